#include "server/limit_gate.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <random>

#include "codec/job_codec.h"  // FormatEpoch
#include "server/job_expiry.h"
#include "base/text_escape.h"

namespace reliableq::server {

namespace {

// A parked job comes back at a random moment in the first tenth of the
// period after the window frees (at most half a second): jobs parked
// together do not all come back in the same instant.
double JitterSeconds(double period_seconds) {
  thread_local std::mt19937_64 random{std::random_device{}()};
  double most = std::min(0.5, period_seconds / 10.0);
  return std::uniform_real_distribution<double>(0.0, most)(random);
}

// The rapidjson string member `name` of `object`, or nullopt.
std::optional<std::string_view> StringField(const rapidjson::Value& object, const char* name) {
  auto it = object.FindMember(name);
  if (it == object.MemberEnd() || !it->value.IsString()) return std::nullopt;
  return std::string_view(it->value.GetString(), it->value.GetStringLength());
}

}  // namespace

LimitPlan::LimitPlan(const std::vector<Limit>& limits) {
  for (size_t i = 0; i < limits.size(); ++i) {
    for (const std::string& job_class : limits[i].EffectiveClasses()) by_class_[job_class] = i;
  }
}

std::optional<size_t> LimitPlan::Find(std::string_view payload, std::string_view queue, double now,
                                      bool* mismatch) const {
  *mismatch = false;
  rapidjson::Document doc;
  doc.Parse(payload.data(), payload.size());
  if (doc.HasParseError() || !doc.IsObject()) return std::nullopt;  // the processor reports it
  std::optional<std::string_view> job_class = StringField(doc, "class");
  if (!job_class) return std::nullopt;
  auto it = by_class_.find(*job_class);
  if (it == by_class_.end()) return std::nullopt;
  if (StringField(doc, "queue") != queue ||
      payload.find("\"queue\":\"" + std::string(queue) + "\"") == std::string_view::npos) {
    *mismatch = true;
    return std::nullopt;
  }
  if (Expired(ReadJobFlow(doc), now)) return std::nullopt;
  return it->second;
}

LimitGate::LimitGate(redis::AsyncConnection& command, const QueueSet& queues, const protocol::Keys& keys,
                     std::string identity, std::vector<Limit> limits, const Clock& clock,
                     const base::Logger& log, Admit admit, metrics::WorkerMetrics* metrics)
    : command_(command),
      queues_(queues),
      keys_(keys),
      identity_(std::move(identity)),
      limits_(std::move(limits)),
      plan_(limits_),
      clock_(clock),
      log_(log),
      admit_(std::move(admit)),
      metrics_(metrics),
      owed_(limits_.size()) {}

protocol::LimitTerms LimitGate::Terms(size_t limit) const {
  const Limit& l = limits_[limit];
  return protocol::LimitTerms{l.name, l.concurrency, l.rate, static_cast<double>(l.period.count()) / 1000.0};
}

void LimitGate::Filter(std::vector<FetchedJob>* jobs) {
  Flush();
  size_t kept = 0;
  for (FetchedJob& job : *jobs) {
    const std::string& queue = queues_[job.queue].name;
    bool mismatch = false;
    std::optional<size_t> limit = plan_.Find(job.payload, queue, clock_.Now(), &mismatch);
    if (mismatch && !mismatch_logged_) {
      mismatch_logged_ = true;
      log_.Log(LogLevel::kWarn, base::LogEvent("limit_queue_mismatch").WithQueue(queue),
               "a job of a limited class fetched from queue %s names another queue in its "
               "payload: it runs without a slot (logged once)",
               base::Escaped(queue).c_str());
    }
    if (!limit) {
      // Not onto itself: a self-move empties the payload (libstdc++), and
      // the job would go to the dead set as "not a job".
      if (&(*jobs)[kept] != &job) (*jobs)[kept] = std::move(job);
      ++kept;
      continue;
    }
    Acquire(*limit, std::move(job));
  }
  jobs->resize(kept);
}

void LimitGate::Acquire(size_t limit, FetchedJob job) {
  uint64_t slot = next_slot_++;
  std::string holder = protocol::LimitHolder(slot, identity_);
  protocol::LimitTerms terms = Terms(limit);
  ScriptCall call = protocol::LimitAcquireCall(keys_, terms, queues_[job.queue].working_key, job.payload,
                                     holder, std::nullopt, JitterSeconds(terms.period_seconds));
  waiting_reply_.emplace(slot, std::move(job));
  ++pending_;
  Status sent = command_.Eval(call, [this, limit, slot](const Status& s, redis::ReplyRef reply) {
    auto found = waiting_reply_.find(slot);
    if (found == waiting_reply_.end()) return;
    FetchedJob job = std::move(found->second);
    waiting_reply_.erase(found);
    --pending_;
    OnAcquired(limit, slot, std::move(job),
               s.ok() ? protocol::ReadLimitAcquireReply(reply) : Result<protocol::LimitAcquireReply>(s));
  });
  if (!sent.ok()) {
    // Not sent: no slot taken; the job stays in the working list for the
    // reconcile the lost connection brings.
    waiting_reply_.erase(slot);
    --pending_;
  }
}

void LimitGate::OnAcquired(size_t limit, uint64_t slot, FetchedJob job,
                           Result<protocol::LimitAcquireReply> read) {
  const Limit& l = limits_[limit];
  const Status& s = read.status();
  std::string holder = protocol::LimitHolder(slot, identity_);
  bool lost = !s.ok() && (s.IsIoError() || s.IsTimeout() || s.IsShutdown());
  if (!lost && !s.ok()) {
    // Refused (a key of the wrong type, OOM, READONLY): the script wrote
    // nothing and the job is still in our working list. Held, and tried
    // again on the next beat; the release of a slot never taken is a no-op
    // HDEL, sent in case an unexpected reply (kProtocol) hid one.
    if (!acquire_refused_logged_) {
      acquire_refused_logged_ = true;
      std::string error = s.ToString();
      log_.Log(LogLevel::kWarn, base::LogEvent("limit_acquire_failed").WithError(error),
               "limit %s: acquire refused (%s); the job waits in this process and is tried "
               "again on each beat (logged once until an acquire succeeds)",
               l.name.c_str(), error.c_str());
    }
    owed_[limit].push_back(std::move(holder));
    Flush();
    refused_.emplace_back(limit, std::move(job));
    ++pending_;
    return;
  }
  if (lost) {
    // Redis may have given the slot without our hearing it: give it back
    // (a no-op if it did not). The job is in our working list or parked;
    // the reconcile that follows a lost connection returns it.
    std::string error = s.ToString();
    log_.Log(LogLevel::kWarn, base::LogEvent("limit_acquire_failed").WithError(error),
             "limit %s: acquire failed (%s); the job goes back to its queue", l.name.c_str(),
             error.c_str());
    owed_[limit].push_back(std::move(holder));
    Flush();
    return;
  }
  acquire_refused_logged_ = false;
  using Answer = protocol::LimitAcquireReply::Answer;
  if (read->answer == Answer::kStart) {
    job.limit_slot = slot;
    held_.emplace(slot, Held{limit, std::move(holder)});
    std::vector<FetchedJob> start;
    start.push_back(std::move(job));
    if (!admit_(&start)) Release(slot);
    return;
  }
  if (read->answer == Answer::kGone) return;  // recovered by a janitor: not ours any more
  const char* reason = read->answer == Answer::kWaiting ? "concurrency" : "rate";
  if (metrics_ != nullptr) metrics_->JobParked(l.name, reason);
  if (log_.Enabled(LogLevel::kDebug)) {
    log_.Log(LogLevel::kDebug, base::LogEvent("job_parked").WithQueue(queues_[job.queue].name),
             "limit %s: job parked (%s full)%s%s", l.name.c_str(), reason,
             read->at.empty() ? "" : ", back at ", read->at.c_str());
  }
}

void LimitGate::Release(uint64_t slot) {
  if (slot == 0) return;
  auto it = held_.find(slot);
  if (it == held_.end()) return;
  owed_[it->second.limit].push_back(std::move(it->second.holder));
  held_.erase(it);
  Flush();
}

void LimitGate::RetryRefused() {
  if (refused_.empty() || !command_.ready()) return;
  std::vector<std::pair<size_t, FetchedJob>> again;
  again.swap(refused_);
  pending_ -= again.size();
  for (auto& [limit, job] : again) Acquire(limit, std::move(job));
}

void LimitGate::DropRefused() {
  pending_ -= refused_.size();
  refused_.clear();
}

void LimitGate::ReleaseAll() {
  for (auto& [slot, held] : held_) owed_[held.limit].push_back(std::move(held.holder));
  held_.clear();
  Flush();
}

void LimitGate::Flush() {
  if (!command_.ready()) return;
  for (size_t i = 0; i < owed_.size(); ++i) {
    if (owed_[i].empty()) continue;
    std::vector<std::string> holders;
    holders.swap(owed_[i]);
    SendRelease(i, std::move(holders));
  }
}

void LimitGate::SendRelease(size_t limit, std::vector<std::string> holders) {
  ScriptCall call = protocol::LimitReleaseCall(keys_, Terms(limit), holders, clock_.Now());
  auto kept = std::make_shared<std::vector<std::string>>(std::move(holders));
  Status sent = command_.Eval(call, [this, limit, kept](const Status& s, redis::ReplyRef) {
    if (s.ok()) {
      release_error_logged_ = false;
      return;
    }
    // Sent again with the next one: HDEL of a holder already gone frees
    // nothing twice.
    if (!release_error_logged_) {
      release_error_logged_ = true;
      std::string error = s.ToString();
      log_.Log(LogLevel::kWarn, base::LogEvent("limit_release_failed").WithError(error),
               "limit %s: slots not given back yet (%s); trying again", limits_[limit].name.c_str(),
               error.c_str());
    }
    for (std::string& h : *kept) owed_[limit].push_back(std::move(h));
  });
  if (!sent.ok()) {
    for (std::string& h : *kept) owed_[limit].push_back(std::move(h));
  }
}

void LimitGate::Declare() {
  if (!command_.ready() || limits_.empty()) return;
  std::vector<std::string> argv{"HSET", keys_.Limits()};
  for (const Limit& l : limits_) {
    argv.push_back(l.name);
    argv.push_back(LimitDefinitionJson(l));
  }
  std::vector<std::string_view> views(argv.begin(), argv.end());
  command_.Command(views, [this](const Status& s, redis::ReplyRef) {
    if (!s.ok()) {
      std::string error = s.ToString();
      log_.Log(LogLevel::kWarn, base::LogEvent("limits_not_declared").WithError(error),
               "limit definitions not written to Redis: %s", error.c_str());
    }
  });
}

void LimitGate::AddPending(PayloadsByQueue* per_queue) const {
  for (const auto& [slot, job] : waiting_reply_) (*per_queue)[job.queue].push_back(job.payload);
  for (const auto& [limit, job] : refused_) (*per_queue)[job.queue].push_back(job.payload);
}

}  // namespace reliableq::server
