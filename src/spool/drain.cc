#include "spool/drain.h"

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "redis/errors.h"
#include "redis/reply.h"
#include "protocol/script_calls.h"

namespace reliableq::spool {

namespace {

using Fate = JournalFile::Fate;
using Outcome = JournalFile::Outcome;
using Pending = JournalFile::Pending;

// The script call that stores `job` unless its jid was pushed within the
// replay window (by the push that spooled it, if it landed after all, or by
// an earlier drain).
ScriptCall CallFor(const DrainConfig& config, SpooledJob& job) {
  std::optional<double> at;
  if (job.kind == SpooledJob::Kind::kSchedule) at = job.at;
  std::vector<protocol::OncePush> jobs;
  jobs.push_back({job.jid, job.queue, at, std::move(job.payload)});
  return protocol::PushOnceCall(config.keys, config.replay_window, std::move(jobs));
}

void AppendCall(const ScriptCall& call, std::string* wire) {
  std::string numkeys = std::to_string(call.keys.size());
  redis::Argv keys(call.keys.begin(), call.keys.end());
  redis::Argv args(call.args.begin(), call.args.end());
  redis::Argv argv = redis::ScriptArgv("EVALSHA", GetScript(call.script).sha1, numkeys, keys, args);
  redis::AppendCommand(wire, argv.data(), argv.size());
}

class ChunkPusher {
 public:
  ChunkPusher(redis::Connection* redis, const DrainConfig& config,
              const std::function<bool()>& stopping)
      : redis_(redis), config_(config), stopping_(stopping) {}

  // Pushes `jobs` in one round trip; one Outcome per job, in order. Returns
  // the failure that left jobs pending, OK when none was (NOSCRIPT aside:
  // *noscript says jobs are pending for that alone).
  Status Push(std::vector<Pending>* jobs, std::vector<Outcome>* outcomes, bool* noscript) {
    *noscript = false;
    already_.assign(jobs->size(), false);
    wire_.clear();
    ends_.clear();
    replies_.clear();
    outcomes->assign(jobs->size(), Outcome{});
    for (size_t i = 0; i < jobs->size(); ++i) {
      (*outcomes)[i].offset = (*jobs)[i].offset;
      AppendCall(CallFor(config_, (*jobs)[i].job), &wire_);
      ends_.push_back(wire_.size());
    }
    std::string replicas = std::to_string(config_.wait_replicas);
    std::string timeout = std::to_string(config_.wait_timeout.count());
    if (config_.wait_replicas > 0) {
      std::string_view argv[] = {"WAIT", replicas, timeout};
      redis::AppendCommand(&wire_, argv, 3);
      ends_.push_back(wire_.size());
    }
    size_t written = 0;
    Status sent = redis_->Send(wire_, ends_, &replies_, &written);
    Status failure;
    bool any_pushed = false;
    for (size_t i = 0; i < jobs->size(); ++i) {
      Outcome& outcome = (*outcomes)[i];
      if (i >= replies_.size()) {
        // Unanswered: it may have run; it is pushed again (same jid).
        outcome.fate = Fate::kPending;
        if (failure.ok()) failure = sent;
        continue;
      }
      const redis::ReplyPtr& reply = replies_[i];
      if (!redis::IsErrorReply(reply)) {
        outcome.fate = Fate::kPushed;
        any_pushed = true;
        // 0: an earlier push of its jid had stored it.
        Result<protocol::PushOnceReply> pushed = protocol::ReadPushOnceReply(reply);
        already_[i] = pushed.ok() && pushed->pushed == 0;
        continue;
      }
      Status error = redis_->ErrorOf(reply);
      if (redis::IsNoScript(error)) {
        outcome.fate = Fate::kPending;
        *noscript = true;
      } else if (error.IsRetryable()) {
        outcome.fate = Fate::kPending;
        if (failure.ok()) failure = error;
      } else if (error.IsRefused()) {
        outcome.fate = Fate::kDropped;
        Log(LogLevel::kWarn, "spool_job_dropped", "spool: job %s dropped: %s",
            (*jobs)[i].job.jid.c_str(), error.ToString().c_str());
      } else {
        outcome.fate = Fate::kHeld;
        outcome.reason = error.ToString();
        Log(LogLevel::kWarn, "spool_job_held",
            "spool: job %s kept in the spool: Redis refused it: %s", (*jobs)[i].job.jid.c_str(),
            outcome.reason.c_str());
      }
    }
    if (config_.wait_replicas > 0 && any_pushed) {
      Status replicated = Replicated();
      if (!replicated.ok()) {
        // Stored on the master only: they are pushed again, and waited for,
        // rather than counted as safe.
        for (Outcome& outcome : *outcomes) {
          if (outcome.fate == Fate::kPushed) outcome.fate = Fate::kPending;
        }
        if (failure.ok()) failure = replicated;
      }
    }
    if (!sent.ok() && failure.ok()) failure = sent;
    return failure;
  }

  // Whether job `i` of the last Push was one an earlier push of its jid
  // had stored.
  bool already_stored(size_t i) const { return already_[i]; }

 private:
  // OK once WAIT (the round trip's last reply, or sent again) reports
  // enough replicas. A Redis that answers WAIT with an error (a managed one
  // that refuses it, say) can never confirm: the jobs it stored count as
  // pushed, with a warning, rather than being pushed again forever.
  Status Replicated() {
    size_t at = ends_.size() - 1;
    if (at >= replies_.size()) return Status::IoError("no answer to WAIT");
    const std::string replicas = std::to_string(config_.wait_replicas);
    const std::string timeout = std::to_string(config_.wait_timeout.count());
    redis::ReplyPtr again;
    redis::ReplyRef reply = replies_[at];
    for (;;) {
      Result<int64_t> acknowledged = redis::ReadWaitReply(reply);
      if (!acknowledged.ok()) {
        std::string why = redis::IsErrorReply(reply) ? acknowledged.status().ToString()
                                                : std::string("answered ") + redis::TypeName(reply);
        Log(LogLevel::kWarn, "spool_unreplicated", "spool: %s; %s",
            "drained jobs counted as pushed without replica "
            "confirmation: WAIT cannot confirm them",
            why.c_str());
        return Status::OK();
      }
      if (*acknowledged >= config_.wait_replicas) return Status::OK();
      Status shortfall =
          Status::Timeout("WAIT: " + std::to_string(*acknowledged) + " of " + replicas +
                          " replicas confirmed within " + timeout + " ms");
      if (!config_.keep_waiting || (stopping_ && stopping_())) return shortfall;
      // Pipeline keeps an error reply in place, as Send did.
      Result<std::vector<redis::ReplyPtr>> sent = redis_->Pipeline({{"WAIT", replicas, timeout}});
      if (!sent.ok()) return sent.status().WithContext("WAIT");
      again = std::move(sent->front());
      reply = again;
    }
  }

  // Every line of the drain reports an error, its last argument.
  void Log(LogLevel level, const char* event, const char* format, const char* subject,
           const char* error) {
    if (config_.log != nullptr) {
      config_.log->Log(level, base::LogEvent(event).WithError(error), format, subject, error);
    }
  }

  redis::Connection* redis_;
  const DrainConfig& config_;
  const std::function<bool()>& stopping_;
  std::string wire_;
  std::vector<size_t> ends_;
  std::vector<redis::ReplyPtr> replies_;
  std::vector<bool> already_;
};

void Count(const std::vector<Outcome>& outcomes, const ChunkPusher& pusher,
           DrainCounts* counts) {
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const Outcome& outcome = outcomes[i];
    switch (outcome.fate) {
      case Fate::kPushed:
        ++counts->pushed;
        if (pusher.already_stored(i)) ++counts->already_stored;
        break;
      case Fate::kDropped:
        ++counts->dropped;
        break;
      case Fate::kHeld:
        ++counts->held;
        counts->last_held_reason = outcome.reason;
        break;
      case Fate::kPending:
        break;
    }
  }
}

}  // namespace

Status DrainFile(JournalFile* file, redis::Connection* redis, const DrainConfig& config,
                 const std::function<bool()>& stopping, DrainCounts* counts) {
  ChunkPusher pusher(redis, config, stopping);
  std::vector<Pending> jobs;
  std::vector<Outcome> outcomes;
  bool noscript = false;
  int loads = 0;
  // NOSCRIPT: Redis lost the scripts (a restart, SCRIPT FLUSH, a failover
  // to a replica that never loaded them): load them and go on, twice at
  // most per drain.
  auto reload = [&]() -> Status {
    if (++loads > 2) return Status::Script("NOSCRIPT again after loading the scripts");
    return redis->LoadScripts();
  };

  // Held jobs whose time has come first: they are the oldest.
  auto now = std::chrono::steady_clock::now();
  Status s = file->DueHeld(now, config.held_retry, &jobs);
  if (!s.ok()) return s;
  if (!jobs.empty()) {
    Status pushed = pusher.Push(&jobs, &outcomes, &noscript);
    s = file->RecordOutcomes(file->drained_upto(), {}, outcomes, now + config.held_retry);
    if (!s.ok()) return s;
    Count(outcomes, pusher, counts);
    if (!pushed.ok()) return pushed;
    if (noscript) {
      s = reload();
      if (!s.ok()) return s;
    }
  }

  uint64_t from = file->drained_upto();
  for (;;) {
    if (stopping && stopping()) return Status::Shutdown("the drain is stopping");
    s = file->ReadPending(&from, config.chunk_jobs, config.chunk_bytes, &jobs);
    if (!s.ok()) return s;
    if (jobs.empty()) return Status::OK();
    Status pushed = pusher.Push(&jobs, &outcomes, &noscript);
    s = file->RecordOutcomes(from, outcomes, {},
                             std::chrono::steady_clock::now() + config.held_retry);
    if (!s.ok()) return s;
    Count(outcomes, pusher, counts);
    if (!pushed.ok()) return pushed;
    if (noscript) {
      s = reload();
      if (!s.ok()) return s;
      // The jobs NOSCRIPT turned away are pending again from here.
      from = file->drained_upto();
    }
  }
}

}  // namespace reliableq::spool
