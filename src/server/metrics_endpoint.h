// MetricsEndpoint: the worker's HTTP endpoint (ServerOptions::http_address),
// on an HttpListener with one thread of its own:
//   GET /metrics  the worker's metrics (worker_metrics.h), text format 0.0.4
//   GET /healthz  200 "ok" while the event loop turns and Redis answers,
//                 else 503 with a one-line reason
// The loop is "turning" while a timer on it (every 250 ms) has stamped an
// atomic within the last 2 s; Redis "answers" while the command connection
// had a reply without error within the heartbeat ttl (the heartbeat alone
// brings one every heartbeat_interval): a worker that cannot beat for that
// long is taken for dead by the others anyway.
//
// Handlers run on the listener's thread and read only atomics, the pool
// (under its own lock) and the metrics (thread-safe); what only the loop
// may read (outcomes not confirmed) the timer copies into an atomic.
//
// Thread safety: Start and Close on the loop thread (Start before Run);
// destroy it before what `sources` names.

#ifndef RELIABLEQ_SERVER_METRICS_ENDPOINT_H_
#define RELIABLEQ_SERVER_METRICS_ENDPOINT_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "http/listener.h"
#include "base/log.h"
#include "metrics/worker_metrics.h"
#include "redis/async_connection.h"
#include "server/processor_pool.h"
#include "uv/handles.h"

namespace reliableq::server {

// What the health line says, given how long ago the loop last turned and
// Redis last answered. Empty when healthy. Pure, for tests.
std::string HealthProblem(std::chrono::duration<double> since_turn,
                          std::chrono::duration<double> since_reply,
                          std::chrono::milliseconds heartbeat_ttl);

class MetricsEndpoint {
 public:
  struct Sources {
    const ProcessorPool& pool;
    const redis::AsyncConnection& command;
    // Outcomes Redis has not confirmed; called on the loop thread only.
    std::function<size_t()> pending;
  };

  // Binds `address` ("PORT", "HOST:PORT" or "[V6]:PORT") and serves.
  // kInvalidArgument for an address that does not parse, kIoError naming
  // it when it cannot be bound (a port in use).
  static Result<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& address, uv::EventLoop& loop, std::shared_ptr<metrics::WorkerMetrics> metrics,
      Sources sources, std::chrono::milliseconds heartbeat_ttl, const base::Logger& log);

  // Stops the loop's timer (the loop can then end); the listener keeps
  // serving, and /healthz reports the loop as stopped, until destroyed.
  void Close() { tick_.Close(); }
  ~MetricsEndpoint();

  int port() const { return listener_->port(); }

 private:
  MetricsEndpoint(uv::EventLoop& loop, std::shared_ptr<metrics::WorkerMetrics> metrics, Sources sources,
                  std::chrono::milliseconds heartbeat_ttl);
  void OnTick();
  std::string Health() const;
  std::string Scrape() const;

  const std::shared_ptr<metrics::WorkerMetrics> metrics_;
  const Sources sources_;
  const std::chrono::milliseconds heartbeat_ttl_;
  // Steady-clock ticks; written by the loop's timer.
  std::atomic<std::chrono::steady_clock::rep> last_turn_{0};
  std::atomic<size_t> pending_{0};
  // Until the first reply: when the endpoint started (Open had just
  // talked to Redis).
  const std::chrono::steady_clock::time_point started_;
  uv::Timer tick_;
  // Last: stopped and joined first, while what its handlers read exists.
  std::unique_ptr<http::HttpListener> listener_;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_METRICS_ENDPOINT_H_
