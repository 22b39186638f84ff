#include "server/metrics_endpoint.h"


#include <algorithm>
#include <cstdio>

namespace reliableq::server {

namespace {

using Steady = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kTick{250};
// A loop that has not run its 250 ms timer for this long is stuck (a
// callback that blocks) or gone.
constexpr std::chrono::duration<double> kLoopStale{2.0};
// A scrape and a health probe may come at once; neither waits for the
// other, since connections are not kept alive (HttpListener::Start).
constexpr int kThreads = 2;

}  // namespace

std::string HealthProblem(std::chrono::duration<double> since_turn,
                          std::chrono::duration<double> since_reply,
                          std::chrono::milliseconds heartbeat_ttl) {
  char line[160];
  if (since_turn > kLoopStale) {
    std::snprintf(line, sizeof line, "event loop: no turn for %.1f s", since_turn.count());
    return line;
  }
  std::chrono::duration<double> ttl = heartbeat_ttl;
  if (since_reply > ttl) {
    std::snprintf(line, sizeof line, "redis: no reply for %.1f s (heartbeat ttl %g s)",
                  since_reply.count(), ttl.count());
    return line;
  }
  return {};
}

MetricsEndpoint::MetricsEndpoint(uv::EventLoop& loop, std::shared_ptr<metrics::WorkerMetrics> metrics,
                                 Sources sources, std::chrono::milliseconds heartbeat_ttl)
    : metrics_(std::move(metrics)),
      sources_(std::move(sources)),
      heartbeat_ttl_(heartbeat_ttl),
      started_(Steady::now()),
      tick_(loop, [this] { OnTick(); }) {}

MetricsEndpoint::~MetricsEndpoint() {
  // The listener first: no handler may run while the rest goes.
  listener_.reset();
}

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& address, uv::EventLoop& loop, std::shared_ptr<metrics::WorkerMetrics> metrics,
    Sources sources, std::chrono::milliseconds heartbeat_ttl, const base::Logger& log) {
  Result<http::HttpAddress> where = http::HttpAddress::Parse(address);
  if (!where.ok()) return where.status();
  std::unique_ptr<MetricsEndpoint> endpoint(
      new MetricsEndpoint(loop, std::move(metrics), std::move(sources), heartbeat_ttl));
  MetricsEndpoint* self = endpoint.get();
  http::HttpRoutes routes;
  routes.Get("/metrics", [self](const http::HttpRequest&, http::HttpResponse& response) {
    response.SetContent(self->Scrape(), "text/plain; version=0.0.4; charset=utf-8");
  });
  routes.Get("/healthz", [self](const http::HttpRequest&, http::HttpResponse& response) {
    std::string problem = self->Health();
    response.status = problem.empty() ? 200 : 503;
    response.SetContent(problem.empty() ? "ok\n" : problem + "\n", "text/plain; charset=utf-8");
  });
  auto listener = http::HttpListener::Start(*where, kThreads, std::move(routes), /*keep_alive=*/false);
  if (!listener.ok()) return listener.status();
  endpoint->listener_ = std::move(listener.value());
  endpoint->OnTick();
  endpoint->tick_.Start(kTick, kTick);
  log.Log(LogLevel::kInfo, "metrics_listening", "metrics on http://%s/metrics, health on /healthz",
          endpoint->listener_->address().c_str());
  return endpoint;
}

void MetricsEndpoint::OnTick() {
  last_turn_.store(Steady::now().time_since_epoch().count(), std::memory_order_relaxed);
  pending_.store(sources_.pending(), std::memory_order_relaxed);
}

std::string MetricsEndpoint::Health() const {
  Steady::time_point now = Steady::now();
  Steady::time_point turn{Steady::duration(last_turn_.load(std::memory_order_relaxed))};
  Steady::time_point reply = std::max(sources_.command.last_good_reply(), started_);
  return HealthProblem(now - turn, now - reply, heartbeat_ttl_);
}

std::string MetricsEndpoint::Scrape() const {
  metrics_->SetBusy(static_cast<double>(sources_.pool.running()));
  metrics_->SetOutcomesPending(static_cast<double>(pending_.load(std::memory_order_relaxed)));
  metrics_->SyncRedisTotals(sources_.command.errors(), sources_.command.reconnects());
  return metrics_->Serialize();
}

}  // namespace reliableq::server
