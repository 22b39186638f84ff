// `reliableq migrate`: moves the data of a single-Redis deployment
// (layout 1) into one queue group of layout 2 on another Redis or a Redis
// Cluster (reliableq-schema(7), "Moving to a cluster"). The command-line
// verb (src/cli/migrate_command.cc) parses, calls Migrate and prints.
//
// Order: check the group name and both connections' options; check the
// source (plan.h, CheckSource) and the target (CheckTarget); plan every
// key (PlanKeys); unless dry_run, move them one by one (mover.h); then
// record layout 2 for the group on the target (<prefix>{G}:schema = "2",
// SET NX) and add the group to <prefix>groups (SADD). The source's own
// record, <prefix>schema, is left as it is.
//
// Thread safety: one call at a time per process (it owns its connections).

#ifndef RELIABLEQ_MIGRATE_MIGRATION_H_
#define RELIABLEQ_MIGRATE_MIGRATION_H_

#include <cstdint>
#include <vector>

#include "migrate/types.h"
#include "reliableq/redis_options.h"
#include "reliableq/status.h"

namespace reliableq::migrate {

struct MigrateOptions {
  MigrationSettings settings;
  // Plan and report; write nothing on either side.
  bool dry_run = false;
  // Tests only: >= 0 ends the process (std::_Exit with
  // kTestStopExitCode) right after that many writes to the target, before
  // the source's matching removal: a command killed at its worst moment.
  // -1: off.
  int64_t TEST_stop_after_writes = -1;
};

inline constexpr int kTestStopExitCode = 75;

struct MovedKey {
  PlannedKey key;
  // Elements moved (with dry_run: that would move, the planned size).
  int64_t moved = 0;
};

// Jobs moved, per place.
struct JobCounts {
  int64_t queued = 0;     // queue:<q> lists
  int64_t scheduled = 0;  // schedule
  int64_t retries = 0;    // retry
  int64_t dead = 0;       // dead
  int64_t parked = 0;     // limit:<n>:waiting lists
};

struct MigrationReport {
  bool dry_run = false;
  std::vector<MovedKey> keys;
  JobCounts jobs;
  // The group's layout record was written by this run (not there before).
  bool schema_written = false;
  // The group was added to <prefix>groups by this run.
  bool group_added = false;
};

// Runs the migration. kInvalidArgument for a bad group name or unusable
// options (a source that is a cluster or names a group; a target whose URL
// names another group); kRefused with one line when a check refuses
// (nothing was written then); the connections' errors otherwise. An error
// after the moves began names the key it stopped at; every key before it
// moved whole, and a rerun goes on from there.
Result<MigrationReport> Migrate(const RedisOptions& source, const RedisOptions& target,
                                const MigrateOptions& options);

}  // namespace reliableq::migrate

#endif  // RELIABLEQ_MIGRATE_MIGRATION_H_
