#include "server/periodic_scheduler.h"

#include <algorithm>
#include <cmath>

#include "codec/job_codec.h"
#include "protocol/script_calls.h"
#include "base/text_escape.h"

namespace reliableq::server {

namespace {

using std::chrono::milliseconds;

// The longest sleep: a wall-clock step is noticed within it.
constexpr int64_t kMaxSleepMillis = 60000;
// After a failed call (Redis down, a refused script): try again this soon.
constexpr milliseconds kRetryDelay{1000};

}  // namespace

struct PeriodicScheduler::Entry {
  PeriodicJob job;
  periodic::CronSchedule cron;
  periodic::PeriodicDefinition definition;
  int64_t cursor = 0;              // every tick up to here is handled
  bool declared = false;           // periodic_declare.lua answered this run
  bool catch_up_owed = false;      // the catch-up tick is still to submit
  bool busy = false;               // a batch is on its way
  bool retry_soon = false;         // the last batch failed
  std::string conflict_with = {};  // the declarer last logged as winning ("": none)
};

// The ticks of one turn for one job, sent back to back.
struct PeriodicScheduler::Batch {
  uint64_t run = 0;
  std::vector<int64_t> ticks;
  std::vector<bool> handled;  // Redis answered for the tick (not an error)
  std::vector<bool> early;    // Redis found the tick not yet due
  size_t remaining = 0;
  bool catch_up_first = false;  // ticks[0] is the catch-up tick
};

PeriodicScheduler::PeriodicScheduler(uv::EventLoop& loop, redis::AsyncConnection& command,
                                     const protocol::Keys& keys, std::string identity,
                                     const std::vector<PeriodicJob>& jobs, const Clock& clock,
                                     const base::Logger& log, metrics::WorkerMetrics* metrics)
    : command_(command),
      keys_(keys),
      identity_(std::move(identity)),
      redis_time_(clock),
      log_(log),
      metrics_(metrics),
      timer_(loop, [this] { Turn(); }) {
  for (const PeriodicJob& job : jobs) {
    Result<periodic::CronSchedule> cron = periodic::CronSchedule::Parse(job.cron, job.time_zone);
    Status checked = cron.ok() ? CheckPeriodicJob(job) : cron.status();
    if (!checked.ok()) {
      log_.Log(LogLevel::kError, base::LogEvent("periodic_invalid").WithError(checked.message()),
               "%s: left out", checked.message().c_str());
      continue;
    }
    entries_.push_back(std::unique_ptr<Entry>(new Entry{job, *cron, periodic::DefinitionOf(job)}));
  }
}

PeriodicScheduler::~PeriodicScheduler() = default;

void PeriodicScheduler::Start() {
  if (running_ || entries_.empty()) return;
  running_ = true;
  ++run_;
  // The cursors start at Redis's now: from the worker's, one a minute
  // behind would owe the last minute's ticks, pushing one that was not due
  // at its start. Without an answer, the estimate (the wall clock at
  // first) will do.
  uint64_t run = run_;
  Status sent = command_.Command({"TIME"}, [this, run](const Status& s, redis::ReplyRef r) {
    if (run != run_) return;
    if (s.ok()) redis_time_.Observe(r);
    Begin();
  });
  if (!sent.ok()) Begin();
}

void PeriodicScheduler::Begin() {
  auto now = static_cast<int64_t>(std::floor(redis_time_.Now()));
  for (auto& entry : entries_) {
    entry->cursor = now;
    entry->declared = false;
    entry->busy = false;
    entry->retry_soon = false;
    entry->catch_up_owed = entry->job.catch_up;
  }
  Turn();
}

void PeriodicScheduler::Stop() {
  if (!running_) return;
  running_ = false;
  ++run_;
  timer_.Stop();
}

void PeriodicScheduler::Turn() {
  if (!running_) return;
  timer_.Stop();
  auto now = static_cast<int64_t>(std::floor(redis_time_.Now()));
  // Read again every turn, for the next one: Redis's clock may have been
  // set, or a failover brought another server's.
  if (command_.ready()) {
    uint64_t run = run_;
    command_.Command({"TIME"}, [this, run](const Status& s, redis::ReplyRef r) {
      if (run == run_ && s.ok()) redis_time_.Observe(r);
    });
  }
  for (auto& entry : entries_) {
    if (entry->busy) continue;
    entry->retry_soon = false;
    if (!command_.ready()) {
      entry->retry_soon = true;
      continue;
    }
    // Sent before the ticks on the same connection, so Redis runs it first.
    if (!entry->declared) Declare(*entry);
    SubmitOwed(*entry, now);
  }
  Arm();
}

void PeriodicScheduler::Declare(Entry& entry) {
  const periodic::PeriodicDefinition& d = entry.definition;
  ScriptCall call = protocol::PeriodicDeclareCall(keys_, entry.job.name, d.digest, identity_, redis_time_.Now(),
                                        {{"cron", d.cron},
                                         {"timezone", d.time_zone},
                                         {"class", d.job_class},
                                         {"queue", d.queue},
                                         {"args", d.args},
                                         {"retry", d.retry},
                                         {"catch_up", entry.job.catch_up ? "true" : "false"}});
  entry.declared = true;  // a failure below sets it back
  uint64_t run = run_;
  Status sent = command_.Eval(call, [this, &entry, run](const Status& s, redis::ReplyRef r) {
    if (run != run_) return;
    Result<protocol::PeriodicDeclareReply> read =
        s.ok() ? protocol::ReadPeriodicDeclareReply(r) : Result<protocol::PeriodicDeclareReply>(s);
    if (!read.ok()) {
      entry.declared = false;
      std::string why = read.status().ToString();
      log_.Log(LogLevel::kWarn, base::LogEvent("periodic_declare_failed").WithError(why),
               "periodic job %s: declaring failed: %s; trying again", entry.job.name.c_str(),
               why.c_str());
      return;
    }
    const std::string& previous = read->previous_digest;
    const std::string& declarer = read->previous_declarer;
    if (!previous.empty() && previous != entry.definition.digest) {
      log_.Log(LogLevel::kWarn, "periodic_conflict",
               "periodic job %s: this worker's declaration (digest %s, cron \"%s\") replaces "
               "the different one of %s (digest %s): the newest declaration wins",
               entry.job.name.c_str(), entry.definition.digest.c_str(),
               base::Escaped(entry.job.cron).c_str(), base::Escaped(declarer).c_str(),
               base::Escaped(previous).c_str());
    }
    entry.conflict_with.clear();
  });
  if (!sent.ok()) entry.declared = false;
}

void PeriodicScheduler::SubmitOwed(Entry& entry, int64_t now) {
  auto batch = std::make_shared<Batch>();
  batch->run = run_;
  if (entry.catch_up_owed) {
    if (std::optional<int64_t> before = entry.cron.Previous(entry.cursor)) {
      batch->ticks.push_back(*before);
      batch->catch_up_first = true;
    } else {
      entry.catch_up_owed = false;
    }
  }
  periodic::OwedTicks owed = periodic::TicksOwed(entry.cron, entry.cursor, now, kMaxTicksPerTurn);
  if (owed.skipped > 0) {
    log_.Log(LogLevel::kWarn, "periodic_skipped",
             "periodic job %s: %lld ticks from %lld to %lld skipped (more than %zu owed at "
             "once); pushing the latest",
             entry.job.name.c_str(), static_cast<long long>(owed.skipped),
             static_cast<long long>(owed.first_skipped), static_cast<long long>(owed.last_skipped),
             kMaxTicksPerTurn);
    entry.cursor = owed.last_skipped;
  }
  batch->ticks.insert(batch->ticks.end(), owed.ticks.begin(), owed.ticks.end());
  if (batch->ticks.empty()) return;
  batch->handled.assign(batch->ticks.size(), false);
  batch->early.assign(batch->ticks.size(), false);
  batch->remaining = batch->ticks.size();
  entry.busy = true;
  double at = redis_time_.Now();
  for (size_t i = 0; i < batch->ticks.size(); ++i) {
    int64_t tick = batch->ticks[i];
    std::string jid;
    Result<std::string> payload = periodic::TickPayload(entry.job, tick, at);
    Status sent;
    if (!payload.ok()) {
      sent = payload.status();
    } else {
      // The jid is the payload's: read back rather than made twice.
      Result<codec::DecodedJob> decoded = codec::DecodeJob(*payload);
      if (decoded.ok() && decoded->document["jid"].IsString()) {
        jid = decoded->document["jid"].GetString();
      }
      protocol::PeriodicTick call{
          entry.job.name,  entry.definition.digest, tick, batch->catch_up_first && i == 0,
          entry.job.queue, std::move(*payload),     jid,  std::nullopt};
      sent = command_.Eval(protocol::PeriodicTickCall(keys_, std::move(call)),
                           [this, &entry, batch, i](const Status& s, redis::ReplyRef r) {
                             OnTickReply(
                                 entry, batch, i,
                                 s.ok() ? protocol::ReadPeriodicTickReply(r) : Result<protocol::PeriodicTickReply>(s));
                           });
    }
    if (!sent.ok()) OnTickReply(entry, batch, i, sent);
  }
}

void PeriodicScheduler::OnTickReply(Entry& entry, const std::shared_ptr<Batch>& batch, size_t index,
                                    const Result<protocol::PeriodicTickReply>& read) {
  if (batch->run != run_) return;
  const std::string& name = entry.job.name;
  const int64_t tick = batch->ticks[index];
  using Outcome = protocol::PeriodicTickReply::Outcome;
  if (!read.ok()) {
    std::string why = read.status().ToString();
    log_.Log(LogLevel::kWarn, base::LogEvent("periodic_failed").WithError(why),
             "periodic job %s: tick %lld not submitted: %s; trying again", name.c_str(),
             static_cast<long long>(tick), why.c_str());
  } else if (read->outcome == Outcome::kPushed) {
    batch->handled[index] = true;
    entry.conflict_with.clear();
    log_.Log(LogLevel::kDebug, "periodic_pushed", "periodic job %s: tick %lld pushed%s",
             name.c_str(), static_cast<long long>(tick),
             batch->catch_up_first && index == 0 ? " (catch-up)" : "");
    if (metrics_) metrics_->PeriodicPushed(name);
  } else if (read->outcome == Outcome::kEarly) {
    // The estimate ran ahead of Redis's clock (it was set back, or a
    // failover): learn its time; the tick is submitted again when due.
    batch->early[index] = true;
    redis_time_.Observe(read->now);
  } else if (read->outcome == Outcome::kDuplicate || read->outcome == Outcome::kSuperseded) {
    batch->handled[index] = true;
  } else if (read->outcome == Outcome::kTooLate) {
    batch->handled[index] = true;
    log_.Log(LogLevel::kWarn, "periodic_skipped",
             "periodic job %s: tick %lld skipped: older than every tick Redis keeps a record of",
             name.c_str(), static_cast<long long>(tick));
  } else if (read->outcome == Outcome::kConflict) {
    batch->handled[index] = true;
    const std::string& declarer = read->declarer;
    if (declarer != entry.conflict_with) {
      entry.conflict_with = declarer;
      log_.Log(LogLevel::kWarn, "periodic_conflict",
               "periodic job %s: the declaration of %s replaced this worker's (%s, digest %s), "
               "which differs: this worker pushes none of its ticks",
               name.c_str(), base::Escaped(declarer).c_str(), identity_.c_str(),
               entry.definition.digest.c_str());
    }
    TakeOverIfGone(entry, declarer);
  } else if (read->outcome == Outcome::kUndeclared) {
    // The record is gone (a FLUSHDB): declare again, then the tick.
    entry.declared = false;
  }
  if (--batch->remaining == 0) Finish(entry, *batch);
}

// The newest declaration among live workers wins: when the worker whose
// declaration is recorded is gone (its heartbeat key expired or was deleted
// at its stop), this one declares again, and its ticks are pushed from the
// next turn on. Without it, one worker started once with another schedule
// would silence the job until every worker restarted.
void PeriodicScheduler::TakeOverIfGone(Entry& entry, const std::string& declarer) {
  if (declarer.empty() || declarer == identity_) return;
  Entry* target = &entry;
  command_.Command({"EXISTS", keys_.Heartbeat(declarer)},
                   [this, target, declarer](const Status& s, redis::ReplyRef reply) {
                     Result<int64_t> exists = s.ok() ? redis::ToInteger(reply) : Result<int64_t>(s);
                     if (!exists.ok() || !running_ || *exists != 0 ||
                         target->conflict_with != declarer) {
                       return;
                     }
                     log_.Log(LogLevel::kWarn, "periodic_takeover",
                              "periodic job %s: %s, whose declaration won, is gone: this "
                              "worker declares its own again",
                              target->job.name.c_str(), base::Escaped(declarer).c_str());
                     target->declared = false;
                     target->conflict_with.clear();
                   });
}

void PeriodicScheduler::Finish(Entry& entry, const Batch& batch) {
  entry.busy = false;
  size_t first = 0;
  if (batch.catch_up_first) {
    first = 1;
    if (batch.handled[0]) entry.catch_up_owed = false;
  }
  // The cursor passes the ticks Redis answered for, up to the first that
  // failed: that one and the later ones are submitted again.
  for (size_t i = first; i < batch.ticks.size(); ++i) {
    if (!batch.handled[i]) {
      // An early tick waits for its time (Arm), not the retry delay.
      entry.retry_soon = !batch.early[i];
      break;
    }
    entry.cursor = std::max(entry.cursor, batch.ticks[i]);
  }
  if (entry.catch_up_owed || !entry.declared) entry.retry_soon = true;
  Arm();
}

void PeriodicScheduler::Arm() {
  if (!running_) return;
  double now = redis_time_.Now();
  int64_t wait = kMaxSleepMillis;
  for (const auto& entry : entries_) {
    if (entry->busy) continue;  // its reply arms the timer again
    // A failed call waits out the retry delay whatever it left owed: its
    // ticks are overdue, and waiting for them would be no wait at all, so
    // a Redis that refuses every call would be asked again without pause.
    if (entry->retry_soon) {
      wait = std::min<int64_t>(wait, kRetryDelay.count());
      continue;
    }
    std::optional<int64_t> next = entry->cron.Next(entry->cursor);
    if (!next) continue;
    // A hair after the tick, so that the turn's clock reads it as due.
    auto until = static_cast<int64_t>(std::ceil((static_cast<double>(*next) - now) * 1000.0)) + 1;
    wait = std::min(wait, std::max<int64_t>(until, 1));
  }
  timer_.Start(milliseconds(wait));
}

}  // namespace reliableq::server
