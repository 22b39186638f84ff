// ClusterMetrics: the cluster-wide gauges of `reliableq web`'s /metrics
// (reliableq(1), "web"), read from Redis at scrape time: queue sizes and
// latencies, the sizes of the job sets, processes, busy, in-progress and
// orphaned jobs, the held sequence keys and the age of the oldest hold
// (two reads in the stats' first round trip), and Sidekiq's
// processed/failed counters. A Collectable, so that prometheus-cpp's
// serializer writes the text format.
//
// Thread safety: Collect and Read from any thread (each borrows its own
// connection from the pool).

#ifndef RELIABLEQ_WEB_CLUSTER_METRICS_H_
#define RELIABLEQ_WEB_CLUSTER_METRICS_H_

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <vector>

#include "reliableq/status.h"

namespace reliableq::web {

class AdminPool;

class ClusterMetrics final : public prometheus::Collectable {
 public:
  explicit ClusterMetrics(AdminPool* pool) : pool_(pool) {}

  // The families, or why Redis could not be read.
  Result<std::vector<prometheus::MetricFamily>> Read() const;
  // Read(), with no families when Redis could not be read.
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  AdminPool* pool_;
};

}  // namespace reliableq::web

#endif  // RELIABLEQ_WEB_CLUSTER_METRICS_H_
