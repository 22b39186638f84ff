// Moves the keys of a migration plan (plan.h) from the layout-1 Redis to
// the group on the target, one key at a time, so that a command killed at
// any point loses no job: every element is written to the target before it
// is removed from the source, and a rerun finds where the stopped run was
// (plan.h, Action).
//
// Thread safety: one thread; it uses both connections.

#ifndef RELIABLEQ_MIGRATE_MOVER_H_
#define RELIABLEQ_MIGRATE_MOVER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "migrate/plan.h"
#include "redis/connection.h"
#include "reliableq/status.h"

namespace reliableq::migrate {

class Mover {
 public:
  // `TEST_after_target_write`, when set, runs right after each write to
  // the target (a RESTORE or a batch), before the source's matching DEL or
  // removal: where the tests stop the command or change the source.
  Mover(redis::Connection& source, redis::Connection& target, const MigrationSettings& settings,
        std::function<void()> TEST_after_target_write = nullptr)
      : source_(source),
        target_(target),
        settings_(settings),
        after_target_write_(std::move(TEST_after_target_write)) {}

  // Moves one key as planned; returns how many of its elements this call
  // moved (a string counts 1; 0 when the key was gone by then). An error
  // leaves the key where a rerun picks it up: on the source, on both sides
  // with the same value, or part-way through its batches, markers
  // recorded. kRefused when the source changed while the key moved (a
  // client still writes to it) or no longer equals the target's copy.
  Result<int64_t> Move(const PlannedKey& key);

 private:
  Result<int64_t> Restore(const PlannedKey& key);
  Result<int64_t> DeleteOnly(const PlannedKey& key);
  Result<int64_t> ListBatches(const PlannedKey& key);
  // Removes the jobs of `batch` (as LRANGE listed them, copied to the
  // target) from the source list, and records `total_text` as the source's
  // marker, in one MULTI.
  Status RemoveCopied(const PlannedKey& key, const std::vector<std::string>& batch,
                      const std::string& total_text);
  Result<int64_t> ZsetBatches(const PlannedKey& key);
  // DEL of the source key in MULTI after the WATCH the caller sent;
  // kRefused when EXEC found the key changed.
  Status DeleteWatched(const PlannedKey& key);
  void AfterTargetWrite() {
    if (after_target_write_) after_target_write_();
  }
  // OK once every replica the target's primary has connected now holds
  // the target's writes so far (WAIT); at once without replicas. The source
  // lets go of a key only after: Redis replicates asynchronously, and a
  // failover of the target (a cluster promotes a replica by itself) right
  // after a write the primary acknowledged would lose what the source no
  // longer has. kTimeout when fewer confirmed: nothing leaves the source.
  Status TargetReplicated();
  // The same for what an earlier run copied to the target (before the
  // source's copy is removed on a rerun).
  Status EarlierCopyReplicated();

  redis::Connection& source_;
  redis::Connection& target_;
  const MigrationSettings& settings_;
  std::function<void()> after_target_write_;
};

}  // namespace reliableq::migrate

#endif  // RELIABLEQ_MIGRATE_MOVER_H_
