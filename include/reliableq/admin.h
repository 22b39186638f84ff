// Admin: reads the state of a reliableq/Sidekiq Redis and repairs it.
//
// Stats read the same keys as Sidekiq::Stats. Recover runs one janitor pass:
// the jobs in the working lists of every registered process whose heartbeat
// key has expired go back to the right end of their queues (to be taken
// next), with interrupted_count + 1; a job over max_interruptions goes to the
// dead set. Each working list is moved by one script that checks the
// heartbeat again inside, so a pass is safe to run beside live workers and
// beside other passes.
//
// Thread safety: one Admin per thread.

#ifndef RELIABLEQ_ADMIN_H_
#define RELIABLEQ_ADMIN_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "reliableq/redis_options.h"
#include "reliableq/status.h"

namespace reliableq {

struct QueueStats {
  std::string name;
  int64_t size = 0;
  // Seconds since the oldest job was enqueued (0 for an empty queue or one
  // whose oldest job has no usable enqueued_at).
  double latency = 0;
};

struct Stats {
  int64_t processed = 0;
  int64_t failed = 0;
  // Every queue named in `queues`, sorted by name.
  std::vector<QueueStats> queues;
  int64_t enqueued = 0;   // sum of the queue sizes
  int64_t scheduled = 0;  // ZCARD schedule
  int64_t retries = 0;    // ZCARD retry
  int64_t dead = 0;       // ZCARD dead
  int64_t processes = 0;  // SCARD processes
  int64_t busy = 0;       // sum of the processes' busy fields
  // Jobs held in reliableq working lists (fetched, not yet acknowledged).
  int64_t in_progress = 0;
};

struct RecoverOptions {
  // Only list what would move; change nothing.
  bool dry_run = false;
  // Only this identity (empty: every registered identity).
  std::string identity;
  // Recover `identity` even though its heartbeat is alive. Requires identity.
  bool force = false;
  // Jobs interrupted more often than this go to the dead set.
  int max_interruptions = 3;
};

struct QueueRecovery {
  std::string queue;
  int64_t requeued = 0;  // back to queue:<queue> (dry run: would be)
  int64_t dead = 0;      // to the dead set (dry run: would be)
};

struct IdentityRecovery {
  std::string identity;
  bool alive = false;  // heartbeat present (only recovered with force)
  std::vector<QueueRecovery> queues;
};

struct RecoveryReport {
  // Every identity looked at, dead ones first; identities with nothing to
  // move are listed too.
  std::vector<IdentityRecovery> identities;
};

class Admin {
 public:
  // Connects (within options.connect_timeout). `prefix` is the prefix of
  // reliableq's own keys, as in ServerOptions.
  static Result<std::unique_ptr<Admin>> Open(const RedisOptions& options,
                                             std::string prefix = "reliableq:");
  virtual ~Admin();
  Admin(const Admin&) = delete;
  Admin& operator=(const Admin&) = delete;

  virtual Result<Stats> GetStats() = 0;

  // One janitor pass now. `force` without `identity` is kInvalidArgument;
  // an identity that is not registered is kNotFound.
  virtual Result<RecoveryReport> Recover(const RecoverOptions& options) = 0;

 protected:
  Admin() = default;
};

}  // namespace reliableq

#endif  // RELIABLEQ_ADMIN_H_
