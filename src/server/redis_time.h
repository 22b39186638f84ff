// RedisTime: Redis's clock as one worker estimates it, for the decisions
// that every worker must take alike: which scheduled or retried job is due
// (Poller) and which cron tick is (PeriodicScheduler). The scripts judge
// those by TIME themselves; this estimate only times the worker's wake-ups,
// so that a worker whose wall clock is a minute off neither wakes a minute
// early to be refused nor a minute late (reliableq-schema(7), CLOCKS).
//
// The estimate is the last TIME reply read plus the time elapsed since on
// the clock's Monotonic(): a step of the worker's wall clock does not move
// it. It lags Redis by the reply's one-way trip, so a wake-up it times is a
// hair late, never early. Before the first reply it is the wall clock.
//
// Thread safety: loop thread only.

#ifndef RELIABLEQ_SERVER_REDIS_TIME_H_
#define RELIABLEQ_SERVER_REDIS_TIME_H_

#include <chrono>
#include <optional>

#include "redis/reply.h"
#include "reliableq/clock.h"

namespace reliableq::server {

class RedisTime {
 public:
  explicit RedisTime(const Clock& clock) : clock_(clock) {}

  // Redis's TIME answered `redis_now` (epoch seconds), read just now.
  void Observe(double redis_now) {
    observed_ = redis_now;
    observed_at_ = clock_.Monotonic();
  }
  // Observe the TIME reply `reply`; false (and nothing learnt) when it is
  // not one.
  bool Observe(redis::ReplyRef reply) {
    Result<double> now = redis::ReadTimeReply(reply);
    if (now.ok()) Observe(*now);
    return now.ok();
  }

  // Redis's clock now, as far as this worker knows (epoch seconds).
  double Now() const {
    if (!observed_) return clock_.Now();
    return *observed_ + std::chrono::duration<double>(clock_.Monotonic() - observed_at_).count();
  }

 private:
  const Clock& clock_;
  std::optional<double> observed_;
  std::chrono::steady_clock::time_point observed_at_;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_REDIS_TIME_H_
