// DeadlineWatch: the loop's look at running jobs whose timeout passed.
//
// Every tick it asks the pool (CheckDeadlines), which requests stop on the
// token of a C++ job at its deadline (programs and URLs stop their own
// jobs, and the pool counts those). Each timed-out C++ job is logged
// ("job_timeout") and counted (reliableq_jobs_timed_out_total). A C++ handler still running
// kill_grace after its deadline has overrun: logged ("job_overrun") and, with
// OverrunAction::kExitProcess, the process ends at once with status 70, so
// that the janitor gives its jobs back (reliableq(1), TIMEOUTS).
//
// Thread safety: loop thread.

#ifndef RELIABLEQ_SERVER_DEADLINE_WATCH_H_
#define RELIABLEQ_SERVER_DEADLINE_WATCH_H_

#include <chrono>
#include <memory>

#include "base/log.h"
#include "metrics/worker_metrics.h"
#include "reliableq/clock.h"
#include "reliableq/server.h"
#include "server/processor_pool.h"
#include "uv/event_loop.h"
#include "uv/handles.h"

namespace reliableq::server {

class DeadlineWatch {
 public:
  // How often running jobs are looked at: a C++ handler sees its stop
  // request at most this late (command and HTTP handlers keep their own
  // time, to the millisecond).
  static constexpr std::chrono::milliseconds kTick{100};

  // metrics: counts the overruns there (null: none).
  DeadlineWatch(uv::EventLoop& loop, ProcessorPool& pool, OverrunAction on_overrun,
                const Clock& clock, const base::Logger& log, metrics::WorkerMetrics* metrics);

  void Start();
  void Stop();

 private:
  void Check();

  ProcessorPool& pool_;
  const OverrunAction on_overrun_;
  const Clock& clock_;
  const base::Logger& log_;
  metrics::WorkerMetrics* const metrics_;  // null: none
  uv::Timer timer_;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_DEADLINE_WATCH_H_
