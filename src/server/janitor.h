// Janitor: about every janitor_interval, one recovery pass that gives the
// jobs of dead processes back to their queues (recovery.h), when this
// process wins the lease that keeps passes from running at once.
//
// The pass runs on libuv's thread pool with a blocking connection of its
// own, so a long recovery never stalls the loop. A worker that wins the
// lease tries again 1 to 1.2 intervals later; one that loses tries again
// when the lease it found runs out, plus up to 0.2 interval, so that the
// workers sharing a prefix run about one pass per interval between them
// whatever their number, and a dead process is recovered within its
// heartbeat ttl + 1.2 intervals of its last beat (I3), or within about 1.2
// intervals of its crash when its connections tell (recovery.h).
// Its own process is skipped: it knows it is alive even when its heartbeat
// lapsed (a Redis outage), and its next beat re-registers it.
//
// After each pass it ran (it held the lease) it records the pass for people
// to see (reliableq-schema(7), janitor:last and janitor:passes), in one
// round trip on its own connection; a record that cannot be written is
// logged at debug and changes nothing else.
//
// Thread safety: loop thread only; the pass's state is touched by the pool
// thread only while a pass runs.

#ifndef RELIABLEQ_SERVER_JANITOR_H_
#define RELIABLEQ_SERVER_JANITOR_H_

#include <chrono>
#include <memory>
#include <random>

#include "base/log.h"
#include "metrics/worker_metrics.h"
#include "protocol/recovery.h"
#include "redis/connection.h"
#include "reliableq/clock.h"
#include "uv/handles.h"

namespace reliableq::server {

// The JSON of the pass that `by` ran at `at` (epoch seconds), as
// janitor:last and janitor:passes keep it: what it found, or why it failed.
std::string JanitorPassJson(const Result<RecoveryReport>& pass, const std::string& by, double at);
// Whether a pass goes into janitor:passes too: it found a dead process, or
// failed.
bool JanitorPassNotable(const Result<RecoveryReport>& pass);

class Janitor {
 public:
  // `identity` is this process (never recovered by its own janitor);
  // `redis` may be null (connected on the first pass).
  Janitor(uv::EventLoop& loop, RedisOptions redis_options,
          std::unique_ptr<redis::Connection> redis, const protocol::Keys& keys,
          const std::string& identity, int max_interruptions, const DeadSetLimits& dead_limits,
          std::chrono::milliseconds interval, const Clock& clock, const base::Logger& log,
          metrics::WorkerMetrics* metrics);

  // A pass now, then about one every interval until Stop().
  void Start();
  // No new pass; one running finishes (the loop waits for it).
  void Stop();

 private:
  void Schedule(std::chrono::milliseconds delay);
  void BeginPass();
  // On the thread pool.
  void RunPass();
  // Back on the loop thread.
  void Report();
  // On the thread pool, after a pass it ran.
  void WriteRecord(double at);
  // On the thread pool, after the recovery: the limiter slots of dead
  // processes (limit_reaper.h).
  void ReapSlots(double now);

  uv::EventLoop& loop_;
  const RedisOptions redis_options_;
  std::unique_ptr<redis::Connection> redis_;
  const protocol::RecoveryConfig config_;
  const std::chrono::milliseconds interval_;
  const Clock& clock_;
  const base::Logger& log_;
  uv::Timer timer_;
  std::mt19937_64 random_;
  bool stopped_ = false;
  bool running_ = false;
  // Set by the pass: its outcome, and how long before the lease it won or
  // found runs out, measured when the pass took or tried it.
  Result<RecoveryReport> result_ = RecoveryReport{};
  bool won_lease_ = false;
  std::chrono::milliseconds lease_left_{0};
  std::chrono::steady_clock::time_point lease_read_at_;
  // Why the pass's record was not written (OK when it was, or none was due).
  Status record_status_;
  metrics::WorkerMetrics* const metrics_;  // null: none
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_JANITOR_H_
