// ProcessorPool: the threads that run handlers, and the hand-off between
// them and the loop thread.
//
// The loop thread submits fetched jobs; a processor takes one, runs its
// handler with no lock held, and posts the outcome to a finished list. The
// first outcome posted after the loop armed the wake-up (ArmWake) calls
// `wake` (uv_async_send), so the loop sends one ack round for everything
// that finished since it last looked; while an ack is on its way the loop
// does not arm it, and outcomes gather for the next one. One mutex guards
// the ready queue, the finished list and each slot's current job; a
// processor takes it once per job, to post its outcome and take the next
// job together.
//
// The pool's state (registry, middleware, hooks, logger, clock) is shared
// with its threads, so after a hard stop the threads still running a
// handler can be left behind safely (Shutdown); anything else a handler
// uses is the program's to keep alive (see Server::Run).
//
// Thread safety: Submit, TakeNotStarted, TakeFinished and the readers are
// for the loop thread; `wake` is called from processor threads.

#ifndef RELIABLEQ_SERVER_PROCESSOR_POOL_H_
#define RELIABLEQ_SERVER_PROCESSOR_POOL_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "metrics/worker_metrics.h"
#include "reliableq/clock.h"
#include "reliableq/handler.h"
#include "reliableq/server.h"
#include "reliableq/status.h"
#include "server/external_handlers.h"
#include "server/job_timeouts.h"
#include "server/worker_jobs.h"

namespace reliableq::server {

// What processors need to know besides the handlers.
struct ProcessorConfig {
  int threads = 10;
  HandlerRegistry registry;
  // queue_names[i] is the name of queue index i (for JobView::queue).
  std::vector<std::string> queue_names;
  int max_retries = 25;
  int max_snoozes = 100;                   // ServerOptions::max_snoozes
  std::map<std::string, ClassRetry, std::less<>> class_retries;  // ServerOptions's
  std::function<int(int n)> random_below;  // empty: per-thread generator
  std::vector<ServerMiddleware> middleware;
  std::vector<DeathHandler> death_handlers;
  // Shared with the threads, which may outlive the pool (Shutdown).
  std::shared_ptr<const base::Logger> log;
  std::shared_ptr<const Clock> clock;
  // Null: no metrics, and no cost for them. Shared like the above.
  std::shared_ptr<metrics::WorkerMetrics> metrics;
  // Classes run by programs and URLs, after the registry's; null: none.
  std::shared_ptr<const ExternalHandlers> external;
  // Which timeout a job has (empty: the jobs' own `timeout` fields only).
  TimeoutPolicy timeouts{{}};
  // After its timeout, how long a C++ handler has to stop before it has
  // overrun (CheckDeadlines).
  std::chrono::milliseconds kill_grace{5000};
  // Which finished jobs keep a final record (ServerOptions::records), and
  // the process named in it.
  JobRecords records;
  std::string identity;

  // The server's: metrics when options.http_address is set, labelled with
  // the registry's and the external handlers' classes.
  static ProcessorConfig For(const ServerOptions& options, HandlerRegistry registry,
                             std::shared_ptr<const ExternalHandlers> external,
                             std::vector<std::string> queue_names,
                             std::shared_ptr<const base::Logger> log,
                             std::shared_ptr<const Clock> clock);
};

// A running job whose deadline passed (CheckDeadlines).
struct DeadlineEvent {
  enum class Kind {
    kTimedOut,  // its timeout passed: stop was requested
    kOverrun,   // still running kill_grace after that
  };
  Kind kind = Kind::kTimedOut;
  uint32_t queue = 0;
  std::string payload;
  std::chrono::milliseconds timeout{0};
};

class ProcessorPool {
 public:
  ProcessorPool(ProcessorConfig config, std::function<void()> wake);
  ~ProcessorPool();
  ProcessorPool(const ProcessorPool&) = delete;
  ProcessorPool& operator=(const ProcessorPool&) = delete;

  // Starts the `threads` processor threads. kIoError naming how many could
  // not be started when the system refuses a thread (its limits on threads
  // or memory); the pool has then stopped the ones it had started and runs
  // nothing. Call once.
  Status Start();

  // Queues jobs to run, in order.
  void Submit(std::vector<FetchedJob>* jobs);
  // The name of the next queue index (a namespace's queue, found later):
  // call before submitting a job of it.
  void AddQueueName(std::string name);

  // Jobs start only before `until` (on the configured clock's Monotonic()):
  // the time up to which this process is
  // sure it has not been declared dead (its last confirmed heartbeat plus
  // the ttl). A process paused past its ttl may find, on waking, that a
  // janitor has already handed back the jobs it had fetched; its next beat
  // tells, and until then nothing new starts. Before the first call nothing
  // starts at all.
  void SetLease(std::chrono::steady_clock::time_point until);

  // Removes and returns the jobs submitted but not started.
  std::vector<FetchedJob> TakeNotStarted();

  // Moves every posted outcome into `out` (appending).
  void TakeFinished(std::vector<FinishedJob>* out);

  // Asks for `wake` at the next posted outcome. False when outcomes are
  // already waiting: no wake-up comes for those, so take them.
  bool ArmWake();

  // Reports each running C++ job whose deadline (`now`, on the clock's
  // Monotonic()) has passed, once as kTimedOut, when it requests stop on
  // the job's token, and once more as kOverrun when it still runs
  // kill_grace later. Jobs of programs and URLs are left out: their
  // handlers end them at the deadline themselves (with the SIGTERM grace a
  // stop request would skip), and their failure is the report. Loop
  // thread.
  std::vector<DeadlineEvent> CheckDeadlines(std::chrono::steady_clock::time_point now);

  // A hard stop: lists the running jobs, requests stop on each one's token
  // (a command handler's process group gets SIGKILL), and from then on
  // drops every outcome, so that the listed jobs go back to their queues
  // with the hand-back and nothing else (no ack, retry, hooks or counts).
  // Then waits up to `wait` for the threads of command and HTTP handlers to
  // return: when it does, none of their processes runs while the jobs go
  // back. C++ handlers are not waited for. Loop thread; call once, before
  // TakeFinished (what finished before is acked as usual).
  std::vector<RunningJob> StopRunning(std::chrono::milliseconds wait);

  // Self-fencing (server/self_fence.h): requests stop on the token of every
  // running job not fenced yet (a command handler's process group gets
  // SIGKILL, an HTTP request is abandoned, a C++ handler sees
  // stop_requested()) and, when each returns, drops its outcome, whatever
  // it is: the job stays in its working list, for a janitor to recover or,
  // if this process was not taken for dead, for the reconcile to requeue.
  // Returns the jobs it fenced now. Loop thread.
  std::vector<RunningJob> Fence();
  // How many fenced jobs returned since the last call, appending the
  // limiter slot (FetchedJob::limit_slot) of each that held one. Each such
  // return calls `wake`. Loop thread.
  size_t TakeFencedEnded(std::vector<uint64_t>* limit_slots);

  // Jobs submitted and not finished: ready plus running.
  size_t held() const;
  // Outcomes posted since the start; any thread may read it.
  uint64_t finished_total() const;
  size_t ready() const;
  size_t running() const;

  // The jobs running now, with their progress.
  std::vector<RunningJob> Running() const;
  // Whether a running job reported progress since the last call.
  bool TakeProgressChanged();

  // Appends, per queue index, the payloads the pool still holds: running,
  // finished but not taken, and (when `include_ready`) not started.
  void HeldPayloads(bool include_ready, std::vector<std::vector<std::string>>* per_queue) const;

  // Drops the jobs not started (take them first with TakeNotStarted if
  // they matter), stops the threads and calls `wake` no more. Joins threads that finish within `wait`; the others are detached
  // with their handler still running (their outcomes are dropped).
  void Shutdown(std::chrono::milliseconds wait);

 private:
  struct State;
  std::shared_ptr<State> state_;
  std::vector<std::thread> threads_;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_PROCESSOR_POOL_H_
