#include "server/processor_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <optional>
#include <random>
#include <stop_token>
#include <system_error>

#include "codec/job_codec.h"
#include "server/failure_planner.h"
#include "server/final_record.h"
#include "server/handler_call.h"
#include "server/job_expiry.h"
#include "server/job_report.h"

namespace reliableq::server {

namespace {

// How long a thread with jobs in its metrics tally waits for work before
// it adds them to the shared series.
constexpr std::chrono::milliseconds kIdleFlush{50};


// Seconds from the job's enqueued_at to `started_at`, or -1 when it has
// none. Sidekiq 8 writes milliseconds (an integer); earlier ones seconds.
double PickupLatency(const rapidjson::Document& document, double started_at) {
  auto it = document.FindMember("enqueued_at");
  if (it == document.MemberEnd() || !it->value.IsNumber()) return -1;
  double at = it->value.GetDouble();
  if (at > 1e11) at /= 1000;
  return started_at >= at ? started_at - at : 0;
}

metrics::JobResult ResultOf(const FinishedJob& done) {
  if (done.outcome == Outcome::kSucceeded) return metrics::JobResult::kSucceeded;
  if (done.outcome == Outcome::kSnoozed) return metrics::JobResult::kSnoozed;
  if (done.outcome == Outcome::kInvalid) return metrics::JobResult::kDead;
  switch (done.action) {
    case protocol::FailureAction::kRetry:
      return metrics::JobResult::kRetried;
    case protocol::FailureAction::kDead:
      return metrics::JobResult::kDead;
    case protocol::FailureAction::kDrop:
      break;
  }
  return metrics::JobResult::kDiscarded;
}

bool AnyClassTimeout(const HandlerRegistry& registry) {
  for (const std::string& name : registry.Classes()) {
    if (registry.Options(name)->timeout.count() > 0) return true;
  }
  return false;
}

}  // namespace

struct ProcessorPool::State {
  struct Slot {
    bool busy = false;
    FetchedJob job;
    double started_at = 0;
    // A source per slot, made again only after a stop was requested on
    // it: a job that was never stopped leaves it as it found it, so the
    // common job costs no allocation.
    std::stop_source stop;
    // Set, with the lock, only for a job that has a timeout.
    std::optional<std::chrono::steady_clock::time_point> deadline;
    std::chrono::milliseconds timeout{0};
    bool external = false;
    bool timed_out_reported = false;
    bool overrun_reported = false;
    // Fence() stopped this slot's job: its outcome is dropped.
    bool fenced = false;
    // Its job's result and progress (JobView::SetResult, ReportProgress).
    std::unique_ptr<JobReport> report;
  };

  explicit State(ProcessorConfig c)
      : config(std::move(c)),
        class_timeouts(AnyClassTimeout(config.registry)),
        records_on(config.records.any()),
        planner(config.registry, config.max_retries, config.max_snoozes, config.class_retries,
                config.random_below, config.death_handlers, *config.log),
        queue_names(config.queue_names.begin(), config.queue_names.end()) {}

  ProcessorConfig config;
  // Some registered class has a JobClassOptions::timeout.
  const bool class_timeouts;
  // Some class keeps records (ProcessorConfig::records).
  const bool records_on;
  FailurePlanner planner;  // refers into config
  std::function<void()> wake;

  mutable std::mutex mu;
  // Grows as a namespace's queues are found (AddQueueName); a deque, so
  // that a name a thread took under mu stays where it is meanwhile.
  std::deque<std::string> queue_names;  // appended under mu
  std::condition_variable work_available;
  std::deque<FetchedJob> ready;           // guarded by mu
  std::vector<FinishedJob> finished;      // guarded by mu
  std::vector<Slot> slots;                // guarded by mu
  size_t running = 0;                     // guarded by mu
  size_t idle_waiters = 0;                // guarded by mu
  // Idle threads notified and not yet running: at most one at a time (see
  // Loop).
  size_t wakes_pending = 0;               // guarded by mu
  // The loop wants `wake` at the next posted outcome (ArmWake).
  bool wake_armed = true;                 // guarded by mu
  std::atomic<uint64_t> finished_total{0};  // written under mu
  // A running job reported progress (TakeProgressChanged).
  std::atomic<bool> progress_changed{false};
  bool stopping = false;                  // guarded by mu
  // StopRunning was called: outcomes are dropped from then on.
  bool hard_stopped = false;              // guarded by mu
  std::atomic<bool> hard_stop{false};     // the same, for Run without mu
  std::condition_variable slot_freed;     // a slot freed after a hard stop
  std::chrono::steady_clock::time_point lease;  // guarded by mu
  // Fenced jobs that returned, and their limiter slots (TakeFencedEnded).
  size_t fenced_ended = 0;                   // guarded by mu
  std::vector<uint64_t> fenced_limit_slots;  // guarded by mu
  bool wake_enabled = true;               // guarded by mu
  size_t exited = 0;                      // guarded by mu
  std::condition_variable thread_exited;

  void Loop(int slot_index);
  // The jobs running now; call with mu held.
  std::vector<RunningJob> RunningLocked() const;
  // Wakes one idle thread if work waits and no other wake-up is under way.
  void WakeOneIfNeeded();
  // `started_at`: epoch seconds when the job left the ready queue.
  // `tally`: the thread's (metrics off: one that does nothing).
  FinishedJob Run(Slot& slot, const std::string& queue, metrics::WorkerMetrics::Tally& tally);
  // The handler of `job_class`: C++ first, then programs and URLs.
  const Handler* FindHandler(std::string_view job_class, bool* external) const;
  // Publishes, under mu, the job's deadline (with a timeout) and whether
  // its handler is a program or a URL.
  void MarkSlot(Slot& slot, std::optional<std::chrono::milliseconds> timeout, bool external);
  // Adds the final record of a job whose life ended as `state` to `done`,
  // when its class keeps records and it has a jid. `ended` is the payload
  // as it ended; `error` its last failure (null: none).
  void Record(const Slot& slot, const rapidjson::Document& document, std::string_view job_class,
              std::string_view queue, std::string_view state, std::string_view ended,
              const JobError* error, double now, FinishedJob* done) const;
};

ProcessorPool::ProcessorPool(ProcessorConfig config, std::function<void()> wake)
    : state_(std::make_shared<State>(std::move(config))) {
  state_->slots.resize(static_cast<size_t>(state_->config.threads));
  for (State::Slot& slot : state_->slots) {
    slot.report = std::make_unique<JobReport>(*state_->config.clock, state_->progress_changed);
  }
  state_->wake = std::move(wake);
}

ProcessorPool::~ProcessorPool() { Shutdown(std::chrono::milliseconds(0)); }

Status ProcessorPool::Start() {
  for (size_t i = 0; i < state_->slots.size(); ++i) {
    std::shared_ptr<State> state = state_;
    int slot = static_cast<int>(i);
    try {
      threads_.emplace_back([state, slot] { state->Loop(slot); });
    } catch (const std::system_error& e) {
      // Out of threads or memory (ulimit -u, RLIMIT_AS, a cgroup's pids
      // limit). The threads already started are idle: stop them, so that
      // the pool is left as if it had never started.
      Shutdown(std::chrono::seconds(5));
      return Status::IoError("cannot start processor thread " + std::to_string(i + 1) + " of " +
                             std::to_string(state_->slots.size()) + ": " + e.what());
    }
  }
  return Status::OK();
}

void ProcessorPool::State::Loop(int slot_index) {
  base::SetLogThreadName("p" + std::to_string(slot_index));
  Slot& slot = slots[static_cast<size_t>(slot_index)];
  metrics::WorkerMetrics::Tally tally(config.metrics.get());
  std::unique_lock<std::mutex> lock(mu);
  while (true) {
    while (!stopping && (ready.empty() || config.clock->Monotonic() >= lease)) {
      ++idle_waiters;
      if (ready.empty()) {
        // Submit and Shutdown notify; the timeout only bounds the wait
        // should a wake-up ever be missed. A thread with jobs in its tally
        // waits kIdleFlush at first, then adds them to the shared series,
        // so that a scrape of an idle worker is exact; not at once, since
        // a draining worker's threads find the ready queue empty between
        // fetches all the time.
        bool flush = tally.pending();
        if (work_available.wait_for(lock, flush ? kIdleFlush : std::chrono::seconds(1)) ==
                std::cv_status::timeout &&
            flush && ready.empty()) {
          lock.unlock();
          tally.Flush();
          lock.lock();
        }
      } else {
        // Work is waiting but the lease ran out: SetLease wakes us when the
        // next beat confirms it (the timeout only bounds a lost wake-up).
        work_available.wait_for(lock, std::chrono::milliseconds(100));
      }
      --idle_waiters;
      if (wakes_pending > 0) --wakes_pending;
    }
    if (stopping) break;  // Shutdown cleared the ready queue
    slot.job = std::move(ready.front());
    ready.pop_front();
    WakeOneIfNeeded();
    slot.busy = true;
    slot.started_at = config.clock->Now();
    if (slot.stop.stop_requested()) slot.stop = std::stop_source();
    ++running;
    const std::string& queue = queue_names[slot.job.queue];
    lock.unlock();

    FinishedJob outcome = Run(slot, queue, tally);

    lock.lock();
    slot.busy = false;
    slot.deadline.reset();
    slot.external = false;
    --running;
    if (hard_stopped) {
      // Its job goes back with the hand-back (StopRunning listed it): an
      // outcome would ack it, or retry or drop it, as if it had run.
      slot_freed.notify_all();
      continue;
    }
    if (slot.fenced) {
      // The job stays in the working list (Fence): the loop is told, so
      // that the reconcile requeues it if no janitor took it.
      slot.fenced = false;
      ++fenced_ended;
      if (slot.job.limit_slot != 0) fenced_limit_slots.push_back(slot.job.limit_slot);
      if (wake_enabled) wake();
      continue;
    }
    outcome.payload = std::move(slot.job.payload);
    outcome.limit_slot = slot.job.limit_slot;
    finished.push_back(std::move(outcome));
    finished_total.fetch_add(1, std::memory_order_relaxed);
    if (wake_armed && wake_enabled) {
      wake_armed = false;
      wake();
    }
  }
  lock.unlock();
  tally.Flush();
  lock.lock();
  ++exited;
  thread_exited.notify_all();
}

void ProcessorPool::State::WakeOneIfNeeded() {
  // Wake-ups are chained and one at a time: a thread that takes a job wakes
  // one more only if work is still waiting and no other thread is already
  // on its way. Short jobs then run on the threads already awake instead of
  // paying a context switch and a contended lock each, while long ones
  // still spread over every thread within a few wake-up latencies.
  if (ready.empty() || idle_waiters <= wakes_pending || wakes_pending > 0) return;
  ++wakes_pending;
  work_available.notify_one();
}

const Handler* ProcessorPool::State::FindHandler(std::string_view job_class,
                                                 bool* external) const {
  const Handler* handler = config.registry.Find(job_class);
  *external = handler == nullptr && config.external != nullptr;
  if (*external) handler = config.external->Find(job_class);
  return handler;
}

void ProcessorPool::State::MarkSlot(Slot& slot, std::optional<std::chrono::milliseconds> timeout,
                                    bool external) {
  std::lock_guard<std::mutex> lock(mu);
  slot.external = external;
  slot.timed_out_reported = false;
  slot.overrun_reported = false;
  if (!timeout) return;
  slot.deadline = config.clock->Monotonic() + *timeout;
  slot.timeout = *timeout;
}

FinishedJob ProcessorPool::State::Run(Slot& slot, const std::string& queue,
                                      metrics::WorkerMetrics::Tally& tally) {
  const FetchedJob& job = slot.job;
  const double started_at = slot.started_at;
  // The payload itself moves into the outcome under the lock (Loop): the
  // slot keeps it while the job runs, for Running and HeldPayloads.
  FinishedJob done;
  done.queue = job.queue;
  // The last job's result and progress are not this one's.
  slot.report->Clear();
  Result<codec::DecodedJob> decoded = codec::DecodeJob(job.payload);
  if (!decoded.ok()) {
    done.outcome = Outcome::kInvalid;
    done.error = decoded.status().message();
    if (config.metrics) {
      tally.Add(metrics::LabelBounder::kOther, job.queue, queue, ResultOf(done), 0, -1, started_at);
    }
    return done;
  }
  // DecodeJob made sure it is a string.
  const rapidjson::Value& class_value = decoded->document["class"];
  std::string_view job_class(class_value.GetString(), class_value.GetStringLength());
  if (DiscardIfExpired(decoded->document, job_class, queue, started_at, *config.log,
                       config.metrics.get(), &done)) {
    Record(slot, decoded->document, job_class, queue, "expired", job.payload, nullptr, started_at,
           &done);
    return done;
  }
  bool external = false;
  const Handler* handler = FindHandler(job_class, &external);
  // A second look in the registry only when some class has a timeout.
  const JobClassOptions* class_options =
      external || !class_timeouts ? nullptr : config.registry.Options(job_class);
  Result<std::optional<std::chrono::milliseconds>> timeout = config.timeouts.For(
      decoded->document, job_class,
      class_options != nullptr ? class_options->timeout : std::chrono::milliseconds(0));
  std::optional<std::chrono::steady_clock::time_point> deadline;
  bool timed = timeout.ok() && timeout->has_value();
  // The lock only for a job with a timeout or an external handler (a
  // process or a request costs far more than it).
  if (timed || external) {
    MarkSlot(slot, timed ? *timeout : std::nullopt, external);
    deadline = slot.deadline;  // only this thread writes it while the job runs
  }
  // Only this thread replaces slot.stop, between jobs; the loop thread
  // requests stop on it under the lock (CheckDeadlines, StopRunning).
  JobView view(job.payload, queue, decoded->document, &slot.stop, deadline, slot.report.get());
  base::JobLogContext context(view.job_class(), view.jid(), queue);
  HandlerEnding ending;
  if (!timeout.ok()) {
    ending.error.error_class = "Reliableq::InvalidJob";
    ending.error.message = timeout.status().message();
  } else if (handler == nullptr) {
    // Sidekiq fails a job whose class it cannot load the same way: it is
    // retried, so a rolling deploy that adds the class picks it up later.
    ending.error.error_class = "Reliableq::UnknownJobClass";
    ending.error.message =
        "no handler is registered for class '" + std::string(view.job_class()) + "' in this worker";
  } else {
    config.log->Log(LogLevel::kDebug, "job_start", "start");
    ending = CallHandler(*handler, config.middleware, view);
  }
  JobError& error = ending.error;
  // Stopped hard: its outcome is dropped (Loop), and so are its retry,
  // hooks, log lines and metrics. The job goes back to its queue.
  if (hard_stop.load(std::memory_order_acquire)) return done;
  // Fenced the same way (a stop was requested, and Fence() did it).
  if (slot.stop.stop_requested()) {
    std::lock_guard<std::mutex> lock(mu);
    if (slot.fenced) return done;
  }
  if (ending.snooze && planner.Snooze(job.payload, decoded->document, job_class, *ending.snooze,
                                      config.clock->Now(), &error, &done)) {
    if (config.metrics) {
      double now = config.clock->Now();
      tally.Add(view.job_class(), job.queue, queue, metrics::JobResult::kSnoozed, now - started_at,
                PickupLatency(decoded->document, started_at), now);
    }
    return done;
  }
  // The clock is read only when the time is logged, counted or recorded: a
  // no-op job costs a few microseconds, and every read tens of nanoseconds.
  if (error.error_class.empty()) {
    bool debug = config.log->Enabled(LogLevel::kDebug);
    if (records_on || debug || config.metrics) {
      double now = config.clock->Now();
      if (records_on) {
        Record(slot, decoded->document, job_class, queue, "done", job.payload, nullptr, now, &done);
      }
      if (debug) {
        config.log->Log(LogLevel::kDebug, base::LogEvent("job_done").WithDuration(now - started_at),
                        "done: %.6f sec", now - started_at);
      }
      if (config.metrics) {
        tally.Add(view.job_class(), job.queue, queue, metrics::JobResult::kSucceeded, now - started_at,
                  PickupLatency(decoded->document, started_at), now);
      }
    }
    return done;
  }
  double now = config.clock->Now();
  // A program or a URL ends its job at the timeout itself: this is where
  // that is known (DeadlineWatch counts the C++ ones).
  if (config.metrics && external && error.error_class == "Reliableq::JobTimeout") {
    config.metrics->JobTimedOut(job_class);
  }
  if (config.log->Enabled(LogLevel::kWarn)) {
    std::string error_text = error.error_class + ": " + error.message;
    config.log->Log(LogLevel::kWarn,
                    base::LogEvent("job_fail").WithDuration(now - started_at).WithError(error_text),
                    "fail: %.6f sec: %s", now - started_at, error_text.c_str());
  }
  // The record's copy of the error: Plan takes it.
  std::optional<JobError> recorded_error;
  if (records_on) recorded_error = error;
  planner.Plan(job.payload, queue, decoded->document, std::move(error), std::move(ending.backtrace),
               std::move(ending.then), now, &done);
  if (recorded_error && done.action != protocol::FailureAction::kRetry) {
    bool dead = done.action == protocol::FailureAction::kDead;
    Record(slot, decoded->document, job_class, queue, dead ? "dead" : "discarded",
           done.updated_payload.empty() ? std::string_view(job.payload) : done.updated_payload,
           &*recorded_error, now, &done);
  }
  // Where the job goes next is logged here, with the job's context, not
  // when the loop sends the outcome.
  if (done.action == protocol::FailureAction::kRetry) {
    config.log->Log(LogLevel::kInfo, base::LogEvent("job_retry").WithError(done.error),
                    "will retry in %.0f s: %s", done.score - now, done.error.c_str());
  } else {
    bool dead = done.action == protocol::FailureAction::kDead;
    config.log->Log(LogLevel::kWarn,
                    base::LogEvent(dead ? "job_dead" : "job_dropped").WithError(done.error), "%s: %s",
                    dead ? "to the dead set" : "dropped", done.error.c_str());
  }
  if (config.metrics) {
    tally.Add(view.job_class(), job.queue, queue, ResultOf(done), now - started_at,
              PickupLatency(decoded->document, started_at), now);
  }
  return done;
}

void ProcessorPool::State::Record(const Slot& slot, const rapidjson::Document& document,
                                  std::string_view job_class, std::string_view queue,
                                  std::string_view state, std::string_view ended,
                                  const JobError* error, double now, FinishedJob* done) const {
  RecordedEnd end{state, job_class, queue, ended, error, slot.started_at, now};
  AddFinalRecord(config.records, config.identity, *slot.report, document, end, done);
}

std::vector<DeadlineEvent> ProcessorPool::CheckDeadlines(
    std::chrono::steady_clock::time_point now) {
  std::vector<DeadlineEvent> events;
  std::lock_guard<std::mutex> lock(state_->mu);
  for (State::Slot& slot : state_->slots) {
    if (!slot.busy || !slot.deadline || slot.external || now < *slot.deadline) continue;
    DeadlineEvent event{DeadlineEvent::Kind::kTimedOut, slot.job.queue, {}, slot.timeout};
    if (!slot.timed_out_reported) {
      slot.timed_out_reported = true;
      slot.stop.request_stop();
    } else if (!slot.overrun_reported && now >= *slot.deadline + state_->config.kill_grace) {
      slot.overrun_reported = true;
      event.kind = DeadlineEvent::Kind::kOverrun;
    } else {
      continue;
    }
    event.payload = slot.job.payload;
    events.push_back(std::move(event));
  }
  return events;
}

std::vector<RunningJob> ProcessorPool::StopRunning(std::chrono::milliseconds wait) {
  // Under the lock: no slot takes or finishes a job meanwhile, so the list
  // is exactly the jobs whose outcomes will be dropped. Each request_stop
  // runs the stop callbacks (a command handler's SIGKILL to its process
  // group) before it returns: every SIGKILL goes out before any wait.
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->hard_stopped = true;
  state_->hard_stop.store(true, std::memory_order_release);
  std::vector<RunningJob> running = state_->RunningLocked();
  for (State::Slot& slot : state_->slots) {
    if (slot.busy) slot.stop.request_stop();
  }
  // Programs end within moments of their SIGKILL, and requests are aborted:
  // wait for their threads. Not for C++ handlers, which may never return.
  state_->slot_freed.wait_for(lock, wait, [this] {
    for (const State::Slot& slot : state_->slots) {
      if (slot.busy && slot.external) return false;
    }
    return true;
  });
  return running;
}

std::vector<RunningJob> ProcessorPool::Fence() {
  std::lock_guard<std::mutex> lock(state_->mu);
  std::vector<RunningJob> fenced;
  for (size_t i = 0; i < state_->slots.size(); ++i) {
    State::Slot& slot = state_->slots[i];
    if (!slot.busy || slot.fenced) continue;
    slot.fenced = true;
    // Under the lock, as CheckDeadlines does: the slot's thread replaces
    // its stop source only between jobs.
    slot.stop.request_stop();
    fenced.push_back(
        {static_cast<int>(i), slot.job.queue, slot.job.payload, slot.started_at, std::nullopt});
  }
  return fenced;
}

size_t ProcessorPool::TakeFencedEnded(std::vector<uint64_t>* limit_slots) {
  std::lock_guard<std::mutex> lock(state_->mu);
  for (uint64_t slot : state_->fenced_limit_slots) limit_slots->push_back(slot);
  state_->fenced_limit_slots.clear();
  return std::exchange(state_->fenced_ended, 0);
}

void ProcessorPool::SetLease(std::chrono::steady_clock::time_point until) {
  std::lock_guard<std::mutex> lock(state_->mu);
  bool extended = until > state_->lease;
  state_->lease = until;
  if (extended && !state_->ready.empty()) state_->work_available.notify_all();
}

void ProcessorPool::AddQueueName(std::string name) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->queue_names.push_back(std::move(name));
}

void ProcessorPool::Submit(std::vector<FetchedJob>* jobs) {
  if (jobs->empty()) return;
  std::lock_guard<std::mutex> lock(state_->mu);
  for (FetchedJob& job : *jobs) state_->ready.push_back(std::move(job));
  state_->WakeOneIfNeeded();
  jobs->clear();
}

std::vector<FetchedJob> ProcessorPool::TakeNotStarted() {
  std::lock_guard<std::mutex> lock(state_->mu);
  std::vector<FetchedJob> out(std::make_move_iterator(state_->ready.begin()),
                              std::make_move_iterator(state_->ready.end()));
  state_->ready.clear();
  return out;
}

bool ProcessorPool::ArmWake() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->wake_armed = true;
  return state_->finished.empty();
}

void ProcessorPool::TakeFinished(std::vector<FinishedJob>* out) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (out->empty()) {
    out->swap(state_->finished);
  } else {
    for (FinishedJob& job : state_->finished) out->push_back(std::move(job));
    state_->finished.clear();
  }
}

size_t ProcessorPool::held() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->ready.size() + state_->running;
}

uint64_t ProcessorPool::finished_total() const {
  return state_->finished_total.load(std::memory_order_relaxed);
}

size_t ProcessorPool::ready() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->ready.size();
}

size_t ProcessorPool::running() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->running;
}

std::vector<RunningJob> ProcessorPool::State::RunningLocked() const {
  std::vector<RunningJob> out;
  for (size_t i = 0; i < slots.size(); ++i) {
    const Slot& slot = slots[i];
    if (!slot.busy) continue;
    out.push_back({static_cast<int>(i), slot.job.queue, slot.job.payload, slot.started_at,
                   slot.report->progress()});
  }
  return out;
}

std::vector<RunningJob> ProcessorPool::Running() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->RunningLocked();
}

bool ProcessorPool::TakeProgressChanged() {
  return state_->progress_changed.exchange(false, std::memory_order_acq_rel);
}

void ProcessorPool::HeldPayloads(bool include_ready,
                                 std::vector<std::vector<std::string>>* per_queue) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  for (const State::Slot& slot : state_->slots) {
    if (slot.busy) (*per_queue)[slot.job.queue].push_back(slot.job.payload);
  }
  for (const FinishedJob& job : state_->finished) (*per_queue)[job.queue].push_back(job.payload);
  if (include_ready) {
    for (const FetchedJob& job : state_->ready) (*per_queue)[job.queue].push_back(job.payload);
  }
}

void ProcessorPool::Shutdown(std::chrono::milliseconds wait) {
  if (threads_.empty()) return;
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->stopping = true;
  state_->wake_enabled = false;
  state_->ready.clear();
  state_->work_available.notify_all();
  state_->thread_exited.wait_for(lock, wait, [this] { return state_->exited == threads_.size(); });
  bool all_exited = state_->exited == threads_.size();
  lock.unlock();
  for (std::thread& thread : threads_) {
    // A thread still in a handler cannot be stopped; it holds its own
    // reference to the state, so it may run on after the pool is gone.
    if (all_exited) {
      thread.join();
    } else {
      thread.detach();
    }
  }
  threads_.clear();
}

}  // namespace reliableq::server
