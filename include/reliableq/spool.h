// The client spool, seen from outside a Client: what a spool directory
// holds, and draining it from a process of its own (`reliableq spool
// status|drain DIR`).
//
// A Client with ClientOptions::spool_dir writes each push that cannot reach
// Redis to a journal file of that directory, one file per Client, locked
// (flock) while the Client lives, and its own drainer pushes them back when
// Redis answers (client.h). The journals a Client left when it ended with
// jobs still spooled (its process crashed, or Redis stayed away until it
// was destroyed) are drained by the next Client that opens the directory
// for the same keyspace, or by DrainSpool below. reliableq-schema(7),
// "Client spool", gives the file format.
//
// Each journal records the keyspace it was written for: the prefix of
// reliableq's keys (ClientOptions::prefix) and the queue group
// (RedisOptions::group, empty for layout 1). A Client, and a drain, pushes
// only the journals of its own keyspace, so that a directory shared by
// clients of several groups or prefixes sends each job where it was meant
// to go. The Redis address is not recorded: a spool outlives a failover or
// a new address for the same data. A journal written before keyspaces were
// recorded (format 1) was written for layout 1, and is drained by a Client
// or drain without a group, whatever its prefix.
//
// What a drain pushes is the job as it would have been pushed: the same
// jid, the same payload (after the client middleware), into its queue or
// into the schedule, with push_once.lua, which records in Redis that the
// jid was stored and stores nothing for a jid recorded within the replay
// window (SpoolDrainOptions::replay_window). Then:
// - A job whose push may have landed before it was spooled (a reply that
//   timed out, or a send still unanswered in a stalled Redis), or that a
//   drain pushed and crashed before recording it, is pushed again under the
//   same jid and stored once: Redis finds its record and the push reports
//   success (counted as already stored). Only a push sent again after the
//   record expired stores the job a second time. Jobs are run at least
//   once, never lost.
// - A job a rule refuses (Redis answers with a refusal of the kRefused kind)
//   is refused forever: it is dropped from the spool and counted.
// - A job Redis refuses with another error reply (WRONGTYPE at its queue's
//   key, OOM, ...) is kept ("held") and tried again later, while the jobs
//   after it go on; `spool status` shows it with Redis's reason.
// - A journal is only ever read as a regular file opened without following
//   symbolic links; anything else named like one is refused and reported.
// - A journal whose records are damaged (a frame whose checksum fails,
//   wherever it is) is set aside: the file as it was is copied to
//   "<journal>.corrupt-<offset>" (never drained: for a person to look at,
//   then delete), and its whole records before the damage are drained. A
//   record cut short at the end (a crash during an append: never reported
//   spooled) is dropped, and reported.
//
// Thread safety: plain functions; each call opens what it needs. Running
// them beside live Clients on the same directory is safe: a file a live
// Client holds is neither read for a drain nor changed.

#ifndef RELIABLEQ_SPOOL_H_
#define RELIABLEQ_SPOOL_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "reliableq/redis_options.h"
#include "reliableq/status.h"

namespace reliableq {

struct SpoolFileStatus {
  // The journal's file name (in the directory).
  std::string name;
  // Its size in bytes, drained records included.
  uint64_t bytes = 0;
  // A live process holds it: its writer (a Client), or a drainer that took
  // it over. Its numbers are as of this reading and may be moving.
  bool live = false;
  // Jobs still to push (held ones included), and the bytes of their
  // payloads.
  int64_t pending_jobs = 0;
  int64_t pending_bytes = 0;
  // When the oldest pending job was spooled, epoch seconds; 0 when none.
  double oldest_spooled_at = 0;
  // Jobs Redis refused with an error reply, kept and tried again later
  // (counted in pending_jobs too), and the reason Redis gave for one.
  int64_t held_jobs = 0;
  std::string held_reason;
  // Jobs a rule refused, dropped.
  int64_t dropped_jobs = 0;
  // Its format (1 or 2; 0 when its start cannot be read: see problem) and
  // the keyspace its jobs were spooled for: the prefix of reliableq's keys
  // and the queue group (empty: none, layout 1). Recorded by format 2
  // only (keyspace_recorded); a journal of format 1 was written for layout 1,
  // and is drained by a Client or drain without a group, of any prefix.
  int format = 0;
  bool keyspace_recorded = false;
  std::string prefix;
  std::string group;
  // What is wrong with the file, if anything: a record cut short at its
  // end (a crash during a write, or a write under way in a live file), or
  // damage. Empty when nothing is.
  std::string problem;
};

struct SpoolStatus {
  std::string dir;
  // Every journal, oldest first.
  std::vector<SpoolFileStatus> files;
  // Damaged journals set aside ("<journal>.corrupt-<offset>"): never read
  // again; for a person to look at, then delete.
  std::vector<std::string> corrupt_files;
  // Set when the group or others can write the directory (anyone who can
  // could plant a journal for a drain to push); "" otherwise. Not escaped.
  std::string warning;
  // Bytes of every file above (what spool_max_bytes bounds).
  uint64_t total_bytes = 0;
  int64_t pending_jobs = 0;
};

// Reads every journal of `dir` without changing anything. kNotFound when
// `dir` does not exist; kIoError when it cannot be read. A file that cannot
// be read is listed with its problem rather than failing the call.
Result<SpoolStatus> ReadSpoolStatus(const std::string& dir);

struct SpoolDrainOptions {
  // The prefix of reliableq's own keys: the wake-up channels the pushes
  // publish on (as ClientOptions::prefix). With the RedisOptions' group, the
  // keyspace whose journals are drained.
  std::string prefix = "reliableq:";
  // > 0: a drained job counts as pushed only once WAIT reports this many
  // replicas have it (within wait_timeout); otherwise it stays spooled, to
  // be pushed (and waited for) again by a later drain.
  int wait_replicas = 0;
  std::chrono::milliseconds wait_timeout{1000};
  // As ClientOptions::spool_replay_window: how long Redis keeps the record
  // of each jid the drain pushes, whole seconds, at least 1.
  std::chrono::seconds replay_window{3600};
};

struct SpoolDrainReport {
  int64_t pushed = 0;   // jobs pushed to Redis
  // Of those, the jobs Redis had stored already under their jid (a push
  // that was not confirmed had landed, or an earlier drain pushed them):
  // nothing was stored again.
  int64_t already_stored = 0;
  int64_t dropped = 0;  // jobs a rule refused, dropped
  int64_t held = 0;     // jobs Redis refused with an error reply, kept
  std::string held_reason;
  int64_t left = 0;       // jobs still pending in the files drained
  int files_removed = 0;  // files drained whole, and deleted
  // Files a live process holds (left to it) and files left alone because
  // they could not be read or recorded, or are not regular files (with the
  // reason).
  std::vector<std::string> live_files;
  std::vector<std::string> failed_files;
  // Journals this drain found damaged and set aside, "NAME: what was
  // found and done", and the names of those earlier drains set aside that
  // the directory still holds: their jobs after the damage are left for a
  // person. Not escaped.
  std::vector<std::string> damaged_files;
  std::vector<std::string> corrupt_files;
  // The records cut short at a journal's end (a crash during an append;
  // never reported spooled) that this drain dropped, "NAME: what". Not
  // escaped.
  std::vector<std::string> dropped_tails;
  // As SpoolStatus::warning.
  std::string warning;
  // Journals of another keyspace with jobs pending, left as they are (a
  // drain of their own keyspace pushes them), one line each: "NAME: N jobs
  // spooled for group 'G' (prefix 'P')". Not escaped.
  std::vector<std::string> other_keyspace_files;
  // Why the drain stopped before the end (Redis could not be reached or
  // could not serve, naming where it tried); OK when it did not.
  Status stopped;
};

// Drains, once, every journal of `dir` of the keyspace of `options.prefix`
// and `redis.group` that no live process holds: takes
// its lock, pushes its pending jobs to Redis (connecting only when there is
// something to push), records their outcomes and deletes it once drained.
// Each connect and round trip is bounded by the RedisOptions timeouts.
// Returns the report (a failure to reach Redis is in report.stopped, with
// the counts so far); the call itself fails only when `dir` cannot be read
// (kNotFound, kIoError) or the options are unusable (kInvalidArgument).
// Jobs are left (for a later drain, another keyspace's or a person) when
// report.stopped, held, failed_files, corrupt_files or
// other_keyspace_files say so.
Result<SpoolDrainReport> DrainSpool(const std::string& dir, const RedisOptions& redis,
                                    const SpoolDrainOptions& options = {});

}  // namespace reliableq

#endif  // RELIABLEQ_SPOOL_H_
