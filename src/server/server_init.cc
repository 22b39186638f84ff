// How a worker is put together: the components ServerImpl owns, and the
// events of each wired to the calls of the others (server.cc runs them).

#include <unistd.h>

#include "codec/jid.h"
#include "protocol/process_entry.h"  // ProcessHostname
#include "server/options_check.h"
#include "server/redis_probe.h"
#include "server/server_impl.h"

namespace reliableq::server {

ServerImpl::ServerImpl(const ServerOptions& options, HandlerRegistry registry,
                       std::shared_ptr<const ExternalHandlers> external)
    : options_(options),
      clock_(options.clock ? options.clock : SystemClock()),
      log_(std::make_shared<base::Logger>(options.log_level, options.log_sink, options.log_format)),
      keys_(protocol::Keys::For(options.prefix, options.redis)),
      hostname_(protocol::ProcessHostname()),
      identity_(hostname_ + ":" + std::to_string(getpid()) + ":" + codec::NewJid().substr(0, 12)),
      queues_(options.queues, keys_, identity_),
      pool_config_(ProcessorConfig::For(options, std::move(registry), std::move(external),
                                        queues_.names(), log_, clock_)),
      metrics_(pool_config_.metrics) {
  pool_config_.identity = identity_;
}

ServerImpl::~ServerImpl() {
  // A signal handler calling Stop now must not touch what is being closed.
  if (control_) control_->Shutdown();
  // No processor calls the wake-up after this; threads still in a handler
  // after a hard stop run on with the pool's shared state.
  if (pool_) pool_->Shutdown(milliseconds(0));
  if (loop_ && phase_ != Phase::kStopped) CloseAll();  // opened, never run
  // The members close their handles as they go; the loop, last, completes
  // the closes and checks that none is left open.
}

// Every part is built after the parts it is given or its callbacks call,
// and gets what it may go without (metrics, limits) here, never later: no
// callback reaches a part built after it. A part's events that concern
// another part built later go to a method of this shell (OnResumed,
// OnQuietRequest, FetchMore...), which runs only on the loop, once Run()
// has started, when every part exists. Signals are watched last, once
// there is everything their actions reach.
Status ServerImpl::Init() {
  // Server::Open checked the options. Fail fast, with where we tried, when
  // Redis is not there.
  Result<std::unique_ptr<redis::Connection>> probe = ProbeRedis(options_.redis, keys_, *log_);
  if (!probe.ok()) return probe.status();
  Result<std::unique_ptr<uv::EventLoop>> loop = uv::EventLoop::Create();
  if (!loop.ok()) return loop.status();
  loop_ = std::move(loop.value());
  uv::EventLoop& loop_ref = *loop_;
  const base::Logger& log = *log_;
  const Clock& clock = *clock_;
  const DeadSetLimits dead_limits = options_.dead_set;
  metrics::WorkerMetrics* const metrics = metrics_.get();

  // The loop's own handles, each calling the shell.
  finished_ = std::make_unique<uv::Wakeup>(loop_ref, [this] { OnFinished(); });
  reconnect_timer_ = std::make_unique<uv::Timer>(loop_ref, [this] { ConnectCommand(); });
  stop_timer_ = std::make_unique<uv::Timer>(loop_ref, [this] { OnStopPoll(); });
  progress_timer_ = std::make_unique<uv::Timer>(loop_ref, [this] {
    // Taken only when a beat can go out, so that a report made while the
    // connection is away is shown by the first beat after it.
    if (command_->ready() && pool_->TakeProgressChanged()) heartbeat_->Beat();
  });
  close_timer_ = std::make_unique<uv::Timer>(loop_ref, [this] { CloseAll(); });
  // Processors hand finished jobs to the loop through finished_.
  pool_ = std::make_unique<ProcessorPool>(std::move(pool_config_), [this] { finished_->Send(); });

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
                          [this](const std::vector<uint32_t>& resumed) { OnResumed(resumed); }});
  // Before the first fetch, so that a paused queue is never asked for.
  if (Status s = pauses_->Load(*probe.value()); !s.ok()) {
    log_->Log(LogLevel::kWarn, base::LogEvent("paused_unreadable").WithError(s.ToString()),
              "%s; no queue is paused", s.ToString().c_str());
  }
  if (!options_.limits.empty()) {
    limit_gate_ = std::make_unique<LimitGate>(
        *command_, queues_, keys_, identity_, options_.limits, clock, log,
        [this](std::vector<FetchedJob>* jobs) { return AdmitLimited(jobs); }, metrics);
  }
  LimitGate* const limit_gate = limit_gate_.get();
  fetcher_ = std::make_unique<Fetcher>(
      loop_ref, *command_, queues_, *queue_health_, *pool_, options_.concurrency, clock, log,
      Fetcher::Events{[this](std::vector<FetchedJob> jobs, bool drained) {
                        OnFetched(std::move(jobs), drained);
                      },
                      [this](const Status&) { Reconcile(false); }, [this] { FetchMore(); }},
      Fetcher::Optional{metrics, limit_gate ? std::function<size_t()>([limit_gate] {
                                                return limit_gate->pending();
                                              })
                                            : nullptr});
  outcomes_ = std::make_unique<Outcomes>(
      loop_ref, *command_, queues_, *pool_, dead_limits, keys_, clock, log,
      [this] { OnFinished(); },
      Outcomes::Optional{metrics, limit_gate ? std::function<void(uint64_t)>(
                                                   [limit_gate](uint64_t slot) {
                                                     limit_gate->Release(slot);
                                                   })
                                             : nullptr});
  poller_ = std::make_unique<Poller>(loop_ref, *command_, options_.scheduled_poll_interval,
                                     dead_limits, keys_, clock, log);
  idle_fetch_ = std::make_unique<IdleFetch>(
      loop_ref, options_.redis, keys_.ClientName(identity_), keys_, queues_, *queue_health_,
      *command_, *fetcher_,
      IdleFetch::Intervals{options_.idle_poll_interval, options_.heartbeat_interval}, log,
      IdleFetch::Hooks{[this] { return MayFetch(); }, [this] { FetchMore(); },
                       [this](std::string_view name) { AddQueue(name); },
                       [poller = poller_.get()](std::string_view score) {
                         poller->NudgeScore(score);
                       },
                       // Its id goes into the registry, so that the janitor
                       // sees the process alive while any of its
                       // connections is.
                       [heartbeat = heartbeat_.get()] { heartbeat->Beat(); },
                       [pauses = pauses_.get()](std::string_view message) {
                         pauses->OnMessage(message);
                       }});
  unique_starts_ = std::make_unique<UniqueStarts>(*command_, keys_.Unique(""), log);
  reconciler_ = std::make_unique<Reconciler>(
      Reconciler::Parts{*command_, queues_, *pool_, *outcomes_, *fetcher_, clock, log,
                        options_.max_interruptions, dead_limits,
                        limit_gate ? std::function<void(PayloadsByQueue*)>(
                                         [limit_gate](PayloadsByQueue* keep) {
                                           limit_gate->AddPending(keep);
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
  if (!options_.periodic_jobs.empty()) {
    periodic_ = std::make_unique<PeriodicScheduler>(loop_ref, *command_, keys_, identity_,
                                                    options_.periodic_jobs, clock, log, metrics);
  }
  janitor_ = std::make_unique<Janitor>(loop_ref, options_.redis, std::move(probe.value()), keys_,
                                       identity_, options_.max_interruptions, dead_limits,
                                       options_.janitor_interval, clock, log, metrics);
  deadline_watch_ =
      std::make_unique<DeadlineWatch>(loop_ref, *pool_, options_.on_overrun, clock, log, metrics);
  fence_ = std::make_unique<SelfFence>(loop_ref, *pool_, options_.heartbeat_ttl, clock, log);
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
    auto endpoint = MetricsEndpoint::Start(
        options_.http_address, loop_ref, metrics_,
        {*pool_, *command_, [outcomes = outcomes_.get()] { return outcomes->Unconfirmed(); }},
        options_.heartbeat_ttl, log);
    if (!endpoint.ok()) return endpoint.status();
    endpoint_ = std::move(endpoint.value());
  }
  notifier_ = ServiceNotifier::FromEnvironment(loop_ref, log);
  control_ = std::make_unique<Control>(
      loop_ref, options_.handle_signals, log,
      Control::Actions{[this] { OnQuietRequest(); }, [this] { OnStopRequest(); },
                       [this] { DumpState(); }});
  // The threads start now, so that a process that cannot make them (a
  // thread limit) fails to open instead of fetching jobs nobody runs.
  return pool_->Start();
}

}  // namespace reliableq::server

// The public Server: opened here, its implementation in reliableq::server.
namespace reliableq {

Server::~Server() = default;

Result<std::unique_ptr<Server>> Server::Open(const ServerOptions& options,
                                             HandlerRegistry registry) {
  using server::CheckServerOptions;
  using server::ExternalHandlers;
  using server::ServerImpl;
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
