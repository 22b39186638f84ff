#include "server/options_check.h"

#include <cstdio>
#include <set>
#include <string>
#include <string_view>

#include "http/listener.h"
#include "protocol/keys.h"

namespace reliableq::server {

namespace {

using std::chrono::milliseconds;

// "1.5 s".
std::string Seconds(milliseconds ms) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%g s", static_cast<double>(ms.count()) / 1000);
  return buf;
}

// OK when `value` is in [min, kMaxDuration]; otherwise why not, naming it.
Status CheckDuration(std::string_view name, milliseconds value, milliseconds min) {
  if (value >= min && value <= kMaxDuration) return Status::OK();
  std::string range = min.count() == 1
                          ? "above 0 and at most " + Seconds(kMaxDuration)
                          : "from " + (min.count() == 0 ? std::string("0") : Seconds(min)) +
                                " to " + Seconds(kMaxDuration);
  return Status::InvalidArgument(std::string(name) + " must be " + range + ", not " +
                                 Seconds(value));
}

bool IsPrintableAscii(std::string_view text) {
  for (char c : text) {
    if (c < 0x20 || c > 0x7E) return false;
  }
  return true;
}

// A retention Redis's EX takes and a year at most, a size from 256 bytes
// to 1 MiB: a record finish.lua refused would hold its job's outcome back.
Status CheckRecords(const JobRecords& records) {
  auto retention = [](std::string_view what, std::chrono::seconds seconds) {
    if (seconds.count() >= 0 && seconds <= kMaxRecordRetention) return Status::OK();
    return Status::InvalidArgument(std::string(what) + " must be from 0 to " +
                                   std::to_string(kMaxRecordRetention.count()) + " s, not " +
                                   std::to_string(seconds.count()));
  };
  if (Status s = retention("the record retention", records.retention); !s.ok()) return s;
  for (const auto& [name, seconds] : records.class_retention) {
    if (Status s = retention("the record retention of class '" + name + "'", seconds); !s.ok()) {
      return s;
    }
  }
  if (records.max_bytes < kMinRecordBytes || records.max_bytes > kMaxRecordBytes) {
    return Status::InvalidArgument(
        "the most bytes of a record must be from " + std::to_string(kMinRecordBytes) + " to " +
        std::to_string(kMaxRecordBytes) + ", not " + std::to_string(records.max_bytes));
  }
  return Status::OK();
}

Status CheckQueues(const std::vector<QueueSpec>& queues) {
  if (queues.empty()) return Status::InvalidArgument("no queues to work");
  if (queues.size() > kMaxQueues) {
    return Status::InvalidArgument("at most " + std::to_string(kMaxQueues) + " queues, not " +
                                   std::to_string(queues.size()));
  }
  std::set<std::string_view> seen;
  for (const QueueSpec& q : queues) {
    if (Status s = CheckQueueName(q.name); !s.ok()) return s;
    if (q.weight < 0 || q.weight > kMaxQueueWeight) {
      return Status::InvalidArgument("queue weights must be from 0 to " +
                                     std::to_string(kMaxQueueWeight) + ", not " +
                                     std::to_string(q.weight) + " (queue '" + q.name + "')");
    }
    if (!seen.insert(q.name).second) {
      return Status::InvalidArgument("queue '" + q.name + "' is given twice");
    }
  }
  return Status::OK();
}

}  // namespace

Status CheckServerOptions(const ServerOptions& options) {
  if (Status s = CheckQueues(options.queues); !s.ok()) return s;
  if (options.concurrency < 1 || options.concurrency > kMaxConcurrency) {
    return Status::InvalidArgument("concurrency must be from 1 to " +
                                   std::to_string(kMaxConcurrency) + ", not " +
                                   std::to_string(options.concurrency));
  }
  const milliseconds one(1);
  const struct {
    std::string_view name;
    milliseconds value;
    milliseconds min;
  } durations[] = {
      {"shutdown timeout", options.shutdown_timeout, milliseconds(0)},
      {"heartbeat interval", options.heartbeat_interval, one},
      {"heartbeat ttl", options.heartbeat_ttl, one},
      {"janitor interval", options.janitor_interval, one},
      {"scheduled poll interval", options.scheduled_poll_interval, one},
      {"idle poll interval", options.idle_poll_interval, milliseconds(10)},
      {"Redis connect timeout", options.redis.connect_timeout, one},
      {"Redis command timeout", options.redis.command_timeout, one},
  };
  for (const auto& d : durations) {
    if (Status s = CheckDuration(d.name, d.value, d.min); !s.ok()) return s;
  }
  if (options.heartbeat_ttl < 2 * options.heartbeat_interval) {
    return Status::InvalidArgument("heartbeat ttl must be at least twice the heartbeat interval");
  }
  if (options.max_retries < 0) return Status::InvalidArgument("max retries must be >= 0");
  if (options.max_interruptions < 0) {
    return Status::InvalidArgument("max interruptions must be >= 0");
  }
  if (options.dead_set.max_jobs < 0) return Status::InvalidArgument("dead max jobs must be >= 0");
  if (options.dead_set.timeout.count() < 0 || options.dead_set.timeout > kMaxDeadTimeout) {
    return Status::InvalidArgument("dead timeout must be from 0 to 10 years");
  }
  if (options.prefix.size() > kMaxPrefixBytes || !IsPrintableAscii(options.prefix)) {
    return Status::InvalidArgument("the key prefix must be at most " +
                                   std::to_string(kMaxPrefixBytes) +
                                   " characters of printable ASCII");
  }
  if (Status s = protocol::CheckKeyLayout(options.prefix, options.redis.group); !s.ok()) return s;
  if (options.tag.size() > kMaxTagBytes) {
    return Status::InvalidArgument("the tag must be at most " + std::to_string(kMaxTagBytes) +
                                   " bytes");
  }
  if (options.labels.size() > kMaxLabels) {
    return Status::InvalidArgument("at most " + std::to_string(kMaxLabels) + " labels, not " +
                                   std::to_string(options.labels.size()));
  }
  for (const std::string& label : options.labels) {
    if (label.size() > kMaxTagBytes) {
      return Status::InvalidArgument("a label must be at most " + std::to_string(kMaxTagBytes) +
                                     " bytes");
    }
  }
  for (const auto& [job_class, timeout] : options.job_timeouts) {
    std::string name = job_class == "*" ? "the default job timeout" : "the job timeout of " + job_class;
    if (Status s = CheckDuration(name.c_str(), timeout, milliseconds(1)); !s.ok()) return s;
  }
  if (Status s = CheckDuration("kill grace", options.kill_grace, milliseconds(0)); !s.ok()) {
    return s;
  }
  if (Status s = CheckLimits(options.limits); !s.ok()) return s;
  std::set<std::string_view> periodic_names;
  for (const PeriodicJob& job : options.periodic_jobs) {
    if (Status s = CheckPeriodicJob(job); !s.ok()) return s;
    if (!periodic_names.insert(job.name).second) {
      return Status::InvalidArgument("periodic job \"" + job.name + "\" is declared twice");
    }
  }
  if (!options.http_address.empty()) {
    if (Result<http::HttpAddress> where = http::HttpAddress::Parse(options.http_address); !where.ok()) {
      return where.status();
    }
  }
  return CheckRecords(options.records);
}

}  // namespace reliableq::server
