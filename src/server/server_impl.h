// ServerImpl: the worker behind Server (see server.cc for its phases and
// server_init.cc for how its components are wired). Private to the
// server; loop thread except where a member says otherwise.

#ifndef RELIABLEQ_SERVER_SERVER_IMPL_H_
#define RELIABLEQ_SERVER_SERVER_IMPL_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "protocol/keys.h"
#include "redis/async_connection.h"
#include "reliableq/server.h"
#include "server/control.h"
#include "server/deadline_watch.h"
#include "server/external_handlers.h"
#include "server/fetcher.h"
#include "server/hand_back.h"
#include "server/heartbeat.h"
#include "server/idle_fetch.h"
#include "server/janitor.h"
#include "server/limit_gate.h"
#include "server/metrics_endpoint.h"
#include "server/outcomes.h"
#include "server/periodic_scheduler.h"
#include "server/poller.h"
#include "server/processor_pool.h"
#include "server/queue_health.h"
#include "server/queue_pauses.h"
#include "server/queue_set.h"
#include "server/reconciler.h"
#include "server/self_fence.h"
#include "server/sentinel_watch.h"
#include "server/service_notifier.h"
#include "server/state_dump.h"
#include "server/unique_starts.h"
#include "uv/event_loop.h"
#include "uv/handles.h"

namespace reliableq::server {

using std::chrono::milliseconds;

// Reconnect back-off bounds.
constexpr milliseconds kReconnectMin{100};
constexpr milliseconds kReconnectMax{2000};
// How often the stop sequence looks whether running jobs have finished.
constexpr milliseconds kStopPoll{20};
// How long a hard stop waits for killed command handlers to end.
constexpr milliseconds kStopWait{1000};
// How often the loop looks whether a running job reported progress.
constexpr milliseconds kProgressLook{1000};

class ServerImpl final : public Server {
 public:
  ServerImpl(const ServerOptions& options, HandlerRegistry registry,
             std::shared_ptr<const ExternalHandlers> external);
  ~ServerImpl() override;

  Status Init();
  Status Run() override;
  // Safe from a signal handler: an atomic and uv_async_send.
  void Quiet() override { control_->RequestQuiet(); }
  void Stop() override { control_->RequestStop(); }
  const std::string& identity() const override { return identity_; }

 private:
  enum class Phase { kStarting, kRunning, kQuiet, kStopping, kFinishing, kStopped };

  // Control's actions (a signal, Quiet(), Stop(), a state dump).
  void OnQuietRequest();
  void OnStopRequest();
  void DumpState();

  void ConnectCommand();
  void OnCommandLost(const Status& status);
  void ScheduleReconnect();

  BeatSnapshot Snapshot() const;
  void OnBeat(Heartbeat::Found result, const std::string& signal,
              std::chrono::steady_clock::time_point lease_until);

  bool MayFetch() const;
  void FetchMore();
  void OnFetched(std::vector<FetchedJob> jobs, bool drained);
  // Hands fetched jobs to the processors. False when the caller must not go
  // on fetching: quiet or stop began, or a reconcile is owed.
  bool Accept(std::vector<FetchedJob>* jobs);
  // Jobs that got a limiter slot: started, unless quiet or stop began.
  bool AdmitLimited(std::vector<FetchedJob>* jobs);
  // Queues were paused: their jobs fetched and not started go back to the
  // head of their queues (the reconcile's requeue), rather than starting
  // after the pause took effect.
  void OnPaused();
  // Queues were resumed: each is looked at now, not at the next idle poll.
  void OnResumed(const std::vector<uint32_t>& resumed);
  // Takes out of `jobs` those of paused queues, giving back their limiter
  // slots; true when there were any: the caller requests the reconcile that
  // hands them back, after submitting the others.
  bool SetAsidePaused(std::vector<FetchedJob>* jobs);
  // Namespaces: the queues of `queues` they match join the set (the next
  // confirmed beat publishes them before any fetch may use them).
  void DiscoverQueues();
  void AddQueue(std::string_view name);
  void OnFinished();
  void Reconcile(bool drop_ready);

  void EnterQuiet();
  void BeginStop();
  void OnStopPoll();
  void FinishStop(bool hard);
  // Closes on the next loop turn: never from inside a hiredis callback,
  // where the connection objects must outlive the call.
  void RequestClose();
  void CloseAll();

  const ServerOptions options_;
  const std::shared_ptr<const Clock> clock_;
  const std::shared_ptr<const base::Logger> log_;
  const protocol::Keys keys_;
  const std::string hostname_;
  const std::string identity_;
  QueueSet queues_;
  // The processors' configuration, until Init builds the pool with it.
  ProcessorConfig pool_config_;
  std::shared_ptr<metrics::WorkerMetrics> metrics_;  // null without http_address

  // In the order Init builds them (each after what it uses), so destroyed
  // each before what it uses. Declared first, destroyed last: every handle
  // below closes into the loop.
  std::unique_ptr<uv::EventLoop> loop_;
  std::unique_ptr<uv::Wakeup> finished_;
  std::unique_ptr<uv::Timer> reconnect_timer_;
  std::unique_ptr<uv::Timer> stop_timer_;
  // Once a second: a beat when a running job reported progress since the
  // last look, so that progress shows within about a second and costs at
  // most one beat a second however often handlers report it.
  std::unique_ptr<uv::Timer> progress_timer_;
  std::unique_ptr<uv::Timer> close_timer_;
  std::unique_ptr<ProcessorPool> pool_;
  std::unique_ptr<redis::AsyncConnection> command_;
  std::unique_ptr<Heartbeat> heartbeat_;
  std::unique_ptr<QueueHealth> queue_health_;
  std::unique_ptr<QueuePauses> pauses_;
  std::unique_ptr<LimitGate> limit_gate_;  // null without limits
  std::unique_ptr<Fetcher> fetcher_;
  std::unique_ptr<Outcomes> outcomes_;
  std::unique_ptr<Poller> poller_;
  std::unique_ptr<IdleFetch> idle_fetch_;
  std::unique_ptr<UniqueStarts> unique_starts_;
  std::unique_ptr<Reconciler> reconciler_;
  std::unique_ptr<HandBack> hand_back_;
  std::unique_ptr<PeriodicScheduler> periodic_;  // null without periodic jobs
  std::unique_ptr<Janitor> janitor_;
  std::unique_ptr<DeadlineWatch> deadline_watch_;
  std::unique_ptr<SelfFence> fence_;
  std::unique_ptr<SentinelWatch> sentinel_watch_;  // null without Sentinel
  std::unique_ptr<MetricsEndpoint> endpoint_;      // null without http_address
  std::unique_ptr<ServiceNotifier> notifier_;      // null unless NOTIFY_SOCKET is set
  std::unique_ptr<Control> control_;

  int stop_seen_ = 0;
  Phase phase_ = Phase::kStarting;
  milliseconds reconnect_delay_ = kReconnectMin;
  bool queue_limit_logged_ = false;
  std::chrono::steady_clock::time_point stop_deadline_;
  bool hard_stop_ = false;
  // The first fatal error, returned by Run.
  Status fatal_;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_SERVER_IMPL_H_
