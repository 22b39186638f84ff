// What a janitor pass does and did: the options of Admin::Recover and the
// report of a pass, which a worker's janitor also produces (and logs).
//
// Thread safety: plain values.

#ifndef RELIABLEQ_RECOVERY_H_
#define RELIABLEQ_RECOVERY_H_

#include <cstdint>
#include <string>
#include <vector>

namespace reliableq {

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

// Why a recovery pass took a process for dead (reliableq-schema(7), DEAD
// PROCESSES).
enum class DeathEvidence {
  kNone,              // not taken for dead: alive (and recovered only if forced)
  kHeartbeatExpired,  // its heartbeat key was gone (it was silent for its ttl)
  kConnectionsGone,   // none of the Redis connections it published exists any
                      // more (a crash, a kill): taken before its ttl ran out
};

struct IdentityRecovery {
  std::string identity;
  bool alive = false;  // heartbeat present (only recovered with force)
  DeathEvidence evidence = DeathEvidence::kNone;  // kNone exactly when alive
  std::vector<QueueRecovery> queues;
  // Non-empty when Redis refused a move for this process (a key it would
  // write holds the wrong type): the pass wrote nothing for that list, left
  // the process registered, and went on with the others. `queues` lists
  // what moved before.
  std::string error;
};

struct RecoveryReport {
  // Every identity looked at, dead ones first; identities with nothing to
  // move are listed too.
  std::vector<IdentityRecovery> identities;
};

}  // namespace reliableq

#endif  // RELIABLEQ_RECOVERY_H_
