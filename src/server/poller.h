// Poller: moves due jobs of `schedule` and `retry` to their queues, one
// promote.lua call per batch of due members (each member moves only if it
// is still there, so two processes promoting it push it once).
//
// When: it reads the earliest score of both sets (the heads) and sleeps
// until the earlier one is due, then promotes and reads the heads again.
// Due means due by Redis's clock, not the worker's: promote.lua judges by
// TIME, and the poller times its wake-ups by the TIME it reads with every
// read of the heads (redis_time.h), so that a worker whose clock is ahead
// moves nothing early and one whose clock is behind nothing late.
// Nudge() and NudgeAt() tell it that an earlier member may have arrived
// (the server calls them for the wake-up signals; reliableq-schema(7),
// "Wake-up signals"). Every sleep is capped by a fallback wait with
// Sidekiq's spread: about process_count x the interval, uniformly in
// [0.5, 1.5) of that, so the cluster as a whole reads the heads about once
// per interval whatever its size. The fallback finds members nobody
// signalled (a Ruby client without keyspace notifications) and bounds the
// damage of a step of Redis's clock. A full batch makes it go again at once, both
// sets each time, schedule first, so a huge retry set never keeps due
// scheduled jobs waiting (Sidekiq issue 3889).
//
// Thread safety: loop thread only.

#ifndef RELIABLEQ_SERVER_POLLER_H_
#define RELIABLEQ_SERVER_POLLER_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/keys.h"
#include "base/log.h"
#include "redis/async_connection.h"
#include "reliableq/dead_set.h"
#include "reliableq/clock.h"
#include "server/redis_time.h"
#include "uv/handles.h"

namespace reliableq::server {

// The queue a due member of `schedule` or `retry` is pushed to (QueueOf), or
// "" when it is not a job as a worker reads one (DecodeJob), which sends it
// to the dead set: a payload no worker could run is kept where an operator
// sees it, not fetched to fail there.
std::string DueJobQueue(std::string_view member);

class Poller {
 public:
  // `interval` is the fallback's average per process before the spread
  // (ServerOptions::scheduled_poll_interval). `command` must outlive the
  // poller, and must be closed before the poller is destroyed when a
  // command may still be on its way (its callbacks call the poller). A
  // promotion into an empty queue is announced on keys.WakeQueue(its name),
  // so that idle workers start it at once; `keys` name the sets.
  Poller(uv::EventLoop& loop, redis::AsyncConnection& command,
         std::chrono::milliseconds interval, DeadSetLimits dead_limits, const protocol::Keys& keys,
         const Clock& clock, const base::Logger& log);

  // Reads the heads at once, then keeps promoting on time until Stop().
  void Start();
  void Stop();

  // A member may have become the earliest of `schedule` or `retry`: read
  // the heads again now. Coalesced: at most one head read is on its way; a
  // nudge while one is makes one more read after it. Ignored before Start,
  // after Stop, and while backing off after a failure (the fallback reads
  // then).
  void Nudge();
  // A member due at `score` (epoch seconds) was added: wakes at that time
  // if that is earlier than the wake-up already planned. Costs no round
  // trip; the wake-up promotes and reads the heads as usual.
  void NudgeAt(double score);
  // NudgeAt the score a wake-up message carried, given as its text; Nudge
  // when it carried none (a keyspace event) or not a number.
  void NudgeScore(std::string_view score);

 private:
  static constexpr double kNever = std::numeric_limits<double>::infinity();

  // Index of a set in heads_ and in the pass masks.
  enum Set { kScheduleSet = 0, kRetrySet = 1 };

  void OnTimer();
  // Pipelined ZRANGE <set> 0 0 WITHSCORES for both sets (and SCARD
  // processes when `count_processes`), then a pass when one is due, or a
  // sleep until it is.
  void ReadHeads(bool count_processes);
  // Promotes the due members of the sets in `mask` (bit 1 << Set), batch
  // after batch while one is full, then reads the heads.
  void Pass(unsigned mask);
  void Promote(std::string_view set, std::vector<std::string> members,
               std::function<void(bool, bool)> done);
  // Arms the timer for `due` (epoch seconds; kNever: none), capped by a
  // fresh fallback wait.
  void Sleep(double due);
  // After a failure: only the fallback wait, nudges ignored until it fires,
  // so a persistent error costs one try per fallback wait.
  void BackOff();
  void ArmDue(double due, double now);
  std::chrono::milliseconds FallbackWait();
  // Now by Redis's clock as estimated, as the bound ZRANGEBYSCORE is given
  // and as a number read back from that text, so that "the head is due"
  // and "ZRANGEBYSCORE finds it" agree to the last digit.
  std::string NowText() const;
  unsigned DueMask(double now) const;

  redis::AsyncConnection& command_;
  const std::chrono::milliseconds interval_;
  const DeadSetLimits dead_limits_;
  const protocol::Keys keys_;
  const std::string wake_prefix_;
  const std::array<std::string, 2> sets_;  // by Set: schedule, retry
  RedisTime redis_time_;  // what is due and when to wake, by Redis's clock
  const base::Logger& log_;
  uv::Timer timer_;
  std::mt19937_64 random_;
  bool running_ = false;
  bool busy_ = false;           // a head read or a pass is on its way
  bool reread_ = false;         // Nudge() while busy: read the heads again after
  bool backing_off_ = false;    // BackOff() until the timer fires
  bool timer_for_due_ = false;  // the armed timer is a due time, not the fallback
  double wake_at_ = kNever;     // epoch seconds the armed due timer stands for
  double nudged_at_ = kNever;   // NudgeAt() while busy: the earliest score
  std::chrono::steady_clock::time_point fallback_at_;  // when the armed fallback fires
  double heads_[2] = {kNever, kNever};  // the last scores read (kNever: empty)
  int64_t process_count_ = 1;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_POLLER_H_
