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
// The job-set calls are Sidekiq's API (Sidekiq::ScheduledSet, RetrySet,
// DeadSet, Queue) with one difference: every move of a job is one atomic
// script, so a job is in its set or in its destination at every instant,
// never in neither. An entry is named by its jid; the call reads the set to
// find the member that carries it, then acts on that exact member string.
// When somebody else moved or deleted the member in between (a worker's
// poller promoting a due retry, another admin), the call is kNotFound and
// nothing was written. When several members carry the same jid, the one
// with the lowest score is meant (ties: the smallest string).
//
// Thread safety: one Admin per thread.

#ifndef RELIABLEQ_ADMIN_H_
#define RELIABLEQ_ADMIN_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reliableq/clock.h"
#include "reliableq/dead_set.h"
#include "reliableq/recovery.h"
#include "reliableq/redis_options.h"
#include "reliableq/status.h"

namespace reliableq {

struct QueueStats {
  std::string name;
  int64_t size = 0;
  // Seconds since the oldest job was enqueued (0 for an empty queue or one
  // whose oldest job has no usable enqueued_at).
  double latency = 0;
  // In the `paused` set (PauseQueue): workers take no new job from it.
  bool paused = false;
};

// PauseQueue's choices.
struct PauseOptions {
  // Pause a queue that is not known: one neither named in `queues`, nor
  // holding a job, nor paused already (a queue to be, paused ahead of the
  // deploy that brings its first job). Off, such a name is refused, as a
  // typo would be (`reliableq queue pause --force`).
  bool allow_unknown = false;
};

// What PauseQueue and ResumeQueue did.
struct PauseChange {
  // Pause: the queue was not paused before. Resume: it was.
  bool changed = false;
  // The workers told at once: the subscribers that received the message
  // (PUBLISH's reply), each the wake-up connection of a live worker, idle
  // or busy, whether or not it serves the queue. On Redis Cluster only
  // those connected to the node that took the PUBLISH are counted (the
  // others receive it as well). A worker not told (its wake-up connection
  // was down) applies the change at its next heartbeat.
  int64_t workers_told = 0;
};

// One limiter of the `limits` hash, as the workers declared it (ListLimits;
// reliableq(1), LIMITS), with what it holds now.
struct LimitInfo {
  std::string name;
  // The classes it applies to. Empty, with the counts below 0, when its
  // definition in the hash is not the JSON a worker writes.
  std::vector<std::string> classes;
  int64_t concurrency = 0;  // at most this many running at once (0: none)
  int64_t rate = 0;         // at most this many starts per period (0: none)
  double period = 0;        // seconds
  int64_t running = 0;      // slots held now (HLEN limit:<name>)
  int64_t parked = 0;       // jobs waiting for a slot (LLEN limit:<name>:waiting)
  // Starts in the current rate window (the last `period` seconds).
  int64_t window_starts = 0;
};

// One held sequence key (ListSequences; reliableq(1), "Operator
// commands"; reliableq-schema(7), "Sequences").
struct SequenceInfo {
  std::string key;
  // The jid of the job that holds it (empty when the hash lost it).
  std::string holder;
  double held_since = 0;  // epoch seconds when its holder took it
  int64_t waiting = 0;    // jobs waiting for it (LLEN sequence:<key>)
};

// ListSequences: the held keys read, oldest hold first, and how many are
// held in all.
struct SequenceListing {
  std::vector<SequenceInfo> sequences;
  int64_t held = 0;  // ZCARD sequences:since
};

// What ReleaseSequence did.
struct SequenceRelease {
  std::string holder;  // the jid that held the key
  std::string next;    // the jid it went to; empty: none waited, it is free
};

// What SkipSequenceHead did.
struct SequenceSkip {
  std::string jid;   // the job moved to dead (empty: the entry was not a job)
  std::string next;  // the jid the key went to, when nobody held it before
};

struct Stats {
  int64_t processed = 0;
  int64_t failed = 0;
  // Jobs discarded unrun because they had expired (P stat:expired).
  int64_t expired = 0;
  // Every queue named in `queues`, and every paused one (PauseQueue; size 0
  // when `queues` does not name it), sorted by name.
  std::vector<QueueStats> queues;
  int64_t enqueued = 0;   // sum of the queue sizes
  int64_t scheduled = 0;  // ZCARD schedule
  int64_t retries = 0;    // ZCARD retry
  int64_t dead = 0;       // ZCARD dead
  int64_t processes = 0;  // SCARD processes
  int64_t busy = 0;       // sum of the processes' busy fields
  // Jobs held in reliableq working lists (fetched, not yet acknowledged).
  int64_t in_progress = 0;
  // Jobs parked on full concurrency limits (the limits' waiting lists; a
  // job parked on a rate limit counts in `scheduled`).
  int64_t parked = 0;
  // Sequence keys held now (ZCARD sequences:since; reliableq-schema(7),
  // "Sequences"), and the seconds the one held longest has been held (0:
  // none is held).
  int64_t sequences_held = 0;
  double oldest_sequence_hold = 0;
};

// Sidekiq's sorted sets of jobs.
enum class JobSet {
  kScheduled,  // `schedule`: jobs to run later; score = when
  kRetry,      // `retry`: failed jobs; score = the next attempt
  kDead,       // `dead`: jobs that will not run again; score = time of death
};

// The name of `set`: "schedule", "retry" or "dead", its Redis key in layout 1
// (in layout 2 the key is "<prefix>{<group>}:" + the name).
std::string_view JobSetKey(JobSet set);

// One member of a job set, and what it says about its job.
struct SetEntry {
  // Epoch seconds, as stored (see JobSet).
  double score = 0;
  // The member, byte for byte as stored.
  std::string payload;
  // True when the payload is a job Sidekiq can push: a JSON object with a
  // string `class` and an array `args`. The fields below are read from any
  // payload that is a JSON object (a name given twice: its last value, as
  // Sidekiq reads it, when the payload is a job); otherwise they are empty.
  bool valid = false;
  std::string jid;        // "" when absent or not a string
  std::string job_class;  // `class`
  // `queue`: where the job goes when it is retried or enqueued; "" when
  // absent, empty or not a string (it then goes to "default", as Sidekiq's
  // client sends it).
  std::string queue;
  std::optional<int64_t> retry_count;  // when an integer
  std::optional<std::string> error_class;
  std::optional<std::string> error_message;
};

// A page of a job set.
struct SetListing {
  // The number of members of the set (ZCARD, read together with the page).
  int64_t size = 0;
  // schedule and retry: the lowest scores first (next due first); dead: the
  // highest first (latest death first), as Sidekiq's Web UI pages them.
  std::vector<SetEntry> entries;
};

// What a call on every member of a set did.
struct BulkResult {
  int64_t moved = 0;    // retried or killed
  int64_t skipped = 0;  // not jobs (SetEntry::valid false): left in the set
};

// An entry of a job set as Sidekiq's Web UI names it: "<score>-<jid>". The
// score finds the entry with ZRANGEBYSCORE score score (a few members at
// most), never a scan of the set; the jid picks among members with that
// score. An entry without a jid is "<score>-".
struct EntryRef {
  double score = 0;
  std::string jid;

  // nullopt unless `id` is a finite number, "-", then the jid (which may
  // itself contain "-").
  static std::optional<EntryRef> Parse(std::string_view id);
  // The score in its shortest form that reads back as the same double.
  std::string ToString() const;
};

// The id of `entry` (EntryRef::ToString of its score and jid).
std::string EntryIdOf(const SetEntry& entry);

// What may be done to entries of a set, one or many at a time.
enum class SetAction {
  kRetry,   // RetryNow
  kDelete,  // Delete
  kKill,    // to dead (retry and schedule only)
};

// What a call on several entries did.
struct ActionResult {
  int64_t done = 0;
  int64_t not_found = 0;  // not in the set (moved or deleted meanwhile)
  int64_t skipped = 0;    // not jobs, for retry and kill: left in the set
};

// A page of a queue's jobs, in LRANGE order: position 0 is the job pushed
// last, the job taken next is at position size - 1.
struct QueuedJob {
  int64_t position = 0;
  std::string payload;  // as stored
};
struct QueuePage {
  QueueStats stats;
  std::vector<QueuedJob> jobs;
};

// A job a process is running, from Sidekiq's <identity>:work hash.
struct RunningJobInfo {
  std::string thread;   // the hash field
  std::string queue;
  double run_at = 0;    // epoch seconds
  std::string payload;  // the job as the worker took it
  // The handler's last progress report, a JSON object as text
  // ({"percent":40,"message":"...","at":...}); nullopt when none.
  std::optional<std::string> progress;
};

// A process of Sidekiq's `processes` set (a reliableq worker or Sidekiq).
struct ProcessInfo {
  std::string identity;
  // From its `info` field (absent fields: empty, 0).
  std::string hostname;
  int64_t pid = 0;
  std::string tag;
  std::vector<std::string> labels;
  std::vector<std::string> queues;
  int64_t concurrency = 0;
  double started_at = 0;
  std::string version;
  std::string info;  // the raw `info` JSON
  // From the hash itself.
  int64_t busy = 0;
  double beat = 0;  // the last beat, epoch seconds; 0 when absent
  bool quiet = false;
  int64_t rss_kb = 0;
  // The remaining ttl of its reliableq heartbeat key in ms; nullopt when
  // there is none (Sidekiq, or a reliableq process that died).
  std::optional<int64_t> heartbeat_ttl_ms;
  std::vector<RunningJobInfo> jobs;  // sorted by thread
};

// Sidekiq's remote signals (Sidekiq::Process#quiet!, #stop!).
enum class ProcessSignal { kQuiet, kStop };

// A dead process's unfinished jobs, as a dry-run recovery sees them.
struct OrphanJob {
  std::string queue;
  std::string payload;
};
struct Orphan {
  IdentityRecovery recovery;    // what a recovery would do (dry run)
  std::vector<OrphanJob> jobs;  // the first jobs of its working lists
  int64_t total = 0;            // the jobs in its working lists
};

// The janitor's record (reliableq-schema(7), "Janitor passes"): JSON texts
// as the janitor wrote them.
struct JanitorRecord {
  std::optional<std::string> last;
  std::vector<std::string> passes;  // newest first
};

// What the Redis server says of itself (INFO server, memory, clients).
struct RedisServerInfo {
  std::string version;
  int64_t uptime_seconds = 0;
  std::string used_memory_human;
  int64_t connected_clients = 0;
};

// A periodic job as Redis records it (reliableq(1), PERIODIC JOBS;
// reliableq-schema(7), reliableq:periodic:<name>): the declaration that won,
// who made it, and its ticks.
struct PeriodicInfo {
  std::string name;
  std::string cron;
  std::string time_zone;
  std::string job_class;
  std::string queue;
  std::string args;   // JSON
  std::string retry;  // true, false or a count
  bool catch_up = false;
  std::string declared_by;  // the identity of the worker whose declaration won
  double declared_at = 0;   // epoch seconds
  int64_t last_tick = 0;    // epoch seconds; 0: no tick pushed yet
  double last_pushed_at = 0;
  // The first tick after now, by the schedule; 0 when it does not parse
  // here (its zone is not in this machine's tzdata).
  int64_t next_tick = 0;
  int64_t ticks_recorded = 0;  // in reliableq:periodic:<name>:ticks
};

// --- A job found by its jid (Admin::FindJob) ---

// Where FindJob found a job, in the order it looks: the live places first,
// then the job's final record.
enum class JobState {
  kRunning,    // in the <identity>:work hash of a process of `processes`
  kFetched,    // in the working list of a live process, not started yet
  kOrphaned,   // in the working list of a dead process: the janitor gives it back
  kQueued,     // in queue:<q>
  kParked,     // in a limit's waiting list (limit:<name>:waiting)
  kScheduled,  // in `schedule`
  kRetry,      // in `retry`
  kDead,       // in `dead`, or a final record "dead" (the set was trimmed)
  kDone,       // final records: the handler succeeded
  kDiscarded,  //   failed and was discarded (retry false, a discard)
  kExpired,    //   expired before it ran
  kCancelled,  //   cancelled
  kUnknown,    // found nowhere (see JobLookup::not_searched)
};

// "running", "fetched", ..., "unknown": how the CLI and the API name it.
std::string_view JobStateName(JobState state);

// A job's final record (reliableq-schema(7), "Job records"): the STRING at
// <prefix>job:<jid>, written where the job's life ended when its class
// keeps records. Optional members are nullopt when the record lacks them or
// holds another type; unknown members are ignored.
struct JobRecord {
  std::string json;     // as stored, byte for byte
  bool valid = false;   // `json` is a JSON object; the members below are read from it
  std::string state;    // "done", "dead", "discarded", "expired", "cancelled", ...
  double at = 0;        // when the job ended, epoch seconds; 0 when absent
  std::string process;  // the identity of the process that ran it
  std::string job_class;
  std::string queue;
  std::optional<double> started_at;  // its last run's start
  // Runs as Sidekiq's retry_count counts them: retry_count + 2, or 1
  // without one (a retry by hand from retry or dead gives one back).
  std::optional<int64_t> attempts;
  std::optional<std::string> error_class;
  std::optional<std::string> error_message;
  std::optional<std::string> result;    // the handler's result, JSON text
  std::optional<int64_t> result_bytes;  // the result's size when over the cap
  std::optional<std::string> progress;  // the last progress object, JSON text
  std::optional<std::string> job;       // the payload as it ended, JSON text
  std::optional<int64_t> job_bytes;     // the payload's size when over the cap
  // A done job's record keeps its arguments alone (JSON text), not `job`.
  std::optional<std::string> args;
  std::optional<int64_t> args_bytes;  // the arguments' size when over the cap
  // The key's remaining time to live in ms (PTTL); nullopt when it has none.
  std::optional<int64_t> ttl_ms;
};

// The fields of a payload the lookup shows; empty or nullopt when the
// payload lacks them (or is not a JSON object).
struct JobBasics {
  std::string job_class;
  std::string queue;
  std::optional<int64_t> retry_count;
  std::optional<std::string> error_class;
  std::optional<std::string> error_message;
  std::optional<std::string> args;    // JSON text of `args`
  std::optional<double> enqueued_at;  // epoch seconds
};

// A list FindJob did not read to its end: the job may be in it.
struct NotSearched {
  std::string kind;      // "queue" or "parked"
  std::string name;      // the queue's or the limit's name
  int64_t size = 0;      // LLEN when it was read
  int64_t searched = 0;  // the entries read (JobLookupOptions::scan_limit)
};

struct JobLookupOptions {
  // Read at most this many entries of each queue and each limit's waiting
  // list, from the end taken next (at least 1).
  int64_t scan_limit = 10000;
};

// Where a job is, and what it is.
struct JobLookup {
  std::string jid;
  JobState state = JobState::kUnknown;
  // running, fetched, orphaned: the process. running: its work hash field.
  std::string process;
  std::string thread;
  // The queue of its place: running (the work entry's), fetched and
  // orphaned (the working list's), queued; "" otherwise.
  std::string queue;
  std::string limit;  // parked: the limit's name
  // queued and parked: 0 is the job taken next (for a queue, counted from
  // its tail, LINDEX -1; for a waiting list, from its head, LINDEX 0), and
  // the list's length.
  std::optional<int64_t> position;
  std::optional<int64_t> list_size;
  // Times (epoch seconds). since: running (run_at), queued (enqueued_at),
  // dead (the time of death). at: scheduled and retry (when it is due),
  // the finished states (when it ended).
  std::optional<double> since;
  std::optional<double> at;
  // running: the work entry's progress object (JSON text), if any; the
  // finished states: the record's.
  std::optional<std::string> progress;
  // The payload where it was found, byte for byte; a finished state's is
  // the record's `job` (as a JSON text), "" when the record has none.
  std::string payload;
  JobBasics basics;  // read from `payload`, else from the record
  // The final record. With `ended` the state comes from it (the job's life
  // is over); without, the state is a live place and the record is its last
  // end: the death that put it in the dead set, or the end of a previous
  // life (retried from the dead set, or a finished job a janitor gave
  // back).
  std::optional<JobRecord> record;
  bool ended = false;
  // unknown: the lists not read to their end. Only filled when the job was
  // not found (a job found needs no other list).
  std::vector<NotSearched> not_searched;
};

struct AdminOptions {
  // The prefix of reliableq's own keys, as in ServerOptions.
  std::string prefix = "reliableq:";
  // Where "now" comes from (retry now, kill, recovery, latencies); empty:
  // SystemClock().
  std::shared_ptr<const Clock> clock;
};

class Admin {
 public:
  // Connects (within options.connect_timeout) and loads the scripts.
  static Result<std::unique_ptr<Admin>> Open(const RedisOptions& options,
                                             AdminOptions admin_options = {});
  virtual ~Admin();
  Admin(const Admin&) = delete;
  Admin& operator=(const Admin&) = delete;

  virtual Result<Stats> GetStats() = 0;

  // One janitor pass now. `force` without `identity` is kInvalidArgument;
  // an identity that is not registered is kNotFound.
  virtual Result<RecoveryReport> Recover(const RecoverOptions& options) = 0;

  // --- Job sets (schedule, retry, dead) ---

  // At most `limit` entries of `set` in its display order (see
  // SetListing); limit 0 means all of them. kInvalidArgument for a negative
  // limit.
  virtual Result<SetListing> List(JobSet set, int64_t limit) = 0;

  // The entry of `set` whose payload has this jid. kNotFound when there is
  // none (payloads that are not JSON cannot be found by jid);
  // kInvalidArgument for an empty jid.
  virtual Result<SetEntry> Find(JobSet set, std::string_view jid) = 0;

  // Sidekiq's "Retry now": in one script the entry leaves `set` and is
  // pushed (LPUSH, SADD queues) to the queue its `queue` field names
  // ("default" when absent or empty), with enqueued_at = now and, for the
  // retry and dead sets, an integer retry_count lowered by 1 (Sidekiq's
  // SortedEntry#retry: the next failure raises it again). For the schedule
  // set retry_count stays (SortedEntry#add_to_queue, the Web UI's "Add to
  // queue"). Every other byte of the payload stays as it was. Returns the
  // entry as it was in the set. kNotFound as for Find, or when the member
  // was moved meanwhile (nothing is pushed then); kCorruption when the
  // entry is not a job (it stays in the set).
  virtual Result<SetEntry> RetryNow(JobSet set, std::string_view jid) = 0;

  // RetryNow for every member that was in `set` when the call began, in
  // batches of 100 members per script, in the set's display order (so the
  // first retried is taken first). Members that are not jobs stay and are
  // counted as skipped; members moved meanwhile by somebody else are not
  // counted. A Redis error stops the call; the batches before it stand.
  virtual Result<BulkResult> RetryAll(JobSet set) = 0;

  // Removes the entry (ZREM of its exact payload). Returns it as it was.
  // kNotFound as for Find, or when the member was removed meanwhile.
  virtual Result<SetEntry> Delete(JobSet set, std::string_view jid) = 0;

  // Deletes the whole set at once (ZCARD and UNLINK in one script,
  // clear.lua, as Sidekiq's SortedSet#clear). Returns the number of members it had.
  virtual Result<int64_t> DeleteAll(JobSet set) = 0;

  // Sidekiq's SortedEntry#kill for a retry entry: in one script it leaves
  // `retry` and goes, unchanged, into `dead` with score now, followed by
  // the dead-set trims of `limits`. No death handlers run (those live in
  // worker processes). Returns the entry as it was. kNotFound as for
  // RetryNow; kInvalidArgument for max_jobs below 1 or a negative timeout.
  virtual Result<SetEntry> Kill(std::string_view jid, const DeadSetLimits& limits) = 0;

  // Kill for every member that was in `retry` when the call began (Sidekiq's
  // RetrySet#kill_all), in batches of 100; `skipped` is always 0.
  virtual Result<BulkResult> KillAll(const DeadSetLimits& limits) = 0;

  // --- Queues ---

  // Every queue named in `queues`, and every paused one, sorted by name,
  // with its size, latency and pause (as in GetStats).
  virtual Result<std::vector<QueueStats>> ListQueues() = 0;

  // Sidekiq's Queue#clear: UNLINK queue:<name> and SREM queues <name> in one
  // script (clear.lua). Returns the number of jobs the queue held. Jobs that workers have
  // already fetched are not touched: they finish, or a janitor gives them
  // back to the queue (which then reappears). kNotFound when there was
  // neither such a queue nor such a name in `queues` (nothing changed);
  // kInvalidArgument for an empty name.
  virtual Result<int64_t> ClearQueue(std::string_view name) = 0;

  // Pauses queue `name`: SADD to the `paused` set (with the prefix), then
  // "pause <name>" published on the workers' wake-up channel `wake:paused`.
  // A worker that receives it, idle or busy, sends no fetch naming the
  // queue from then on, and gives the jobs of the queue it fetched but has
  // not started back to the head of the queue (in their order); the jobs it
  // runs run to the end, and pushes still go into the queue. A worker the
  // message does not reach applies the pause at its next heartbeat
  // (ServerOptions::heartbeat_interval). Kept in Redis, so it holds for
  // workers that start later, until ResumeQueue.
  // kNotFound, with nothing written, for a queue that is not known
  // (PauseOptions::allow_unknown), its message naming the known queues
  // whose names are close; kInvalidArgument for an empty name.
  virtual Result<PauseChange> PauseQueue(std::string_view name, PauseOptions options) = 0;
  // Undoes PauseQueue (SREM), and publishes "resume <name>" the same way:
  // a worker told fetches from the queue at once, and any other at its next
  // heartbeat. Any name is accepted (one not paused changes nothing).
  virtual Result<PauseChange> ResumeQueue(std::string_view name) = 0;

  // --- Limits ---

  // Every limiter declared in the `limits` hash, sorted by name: its terms
  // and its running, parked and window counts (one HGETALL, then three
  // commands per limiter in a pipeline).
  virtual Result<std::vector<LimitInfo>> ListLimits() = 0;

  // --- Sequences ---

  // The held sequence keys, oldest hold first, at most `limit` of them,
  // each with its holder, since when it holds it and how many jobs wait
  // for it, and the number held in all. Two round trips (ZRANGE WITHSCORES
  // and ZCARD, then HMGET and one LLEN per key, pipelined). Not atomic: a
  // key released between the two reads is listed with an empty holder.
  // kInvalidArgument for a limit below 1.
  virtual Result<SequenceListing> ListSequences(int64_t limit = 100) = 0;

  // The operator lets sequence key `key` go, in one script
  // (sequence_release.lua): it goes on to the oldest job waiting for it,
  // which goes to the end of its queue that is taken next, exactly as when
  // the holder's life ends; or it is free when none waits. The holder job is
  // not touched: if it runs again later it waits at the end of the key's
  // list. kNotFound, with nothing written, when nobody holds the key;
  // kInvalidArgument for an empty key.
  virtual Result<SequenceRelease> ReleaseSequence(std::string_view key) = 0;

  // The oldest job waiting for sequence key `key` goes to the dead set
  // unchanged, score now, followed by the dead-set trims of `limits`, in
  // one script (sequence_skip.lua): a poison job that must not run. The
  // holder keeps the key. kNotFound, with nothing written, when no job
  // waits for the key; kInvalidArgument for an empty key, max_jobs below 1
  // or a negative timeout.
  virtual Result<SequenceSkip> SkipSequenceHead(std::string_view key,
                                                const DeadSetLimits& limits) = 0;

  // --- Pages and score-addressed entries (the dashboard, scripts) ---

  // At most `limit` entries of `set` from `offset` in its display order,
  // and the set's size. kInvalidArgument for a negative offset or limit
  // (0: all from offset).
  virtual Result<SetListing> ListPage(JobSet set, int64_t offset, int64_t limit) = 0;

  // The entry `ref` names. kNotFound when no member has that score and jid
  // (with several: the smallest payload).
  virtual Result<SetEntry> FindAt(JobSet set, const EntryRef& ref) = 0;

  // `action` on the entries `refs` name: found together in one round trip,
  // then moved by one script (retry_now.lua, kill.lua) or one ZREM per
  // batch of 100, so each entry is in its set or its destination at every
  // instant. kInvalidArgument for kKill on the dead set.
  virtual Result<ActionResult> ActOn(JobSet set, SetAction action,
                                     const std::vector<EntryRef>& refs,
                                     const DeadSetLimits& limits = {}) = 0;

  // `action` on every member that was in the set when the call began
  // (RetryAll, DeleteAll, KillAll; kill also from schedule).
  virtual Result<ActionResult> ActOnAll(JobSet set, SetAction action,
                                        const DeadSetLimits& limits = {}) = 0;

  // The queue's size and latency and at most `limit` of its jobs from
  // `offset`. A queue that does not exist has size 0 and no jobs.
  virtual Result<QueuePage> ListQueue(std::string_view name, int64_t offset, int64_t limit) = 0;

  // --- Processes ---

  // Every member of `processes`, sorted by identity; a member whose hash
  // expired is listed with what is left (the dashboard shows it as gone).
  virtual Result<std::vector<ProcessInfo>> ListProcesses() = 0;

  // Sidekiq's remote signal: LPUSH <identity>-signals TSTP (quiet) or TERM
  // (stop), EXPIRE 60; the process reads it with its next beat. kNotFound
  // when `identity` is not in `processes`.
  virtual Status SignalProcess(std::string_view identity, ProcessSignal signal) = 0;

  // --- Recovery, the janitor's record, the audit trail ---

  // A dry-run recovery and, for each process it takes for dead, up to
  // `jobs_per_process` jobs of its working lists.
  virtual Result<std::vector<Orphan>> ListOrphans(int64_t jobs_per_process) = 0;

  virtual Result<JanitorRecord> ReadJanitorRecord() = 0;

  // --- Periodic jobs ---

  // Every periodic job ever declared (the members of reliableq:periodic),
  // by name; a name whose hash is gone is left out.
  virtual Result<std::vector<PeriodicInfo>> ListPeriodic() = 0;

  // LPUSH `entry_json` onto <prefix>audit and LTRIM it to 1000 entries, in
  // one MULTI.
  virtual Status AppendAudit(std::string_view entry_json) = 0;
  // The newest `limit` audit entries, newest first.
  virtual Result<std::vector<std::string>> ReadAudit(int64_t limit) = 0;

  // --- Finding a job ---

  // Where job `jid` is now, looking in this order and stopping at the first
  // place that holds it: the work hashes of the processes in `processes`
  // (running), the working lists of the processes in the registry (fetched,
  // or orphaned when the process's heartbeat key is gone), every queue named
  // in `queues` and every limit's waiting list (queued, parked), then
  // `schedule`, `retry` and `dead`; and, whatever was found, the final
  // record <prefix>job:<jid> (a finished state when the job is nowhere
  // else; JobLookup::record otherwise). A job in no place and with no record
  // is kUnknown: its class keeps no records, the record expired, the jid
  // never existed, or it lies past the scan limit of a long list
  // (not_searched). Writes nothing.
  //
  // Cost, in round trips: 1 (the directories and the record: SMEMBERS,
  // HGETALL, HKEYS, GET, PTTL), 1 (every work hash, heartbeat and list
  // length), then ceil(scan_limit / 1000) at most for the lists, each
  // reading one page of 1000 entries of every list not finished yet
  // (LRANGE; the working lists whole, up to the limit), then the three sets
  // by ZSCAN MATCH as Find (one round trip per 1000 members; the match runs
  // on the server). A job is matched on the client by its parsed jid.
  //
  // Not atomic: a job that moves between two reads (a queued job fetched
  // meanwhile) may be reported in its last place or not at all; look again.
  // kInvalidArgument for an empty jid or a scan_limit below 1; any Redis error.
  virtual Result<JobLookup> FindJob(std::string_view jid, const JobLookupOptions& options = {}) = 0;

  // INFO of the server; fails when Redis does not answer.
  virtual Result<RedisServerInfo> ServerInfo() = 0;

 protected:
  Admin() = default;
};

}  // namespace reliableq

#endif  // RELIABLEQ_ADMIN_H_
