#include "server/options_check.h"

#include <set>
#include <string>

namespace reliableq {

Status CheckServerOptions(const ServerOptions& options) {
  using std::chrono::milliseconds;
  if (options.queues.empty()) return Status::InvalidArgument("no queues to work");
  std::set<std::string> seen;
  for (const QueueSpec& q : options.queues) {
    if (q.name.empty()) return Status::InvalidArgument("a queue name is empty");
    if (q.weight < 0) return Status::InvalidArgument("queue weights must be >= 0");
    if (!seen.insert(q.name).second) {
      return Status::InvalidArgument("queue '" + q.name + "' is given twice");
    }
  }
  if (options.concurrency < 1) return Status::InvalidArgument("concurrency must be >= 1");
  if (options.heartbeat_interval.count() <= 0 ||
      options.heartbeat_ttl < 2 * options.heartbeat_interval) {
    return Status::InvalidArgument("heartbeat ttl must be at least twice the heartbeat interval");
  }
  if (options.janitor_interval.count() <= 0) {
    return Status::InvalidArgument("janitor interval must be positive");
  }
  if (options.shutdown_timeout.count() < 0) {
    return Status::InvalidArgument("shutdown timeout must be >= 0");
  }
  if (options.idle_block_timeout < milliseconds(1000)) {
    // BLMOVE takes whole seconds on Redis 6.2.
    return Status::InvalidArgument("idle block timeout must be at least 1 s");
  }
  return Status::OK();
}

}  // namespace reliableq
