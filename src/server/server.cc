// The server shell: opens a worker, runs its loop, and moves it through its
// phases (starting, running, quiet, stopping, finishing, stopped). It owns
// the event loop, the command connection and the components, and wires the
// events of each component to the calls of the others; the components
// never call one another except where a header says so (the reconciler and
// the hand-back use the fetcher and outcomes they coordinate, and the idle
// fetch the fetcher it drives).
//
// Everything that talks to Redis runs on the loop thread; handlers run on
// the ProcessorPool's threads. Protocol and keys: man/reliableq-schema.7.
//
// The command connection carries the fetches, acks, fails, beats and
// requeues in the order they must take effect; ordering on this one
// connection is what makes "ack before hand-back" and "register before
// fetch" hold. No job ever exists only in this process's memory: whenever
// the process is unsure what Redis holds (a lost reply, a lost heartbeat,
// quiet, stop) it reconciles from Redis.

#include <algorithm>

#include "server/options_check.h"  // kMaxQueues
#include "server/server_impl.h"
#include "base/text_escape.h"
#include "redis/reply.h"

namespace reliableq::server {

// ---------------------------------------------------------------------------
// Control

void ServerImpl::OnQuietRequest() {
  log_->Log(LogLevel::kInfo, "quiet", "quiet: no new jobs; jobs not started go back to their queues");
  if (notifier_) notifier_->Status("quiet: no new jobs");
  EnterQuiet();
}

void ServerImpl::OnStopRequest() {
  if (phase_ == Phase::kStopped) return;
  if (++stop_seen_ == 1) {
    log_->Log(LogLevel::kInfo, "stopping", "stopping: waiting up to %.1f s for %zu running jobs",
              static_cast<double>(options_.shutdown_timeout.count()) / 1000.0, pool_->running());
    if (notifier_) notifier_->Stopping("stopping: waiting for running jobs");
    BeginStop();
  } else if (phase_ == Phase::kStopping) {
    log_->Log(LogLevel::kWarn, "stop_forced", "second stop request: handing running jobs back now");
    FinishStop(true);
  }
}

void ServerImpl::DumpState() {
  static constexpr const char* kPhaseNames[] = {"starting", "running",   "quiet",
                                                "stopping", "finishing", "stopped"};
  WorkerState state;
  state.identity = identity_;
  state.phase = kPhaseNames[static_cast<int>(phase_)];
  state.concurrency = options_.concurrency;
  state.running = pool_->Running();
  state.ready = pool_->ready();
  state.unacknowledged = outcomes_->Unconfirmed();
  state.connected = command_->ready();
  state.now = clock_->Now();
  LogWorkerState(*log_, state, queues_);
}

// ---------------------------------------------------------------------------
// The command connection

void ServerImpl::ConnectCommand() {
  command_->Connect([this](const Status& s) {
    if (phase_ == Phase::kStopped) return;
    if (!s.ok()) {
      log_->Log(LogLevel::kWarn, base::LogEvent("redis_unreachable").WithError(s.ToString()),
                "Redis unreachable: %s; retrying", s.ToString().c_str());
      ScheduleReconnect();
      return;
    }
    if (reconnect_delay_ != kReconnectMin) {
      log_->Log(LogLevel::kInfo, "reconnected", "reconnected to Redis at %s",
                options_.redis.Describe().c_str());
    }
    reconnect_delay_ = kReconnectMin;
    idle_fetch_->CommandConnected();
    // Register (or confirm registration) before anything is fetched: a
    // working list must always belong to a registered process.
    heartbeat_->Beat();
  });
}

void ServerImpl::OnCommandLost(const Status& status) {
  log_->Log(LogLevel::kWarn, base::LogEvent("redis_connection_lost").WithError(status.ToString()),
            "lost the Redis connection: %s", status.ToString().c_str());
  heartbeat_->OnConnectionLost();
  // With every connection of ours gone, a janitor may take this process for
  // dead at once (recovery.h): start no fetched job until a beat on the new
  // connection confirms that it was not.
  pool_->SetLease(clock_->Monotonic());
  // A fetch reply may have been lost with jobs in it: they sit in our
  // working lists unseen until we reconcile.
  if (command_->last_client_id() != 0) {
    reconciler_->AddStaleClient(command_->last_client_id(), command_->last_run_id());
  }
  Reconcile(false);
  if (phase_ != Phase::kStopped) ScheduleReconnect();
}

void ServerImpl::ScheduleReconnect() {
  reconnect_timer_->Start(reconnect_delay_);
  reconnect_delay_ = std::min(reconnect_delay_ * 2, kReconnectMax);
}

// ---------------------------------------------------------------------------
// Heartbeat

BeatSnapshot ServerImpl::Snapshot() const {
  BeatSnapshot snapshot;
  // The beat goes out on the command connection, so its run is the run of
  // the server that will store the entry. The wake-up connection's id is
  // published only when it was given out by that run too: right after a
  // restart it may not have noticed yet, and its id of the old run may name
  // another client now (reliableq-schema(7), DEAD PROCESSES).
  const std::string& run = command_->run_id();
  if (command_->client_id() != 0) snapshot.clients.push_back(command_->client_id());
  if (idle_fetch_->client_id() != 0 && !run.empty() && idle_fetch_->run_id() == run) {
    snapshot.clients.push_back(idle_fetch_->client_id());
  }
  if (!snapshot.clients.empty()) snapshot.clients_run = run;
  snapshot.running = pool_->Running();
  if (!queues_.namespaces().empty()) snapshot.queues = queues_.names();
  snapshot.quiet = phase_ != Phase::kStarting && phase_ != Phase::kRunning;
  return snapshot;
}

void ServerImpl::OnBeat(Heartbeat::Found result, const std::string& signal,
                        std::chrono::steady_clock::time_point lease_until) {
  if (phase_ == Phase::kStopped) return;
  if (result == Heartbeat::Found::kFirst) {
    log_->Log(LogLevel::kInfo, "started",
              "started %s: concurrency %d, queues %zu, heartbeat ttl %.1f s", identity_.c_str(),
              options_.concurrency, queues_.size(),
              static_cast<double>(options_.heartbeat_ttl.count()) / 1000.0);
    janitor_->Start();
    if (limit_gate_) limit_gate_->Declare();
    if (notifier_) notifier_->Ready("running " + identity_);
    if (phase_ == Phase::kStarting) {
      phase_ = Phase::kRunning;
      poller_->Start();
      if (periodic_) periodic_->Start();
    }
    // Jobs left in our (brand new) working lists cannot exist, but a
    // reconcile costs one round trip and makes start-up uniform.
    Reconcile(false);
  } else if (result == Heartbeat::Found::kDeclaredDead) {
    log_->Log(LogLevel::kWarn, "heartbeat_key_lost",
              "heartbeat key was gone: this process was taken for dead and its jobs may have "
              "been recovered by a janitor; re-registered, dropping jobs not yet started");
    Reconcile(true);
  } else {
    reconciler_->Run();
  }
  // Extended only now, after the jobs a lost heartbeat invalidated were
  // dropped above.
  pool_->SetLease(lease_until);
  fence_->Extend(lease_until);
  if (!queues_.namespaces().empty() && heartbeat_->published_queues() > queues_.published()) {
    // The registry names their working lists now: they may be fetched
    // from, and may already hold jobs.
    size_t before = queues_.published();
    queues_.Publish(heartbeat_->published_queues());
    for (size_t q = before; q < queues_.published(); ++q) {
      idle_fetch_->Wake(static_cast<uint32_t>(q));
    }
    FetchMore();
  }
  outcomes_->FlushCounts();
  pauses_->Refresh();
  if (limit_gate_) limit_gate_->Flush();
  if (limit_gate_ && phase_ == Phase::kRunning) limit_gate_->RetryRefused();
  if (!signal.empty()) control_->Handle(signal);
  // A broken queue is left out of the idle poll: while the worker is idle,
  // a fetch per beat finds out when it works again.
  if (idle_fetch_->idle() && queue_health_->any_broken()) FetchMore();
  idle_fetch_->OnBeat();
  DiscoverQueues();
}

// ---------------------------------------------------------------------------
// Fetch

bool ServerImpl::MayFetch() const {
  return phase_ == Phase::kRunning && heartbeat_->registered() &&
         !reconciler_->blocks_fetching();
}

void ServerImpl::FetchMore() {
  if (!MayFetch()) return;
  if (fetcher_->Fetch(nullptr)) idle_fetch_->FetchedAll();
}

void ServerImpl::OnFetched(std::vector<FetchedJob> jobs, bool drained) {
  if (!Accept(&jobs)) return;
  idle_fetch_->OnFetched(drained);
  if (!drained) FetchMore();
}

bool ServerImpl::Accept(std::vector<FetchedJob>* jobs) {
  if (phase_ != Phase::kRunning) {
    // Quiet or stop began while the reply was on its way: these jobs go
    // back with the reconcile (they are in our working lists meanwhile).
    Reconcile(false);
    return false;
  }
  // A queue paused while the fetch was on its way.
  bool set_aside = SetAsidePaused(jobs);
  // Jobs of limited classes wait for a slot (AdmitLimited).
  if (limit_gate_) limit_gate_->Filter(jobs);
  // About to start: the same jobs may be pushed again now (a job a limit
  // parks keeps its key until it gets a slot).
  unique_starts_->OnFetched(*jobs);
  pool_->Submit(jobs);
  // After the submit, so that the reconcile keeps the jobs just submitted.
  if (set_aside) reconciler_->Request();
  if (reconciler_->blocks_fetching()) {
    // Submitted first, so the owed reconcile keeps them.
    reconciler_->Run();
    return false;
  }
  return true;
}

bool ServerImpl::AdmitLimited(std::vector<FetchedJob>* jobs) {
  if (phase_ != Phase::kRunning) {
    // Kept by no reconcile now: they go back to their queues.
    Reconcile(false);
    return false;
  }
  // A queue paused while they waited for their slot.
  bool set_aside = SetAsidePaused(jobs);
  unique_starts_->OnFetched(*jobs);
  pool_->Submit(jobs);
  if (set_aside) reconciler_->Request();
  return true;
}

// ---------------------------------------------------------------------------
// Pauses

void ServerImpl::OnPaused() {
  // Quiet and stop have dropped every job not started; a starting worker
  // holds none.
  if (phase_ != Phase::kRunning) return;
  std::vector<FetchedJob> ready = pool_->TakeNotStarted();
  bool set_aside = SetAsidePaused(&ready);
  pool_->Submit(&ready);  // the others, in their order
  if (set_aside) reconciler_->Request();
}

void ServerImpl::OnResumed(const std::vector<uint32_t>& resumed) {
  for (uint32_t queue : resumed) idle_fetch_->Wake(queue);
  FetchMore();
}

bool ServerImpl::SetAsidePaused(std::vector<FetchedJob>* jobs) {
  auto first_paused = std::stable_partition(jobs->begin(), jobs->end(), [this](const FetchedJob& job) {
    return !queues_.paused(job.queue);
  });
  if (first_paused == jobs->end()) return false;
  for (auto job = first_paused; job != jobs->end(); ++job) {
    if (limit_gate_) limit_gate_->Release(job->limit_slot);
  }
  size_t count = static_cast<size_t>(jobs->end() - first_paused);
  jobs->erase(first_paused, jobs->end());
  log_->Log(LogLevel::kInfo, "paused_returned",
            "%zu fetched jobs of paused queues not started: back to the head of their queues",
            count);
  return true;
}

void ServerImpl::DiscoverQueues() {
  if (queues_.namespaces().empty() || !command_->ready()) return;
  command_->Command({"SMEMBERS", keys_.Queues()}, [this](const Status& s, redis::ReplyRef reply) {
    if (!s.ok()) return;
    Result<std::vector<std::string>> names = redis::ToStrings(reply);
    if (!names.ok()) return;
    for (const std::string& name : *names) AddQueue(name);
  });
}

void ServerImpl::AddQueue(std::string_view name) {
  if (phase_ != Phase::kRunning || !queues_.Matches(name) || !CheckQueueName(name).ok()) {
    return;
  }
  if (queues_.size() >= kMaxQueues) {
    if (!queue_limit_logged_) {
      queue_limit_logged_ = true;
      log_->Log(LogLevel::kWarn, base::LogEvent("queue_limit_reached").WithQueue(name),
                "a namespace matches more queues than the %zu a worker serves; queue %s and "
                "later ones are left out", kMaxQueues, base::Escaped(name).c_str());
    }
    return;
  }
  queues_.Add(name);
  pool_->AddQueueName(std::string(name));
  log_->Log(LogLevel::kInfo, base::LogEvent("queue_joined").WithQueue(name),
            "queue %s joins namespace work", base::Escaped(name).c_str());
  heartbeat_->Beat();
  idle_fetch_->QueuesChanged();
}

// ---------------------------------------------------------------------------
// Completions and reconciliation

void ServerImpl::OnFinished() {
  if (phase_ == Phase::kStopped) return;
  outcomes_->Collect();
  idle_fetch_->OnFinished();
  // Jobs the fence stopped are still in our working lists: if no janitor
  // took them, the reconcile gives them back to their queues.
  std::vector<uint64_t> limit_slots;
  if (pool_->TakeFencedEnded(&limit_slots) > 0) {
    if (limit_gate_) {
      for (uint64_t slot : limit_slots) limit_gate_->Release(slot);
    }
    Reconcile(false);
  }
}

void ServerImpl::Reconcile(bool drop_ready) {
  if (phase_ == Phase::kFinishing || phase_ == Phase::kStopped) return;
  if (drop_ready || phase_ != Phase::kRunning) {
    // Even while disconnected: these must not start. They are in our
    // working lists, and the reconcile (or the janitor) hands them back.
    std::vector<FetchedJob> dropped = pool_->TakeNotStarted();
    if (limit_gate_) {
      for (const FetchedJob& job : dropped) limit_gate_->Release(job.limit_slot);
      limit_gate_->DropRefused();
    }
    if (!dropped.empty()) {
      log_->Log(LogLevel::kInfo, "fetched_returned",
                "%zu fetched jobs not started: back to their queues", dropped.size());
    }
  }
  reconciler_->Request();
}

// ---------------------------------------------------------------------------
// Quiet and stop

void ServerImpl::EnterQuiet() {
  if (phase_ == Phase::kStarting || phase_ == Phase::kRunning) {
    phase_ = Phase::kQuiet;
  } else if (phase_ != Phase::kQuiet) {
    return;
  }
  poller_->Stop();
  if (periodic_) periodic_->Stop();
  idle_fetch_->Leave();
  Reconcile(true);
  heartbeat_->Beat();  // tell the Web UI at once
}

void ServerImpl::BeginStop() {
  if (phase_ == Phase::kStopping || phase_ == Phase::kFinishing || phase_ == Phase::kStopped) {
    return;
  }
  EnterQuiet();
  phase_ = Phase::kStopping;
  stop_deadline_ = clock_->Monotonic() + options_.shutdown_timeout;
  stop_timer_->Start(milliseconds(0), kStopPoll);
}

void ServerImpl::OnStopPoll() {
  if (phase_ != Phase::kStopping) return;
  if (pool_->held() == 0) {
    FinishStop(false);
  } else if (clock_->Monotonic() >= stop_deadline_) {
    log_->Log(LogLevel::kWarn, "shutdown_timeout",
              "shutdown timeout: %zu jobs still running go back to their queues", pool_->running());
    FinishStop(true);
  }
}

void ServerImpl::FinishStop(bool hard) {
  if (phase_ == Phase::kFinishing || phase_ == Phase::kStopped) return;
  if (phase_ != Phase::kStopping) EnterQuiet();
  phase_ = Phase::kFinishing;
  hard_stop_ = hard;
  stop_timer_->Stop();
  progress_timer_->Stop();
  janitor_->Stop();
  poller_->Stop();
  // A beat landing after forget.lua would register the stopped process
  // again; the hand-back's requeue replaces the reconcile.
  heartbeat_->Stop();
  reconciler_->Close();
  idle_fetch_->Stop();
  PayloadsByQueue running(queues_.size());
  if (hard) {
    // The running jobs, listed as the pool stops posting outcomes, so that
    // each one is either acked (finished before) or handed back, never
    // both; command handlers' process groups are killed first, so that
    // none runs on beside the job's next copy.
    for (const RunningJob& job : pool_->StopRunning(kStopWait)) {
      running[job.queue].push_back(job.payload);
    }
  }
  outcomes_->TakeFinished();
  // Threads still in a C++ handler cannot be stopped; their jobs go back.
  if (hard) pool_->Shutdown(milliseconds(0));
  // Before the hand-back: no job of ours runs or starts any more.
  if (limit_gate_) limit_gate_->ReleaseAll();
  hand_back_->Start(hard, std::move(running));
}

void ServerImpl::RequestClose() {
  phase_ = Phase::kStopped;
  close_timer_->Start(milliseconds(0));
}

void ServerImpl::CloseAll() {
  phase_ = Phase::kStopped;
  pool_->Shutdown(milliseconds(hard_stop_ ? 0 : 1000));
  // Nothing below calls back into this object any more; handles that stay
  // (the control wake-up, unreferenced) close with the server.
  outcomes_->Close();
  reconciler_->Close();
  heartbeat_->Stop();
  poller_->Stop();
  if (periodic_) periodic_->Stop();
  janitor_->Stop();
  deadline_watch_->Stop();
  fence_->Close();
  fetcher_->Stop();
  command_->Close();
  idle_fetch_->Stop();
  if (sentinel_watch_) sentinel_watch_->Close();
  finished_->Close();
  reconnect_timer_->Close();
  stop_timer_->Close();
  progress_timer_->Close();
  close_timer_->Close();
  if (endpoint_) endpoint_->Close();
  notifier_.reset();  // its watchdog timer would keep the loop running
  // Built last: absent when Init failed before (the metrics endpoint could
  // not listen).
  if (control_) control_->CloseSignals();
}

Status ServerImpl::Run() {
  if (!loop_) return Status::Shutdown("server was not opened");
  base::SetLogThreadName("loop");
  heartbeat_->Start();
  progress_timer_->Start(kProgressLook, kProgressLook);
  deadline_watch_->Start();
  ConnectCommand();
  idle_fetch_->Start();
  if (sentinel_watch_) sentinel_watch_->Start();
  // Quiet/Stop may have been asked before Run.
  control_->TakeRequests();
  loop_->Run();
  return fatal_;
}

}  // namespace reliableq::server
