#include "server/poller.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "codec/job_codec.h"
#include "protocol/keys.h"
#include "protocol/script_calls.h"
#include "redis/reply.h"

namespace reliableq::server {

namespace {

// Due members promoted per script call.
constexpr size_t kPromoteBatch = 100;

constexpr unsigned kBothSets = 3;

// The score of a ZRANGE ... WITHSCORES reply of at most one member, or
// +inf for an empty set. False when the reply is not that.
bool HeadScore(redis::ReplyRef reply, double* score) {
  Result<std::vector<std::string>> read = redis::ToStrings(reply);
  if (!read.ok()) return false;
  if (read->empty()) {
    *score = std::numeric_limits<double>::infinity();
    return true;
  }
  if (read->size() != 2) return false;
  // Redis writes scores so that strtod reads back the same double
  // ("inf" and "-inf" included).
  const std::string& text = (*read)[1];
  char* end = nullptr;
  *score = std::strtod(text.c_str(), &end);
  return end != text.c_str() && *end == '\0' && !std::isnan(*score);
}

}  // namespace

std::string DueJobQueue(std::string_view member) {
  Result<codec::DecodedJob> job = codec::DecodeJob(member);
  return job.ok() ? codec::QueueOf(job->document) : std::string();
}

Poller::Poller(uv::EventLoop& loop, redis::AsyncConnection& command,
               std::chrono::milliseconds interval, DeadSetLimits dead_limits,
               const protocol::Keys& keys, const Clock& clock, const base::Logger& log)
    : command_(command),
      interval_(interval),
      dead_limits_(dead_limits),
      keys_(keys),
      wake_prefix_(keys.WakeQueue("")),
      sets_{keys.Schedule(), keys.Retry()},
      redis_time_(clock),
      log_(log),
      timer_(loop, [this] { OnTimer(); }),
      random_(std::random_device{}()) {}

void Poller::Start() {
  running_ = true;
  backing_off_ = false;
  if (busy_) {
    reread_ = true;
    return;
  }
  timer_.Stop();
  ReadHeads(true);
}

void Poller::Stop() {
  running_ = false;
  timer_.Stop();
}

void Poller::Nudge() {
  if (!running_ || backing_off_) return;
  if (busy_) {
    reread_ = true;
    return;
  }
  timer_.Stop();
  ReadHeads(false);
}

void Poller::NudgeScore(std::string_view score) {
  double at = 0;
  auto [end, error] = std::from_chars(score.data(), score.data() + score.size(), at);
  if (!score.empty() && error == std::errc() && end == score.data() + score.size()) {
    NudgeAt(at);
  } else {
    Nudge();
  }
}

void Poller::NudgeAt(double score) {
  if (!running_ || backing_off_ || std::isnan(score)) return;
  if (busy_) {
    // The read on its way may have missed it: the next sleep counts it.
    nudged_at_ = std::min(nudged_at_, score);
    return;
  }
  if (score < wake_at_) ArmDue(score, redis_time_.Now());
}

void Poller::OnTimer() {
  if (!running_ || busy_) return;
  bool due = timer_for_due_;
  backing_off_ = false;
  wake_at_ = kNever;
  if (!due) {
    // The fallback: the heads may have changed unseen (a Ruby client that
    // sends no signal), and the process count with them.
    ReadHeads(true);
    return;
  }
  // Straight to the due members: reading the heads first would only add a
  // round trip to every job's lateness. No set due by the heads read (the
  // time came from NudgeAt, or the timer fired a hair early): ask both.
  unsigned mask = DueMask(std::strtod(NowText().c_str(), nullptr));
  Pass(mask != 0 ? mask : kBothSets);
}

std::string Poller::NowText() const { return codec::FormatEpoch(redis_time_.Now()); }

unsigned Poller::DueMask(double now) const {
  unsigned mask = 0;
  for (int set : {kScheduleSet, kRetrySet}) {
    if (heads_[set] <= now) mask |= 1u << set;
  }
  return mask;
}

void Poller::ReadHeads(bool count_processes) {
  if (!command_.ready()) {
    BackOff();
    return;
  }
  busy_ = true;
  // This read sees every member added before it; a nudge from now on asks
  // for another.
  reread_ = false;
  struct Read {
    int remaining = 0;
    bool failed = false;
    double heads[2] = {kNever, kNever};
  };
  auto read = std::make_shared<Read>();
  read->remaining = count_processes ? 4 : 3;
  auto finished = [this, read] {
    if (--read->remaining > 0) return;
    busy_ = false;
    if (!running_) return;
    if (read->failed) {
      BackOff();
      return;
    }
    heads_[kScheduleSet] = read->heads[kScheduleSet];
    heads_[kRetrySet] = read->heads[kRetrySet];
    unsigned due = DueMask(std::strtod(NowText().c_str(), nullptr));
    if (due != 0) {
      Pass(due);
    } else if (reread_) {
      ReadHeads(false);
    } else {
      Sleep(std::min(heads_[kScheduleSet], heads_[kRetrySet]));
    }
  };
  // Sent in one loop turn, so they leave in one write and cost one round
  // trip (async_connection.h).
  for (int set : {kScheduleSet, kRetrySet}) {
    Status sent = command_.Command(
        {"ZRANGE", sets_[set], "0", "0", "WITHSCORES"},
        [read, set, finished](const Status& s, redis::ReplyRef r) {
          if (!s.ok() || !HeadScore(r, &read->heads[set])) read->failed = true;
          finished();
        });
    if (!sent.ok()) {
      read->failed = true;
      finished();
    }
  }
  // Redis's clock with every read of the heads, so that what is due and
  // when to wake are judged by it (redis_time.h). A failed read keeps the
  // last estimate: promote.lua judges by TIME anyway.
  Status timed = command_.Command({"TIME"}, [this, finished](const Status& s, redis::ReplyRef r) {
    if (s.ok()) redis_time_.Observe(r);
    finished();
  });
  if (!timed.ok()) finished();
  if (count_processes) {
    Status sent = command_.Command({"SCARD", keys_.Processes()},
                                   [this, finished](const Status& s, redis::ReplyRef r) {
                                     Result<int64_t> count =
                                         s.ok() ? redis::ToInteger(r) : Result<int64_t>(s);
                                     if (count.ok()) process_count_ = *count;
                                     finished();
                                   });
    if (!sent.ok()) finished();
  }
}

void Poller::Pass(unsigned mask) {
  if (!command_.ready()) {
    BackOff();
    return;
  }
  if (mask == 0) mask = kBothSets;
  busy_ = true;
  struct Round {
    int remaining = 0;
    bool full = false;
    bool failed = false;
  };
  auto round = std::make_shared<Round>();
  round->remaining = ((mask & 1u) != 0) + ((mask & 2u) != 0);
  auto finished = [this, round](bool batch_was_full, bool failed) {
    round->full = round->full || batch_was_full;
    round->failed = round->failed || failed;
    if (--round->remaining > 0) return;
    busy_ = false;
    if (!running_) return;
    if (round->failed) {
      BackOff();
    } else if (round->full) {
      Pass(kBothSets);
    } else {
      ReadHeads(false);
    }
  };
  std::string now = NowText();
  std::string limit = std::to_string(kPromoteBatch);
  // Schedule first: its batch is promoted first.
  for (int set : {kScheduleSet, kRetrySet}) {
    if ((mask & (1u << set)) == 0) continue;
    std::string_view key = sets_[set];
    Status sent = command_.Command(
        {"ZRANGEBYSCORE", key, "-inf", now, "LIMIT", "0", limit},
        [this, key, finished](const Status& s, redis::ReplyRef r) {
          Result<std::vector<std::string>> due =
              s.ok() ? redis::ToStrings(r) : Result<std::vector<std::string>>(s);
          if (!due.ok()) {
            if (!s.ok()) {
              std::string error = s.ToString();
              log_.Log(LogLevel::kWarn, base::LogEvent("due_read_failed").WithError(error),
                       "reading due jobs of %.*s failed: %s", static_cast<int>(key.size()),
                       key.data(), error.c_str());
            }
            finished(false, true);
            return;
          }
          if (due->empty()) {
            finished(false, false);
            return;
          }
          Promote(key, std::move(*due), finished);
        });
    if (!sent.ok()) finished(false, true);
  }
}

void Poller::Promote(std::string_view set, std::vector<std::string> members,
                     std::function<void(bool, bool)> done) {
  bool full = members.size() >= kPromoteBatch;
  std::vector<protocol::QueuedMember> due;
  due.reserve(members.size());
  for (std::string& member : members) {
    due.push_back({DueJobQueue(member), std::move(member)});
  }
  Status sent = command_.Eval(
      protocol::PromoteCall(keys_, set, std::nullopt, dead_limits_, wake_prefix_, std::move(due)),
      [this, set, full, done](const Status& s, redis::ReplyRef r) {
        // Members left as early mean the estimate of Redis's clock ran
        // ahead (a step of Redis's clock, a failover): not another batch
        // at once, which would find them again, but the heads and TIME.
        bool early = false;
        if (!s.ok()) {
          std::string error = s.ToString();
          log_.Log(LogLevel::kWarn, base::LogEvent("due_move_failed").WithError(error),
                   "moving due jobs of %.*s failed: %s", static_cast<int>(set.size()), set.data(),
                   error.c_str());
        } else if (Result<protocol::PromoteReply> read = protocol::ReadPromoteReply(r); read.ok()) {
          early = read->early > 0;
          log_.Log(LogLevel::kDebug, "due_moved",
                   "%.*s: %lld due jobs enqueued, %lld to the dead set, %lld not yet due",
                   static_cast<int>(set.size()), set.data(),
                   static_cast<long long>(read->promoted), static_cast<long long>(read->dead),
                   static_cast<long long>(read->early));
        }
        done(s.ok() && full && !early, !s.ok());
      });
  if (!sent.ok()) done(false, true);
}

std::chrono::milliseconds Poller::FallbackWait() {
  std::uniform_real_distribution<double> spread(0.5, 1.5);
  double average = static_cast<double>(interval_.count()) *
                   static_cast<double>(std::max<int64_t>(1, process_count_));
  // Capped far beyond any real wait (kMaxDuration x a huge process count),
  // so that adding it to a steady_clock time cannot overflow.
  return std::chrono::milliseconds(
      static_cast<int64_t>(std::min(average * spread(random_), 1e10)));
}

void Poller::Sleep(double due) {
  // The loop's timers run on real time (clock.h), so the fallback's
  // deadline is kept on the real steady clock, not the injected one.
  fallback_at_ = std::chrono::steady_clock::now() + FallbackWait();
  due = std::min(due, nudged_at_);
  nudged_at_ = kNever;
  ArmDue(due, redis_time_.Now());
}

void Poller::BackOff() {
  backing_off_ = true;
  nudged_at_ = kNever;
  fallback_at_ = std::chrono::steady_clock::now() + FallbackWait();
  ArmDue(kNever, redis_time_.Now());
}

void Poller::ArmDue(double due, double now) {
  using std::chrono::milliseconds;
  double fallback_ms = std::max<double>(
      0.0, static_cast<double>(std::chrono::duration_cast<milliseconds>(
                                   fallback_at_ - std::chrono::steady_clock::now())
                                   .count()));
  // Rounded up, and 1 ms more: libuv counts whole milliseconds from the
  // time it cached at the start of the loop turn, so a timer can fire up
  // to a millisecond early, find nothing due and cost two round trips.
  double due_ms = due <= now ? 0.0 : std::ceil((due - now) * 1000.0) + 1.0;
  if (due_ms < fallback_ms) {
    timer_for_due_ = true;
    wake_at_ = due;
    timer_.Start(milliseconds(static_cast<int64_t>(due_ms)));
  } else {
    // Also when the clock was set back or forth: no sleep is longer than
    // the fallback wait.
    timer_for_due_ = false;
    wake_at_ = now + fallback_ms / 1000.0;
    timer_.Start(milliseconds(static_cast<int64_t>(fallback_ms)));
  }
}

}  // namespace reliableq::server
