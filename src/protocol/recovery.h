// The janitor pass: gives the jobs of dead processes back to their queues.
//
// A process is found through its registry entry (process_entry.h) and is
// dead when its heartbeat key is absent, or when none of the Redis
// connections it published exists any more: then, if the entry's client ids
// come from this server run (its run_id) and this server has been up longer
// than the process's heartbeat ttl, drop_heartbeat.lua deletes its heartbeat
// key, but only while the key still names the connection of the beat the
// pass read (a process that reconnected and beat meanwhile stays alive).
// A SIGKILLed worker is thus recovered within a pass or two, while a
// stopped one (SIGSTOP), a partitioned one or any process after a Redis
// restart or failover waits for its ttl. For each dead process, every
// working list named by its queues is emptied by recover.lua (in batches,
// each batch one atomic script that checks the heartbeat again), then the
// process is unregistered by forget.lua, which again refuses if the process
// beat meanwhile or a list is not empty. A pass is therefore safe beside
// live workers and beside other passes; the lease that keeps passes from
// running at once is the caller's business, not a condition of safety.
//
// Used by Admin::Recover and by the server's janitor.
//
// Thread safety: a pass uses only `redis`, which must not be shared with
// another thread while the pass runs.

#ifndef RELIABLEQ_PROTOCOL_RECOVERY_H_
#define RELIABLEQ_PROTOCOL_RECOVERY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/keys.h"
#include "redis/connection.h"
#include "reliableq/dead_set.h"
#include "reliableq/recovery.h"
#include "reliableq/status.h"

namespace reliableq::protocol {

struct RecoveryConfig {
  // Key names (the prefix of reliableq's own keys).
  Keys keys;
  // A job interrupted more often than this goes to the dead set; negative
  // means no limit.
  int max_interruptions = 3;
  // Only count what would move; write nothing.
  bool dry_run = false;
  // Only this identity; empty means every registered identity.
  std::string identity;
  // Never this identity: a worker's own janitor knows its process is alive
  // even when its heartbeat lapsed (a Redis outage); its next beat
  // re-registers it and hands back what it must.
  std::string skip_identity;
  // Recover `identity` even though its heartbeat is alive (and unregister
  // it, so that its next beat finds itself declared dead). Needs identity.
  bool force = false;
  // Sidekiq's dead-set trims (dead_max_jobs, dead_timeout_in_seconds).
  int64_t dead_max_jobs = 10000;
  int64_t dead_timeout_seconds = 15552000;
  // The most jobs one script call moves, so Redis is never blocked long.
  int batch = 1000;
};

// Runs one pass at time `now` (epoch seconds). The report lists every
// identity looked at: dead ones (and a forced one) first with what moved
// per queue and why they were taken for dead (a dry run reports a process
// without connections as dead, and deletes nothing), then live ones with
// alive=true and no queues; each group is sorted by identity. A registry
// entry whose JSON cannot be read is reported as a dead identity with no
// queues and is not unregistered, so it stays visible until someone looks
// at it.
//
// Errors: kInvalidArgument for force without identity or a non-positive
// batch; kNotFound "no registered process <id>" when `identity` is not in
// the registry; any Redis error (the moves made before it stand, and are
// all complete: no job is ever half moved).
Result<RecoveryReport> RunRecoveryPass(redis::Connection& redis, const RecoveryConfig& config,
                                       double now);

}  // namespace reliableq::protocol

#endif  // RELIABLEQ_PROTOCOL_RECOVERY_H_
