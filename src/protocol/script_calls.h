// Script calls: the one place that builds the KEYS and ARGV of each script
// in lua/, in the order its header documents, for every caller (the worker,
// the janitor pass, Admin), and beside it the one reader of the script's
// reply (a kProtocol Status for a reply of another shape). A script's
// contract changes here and in its .lua file, nowhere else. Pure: building
// a call or reading a reply does no I/O.
//
// Thread safety: plain functions over values.

#ifndef RELIABLEQ_PROTOCOL_SCRIPT_CALLS_H_
#define RELIABLEQ_PROTOCOL_SCRIPT_CALLS_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/keys.h"
#include "redis/reply.h"
#include "redis/script_call.h"
#include "reliableq/dead_set.h"
#include "reliableq/recovery.h"

namespace reliableq::protocol {

// push.lua: each queue's payloads, in the order given (the first given is
// taken first), all or nothing; a queue that was empty is woken on
// keys.WakeQueue(queue). Queues must be distinct and non-empty. The
// payloads are moved into the call: a bulk push copies none of them.
struct QueuePush {
  std::string_view queue;
  std::vector<std::string> payloads;
};
ScriptCall PushCall(const Keys& keys, std::vector<QueuePush> pushes);

// schedule.lua: `payload` into schedule, due at `at`; when it is the
// earliest, keys.WakeScheduled() hears its time.
ScriptCall ScheduleCall(const Keys& keys, double at, std::string payload);
// Its reply: kProtocol "schedule.lua answered <type>" unless an integer.
struct ScheduleReply {
  bool added = false;  // false: it was scheduled already (its time is now `at`)
};
Result<ScheduleReply> ReadScheduleReply(redis::ReplyRef reply);

// push_once.lua: each job to its queue (`at` empty) or into schedule, due
// at `at`, unless keys.Pushed(jid) says its jid was pushed within the last
// `replay_window` (whole seconds, at least 1); all or nothing, in the order
// given. The payloads are moved into the call.
struct OncePush {
  std::string_view jid;
  std::string_view queue;
  std::optional<double> at;
  std::string payload;
};
ScriptCall PushOnceCall(const Keys& keys, std::chrono::seconds replay_window,
                        std::vector<OncePush> jobs);
// Its reply: kProtocol "push_once.lua answered <type>" unless an integer.
struct PushOnceReply {
  int64_t pushed = 0;  // 0: every jid was pushed already
};
Result<PushOnceReply> ReadPushOnceReply(redis::ReplyRef reply);

// push_unique.lua: `payload` (of job `jid`) to its queue (`at` empty) or
// into schedule, due at `at`, unless `unique_key` is held; takes the key
// for `ttl_millis` (0: no expiry).
ScriptCall PushUniqueCall(const Keys& keys, std::string_view unique_key, std::string_view jid,
                          int64_t ttl_millis, std::string_view queue, std::optional<double> at,
                          std::string payload);
// Its reply: the integer 1 (pushed) or the holder's jid (a string);
// kProtocol for anything else.
struct PushUniqueReply {
  bool pushed = false;
  std::string holder;  // the jid of the job holding the key, when not pushed
};
Result<PushUniqueReply> ReadPushUniqueReply(redis::ReplyRef reply);

// release_unique.lua: releases unique key `unique_key` while it holds `jid`
// (a job unique until it starts, as it is fetched).
ScriptCall ReleaseUniqueCall(std::string_view unique_key, std::string_view jid);

// fetch.lua: up to `max` jobs from the (queue key, working key) pairs, tried
// in the order given. With `sequences` (the keys of the pairs' keyspace), a
// job of a sequence held by another job waits for it instead
// (reliableq-schema(7), "Sequences"); null: nothing is gated.
ScriptCall FetchCall(const std::vector<std::pair<std::string_view, std::string_view>>& pairs,
                     size_t max, const Keys* sequences = nullptr);
// Its reply. `pair` is an index into the call's `pairs` (0 for the first).
struct FetchedPayload {
  size_t pair = 0;
  std::string payload;
};
struct SkippedPair {
  size_t pair = 0;
  std::string reason;  // names the key and its type
};
struct FetchReply {
  std::vector<FetchedPayload> jobs;  // oldest first
  std::vector<SkippedPair> skipped;  // pairs not fetched from: a key of another type
  // Jobs taken from the queues that wait for their sequence instead of
  // running: they count against `max` as the jobs moved do.
  size_t waiting = 0;
};
Result<FetchReply> ReadFetchReply(redis::ReplyRef reply);

// heartbeat.lua: what one beat writes.
struct BeatFields {
  int64_t ttl_millis = 0;
  std::string registry_entry;  // the registry entry JSON (process_entry.h)
  std::string info;            // Sidekiq's info JSON
  size_t busy = 0;
  double now = 0;
  bool quiet = false;
  int64_t rss_kb = 0;
  int64_t rtt_us = 0;
  // (thread id, work JSON) for every running job.
  std::vector<std::pair<std::string, std::string>> work;
};
ScriptCall HeartbeatCall(const Keys& keys, std::string_view identity, BeatFields fields);
// Its reply.
struct HeartbeatReply {
  bool existed = false;  // the heartbeat key was there before the beat
  std::string signal;    // the signal popped; empty: none
};
Result<HeartbeatReply> ReadHeartbeatReply(redis::ReplyRef reply);

// forget.lua: unregisters `identity`, whose working lists are those of
// `queues`; `force` also when its heartbeat exists.
ScriptCall ForgetCall(const Keys& keys, std::string_view identity,
                      const std::vector<std::string>& queues, bool force);
// Its reply: whether the process was forgotten (false: its heartbeat is
// there, without `force`, or a working list is not empty).
Result<bool> ReadForgetReply(redis::ReplyRef reply);

// drop_heartbeat.lua: deletes the heartbeat key of `identity` only while it
// holds `beat_client` (> 0), the id its registry entry named, and the
// server is the one of `run_id`, where its connections were found gone.
ScriptCall DropHeartbeatCall(const Keys& keys, std::string_view identity, int64_t beat_client,
                             std::string_view entry_read, std::string_view run_id);

// finish.lua: the end of one run of a job (reliableq-schema(7), "The end
// of a job's life").
enum class FinishMode { kDone, kSnooze, kRetry, kDead, kDiscard, kExpire };
struct FinishedRun {
  std::string_view working_key;
  std::string_view original;  // as fetched
  // kSnooze, kRetry, kDead: the payload it moves as (the worker's edit).
  std::string_view updated;
  FinishMode mode = FinishMode::kDone;
  double score = 0;           // kSnooze, kRetry: when it runs again
  bool counted = true;        // false: a payload that is not a job
  // Sent again after a reply that was lost: count it only if it is still
  // in the working list (the first call, if it ran, counted it).
  bool resent_unconfirmed = false;
  // The job's final record (reliableq-schema(7), "Job records"), written
  // with the move when the job's life ends (kDone, kDead, kDiscard,
  // kExpire) and it moved; empty: none. record_key is Keys::JobRecord.
  std::string_view record_key;
  std::string_view record;
  int64_t record_ttl_seconds = 0;
};
// `wake_channel` is Keys::WakeScheduled(): modes kSnooze and kRetry publish
// the score there when the job becomes the earliest member of its set, so
// that sleeping pollers wake at its time. Empty: no message (the pollers'
// fallback reads still find it).
ScriptCall FinishCall(const Keys& keys, const FinishedRun& run, double now,
                      const DeadSetLimits& limits, std::string_view wake_channel = {});
// Its reply: whether the job was still in the working list (and moved).
Result<bool> ReadFinishReply(redis::ReplyRef reply);

// ack.lua: the successes of jobs whose payloads carry a feature marker,
// all from one working list, in one step; each with its final record
// (record_key empty: none; FinishedRun's record fields).
struct AckedRun {
  std::string_view original;  // as fetched
  // Its jid and sequence key as the worker read them (empty: none).
  std::string_view jid;
  std::string_view sequence_key;
  std::string_view record_key;
  std::string_view record;
  int64_t record_ttl_seconds = 0;
};
ScriptCall AckCall(const Keys& keys, std::string_view working_key,
                   const std::vector<AckedRun>& runs);
// Its reply: for each run, in order, whether the job was still in the
// working list (and moved).
Result<std::vector<bool>> ReadAckReply(redis::ReplyRef reply, size_t runs);

// requeue.lua: a live process gives back one working list.
enum class RequeueMode { kKeep, kInterrupt };
ScriptCall RequeueCall(const Keys& keys, std::string_view working_key, std::string_view queue, RequeueMode mode,
                       int max_interruptions, double now, const DeadSetLimits& limits,
                       std::vector<std::string> listed);
// Its reply: how many jobs went back to the queue, to dead, and stayed.
struct RequeueReply {
  int64_t requeued = 0;
  int64_t dead = 0;
  int64_t kept = 0;
};
Result<RequeueReply> ReadRequeueReply(redis::ReplyRef reply);

// recover.lua: one batch of a dead process's working list for `queue`.
struct RecoverBatch {
  int max_interruptions = 3;
  int64_t limit = 1000;
  bool force = false;
  bool dry_run = false;
  int64_t offset = 0;
};
ScriptCall RecoverCall(const Keys& keys, std::string_view identity, std::string_view queue,
                       const RecoverBatch& batch, double now, const DeadSetLimits& limits);

// A member of a sorted set to push to a queue, and that queue's name (empty
// when the member is not a job: promote.lua sends it to dead).
struct QueuedMember {
  std::string queue;
  std::string member;
};

// promote.lua: due members of `set` (schedule or retry) to their queues; a
// queue found empty is announced on `wake_prefix` + its name (empty: not).
// What is due, and the new enqueued_at, are judged by `now`; nullopt: by
// Redis's TIME (what workers give, reliableq-schema(7), CLOCKS).
ScriptCall PromoteCall(const Keys& keys, std::string_view set, std::optional<double> now,
                       const DeadSetLimits& limits, std::string_view wake_prefix,
                       std::vector<QueuedMember> members);
// Its reply: members pushed to their queues, sent to dead, no longer in
// the set (promoted or deleted by somebody else), and left as not yet due.
struct PromoteReply {
  int64_t promoted = 0;
  int64_t dead = 0;
  int64_t skipped = 0;
  int64_t early = 0;
};
Result<PromoteReply> ReadPromoteReply(redis::ReplyRef reply);

// retry_now.lua: entries of `set` to their queues now; `decrement_retry`
// for Sidekiq's "Retry now" (retry_count - 1).
ScriptCall RetryNowCall(const Keys& keys, std::string_view set, double now, bool decrement_retry,
                        std::vector<QueuedMember> entries);
// Its reply, {moved, missing}: missing entries had left the set.
struct RetryNowReply {
  int64_t moved = 0;
  int64_t missing = 0;
};
Result<RetryNowReply> ReadRetryNowReply(redis::ReplyRef reply);

// clear.lua: deletes a whole job set (`queue` empty: `key` is a ZSET), or
// the queue `queue` (`key` is its LIST) and its name in `queues`.
ScriptCall ClearCall(const Keys& keys, std::string_view key, std::string_view queue);
// Its reply, {size, removed}: what the key held, and the keys and names
// removed (0: there was nothing to clear).
struct ClearReply {
  int64_t size = 0;
  int64_t removed = 0;
};
Result<ClearReply> ReadClearReply(redis::ReplyRef reply);

// kill.lua: entries of `from` (keys.Retry() when not given, or schedule for the dashboard's kill of
// a scheduled job) to dead.
ScriptCall KillCall(const Keys& keys, double now, const DeadSetLimits& limits,
                    std::vector<std::string> entries,
                    std::optional<std::string_view> from = std::nullopt);
// Its reply, {killed, missing}: missing entries had left `from`.
struct KillReply {
  int64_t killed = 0;
  int64_t missing = 0;
};
Result<KillReply> ReadKillReply(redis::ReplyRef reply);

// sequence_release.lua: an operator lets sequence key `key` go; it goes on
// to the oldest job waiting for it, as a finish hands it on.
ScriptCall SequenceReleaseCall(const Keys& keys, std::string_view key);
// Its reply: held false when nobody held the key (nothing was written);
// else the jid that held it and the jid it went to (empty: none waited).
struct SequenceReleaseReply {
  bool held = false;
  std::string holder;
  std::string next;
};
Result<SequenceReleaseReply> ReadSequenceReleaseReply(redis::ReplyRef reply);

// sequence_skip.lua: the oldest job waiting for sequence key `key` goes to
// dead with score `now`, followed by the dead-set trims of `limits`.
ScriptCall SequenceSkipCall(const Keys& keys, std::string_view key, double now,
                            const DeadSetLimits& limits);
// Its reply: skipped false when no job waited (nothing was written); else
// the jid of the job moved (empty: the entry was not a job) and the jid the
// key went to when it was held by nobody (empty otherwise).
struct SequenceSkipReply {
  bool skipped = false;
  std::string jid;
  std::string next;
};
Result<SequenceSkipReply> ReadSequenceSkipReply(redis::ReplyRef reply);

// limit_acquire.lua: the job `payload`, fetched into `working_key`, takes
// a slot of limiter `limit` as `holder` ("<n>@<identity>"), or is parked.
struct LimitTerms {
  std::string_view name;
  int concurrency = 0;
  int rate = 0;
  double period_seconds = 0;
};
// `now` nullopt: the script reads Redis's clock (TIME), so that workers
// whose clocks disagree still share one rate window (the worker's call).
ScriptCall LimitAcquireCall(const Keys& keys, const LimitTerms& limit,
                            std::string_view working_key, std::string payload,
                            std::string_view holder, std::optional<double> now,
                            double jitter_seconds);
// Its reply: the job may start, was parked (on a full limiter, or in
// schedule on a full rate window), or is gone from the working list.
struct LimitAcquireReply {
  enum class Answer { kStart, kWaiting, kScheduled, kGone };
  Answer answer = Answer::kStart;
  std::string at;  // kScheduled: when the job is due, epoch seconds as text
};
Result<LimitAcquireReply> ReadLimitAcquireReply(redis::ReplyRef reply);

// limit_release.lua: `holders` of limiter `limit` given back; parked jobs
// move back to their queues while it has room.
ScriptCall LimitReleaseCall(const Keys& keys, const LimitTerms& limit,
                            std::vector<std::string> holders, double now);

// limit_reap.lua: frees the holders of limiter `limit` whose process (one
// of `identities`, read from its holders) has no heartbeat key.
ScriptCall LimitReapCall(const Keys& keys, const LimitTerms& limit,
                         const std::vector<std::string>& identities, double now);
// Its reply: the holders freed, and the parked jobs moved back.
struct LimitReapReply {
  int64_t removed = 0;
  int64_t moved = 0;
};
Result<LimitReapReply> ReadLimitReapReply(redis::ReplyRef reply);

// "<n>@<identity>", the holder name limit_reap.lua parses.
std::string LimitHolder(uint64_t n, std::string_view identity);
// periodic.lua: the job of one tick of periodic job `name`, pushed unless
// the tick was pushed already (see the script for every refusal).
struct PeriodicTick {
  std::string_view name;
  std::string_view digest;
  int64_t tick = 0;
  bool catch_up = false;
  std::string_view queue;
  std::string payload;
  std::string_view jid;
  // Judges whether the tick is due and is recorded as last_pushed_at;
  // nullopt: Redis's TIME (what workers give, reliableq-schema(7), CLOCKS).
  std::optional<double> now;
};
// How many ticks periodic:<name>:ticks keeps; older ticks are refused as
// too late.
inline constexpr int64_t kPeriodicTicksKept = 1000;
ScriptCall PeriodicTickCall(const Keys& keys, PeriodicTick tick);
// Its reply: what became of the tick (see the script).
struct PeriodicTickReply {
  enum class Outcome { kPushed, kUndeclared, kConflict, kDuplicate, kEarly, kTooLate, kSuperseded };
  Outcome outcome = Outcome::kPushed;
  std::string declarer;  // kConflict: whose declaration is recorded ("": unknown)
  double now = 0;        // kEarly: the now the tick was judged by
};
Result<PeriodicTickReply> ReadPeriodicTickReply(redis::ReplyRef reply);

// periodic_declare.lua: records `fields` (name, value pairs) as the
// declaration of `name` by `identity`.
ScriptCall PeriodicDeclareCall(const Keys& keys, std::string_view name, std::string_view digest,
                               std::string_view identity, double now,
                               std::vector<std::pair<std::string, std::string>> fields);
// Its reply: the declaration it replaced ("" each when there was none).
struct PeriodicDeclareReply {
  std::string previous_digest;
  std::string previous_declarer;
};
Result<PeriodicDeclareReply> ReadPeriodicDeclareReply(redis::ReplyRef reply);

}  // namespace reliableq::protocol

#endif  // RELIABLEQ_PROTOCOL_SCRIPT_CALLS_H_
