// How a worker is put together: the components ServerImpl owns, and the
// events of each wired to the calls of the others (server.cc runs them).

#include <unistd.h>

#include "codec/job_codec.h"      // NewJid
#include "protocol/process_entry.h"  // ProcessHostname
#include "server/options_check.h"
#include "server/redis_probe.h"
#include "server/server_impl.h"

namespace reliableq {
namespace server_detail {

ServerImpl::ServerImpl(const ServerOptions& options, HandlerRegistry registry,
                       std::shared_ptr<const ExternalHandlers> external)
    : options_(options),
      clock_(options.clock ? options.clock : SystemClock()),
      log_(std::make_shared<Logger>(options.log_level, options.log_sink, options.log_format)),
      keys_(Keys::For(options.prefix, options.redis)),
      hostname_(ProcessHostname()),
      identity_(hostname_ + ":" + std::to_string(getpid()) + ":" + NewJid().substr(0, 12)),
      queues_(options.queues, keys_, identity_) {
  ProcessorConfig config = ProcessorConfig::For(options, std::move(registry), std::move(external),
                                                queues_.names(), log_, clock_);
  metrics_ = config.metrics;
  pool_ = std::make_unique<ProcessorPool>(std::move(config), [this] { finished_->Send(); });
}

ServerImpl::~ServerImpl() {
  // A signal handler calling Stop now must not touch what is being closed.
  if (control_) control_->Shutdown();
  // No processor calls the wake-up after this; threads still in a handler
  // after a hard stop run on with the pool's shared state.
  pool_->Shutdown(milliseconds(0));
  if (loop_ && phase_ != Phase::kStopped) CloseAll();  // opened, never run
  // The members close their handles as they go; the loop, last, completes
  // the closes and checks that none is left open.
}

Status ServerImpl::Init() {
  // Server::Open checked the options. Fail fast, with where we tried, when
  // Redis is not there.
  Result<std::unique_ptr<redis::Connection>> probe = ProbeRedis(options_.redis, keys_, *log_);
  if (!probe.ok()) return probe.status();
  Result<std::unique_ptr<uv::EventLoop>> loop = uv::EventLoop::Create();
  if (!loop.ok()) return loop.status();
  loop_ = std::move(loop.value());
  uv::EventLoop& loop_ref = *loop_;
  const Logger& log = *log_;
  const Clock& clock = *clock_;
  const DeadSetLimits dead_limits = options_.dead_set;

  control_ = std::make_unique<Control>(
      loop_ref, options_.handle_signals, log,
      Control::Actions{[this] {
                         log_->Log(LogLevel::kInfo, "quiet",
                                   "quiet: no new jobs; jobs not started go back to their queues");
                         if (notifier_) notifier_->Status("quiet: no new jobs");
                         EnterQuiet();
                       },
                       [this] { OnStopRequest(); }, [this] { DumpState(); }});
  finished_ = std::make_unique<uv::Wakeup>(loop_ref, [this] { OnFinished(); });
  reconnect_timer_ = std::make_unique<uv::Timer>(loop_ref, [this] { ConnectCommand(); });
  stop_timer_ = std::make_unique<uv::Timer>(loop_ref, [this] { OnStopPoll(); });
  close_timer_ = std::make_unique<uv::Timer>(loop_ref, [this] { CloseAll(); });

  command_ = std::make_unique<redis::AsyncConnection>(loop_ref.get(), options_.redis);
  command_->set_client_name(keys_.ClientName(identity_));
  command_->SetOnDisconnect([this](const Status& s) { OnCommandLost(s); });

  ProcessDescription self{identity_,      hostname_,       static_cast<int64_t>(getpid()),
                          options_.tag,   options_.labels, options_.concurrency,
                          queues_.names()};
  heartbeat_ = std::make_unique<Heartbeat>(
      loop_ref, *command_, keys_, std::move(self), options_.heartbeat_ttl,
      options_.heartbeat_interval, clock, log,
      Heartbeat::Events{
          [this] { return Snapshot(); },
          [this](Heartbeat::Found r, const std::string& signal,
                 std::chrono::steady_clock::time_point lease) { OnBeat(r, signal, lease); }});
  queue_health_ = std::make_unique<QueueHealth>(queues_, clock, log);
  pauses_ = std::make_unique<QueuePauses>(
      *command_, keys_, queues_, log,
      QueuePauses::Events{[this](const std::vector<uint32_t>&) { OnPaused(); },
                          [this](const std::vector<uint32_t>& resumed) {
                            for (uint32_t q : resumed) idle_fetch_->Wake(q);
                            FetchMore();
                          }});
  // Before the first fetch, so that a paused queue is never asked for.
  if (Status s = pauses_->Load(*probe.value()); !s.ok()) {
    log_->Log(LogLevel::kWarn, LogEvent("paused_unreadable").WithError(s.ToString()),
              "%s; no queue is paused", s.ToString().c_str());
  }
  fetcher_ = std::make_unique<Fetcher>(
      loop_ref, *command_, queues_, *queue_health_, *pool_, options_.concurrency, clock, log,
      Fetcher::Events{[this](std::vector<FetchedJob> jobs, bool drained) {
                        OnFetched(std::move(jobs), drained);
                      },
                      [this](const Status&) { Reconcile(false); }, [this] { FetchMore(); }});
  idle_fetch_ = std::make_unique<IdleFetch>(
      loop_ref, options_.redis, keys_.ClientName(identity_), keys_, queues_, *queue_health_,
      *command_, *fetcher_,
      IdleFetch::Intervals{options_.idle_poll_interval, options_.heartbeat_interval}, log,
      IdleFetch::Hooks{[this] { return MayFetch(); }, [this] { FetchMore(); },
                       [this](std::string_view name) { AddQueue(name); },
                       [this](std::string_view score) { poller_->NudgeScore(score); },
                       // Its id goes into the registry, so that the janitor
                       // sees the process alive while any of its
                       // connections is.
                       [this] { heartbeat_->Beat(); },
                       [this](std::string_view message) { pauses_->OnMessage(message); }});
  outcomes_ =
      std::make_unique<Outcomes>(loop_ref, *command_, queues_, *pool_, dead_limits,
                                 keys_, clock, log,
                                 [this] { OnFinished(); });
  if (!options_.limits.empty()) {
    limit_gate_ = std::make_unique<LimitGate>(
        *command_, queues_, keys_, identity_, options_.limits, clock, log,
        [this](std::vector<FetchedJob>* jobs) { return AdmitLimited(jobs); });
    outcomes_->set_on_slot_freed([this](uint64_t slot) { limit_gate_->Release(slot); });
    fetcher_->set_extra_held([this] { return limit_gate_->pending(); });
  }
  unique_starts_ = std::make_unique<UniqueStarts>(*command_, keys_.Unique(""), log);
  reconciler_ = std::make_unique<Reconciler>(
      Reconciler::Parts{*command_, queues_, *pool_, *outcomes_, *fetcher_, clock, log,
                        options_.max_interruptions, dead_limits,
                        limit_gate_ ? std::function<void(PayloadsByQueue*)>(
                                          [this](PayloadsByQueue* keep) {
                                            limit_gate_->AddPending(keep);
                                          })
                                    : nullptr},
      [this] {
        if (phase_ != Phase::kRunning) return;
        FetchMore();
      });
  hand_back_ = std::make_unique<HandBack>(loop_ref, *command_, queues_, *reconciler_, *outcomes_,
                                          keys_, identity_, clock, log, [this](const Status& s) {
                                            if (!s.ok() && fatal_.ok()) fatal_ = s;
                                            RequestClose();
                                          });
  poller_ = std::make_unique<Poller>(loop_ref, *command_, options_.scheduled_poll_interval,
                                     dead_limits, keys_, clock, log);
  if (!options_.periodic_jobs.empty()) {
    periodic_ = std::make_unique<PeriodicScheduler>(loop_ref, *command_, keys_, identity_,
                                                    options_.periodic_jobs, clock, log);
  }
  janitor_ = std::make_unique<Janitor>(loop_ref, options_.redis, std::move(probe.value()), keys_,
                                       identity_, options_.max_interruptions, dead_limits,
                                       options_.janitor_interval, clock, log);
  deadline_watch_ =
      std::make_unique<DeadlineWatch>(loop_ref, *pool_, options_.on_overrun, clock, log);
  if (auto discovery = redis::Discovery::For(options_.redis); discovery && discovery->sentinel()) {
    // Every connection drops within a watchdog tick (the epoch moved) and
    // reconnects at once, not after the backoff the dead master built up.
    sentinel_watch_ = std::make_unique<SentinelWatch>(loop_ref, std::move(discovery), log, [this] {
      reconnect_delay_ = kReconnectMin;
      if (reconnect_timer_->active()) reconnect_timer_->Start(kReconnectMin);
      idle_fetch_->MasterMoved();
    });
  }

  if (metrics_) {
    fetcher_->set_metrics(metrics_.get());
    outcomes_->set_metrics(metrics_.get());
    janitor_->set_metrics(metrics_.get());
    deadline_watch_->set_metrics(metrics_.get());
    if (periodic_) periodic_->set_metrics(metrics_.get());
    if (limit_gate_) limit_gate_->set_metrics(metrics_.get());
    auto endpoint =
        MetricsEndpoint::Start(options_.http_address, loop_ref, metrics_,
                               {*pool_, *command_, [this] { return outcomes_->Unconfirmed(); }},
                               options_.heartbeat_ttl, log);
    if (!endpoint.ok()) return endpoint.status();
    endpoint_ = std::move(endpoint.value());
  }
  notifier_ = ServiceNotifier::FromEnvironment(loop_ref, log);
  // The threads start now, so that a process that cannot make them (a
  // thread limit) fails to open instead of fetching jobs nobody runs.
  return pool_->Start();
}

}  // namespace server_detail

using server_detail::ServerImpl;

Result<std::unique_ptr<Server>> Server::Open(const ServerOptions& options,
                                             HandlerRegistry registry) {
  if (Status s = CheckServerOptions(options); !s.ok()) return s;
  // A program that is not there or a bad URL fails Open before it connects.
  auto external =
      ExternalHandlers::Open(options, registry, options.clock ? options.clock : SystemClock());
  if (!external.ok()) return external.status();
  auto server = std::make_unique<ServerImpl>(options, std::move(registry), std::move(*external));
  Status s = server->Init();
  if (!s.ok()) return s;
  return std::unique_ptr<Server>(std::move(server));
}

}  // namespace reliableq
