#include "server/poller.h"

#include <memory>

#include "job_codec.h"
#include "keys.h"
#include "script_calls.h"

namespace reliableq {

namespace {

// Due members promoted per script call.
constexpr size_t kPromoteBatch = 100;

}  // namespace

std::string DueJobQueue(std::string_view member) {
  Result<DecodedJob> job = DecodeJob(member);
  return job.ok() ? QueueOf(job->document) : std::string();
}

Poller::Poller(uv::EventLoop& loop, redis::AsyncConnection& command,
               std::chrono::milliseconds interval, DeadSetLimits dead_limits, const Clock& clock,
               const Logger& log)
    : command_(command),
      interval_(interval),
      dead_limits_(dead_limits),
      clock_(clock),
      log_(log),
      timer_(loop, [this] { Poll(); }),
      random_(std::random_device{}()) {}

void Poller::Start() {
  running_ = true;
  Schedule(false);
}

void Poller::Stop() {
  running_ = false;
  timer_.Stop();
}

void Poller::Schedule(bool now) {
  if (!running_) return;
  std::chrono::milliseconds delay{0};
  if (!now) {
    std::uniform_real_distribution<double> spread(0.5, 1.5);
    double average = static_cast<double>(interval_.count()) *
                     static_cast<double>(std::max<int64_t>(1, process_count_));
    delay = std::chrono::milliseconds(static_cast<int64_t>(average * spread(random_)));
  }
  timer_.Start(delay);
}

void Poller::Poll() {
  if (!running_) return;
  if (in_flight_ || !command_.ready()) {
    Schedule(false);
    return;
  }
  in_flight_ = true;
  command_.Command({"SCARD", Keys::kProcesses}, [this](const Status& s, redisReply* r) {
    if (s.ok() && r->type == REDIS_REPLY_INTEGER) process_count_ = r->integer;
  });
  std::string now = FormatEpoch(clock_.Now());
  std::string limit = std::to_string(kPromoteBatch);
  auto full = std::make_shared<bool>(false);
  auto remaining = std::make_shared<int>(2);
  auto finished = [this, full, remaining](bool batch_was_full) {
    *full = *full || batch_was_full;
    if (--*remaining > 0) return;
    in_flight_ = false;
    Schedule(*full);
  };
  for (std::string_view set : {Keys::kSchedule, Keys::kRetry}) {
    Status sent = command_.Command(
        {"ZRANGEBYSCORE", set, "-inf", now, "LIMIT", "0", limit},
        [this, set, finished](const Status& s, redisReply* r) {
          if (!s.ok() || r->type != REDIS_REPLY_ARRAY || r->elements == 0) {
            finished(false);
            return;
          }
          Promote(set, r, finished);
        });
    if (!sent.ok()) finished(false);
  }
}

void Poller::Promote(std::string_view set, redisReply* members, std::function<void(bool)> done) {
  bool full = members->elements >= kPromoteBatch;
  std::vector<QueuedMember> due;
  due.reserve(members->elements);
  for (size_t i = 0; i < members->elements; ++i) {
    std::string member(members->element[i]->str, members->element[i]->len);
    due.push_back({DueJobQueue(member), std::move(member)});
  }
  Status sent = command_.Eval(
      PromoteCall(set, clock_.Now(), dead_limits_, std::move(due)),
      [this, set, full, done](const Status& s, redisReply* r) {
        if (!s.ok()) {
          log_.Log(LogLevel::kWarn, "moving due jobs of %.*s failed: %s",
                   static_cast<int>(set.size()), set.data(), s.ToString().c_str());
        } else if (r->type == REDIS_REPLY_ARRAY && r->elements == 3) {
          log_.Log(LogLevel::kDebug, "%.*s: %lld due jobs enqueued, %lld to the dead set",
                   static_cast<int>(set.size()), set.data(), r->element[0]->integer,
                   r->element[1]->integer);
        }
        done(s.ok() && full);
      });
  if (!sent.ok()) done(false);
}

}  // namespace reliableq
