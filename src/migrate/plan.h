// The plan of `reliableq migrate`: the checks that must pass before any
// key moves, and the list of keys to move from a layout-1 Redis into one
// queue group of layout 2, each with how it moves. Reads only: building a
// plan (and so --dry-run) writes nothing on either side.
//
// What moves (reliableq-schema(7), "Moving to a cluster"): Sidekiq's
// queues SET and the queue:<q> lists of its members, schedule, retry,
// dead, stat:processed and stat:failed with their dated forms; and under
// the prefix paused, limits, limit:*, periodic, periodic:*,
// stat:expired, audit, janitor:last and janitor:passes. Nothing else: the
// application may keep keys of its own in the same Redis.
//
// Thread safety: one thread per connection, as redis::Connection.

#ifndef RELIABLEQ_MIGRATE_PLAN_H_
#define RELIABLEQ_MIGRATE_PLAN_H_

#include <string>
#include <string_view>
#include <vector>

#include "migrate/types.h"
#include "redis/connection.h"
#include "reliableq/status.h"

namespace reliableq::migrate {

// The progress markers of batched moves, HASHes of source key -> elements
// moved so far: on the source (written with each batch's removal) and in
// the group on the target (written with each batch's copy). Deleted once
// a run ends with every key moved.
std::string SourceMarkerKey(std::string_view prefix);
std::string TargetMarkerKey(std::string_view prefix, std::string_view group);

// OK when the source may be migrated; otherwise kRefused with one line:
// its layout record holds something else than nothing or "1"; a worker is
// alive (a heartbeat key exists under the prefix, or a Sidekiq process
// record beat within kSidekiqBeatWindow); or a working list exists (its
// jobs belong back in their queues first: `reliableq recover`).
Status CheckSource(redis::Connection& source, const MigrationSettings& settings);

// OK when the group's layout record on the target is absent or "2";
// otherwise kRefused naming it.
Status CheckTarget(redis::Connection& target, const MigrationSettings& settings);

// The keys to move, directories first (so that the target never holds data
// its directory does not name). Queue names are the members of the
// source's queues SET and of the group's on the target (a stopped run may
// have moved the SET already). kRefused when a key exists on both sides
// with different values and no batch marker (a job could then exist
// twice): nothing has moved then, and the message names the key.
Result<std::vector<PlannedKey>> PlanKeys(redis::Connection& source, redis::Connection& target,
                                         const MigrationSettings& settings);

}  // namespace reliableq::migrate

#endif  // RELIABLEQ_MIGRATE_PLAN_H_
