// PeriodicScheduler: pushes the worker's periodic jobs on their ticks
// (include/reliableq/periodic.h; reliableq(1), "PERIODIC JOBS").
//
// No leader: every worker that declares a job submits each tick it owes to
// periodic.lua, which pushes the job and records the tick in one step, or
// finds the tick recorded and does nothing. So a tick is pushed once
// whichever workers are up, and each tick is owed by every worker that was
// running at its time. A worker owes the ticks in (cursor, now]: the
// cursor starts at its start (Start()), so ticks from before are not
// replayed, except one with catch_up; it moves past a tick once Redis
// answered for it (pushed, found done, too late, conflict), so a tick whose
// call failed (Redis down) is submitted again on the next turn, late. One
// turn submits at most kMaxTicksPerTurn ticks of a job, the latest; the
// earlier ones are logged as skipped.
//
// Time is Redis's, not the worker's: periodic.lua refuses a tick later
// than its TIME as early, and the scheduler counts `now` and times its
// turns by the TIME it reads at Start and with every turn (redis_time.h).
// So a worker whose clock is a minute ahead pushes no tick early, one a
// minute behind pushes none late, and a step of a worker's clock moves
// nothing (reliableq-schema(7), CLOCKS).
//
// At Start, and again when periodic.lua finds no declaration, it records
// its declarations with periodic_declare.lua; the newest declaration wins,
// and a worker whose declaration lost pushes nothing and logs
// `periodic_conflict` once per winning declarer.
//
// Thread safety: loop thread only. `command` must outlive the scheduler and
// be closed before it is destroyed while a call may be on its way.

#ifndef RELIABLEQ_SERVER_PERIODIC_SCHEDULER_H_
#define RELIABLEQ_SERVER_PERIODIC_SCHEDULER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "protocol/keys.h"
#include "base/log.h"
#include "metrics/worker_metrics.h"
#include "periodic/cron.h"
#include "periodic/tick_plan.h"
#include "protocol/script_calls.h"
#include "redis/async_connection.h"
#include "reliableq/clock.h"
#include "reliableq/periodic.h"
#include "server/redis_time.h"
#include "uv/handles.h"

namespace reliableq::server {

class PeriodicScheduler {
 public:
  // Ticks of one job submitted in one turn at most.
  static constexpr size_t kMaxTicksPerTurn = 60;

  // `jobs` passed CheckPeriodicJob (Server::Open checks them); one that
  // does not is logged and left out.
  PeriodicScheduler(uv::EventLoop& loop, redis::AsyncConnection& command, const protocol::Keys& keys,
                    std::string identity, const std::vector<PeriodicJob>& jobs, const Clock& clock,
                    const base::Logger& log, metrics::WorkerMetrics* metrics);
  ~PeriodicScheduler();

  // Declares the jobs, sets each cursor to now and begins pushing ticks.
  // Again after Stop: the cursors start again at now.
  void Start();
  // No new submissions; replies still on their way are ignored.
  void Stop();

 private:
  struct Entry;
  struct Batch;

  // Starts the run once Redis's clock is known (Start asks for it).
  void Begin();
  void Turn();
  void Declare(Entry& entry);
  void SubmitOwed(Entry& entry, int64_t now);
  // `read`: periodic.lua's reply for the tick, or why there is none.
  void OnTickReply(Entry& entry, const std::shared_ptr<Batch>& batch, size_t index,
                   const Result<protocol::PeriodicTickReply>& read);
  void Finish(Entry& entry, const Batch& batch);
  void TakeOverIfGone(Entry& entry, const std::string& declarer);
  void Arm();

  redis::AsyncConnection& command_;
  const protocol::Keys& keys_;
  const std::string identity_;
  RedisTime redis_time_;
  const base::Logger& log_;
  metrics::WorkerMetrics* const metrics_;  // null: none
  std::vector<std::unique_ptr<Entry>> entries_;
  uv::Timer timer_;
  bool running_ = false;
  // Bumped by Start and Stop: replies of an earlier run are ignored.
  uint64_t run_ = 0;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_PERIODIC_SCHEDULER_H_
