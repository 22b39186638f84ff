// The values a migration plan is made of (plan.h), apart from the code
// that reads Redis, so that the command-line verb can print a plan without
// the connection layer's headers.
//
// Thread safety: plain values.

#ifndef RELIABLEQ_MIGRATE_TYPES_H_
#define RELIABLEQ_MIGRATE_TYPES_H_

#include <cstdint>
#include <string>

namespace reliableq::migrate {

struct MigrationSettings {
  // The prefix of reliableq's own keys, the same on both sides.
  std::string prefix = "reliableq:";
  // The queue group the data moves into (CheckGroupName).
  std::string group;
  // A list or zset of more elements than this moves in batches of this
  // many (see Action::kBatches); anything else moves whole.
  int64_t batch = 1000;
  // Now, epoch seconds: a Sidekiq process record that beat less than
  // kSidekiqBeatWindow ago belongs to a live process.
  double now = 0;
};

// How recent a Sidekiq process's beat must be for it to count as alive:
// its record expires 60 s after a beat.
inline constexpr double kSidekiqBeatWindow = 60;

// What a key holds, for the report's job counts.
enum class KeyKind {
  kDirectory,  // queues, periodic, limits, paused: names, not jobs
  kQueue,      // queue:<q>: jobs waiting
  kSchedule,   // schedule
  kRetry,      // retry
  kDead,       // dead
  kParked,     // limit:<n>:waiting: jobs parked on a full limit
  kOther,      // counters, unique keys, periodic records, ...
};

enum class Action {
  // DUMP on the source, RESTORE (with its ttl) on the target, then DEL on
  // the source if it did not change meanwhile (WATCH).
  kRestore,
  // The target already holds the same value (a run stopped between its
  // RESTORE and its DEL): only the source's DEL is left.
  kDeleteOnly,
  // A list or zset above the batch size, or one a stopped run began to
  // move in batches: moved `batch` elements at a time from its oldest end,
  // each batch written to the target before it is removed from the source,
  // with progress markers that make a rerun neither lose nor double one.
  kBatches,
};

struct PlannedKey {
  std::string source;  // layout-1 name
  std::string target;  // layout-2 name in the group
  std::string type;    // TYPE on the source
  int64_t size = 0;    // its elements when planned (1 for a string)
  KeyKind kind = KeyKind::kOther;
  Action action = Action::kRestore;
};

}  // namespace reliableq::migrate

#endif  // RELIABLEQ_MIGRATE_TYPES_H_
