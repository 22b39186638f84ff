// ProcessCollector: the standard process metrics of Prometheus client
// libraries, read from /proc at each scrape (nothing is kept between them):
//   process_resident_memory_bytes  gauge    resident set size
//   process_cpu_seconds_total      counter  user + system CPU time
//   process_start_time_seconds     gauge    start time, epoch seconds
// A value /proc does not give (another system) is left out.
//
// Thread safety: Collect may run on any thread.

#ifndef RELIABLEQ_METRICS_PROCESS_COLLECTOR_H_
#define RELIABLEQ_METRICS_PROCESS_COLLECTOR_H_

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <optional>
#include <string_view>
#include <vector>

namespace reliableq::metrics {

// What /proc says of a process; pure, for tests.
struct ProcessStat {
  double cpu_seconds = 0;
  double start_time_seconds = 0;
};
// Parses the text of /proc/<pid>/stat, given the clock ticks per second and
// the boot time (btime of /proc/stat, epoch seconds). nullopt when it is
// not such a line.
std::optional<ProcessStat> ParseProcStat(std::string_view stat, double ticks_per_second,
                                         double boot_time);

class ProcessCollector : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

}  // namespace reliableq::metrics

#endif  // RELIABLEQ_METRICS_PROCESS_COLLECTOR_H_
