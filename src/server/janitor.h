// Janitor: every janitor_interval (jittered), one recovery pass that gives
// the jobs of dead processes back to their queues (recovery.h), when this
// process wins the lease that keeps passes from running at once.
//
// The pass runs on libuv's thread pool with a blocking connection of its
// own, so a long recovery never stalls the loop. Jitter only ever shortens
// the wait, so recovery stays within heartbeat ttl + janitor interval (I3).
// Its own process is skipped: it knows it is alive even when its heartbeat
// lapsed (a Redis outage), and its next beat re-registers it.
//
// Thread safety: loop thread only; the pass's state is touched by the pool
// thread only while a pass runs.

#ifndef RELIABLEQ_SERVER_JANITOR_H_
#define RELIABLEQ_SERVER_JANITOR_H_

#include <chrono>
#include <memory>
#include <random>

#include "log.h"
#include "recovery.h"
#include "redis/connection.h"
#include "reliableq/clock.h"
#include "uv/handles.h"

namespace reliableq {

class Janitor {
 public:
  // `identity` is this process (never recovered by its own janitor);
  // `redis` may be null (connected on the first pass).
  Janitor(uv::EventLoop& loop, RedisOptions redis_options,
          std::unique_ptr<redis::Connection> redis, const Keys& keys,
          const std::string& identity, int max_interruptions, const DeadSetLimits& dead_limits,
          std::chrono::milliseconds interval, const Clock& clock, const Logger& log);

  // A pass now, then one every interval until Stop().
  void Start();
  // No new pass; one running finishes (the loop waits for it).
  void Stop();

 private:
  void Schedule(bool now);
  void BeginPass();
  // On the thread pool.
  void RunPass();
  // Back on the loop thread.
  void Report();

  uv::EventLoop& loop_;
  const RedisOptions redis_options_;
  std::unique_ptr<redis::Connection> redis_;
  const RecoveryConfig config_;
  const std::chrono::milliseconds interval_;
  const Clock& clock_;
  const Logger& log_;
  uv::Timer timer_;
  std::mt19937_64 random_;
  bool stopped_ = false;
  bool running_ = false;
  Result<RecoveryReport> result_ = RecoveryReport{};
};

}  // namespace reliableq

#endif  // RELIABLEQ_SERVER_JANITOR_H_
