#include "server/outcomes.h"

#include <algorithm>
#include <map>
#include <utility>

#include "protocol/keys.h"
#include "protocol/script_calls.h"

namespace reliableq::server {

namespace {

// Outcomes Redis did not confirm are sent again after a pause, doubling
// from the first to the longest while Redis keeps refusing: a refusal that
// will not heal (a key of the wrong type) must not flood Redis or the log.
constexpr std::chrono::milliseconds kFirstRetryPause{200};
constexpr std::chrono::milliseconds kLongestRetryPause{30000};
// Sidekiq keeps its dated stat counters for 5 years.
constexpr std::string_view kStatsTtlSeconds = "157680000";

}  // namespace

Outcomes::Outcomes(uv::EventLoop& loop, redis::AsyncConnection& command, const QueueSet& queues,
                   ProcessorPool& pool, DeadSetLimits dead_limits, const protocol::Keys& keys,
                   const Clock& clock, const base::Logger& log, std::function<void()> on_round_over,
                   Optional optional)
    : command_(command),
      queues_(queues),
      pool_(pool),
      dead_limits_(dead_limits),
      keys_(keys),
      wake_channel_(keys.WakeScheduled()),
      clock_(clock),
      log_(log),
      on_round_over_(std::move(on_round_over)),
      metrics_(optional.metrics),
      on_slot_freed_(std::move(optional.on_slot_freed)),
      retry_timer_(loop, [this] {
        if (!closed_) on_round_over_();
      }) {}

void Outcomes::Collect() {
  // Bounded: a turn either sends (its reply calls back) or arms the
  // wake-up; outcomes posted while arming are taken by the next turn.
  for (int turn = 0; turn < 3; ++turn) {
    pool_.TakeFinished(&unsent_);
    if (carried_.empty()) Send();
    if (!carried_.empty()) break;
    bool waiting = !pool_.ArmWake();
    if (!waiting || !command_.ready()) break;
  }
}

void Outcomes::Send() {
  if (unsent_.empty() || !command_.ready()) return;
  std::vector<FinishedJob> batch;
  batch.swap(unsent_);
  double now = clock_.Now();
  std::vector<uint64_t> freed;
  std::vector<FinishedJob> acked;
  // Feature-marked successes by queue: one ack.lua call per working list.
  std::map<uint32_t, std::vector<FinishedJob>> marked;
  for (FinishedJob& job : batch) {
    if (job.limit_slot != 0) freed.push_back(std::exchange(job.limit_slot, 0));
    if (job.outcome != Outcome::kSucceeded) continue;
    if (job.feature_marked) {
      marked[job.queue].push_back(std::move(job));
    } else {
      acked.push_back(std::move(job));
    }
  }
  if (!acked.empty()) SendAcks(std::move(acked), now);
  for (auto& [queue, jobs] : marked) SendFeatureAcks(std::move(jobs));
  for (FinishedJob& job : batch) {
    // (The successes moved into the acks above.)
    if (job.outcome == Outcome::kSucceeded) continue;
    SendFinish(std::move(job), now);
  }
  // After the outcomes, on the same connection.
  if (on_slot_freed_) {
    for (uint64_t slot : freed) on_slot_freed_(slot);
  }
}

bool Outcomes::SendRound(std::vector<FinishedJob> jobs,
                         const std::function<Status(Settle)>& issue) {
  auto owned = std::make_shared<std::vector<FinishedJob>>(std::move(jobs));
  carried_.push_back(owned);
  Status sent = issue([this, owned](const Status& why, const std::vector<size_t>& refused) {
    carried_.erase(std::find(carried_.begin(), carried_.end(), owned));
    if (closed_) return;
    if (refused.empty()) {
      if (!refusal_.empty() && unsent_.empty()) {
        log_.Log(LogLevel::kInfo, "outcomes_confirmed", "outcomes are confirmed again");
        refusal_.clear();
        retry_pause_ = kFirstRetryPause;
      }
      // Counts owed by ack.lua successes go out once the processors hold
      // no job and no round is left, not at the next beat: a worker that
      // stops after an all-unique drain would otherwise exit owing them. (A
      // busy worker's next beat or ack round carries them.)
      if (carried_.empty() && pool_.held() == 0) FlushCounts();
      if (carried_.empty()) on_round_over_();
      return;
    }
    // Logged when the reason changes, not on every try.
    std::string reason = why.ToString();
    if (reason != refusal_) {
      log_.Log(LogLevel::kWarn, base::LogEvent("outcomes_unconfirmed").WithError(reason),
               "outcome of %zu jobs not confirmed (%s); the jobs stay in this process's "
               "working lists, and are sent again until Redis confirms them",
               refused.size(), reason.c_str());
      refusal_ = std::move(reason);
    }
    // Without a reply, Redis may have applied them (counters included).
    bool maybe_applied = why.IsIoError() || why.IsTimeout() || why.IsShutdown();
    for (size_t i : refused) {
      FinishedJob& job = (*owned)[i];
      job.maybe_applied = job.maybe_applied || maybe_applied;
      unsent_.push_back(std::move(job));
    }
    // A lost connection sends them again once it is back (the reconcile);
    // an error reply on a live one (READONLY after a failover, MISCONF)
    // needs a later try of its own, since no processor wakes the loop while
    // a round is out.
    if (carried_.empty()) {
      retry_timer_.Start(retry_pause_);
      retry_pause_ = std::min(retry_pause_ * 2, kLongestRetryPause);
    }
  });
  if (!sent.ok()) {
    carried_.pop_back();
    for (FinishedJob& job : *owned) unsent_.push_back(std::move(job));
  }
  return sent.ok();
}

void Outcomes::SendAcks(std::vector<FinishedJob> acked, double now) {
  // LREM each exact payload once, searching from the tail, where the oldest
  // fetched job (most often the one finishing) sits; then count them as
  // Sidekiq does, the dated counter kept for 5 years. Plain pipelined
  // commands: Redis copies and hashes every string a script touches, which
  // made a scripted ack cost about twice the Redis time per job, and when
  // Redis is out of memory it refuses every command queued in a MULTI,
  // while LREM (which frees memory) still runs on its own. Each LREM is one
  // atomic step; the counters are not jobs.
  redis::CommandList ack;
  // A job whose earlier ack lost its reply is counted only when its LREM
  // here still removes it (the earlier pipeline did not run), and then in a
  // later round: had that pipeline run, its INCRBY behind the LREM counted
  // the job already.
  int64_t new_jobs = 0;
  std::vector<bool> maybe_applied;
  maybe_applied.reserve(acked.size());
  for (const FinishedJob& job : acked) {
    ack.Add({"LREM", queues_[job.queue].working_key, "-1", job.payload});
    maybe_applied.push_back(job.maybe_applied);
    if (!job.maybe_applied) ++new_jobs;
  }
  size_t jobs = acked.size();
  int64_t earlier = uncounted_processed_;
  int64_t count = earlier + new_jobs;
  std::string count_text = std::to_string(count);
  std::string processed_day = keys_.Processed(protocol::UtcDate(now));
  ack.Add({"INCRBY", keys_.Processed(), count_text});
  ack.Add({"INCRBY", processed_day, count_text});
  ack.Add({"EXPIRE", processed_day, kStatsTtlSeconds});
  // The final records of the jobs whose class keeps them: a SET each,
  // after the LREMs, in the same pipeline (in a script, as finish.lua
  // writes the others, a success would cost about ten times the Redis time
  // of its LREM). A record is not a job: one Redis refuses (out of memory)
  // is lost, and one whose LREM found the job given back already says how
  // this run ended while the job waits to run again.
  size_t records = 0;
  for (const FinishedJob& job : acked) {
    if (job.record.empty()) continue;
    ack.Add({"SET", keys_.JobRecord(job.jid), job.record, "EX", std::to_string(job.record_ttl)});
    ++records;
  }
  uncounted_processed_ = 0;
  auto sent_at = clock_.Monotonic();
  bool sent = SendRound(std::move(acked), [&](Settle settle) {
    return command_.Pipeline(ack, [this, settle = std::move(settle), jobs, records, count, earlier,
                                   maybe_applied = std::move(maybe_applied), sent_at](
                                      std::vector<Status> statuses, std::vector<int64_t> removed) {
      if (metrics_ != nullptr && statuses[jobs].ok()) {
        metrics_->AckRoundTrip(
            std::chrono::duration<double>(clock_.Monotonic() - sent_at).count());
      }
      std::vector<size_t> refused;
      int64_t refused_new = 0;
      Status why;
      for (size_t i = 0; i < jobs; ++i) {
        if (statuses[i].ok()) {
          if (maybe_applied[i] && removed[i] > 0) ++uncounted_processed_;
          continue;
        }
        if (why.ok()) why = statuses[i];
        refused.push_back(i);
        if (!maybe_applied[i]) ++refused_new;
      }
      // A record whose reply was lost is sent again with its job; one Redis
      // answered with an error (out of memory) is lost.
      for (size_t i = jobs + 3; i < jobs + 3 + records; ++i) {
        const Status& s = statuses[i];
        if (!s.ok() && !s.IsIoError() && !s.IsTimeout() && !s.IsShutdown()) {
          if (metrics_ != nullptr) metrics_->RecordLost();
          std::string error = s.ToString();
          log_.Log(LogLevel::kDebug, base::LogEvent("record_lost").WithError(error),
                   "a job's record was not written (%s)", error.c_str());
        }
      }
      const Status& counted = statuses[jobs];
      if (!counted.ok()) {
        // Logged when counts start to be refused, not on every round.
        if (earlier == 0 && refused.size() < jobs) {
          std::string error = counted.ToString();
          log_.Log(LogLevel::kWarn, base::LogEvent("processed_not_counted").WithError(error),
                   "stat:processed not counted (%s); counting later", error.c_str());
        }
        // Jobs sent again are counted when they are (or not at all, if
        // this round may have been applied).
        uncounted_processed_ += count - refused_new;
      }
      settle(why, refused);
    });
  });
  // Not sent: the jobs went back to unsent_ and are counted with it.
  if (!sent) uncounted_processed_ = earlier;
}

void Outcomes::SendFeatureAcks(std::vector<FinishedJob> jobs) {
  // The record keys, kept alive while the call is built.
  std::vector<std::string> record_keys;
  record_keys.reserve(jobs.size());
  std::vector<protocol::AckedRun> runs;
  runs.reserve(jobs.size());
  for (const FinishedJob& job : jobs) {
    record_keys.push_back(job.record.empty() ? std::string() : keys_.JobRecord(job.jid));
    runs.push_back(
        {job.payload, job.jid, job.sequence_key, record_keys.back(), job.record, job.record_ttl});
  }
  ScriptCall call = protocol::AckCall(keys_, queues_[jobs.front().queue].working_key, runs);
  const size_t count = jobs.size();
  SendRound(std::move(jobs), [&](Settle settle) {
    return command_.Eval(
        call, [this, settle = std::move(settle), count](const Status& s, redis::ReplyRef reply) {
          std::vector<size_t> refused;
          Status why = s;
          Result<std::vector<bool>> moved =
              s.ok() ? protocol::ReadAckReply(reply, count) : Result<std::vector<bool>>(s);
          if (!moved.ok()) {
            why = moved.status();
            for (size_t i = 0; i < count; ++i) refused.push_back(i);
          } else {
            // ack.lua counts nothing: each success is counted here, once
            // its reply came, whether it moved the job or not (sent again
            // after a lost reply, the first call may have moved it). One not
            // moved otherwise had been given back by a janitor; its run here
            // was a run all the same, as SendAcks counts it.
            uncounted_processed_ += static_cast<int64_t>(count);
          }
          settle(why, refused);
        });
  });
}

void Outcomes::SendFinish(FinishedJob job, double now) {
  // Every outcome but a success: one finish.lua call, which moves the
  // job, counts it and ends or keeps the features its payload carries. Rare
  // next to plain acks, so one call each.
  protocol::FinishedRun run;
  run.working_key = queues_[job.queue].working_key;
  run.original = job.payload;
  run.updated = job.updated_payload;
  run.score = job.score;
  run.resent_unconfirmed = job.maybe_applied;
  std::string record_key;
  if (!job.record.empty()) {
    record_key = keys_.JobRecord(job.jid);
    run.record_key = record_key;
    run.record = job.record;
    run.record_ttl_seconds = job.record_ttl;
  }
  switch (job.outcome) {
    case Outcome::kSucceeded:
      // Not sent here (Send acks every success); were one, the script
      // would count it.
      run.mode = protocol::FinishMode::kDone;
      break;
    case Outcome::kSnoozed:
      run.mode = protocol::FinishMode::kSnooze;
      break;
    case Outcome::kExpired:
      run.mode = protocol::FinishMode::kExpire;
      break;
    case Outcome::kInvalid:
      log_.Log(
          LogLevel::kWarn,
          base::LogEvent("job_invalid").WithQueue(queues_[job.queue].name).WithError(job.error),
          "not a job, to the dead set as it is: %s", job.error.c_str());
      run.mode = protocol::FinishMode::kDead;
      run.updated = job.payload;
      run.counted = false;
      break;
    case Outcome::kFailed:
      run.mode = job.action == protocol::FailureAction::kRetry  ? protocol::FinishMode::kRetry
                 : job.action == protocol::FailureAction::kDead ? protocol::FinishMode::kDead
                                                                : protocol::FinishMode::kDiscard;
      break;
  }
  ScriptCall call = protocol::FinishCall(keys_, run, now, dead_limits_, wake_channel_);
  std::vector<FinishedJob> carried;
  carried.push_back(std::move(job));
  SendRound(std::move(carried), [&](Settle settle) {
    return command_.Eval(call, [this, settle = std::move(settle)](const Status& s,
                                                                  redis::ReplyRef reply) {
      if (s.ok()) {
        Result<bool> moved = protocol::ReadFinishReply(reply);
        // Not moved: a janitor had given the job back already; it runs
        // again from its queue.
        if (moved.ok() && !*moved) {
          log_.Log(LogLevel::kDebug, "outcome_late",
                   "a finished job had left its working list (given back by a janitor)");
        }
      }
      settle(s, s.ok() ? std::vector<size_t>{} : std::vector<size_t>{0});
    });
  });
}

void Outcomes::FlushCounts() {
  if (uncounted_processed_ > 0 && carried_.empty() && unsent_.empty() && command_.ready()) {
    SendAcks({}, clock_.Now());
  }
}

void Outcomes::AddUnconfirmed(PayloadsByQueue* per_queue) const {
  for (const FinishedJob& job : unsent_) (*per_queue)[job.queue].push_back(job.payload);
  for (const auto& round : carried_) {
    for (const FinishedJob& job : *round) (*per_queue)[job.queue].push_back(job.payload);
  }
}

size_t Outcomes::Unconfirmed() const {
  size_t n = unsent_.size();
  for (const auto& round : carried_) n += round->size();
  return n;
}

}  // namespace reliableq::server
