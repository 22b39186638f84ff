#include "metrics/process_collector.h"

#include <unistd.h>

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace reliableq::metrics {

namespace {

std::optional<std::string> ReadFile(const char* path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::optional<double> BootTime() {
  std::optional<std::string> stat = ReadFile("/proc/stat");
  if (!stat) return std::nullopt;
  size_t at = stat->find("\nbtime ");
  if (at == std::string::npos) return std::nullopt;
  at += 7;
  double btime = 0;
  auto [end, error] = std::from_chars(stat->data() + at, stat->data() + stat->size(), btime);
  if (error != std::errc()) return std::nullopt;
  return btime;
}

prometheus::MetricFamily One(const char* name, const char* help, prometheus::MetricType type,
                             double value) {
  prometheus::MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = type;
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(std::move(metric));
  return family;
}

}  // namespace

std::optional<ProcessStat> ParseProcStat(std::string_view stat, double ticks_per_second,
                                         double boot_time) {
  // The command name, in parentheses, may hold spaces and ")": the fields
  // that follow start after the last ")".
  size_t close = stat.rfind(')');
  if (close == std::string_view::npos || ticks_per_second <= 0) return std::nullopt;
  std::string_view rest = stat.substr(close + 1);
  // Fields from 3 (state) on; utime is 14, stime 15, starttime 22.
  double values[23] = {0};
  int field = 2;
  size_t i = 0;
  while (i < rest.size() && field < 22) {
    while (i < rest.size() && rest[i] == ' ') ++i;
    size_t start = i;
    while (i < rest.size() && rest[i] != ' ' && rest[i] != '\n') ++i;
    if (start == i) break;
    ++field;
    if (field == 14 || field == 15 || field == 22) {
      double v = 0;
      auto [end, error] = std::from_chars(rest.data() + start, rest.data() + i, v);
      if (error != std::errc() || end != rest.data() + i) return std::nullopt;
      values[field] = v;
    }
  }
  if (field < 22) return std::nullopt;
  ProcessStat out;
  out.cpu_seconds = (values[14] + values[15]) / ticks_per_second;
  out.start_time_seconds = boot_time + values[22] / ticks_per_second;
  return out;
}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  std::vector<prometheus::MetricFamily> out;
  if (std::optional<std::string> statm = ReadFile("/proc/self/statm")) {
    std::istringstream fields(*statm);
    double size = 0, resident = 0;
    if (fields >> size >> resident) {
      out.push_back(One("process_resident_memory_bytes", "Resident memory size in bytes.",
                        prometheus::MetricType::Gauge,
                        resident * static_cast<double>(sysconf(_SC_PAGESIZE))));
    }
  }
  std::optional<std::string> stat = ReadFile("/proc/self/stat");
  std::optional<double> boot = BootTime();
  if (stat && boot) {
    if (auto parsed =
            ParseProcStat(*stat, static_cast<double>(sysconf(_SC_CLK_TCK)), *boot)) {
      out.push_back(One("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                        prometheus::MetricType::Counter, parsed->cpu_seconds));
      out.push_back(One("process_start_time_seconds",
                        "Start time of the process since unix epoch in seconds.",
                        prometheus::MetricType::Gauge, parsed->start_time_seconds));
    }
  }
  return out;
}

}  // namespace reliableq::metrics
