// Poller: moves due jobs of `schedule` and `retry` to their queues, one
// promote.lua call per batch of due members (each member moves only if it
// is still there, so two processes promoting it push it once).
//
// How often: Sidekiq's spread. Each process waits about process_count x the
// interval, uniformly in [0.5, 1.5) of that, so the cluster as a whole polls
// about once per interval whatever its size. A full batch makes it go again
// at once, both sets each time, schedule first, so a huge retry set never
// keeps due scheduled jobs waiting (Sidekiq issue 3889).
//
// Thread safety: loop thread only.

#ifndef RELIABLEQ_SERVER_POLLER_H_
#define RELIABLEQ_SERVER_POLLER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <string_view>

#include "log.h"
#include "redis/async_connection.h"
#include "reliableq/admin.h"
#include "reliableq/clock.h"
#include "uv/handles.h"

namespace reliableq {

// The queue a due member of `schedule` or `retry` is pushed to (QueueOf), or
// "" when it is not a job as a worker reads one (DecodeJob), which sends it
// to the dead set: a payload no worker could run is kept where an operator
// sees it, not fetched to fail there.
std::string DueJobQueue(std::string_view member);

class Poller {
 public:
  Poller(uv::EventLoop& loop, redis::AsyncConnection& command,
         std::chrono::milliseconds interval, DeadSetLimits dead_limits, const Clock& clock,
         const Logger& log);

  // Polls after a spread wait, and keeps polling until Stop().
  void Start();
  void Stop();

 private:
  void Schedule(bool now);
  void Poll();
  void Promote(std::string_view set, redisReply* members, std::function<void(bool)> done);

  redis::AsyncConnection& command_;
  const std::chrono::milliseconds interval_;
  const DeadSetLimits dead_limits_;
  const Clock& clock_;
  const Logger& log_;
  uv::Timer timer_;
  std::mt19937_64 random_;
  bool running_ = false;
  bool in_flight_ = false;
  int64_t process_count_ = 1;
};

}  // namespace reliableq

#endif  // RELIABLEQ_SERVER_POLLER_H_
