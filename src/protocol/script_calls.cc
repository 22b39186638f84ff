#include "protocol/script_calls.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iterator>

#include "codec/job_codec.h"
#include "protocol/script_replies.h"

namespace reliableq::protocol {

namespace {

// The sequence context the scripts that end a job's life take
// (lib/sequence.lua): the sequence keys' prefix, the queue keys' prefix and
// the queues' wake-up channel prefix.
void AddSequenceArgs(const Keys& keys, ScriptCall* call) {
  call->args.push_back(keys.SequencePrefix());
  call->args.push_back(keys.Queue(""));
  call->args.push_back(keys.WakeQueue(""));
}

// Appends, for each member, the index in KEYS of its queue (adding the
// queue's key the first time; 0 for a member that is not a job), the queue's
// name and the member: the shape promote.lua and retry_now.lua share.
void AddQueuedMembers(const Keys& keys, size_t fixed_keys, std::vector<QueuedMember> members,
                      ScriptCall* call) {
  for (QueuedMember& m : members) {
    size_t index = 0;
    if (!m.queue.empty()) {
      std::string key = keys.Queue(m.queue);
      auto begin = call->keys.begin() + static_cast<std::ptrdiff_t>(fixed_keys);
      auto found = std::find(begin, call->keys.end(), key);
      index = static_cast<size_t>(found - call->keys.begin()) + 1;
      if (found == call->keys.end()) call->keys.push_back(std::move(key));
    }
    call->args.push_back(std::to_string(index));
    call->args.push_back(std::move(m.queue));
    call->args.push_back(std::move(m.member));
  }
}

std::string Count(int64_t n) { return std::to_string(n); }

}  // namespace

ScriptCall PushCall(const Keys& keys, std::vector<QueuePush> pushes) {
  ScriptCall call{ScriptId::kPush, {keys.Queues()}, {keys.WakeQueue("")}};
  size_t args = 1;
  for (const QueuePush& push : pushes) args += 2 + push.payloads.size();
  call.keys.reserve(1 + pushes.size());
  call.args.reserve(args);
  for (QueuePush& push : pushes) {
    call.keys.push_back(keys.Queue(push.queue));
    call.args.emplace_back(push.queue);
    call.args.push_back(std::to_string(push.payloads.size()));
    // LPUSH puts its last argument leftmost; the first given must be taken
    // first, from the right end, so it goes first.
    for (std::string& payload : push.payloads) call.args.push_back(std::move(payload));
  }
  return call;
}

ScriptCall ScheduleCall(const Keys& keys, double at, std::string payload) {
  return ScriptCall{ScriptId::kSchedule,
                    {keys.Schedule()},
                    {codec::FormatEpoch(at), std::move(payload), keys.WakeScheduled()}};
}

Result<ScheduleReply> ReadScheduleReply(redis::ReplyRef reply) {
  Result<int64_t> added = IntegerReply(reply, "schedule.lua");
  if (!added.ok()) return added.status();
  return ScheduleReply{.added = *added == 1};
}

ScriptCall PushOnceCall(const Keys& keys, std::chrono::seconds replay_window,
                        std::vector<OncePush> jobs) {
  ScriptCall call{ScriptId::kPushOnce,
                  {keys.Queues(), keys.Schedule()},
                  {Count(replay_window.count()), keys.WakeQueue(""), keys.WakeScheduled()}};
  call.keys.reserve(2 + 2 * jobs.size());
  call.args.reserve(3 + 2 * jobs.size());
  for (OncePush& job : jobs) {
    call.keys.push_back(keys.Pushed(job.jid));
    call.keys.push_back(job.at ? keys.Schedule() : keys.Queue(job.queue));
    call.args.push_back(job.at ? codec::FormatEpoch(*job.at) : std::string(job.queue));
    call.args.push_back(std::move(job.payload));
  }
  return call;
}

Result<PushOnceReply> ReadPushOnceReply(redis::ReplyRef reply) {
  Result<int64_t> pushed = IntegerReply(reply, "push_once.lua");
  if (!pushed.ok()) return pushed.status();
  return PushOnceReply{.pushed = *pushed};
}

ScriptCall PushUniqueCall(const Keys& keys, std::string_view unique_key, std::string_view jid,
                          int64_t ttl_millis, std::string_view queue, std::optional<double> at,
                          std::string payload) {
  if (at) {
    return ScriptCall{ScriptId::kPushUnique,
                      {std::string(unique_key), keys.Queues(), keys.Schedule()},
                      {"at", std::string(jid), Count(ttl_millis), std::move(payload),
                       codec::FormatEpoch(*at), keys.WakeScheduled()}};
  }
  return ScriptCall{
      ScriptId::kPushUnique,
      {std::string(unique_key), keys.Queues(), keys.Queue(queue)},
      {"now", std::string(jid), Count(ttl_millis), std::move(payload), std::string(queue),
       keys.WakeQueue(queue)}};
}

Result<PushUniqueReply> ReadPushUniqueReply(redis::ReplyRef ref) {
  const redisReply* reply = ref.raw();
  if (reply != nullptr && reply->type == REDIS_REPLY_INTEGER && reply->integer == 1) {
    return PushUniqueReply{true, {}};
  }
  if (reply != nullptr && reply->type == REDIS_REPLY_STRING) {
    return PushUniqueReply{false, std::string(redis::View(reply))};
  }
  return Status::Protocol("push_unique.lua answered an unexpected reply");
}

ScriptCall ReleaseUniqueCall(std::string_view unique_key, std::string_view jid) {
  return ScriptCall{ScriptId::kReleaseUnique, {std::string(unique_key)}, {std::string(jid)}};
}

ScriptCall FetchCall(const std::vector<std::pair<std::string_view, std::string_view>>& pairs,
                     size_t max, const Keys* sequences) {
  ScriptCall call{ScriptId::kFetch, {}, {std::to_string(max)}};
  if (sequences != nullptr) {
    call.args.push_back(sequences->SequencePrefix());
    call.args.push_back(sequences->Queue(""));
  }
  call.keys.reserve(pairs.size() * 2);
  for (const auto& [queue, working] : pairs) {
    call.keys.emplace_back(queue);
    call.keys.emplace_back(working);
  }
  return call;
}

Result<FetchReply> ReadFetchReply(redis::ReplyRef reply) {
  constexpr std::string_view kWant =
      "{i, payload, ...} with skipped pairs as {-i, reason} and waiting jobs as {0, n}";
  const redisReply* r = ArrayOf(reply, 0, SIZE_MAX);
  if (r == nullptr || r->elements % 2 != 0) return Unexpected("fetch.lua", reply, kWant);
  FetchReply read;
  read.jobs.reserve(r->elements / 2);
  for (size_t i = 0; i < r->elements; i += 2) {
    // A 1-based index into the pairs; negative for a pair skipped.
    Result<int64_t> pair = redis::ToInteger(r->element[i]);
    if (pair.ok() && *pair == 0) {
      Result<int64_t> waiting = redis::ToInteger(r->element[i + 1]);
      if (!waiting.ok() || *waiting < 0) return Unexpected("fetch.lua", reply, kWant);
      read.waiting += static_cast<size_t>(*waiting);
      continue;
    }
    Result<std::string> text = redis::ToString(r->element[i + 1]);
    if (!pair.ok() || !text.ok()) return Unexpected("fetch.lua", reply, kWant);
    if (*pair < 0) {
      read.skipped.push_back({static_cast<size_t>(-*pair) - 1, std::move(*text)});
    } else {
      read.jobs.push_back({static_cast<size_t>(*pair) - 1, std::move(*text)});
    }
  }
  return read;
}

ScriptCall HeartbeatCall(const Keys& keys, std::string_view identity, BeatFields fields) {
  ScriptCall call{
      ScriptId::kHeartbeat,
      {keys.Heartbeat(identity), keys.Registry(), keys.Processes(), keys.Process(identity),
       keys.Work(identity), keys.Workers(identity), keys.Signals(identity)},
      {std::string(identity), Count(fields.ttl_millis), std::move(fields.registry_entry),
       std::move(fields.info), std::to_string(fields.busy), codec::FormatEpoch(fields.now),
       fields.quiet ? "true" : "false", Count(fields.rss_kb), Count(fields.rtt_us)}};
  for (auto& [thread, work] : fields.work) {
    call.args.push_back(std::move(thread));
    call.args.push_back(std::move(work));
  }
  return call;
}

Result<HeartbeatReply> ReadHeartbeatReply(redis::ReplyRef reply) {
  constexpr std::string_view kWant = "{existed, signal or nil}";
  const redisReply* r = ArrayOf(reply, 1, 2);
  if (r == nullptr) return Unexpected("heartbeat.lua", reply, kWant);
  Result<int64_t> existed = redis::ToInteger(r->element[0]);
  if (!existed.ok()) return Unexpected("heartbeat.lua", reply, kWant);
  HeartbeatReply read;
  read.existed = *existed == 1;
  if (r->elements == 2) {
    Result<std::string> signal = redis::ToString(r->element[1]);
    if (signal.ok()) {
      read.signal = std::move(*signal);
    } else if (!signal.status().IsNotFound()) {
      return Unexpected("heartbeat.lua", reply, kWant);
    }
  }
  return read;
}

ScriptCall ForgetCall(const Keys& keys, std::string_view identity,
                      const std::vector<std::string>& queues, bool force) {
  ScriptCall call{ScriptId::kForget,
                  {keys.Heartbeat(identity), keys.Registry(), keys.Processes(),
                   keys.Process(identity), keys.Work(identity), keys.Workers(identity)},
                  {std::string(identity), force ? "1" : "0"}};
  for (const std::string& queue : queues) call.keys.push_back(keys.Working(identity, queue));
  return call;
}

Result<bool> ReadForgetReply(redis::ReplyRef reply) {
  Result<int64_t> forgotten = redis::ToInteger(reply);
  if (!forgotten.ok()) return Unexpected("forget.lua", reply, "1 or 0");
  return *forgotten == 1;
}

ScriptCall DropHeartbeatCall(const Keys& keys, std::string_view identity, int64_t beat_client,
                             std::string_view entry_read, std::string_view run_id) {
  return ScriptCall{ScriptId::kDropHeartbeat,
                    {keys.Heartbeat(identity), keys.Registry()},
                    {Count(beat_client), std::string(identity), std::string(entry_read),
                     std::string(run_id)}};
}

ScriptCall FinishCall(const Keys& keys, const FinishedRun& run, double now,
                      const DeadSetLimits& limits, std::string_view wake_channel) {
  std::string date = UtcDate(now);
  std::string target;
  const char* mode = "done";
  switch (run.mode) {
    case FinishMode::kDone:
      break;
    case FinishMode::kSnooze:
      mode = "snooze";
      target = keys.Schedule();
      break;
    case FinishMode::kRetry:
      mode = "retry";
      target = keys.Retry();
      break;
    case FinishMode::kDead:
      mode = "dead";
      break;
    case FinishMode::kDiscard:
      mode = "discard";
      break;
    case FinishMode::kExpire:
      mode = "expire";
      break;
  }
  const bool recorded = !run.record.empty();
  // Unused by the other modes, but named all the same: a key of the
  // script's slot.
  if (target.empty()) target = keys.Dead();
  bool scored = run.mode == FinishMode::kSnooze || run.mode == FinishMode::kRetry;
  std::string now_text = codec::FormatEpoch(now);
  ScriptCall call{ScriptId::kFinish,
                  {std::string(run.working_key), std::move(target), keys.Processed(),
                   keys.Processed(date), keys.Failed(), keys.Failed(date), keys.StatExpired()},
                  {std::string(run.original), std::string(run.updated),
                   scored ? codec::FormatEpoch(run.score) : now_text, mode, now_text,
                   Count(limits.max_jobs), Count(limits.timeout.count()),
                   !run.counted             ? "0"
                   : run.resent_unconfirmed ? "2"
                                            : "1",
                   std::string(wake_channel)}};
  if (recorded) {
    call.keys.emplace_back(run.record_key);
    call.args.emplace_back(run.record);
    call.args.push_back(std::to_string(run.record_ttl_seconds));
  } else {
    call.args.insert(call.args.end(), {"", ""});
  }
  AddSequenceArgs(keys, &call);
  return call;
}

Result<bool> ReadFinishReply(redis::ReplyRef reply) { return RemovedAny("finish.lua", reply); }

ScriptCall AckCall(const Keys& keys, std::string_view working_key,
                   const std::vector<AckedRun>& runs) {
  ScriptCall call{ScriptId::kAck, {std::string(working_key)}, {}};
  AddSequenceArgs(keys, &call);
  call.args.reserve(call.args.size() + 6 * runs.size());
  for (const AckedRun& run : runs) {
    call.args.emplace_back(run.original);
    call.args.emplace_back(run.jid);
    call.args.emplace_back(run.sequence_key);
    call.args.emplace_back(run.record_key);
    call.args.emplace_back(run.record_key.empty() ? std::string_view() : run.record);
    call.args.push_back(run.record_key.empty() ? std::string()
                                               : std::to_string(run.record_ttl_seconds));
  }
  return call;
}

Result<std::vector<bool>> ReadAckReply(redis::ReplyRef reply, size_t runs) {
  Result<std::vector<int64_t>> moved = Integers("ack.lua", reply, runs, "{0 or 1 per job}");
  if (!moved.ok()) return moved.status();
  std::vector<bool> out;
  out.reserve(runs);
  for (int64_t m : *moved) out.push_back(m > 0);
  return out;
}

ScriptCall RequeueCall(const Keys& keys, std::string_view working_key, std::string_view queue, RequeueMode mode,
                       int max_interruptions, double now, const DeadSetLimits& limits,
                       std::vector<std::string> listed) {
  ScriptCall call{ScriptId::kRequeue,
                  {std::string(working_key), keys.Queue(queue), keys.Dead(), keys.Queues()},
                  {mode == RequeueMode::kKeep ? "keep" : "interrupt",
                   std::to_string(max_interruptions), codec::FormatEpoch(now),
                   Count(limits.max_jobs), Count(limits.timeout.count()), std::string(queue)}};
  AddSequenceArgs(keys, &call);
  call.args.reserve(call.args.size() + listed.size());
  for (std::string& payload : listed) call.args.push_back(std::move(payload));
  return call;
}

Result<RequeueReply> ReadRequeueReply(redis::ReplyRef reply) {
  auto counts = Integers("requeue.lua", reply, 3, "{requeued, dead, kept}");
  if (!counts.ok()) return counts.status();
  return RequeueReply{(*counts)[0], (*counts)[1], (*counts)[2]};
}

ScriptCall RecoverCall(const Keys& keys, std::string_view identity, std::string_view queue,
                       const RecoverBatch& batch, double now, const DeadSetLimits& limits) {
  ScriptCall call{
      ScriptId::kRecover,
      {keys.Heartbeat(identity), keys.Working(identity, queue), keys.Queue(queue), keys.Dead(),
       keys.Queues()},
      {std::to_string(batch.max_interruptions), codec::FormatEpoch(now), Count(batch.limit),
       batch.force ? "1" : "0", batch.dry_run ? "1" : "0", Count(limits.max_jobs),
       Count(limits.timeout.count()), std::string(queue), Count(batch.offset)}};
  AddSequenceArgs(keys, &call);
  return call;
}

ScriptCall PromoteCall(const Keys& keys, std::string_view set, std::optional<double> now,
                       const DeadSetLimits& limits, std::string_view wake_prefix,
                       std::vector<QueuedMember> members) {
  ScriptCall call{ScriptId::kPromote,
                  {std::string(set), keys.Queues(), keys.Dead()},
                  {now ? codec::FormatEpoch(*now) : std::string(), Count(limits.max_jobs),
                   Count(limits.timeout.count()),
                   std::string(wake_prefix)}};
  AddQueuedMembers(keys, 3, std::move(members), &call);
  return call;
}

Result<PromoteReply> ReadPromoteReply(redis::ReplyRef reply) {
  auto counts = Integers("promote.lua", reply, 4, "{promoted, dead, skipped, early}");
  if (!counts.ok()) return counts.status();
  return PromoteReply{(*counts)[0], (*counts)[1], (*counts)[2], (*counts)[3]};
}

ScriptCall RetryNowCall(const Keys& keys, std::string_view set, double now, bool decrement_retry,
                        std::vector<QueuedMember> entries) {
  ScriptCall call{ScriptId::kRetryNow,
                  {std::string(set), keys.Queues()},
                  {codec::FormatEpoch(now), decrement_retry ? "1" : "0"}};
  AddQueuedMembers(keys, 2, std::move(entries), &call);
  return call;
}

Result<RetryNowReply> ReadRetryNowReply(redis::ReplyRef reply) {
  Result<std::pair<int64_t, int64_t>> counts = TwoCounters(reply, "retry_now.lua");
  if (!counts.ok()) return counts.status();
  return RetryNowReply{.moved = counts->first, .missing = counts->second};
}

ScriptCall ClearCall(const Keys& keys, std::string_view key, std::string_view queue) {
  if (queue.empty()) return ScriptCall{ScriptId::kClear, {std::string(key)}, {"zset"}};
  return ScriptCall{ScriptId::kClear,
                    {std::string(key), keys.Queues()},
                    {"list", std::string(queue)}};
}

Result<ClearReply> ReadClearReply(redis::ReplyRef reply) {
  Result<std::pair<int64_t, int64_t>> counts = TwoCounters(reply, "clear.lua");
  if (!counts.ok()) return counts.status();
  return ClearReply{.size = counts->first, .removed = counts->second};
}

ScriptCall KillCall(const Keys& keys, double now, const DeadSetLimits& limits, std::vector<std::string> entries,
                    std::optional<std::string_view> from) {
  ScriptCall call{ScriptId::kKill,
                  {from ? std::string(*from) : keys.Retry(), keys.Dead()},
                  {codec::FormatEpoch(now), Count(limits.max_jobs), Count(limits.timeout.count())}};
  AddSequenceArgs(keys, &call);
  for (std::string& entry : entries) call.args.push_back(std::move(entry));
  return call;
}

Result<KillReply> ReadKillReply(redis::ReplyRef reply) {
  Result<std::pair<int64_t, int64_t>> counts = TwoCounters(reply, "kill.lua");
  if (!counts.ok()) return counts.status();
  return KillReply{.killed = counts->first, .missing = counts->second};
}

ScriptCall SequenceReleaseCall(const Keys& keys, std::string_view key) {
  return ScriptCall{ScriptId::kSequenceRelease,
                    {keys.Sequences(), keys.SequencesSince(), keys.SequenceWaiting(key)},
                    {std::string(key), keys.SequencePrefix(), keys.Queue(""), keys.WakeQueue("")}};
}

Result<SequenceReleaseReply> ReadSequenceReleaseReply(redis::ReplyRef reply) {
  SequenceReleaseReply read;
  Result<bool> held = FlagAndTwoTexts(reply, "sequence_release.lua", &read.holder, &read.next);
  if (!held.ok()) return held.status();
  read.held = *held;
  return read;
}

ScriptCall SequenceSkipCall(const Keys& keys, std::string_view key, double now,
                            const DeadSetLimits& limits) {
  return ScriptCall{
      ScriptId::kSequenceSkip,
      {keys.Sequences(), keys.SequencesSince(), keys.SequenceWaiting(key), keys.Dead()},
      {std::string(key), codec::FormatEpoch(now), Count(limits.max_jobs),
       Count(limits.timeout.count()), keys.SequencePrefix(), keys.Queue(""), keys.WakeQueue("")}};
}

Result<SequenceSkipReply> ReadSequenceSkipReply(redis::ReplyRef reply) {
  SequenceSkipReply read;
  Result<bool> skipped = FlagAndTwoTexts(reply, "sequence_skip.lua", &read.jid, &read.next);
  if (!skipped.ok()) return skipped.status();
  read.skipped = *skipped;
  return read;
}

ScriptCall LimitAcquireCall(const Keys& keys, const LimitTerms& limit,
                            std::string_view working_key, std::string payload,
                            std::string_view holder, std::optional<double> now,
                            double jitter_seconds) {
  return ScriptCall{ScriptId::kLimitAcquire,
                    {std::string(working_key), keys.Limit(limit.name), keys.LimitStarts(limit.name),
                     keys.LimitWaiting(limit.name), keys.Schedule()},
                    {std::move(payload), std::string(holder), now ? codec::FormatEpoch(*now) : "",
                     std::to_string(limit.concurrency), std::to_string(limit.rate),
                     codec::FormatEpoch(limit.period_seconds), codec::FormatEpoch(jitter_seconds),
                     keys.WakeScheduled()}};
}

Result<LimitAcquireReply> ReadLimitAcquireReply(redis::ReplyRef reply) {
  constexpr std::string_view kWant =
      "{'start'}, {'waiting', holders}, {'scheduled', at} or {'gone'}";
  const redisReply* r = ArrayOf(reply, 1, 2);
  if (r == nullptr) return Unexpected("limit_acquire.lua", reply, kWant);
  Result<std::string> answer = redis::ToString(r->element[0]);
  if (!answer.ok()) return Unexpected("limit_acquire.lua", reply, kWant);
  using Answer = LimitAcquireReply::Answer;
  LimitAcquireReply read;
  if (*answer == "start") {
    read.answer = Answer::kStart;
  } else if (*answer == "waiting") {
    read.answer = Answer::kWaiting;
  } else if (*answer == "gone") {
    read.answer = Answer::kGone;
  } else if (*answer == "scheduled" && r->elements == 2) {
    read.answer = Answer::kScheduled;
    Result<std::string> at = redis::ToString(r->element[1]);
    if (!at.ok()) return Unexpected("limit_acquire.lua", reply, kWant);
    read.at = std::move(*at);
  } else {
    return Unexpected("limit_acquire.lua", reply, kWant);
  }
  return read;
}

ScriptCall LimitReleaseCall(const Keys& keys, const LimitTerms& limit,
                            std::vector<std::string> holders, double now) {
  ScriptCall call{
      ScriptId::kLimitRelease,
      {keys.Limit(limit.name), keys.LimitWaiting(limit.name), keys.Queues(), keys.Dead()},
      {std::to_string(limit.concurrency), keys.WakeQueue(""), codec::FormatEpoch(now),
       keys.Queue("")}};
  for (std::string& holder : holders) call.args.push_back(std::move(holder));
  return call;
}

ScriptCall LimitReapCall(const Keys& keys, const LimitTerms& limit,
                         const std::vector<std::string>& identities, double now) {
  ScriptCall call{
      ScriptId::kLimitReap,
      {keys.Limit(limit.name), keys.LimitWaiting(limit.name), keys.Queues(), keys.Dead()},
      {std::to_string(limit.concurrency), keys.WakeQueue(""), codec::FormatEpoch(now),
       keys.Heartbeat(""), keys.Queue("")}};
  for (const std::string& identity : identities) call.keys.push_back(keys.Heartbeat(identity));
  return call;
}

Result<LimitReapReply> ReadLimitReapReply(redis::ReplyRef reply) {
  auto counts = Integers("limit_reap.lua", reply, 2, "{holders removed, jobs moved back}");
  if (!counts.ok()) return counts.status();
  return LimitReapReply{(*counts)[0], (*counts)[1]};
}

std::string LimitHolder(uint64_t n, std::string_view identity) {
  return std::to_string(n) + "@" + std::string(identity);
}

ScriptCall PeriodicTickCall(const Keys& keys, PeriodicTick tick) {
  return ScriptCall{
      ScriptId::kPeriodic,
      {keys.PeriodicJob(tick.name), keys.PeriodicTicks(tick.name), keys.Queues(),
       keys.Queue(tick.queue)},
      {std::string(tick.digest), Count(tick.tick), Count(kPeriodicTicksKept),
       tick.catch_up ? "catch_up" : "tick", keys.WakeQueue(tick.queue), std::string(tick.queue),
       std::move(tick.payload), std::string(tick.jid),
       tick.now ? codec::FormatEpoch(*tick.now) : std::string()}};
}

Result<PeriodicTickReply> ReadPeriodicTickReply(redis::ReplyRef reply) {
  constexpr std::string_view kWant =
      "{'pushed'}, {'undeclared'}, {'conflict', declared_by}, {'duplicate'}, {'early', now}, "
      "{'too_late'} or {'superseded', tick}";
  using Outcome = PeriodicTickReply::Outcome;
  static const std::pair<std::string_view, Outcome> kOutcomes[] = {
      {"pushed", Outcome::kPushed},     {"undeclared", Outcome::kUndeclared},
      {"conflict", Outcome::kConflict}, {"duplicate", Outcome::kDuplicate},
      {"early", Outcome::kEarly},
      {"too_late", Outcome::kTooLate},  {"superseded", Outcome::kSuperseded}};
  const redisReply* r = ArrayOf(reply, 1, 2);
  if (r == nullptr) return Unexpected("periodic.lua", reply, kWant);
  Result<std::string> word = redis::ToString(r->element[0]);
  if (!word.ok()) return Unexpected("periodic.lua", reply, kWant);
  auto found = std::find_if(std::begin(kOutcomes), std::end(kOutcomes),
                            [&](const auto& known) { return known.first == *word; });
  if (found == std::end(kOutcomes)) return Unexpected("periodic.lua", reply, kWant);
  PeriodicTickReply read;
  read.outcome = found->second;
  if (read.outcome == Outcome::kConflict && r->elements == 2) {
    Result<std::string> declarer = redis::ToString(r->element[1]);
    if (declarer.ok()) read.declarer = std::move(*declarer);
  }
  if (read.outcome == Outcome::kEarly) {
    if (r->elements != 2) return Unexpected("periodic.lua", reply, kWant);
    Result<std::string> now = redis::ToString(r->element[1]);
    char* end = nullptr;
    if (now.ok()) read.now = std::strtod(now->c_str(), &end);
    if (!now.ok() || end == now->c_str() || *end != '\0') {
      return Unexpected("periodic.lua", reply, kWant);
    }
  }
  return read;
}

ScriptCall PeriodicDeclareCall(const Keys& keys, std::string_view name, std::string_view digest,
                               std::string_view identity, double now,
                               std::vector<std::pair<std::string, std::string>> fields) {
  ScriptCall call{
      ScriptId::kPeriodicDeclare,
      {keys.Periodic(), keys.PeriodicJob(name)},
      {std::string(name), std::string(digest), std::string(identity), codec::FormatEpoch(now)}};
  for (auto& [field, value] : fields) {
    call.args.push_back(std::move(field));
    call.args.push_back(std::move(value));
  }
  return call;
}

Result<PeriodicDeclareReply> ReadPeriodicDeclareReply(redis::ReplyRef reply) {
  constexpr std::string_view kWant = "{previous digest, previous declared_by}";
  const redisReply* r = ArrayOf(reply, 2, 2);
  if (r == nullptr) return Unexpected("periodic_declare.lua", reply, kWant);
  Result<std::string> digest = redis::ToString(r->element[0]);
  Result<std::string> declarer = redis::ToString(r->element[1]);
  if (!digest.ok() || !declarer.ok()) return Unexpected("periodic_declare.lua", reply, kWant);
  return PeriodicDeclareReply{std::move(*digest), std::move(*declarer)};
}

}  // namespace reliableq::protocol
