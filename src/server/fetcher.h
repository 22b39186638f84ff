// Fetcher: takes jobs from the queues into this process's working lists in
// batches, one fetch.lua call at a time on the command connection, asking
// for as many as the processors have room for (Prefetch).
//
// Invariant it keeps: at most one fetch is on its way, so `in_flight()`
// tells exactly whether a reply may still bring jobs (the reconciler waits
// for it). After Redis answers a fetch with an error, fetching pauses,
// doubling from 0.1 s to 2 s, until one succeeds: the same fetch would fail
// again at once. (A lost connection has the reconnect's own back-off.)
//
// Thread safety: loop thread only.

#ifndef RELIABLEQ_SERVER_FETCHER_H_
#define RELIABLEQ_SERVER_FETCHER_H_

#include <chrono>
#include <functional>
#include <random>
#include <vector>

#include "base/log.h"
#include "metrics/worker_metrics.h"
#include "protocol/script_calls.h"
#include "redis/async_connection.h"
#include "reliableq/clock.h"
#include "server/prefetch.h"
#include "server/processor_pool.h"
#include "server/queue_health.h"
#include "server/queue_set.h"
#include "uv/handles.h"

namespace reliableq::server {

class Fetcher {
 public:
  struct Events {
    // The jobs a fetch moved, oldest first, and whether the queues ran dry
    // (fewer than asked for). Called with an empty list too.
    std::function<void(std::vector<FetchedJob> jobs, bool drained)> on_jobs;
    // A fetch failed; its reply, had it come, may have carried jobs.
    std::function<void(const Status& why)> on_failed;
    // The pause after a refused fetch is over.
    std::function<void()> on_pause_over;
  };

  // Every fetch tells `health` which queues it could and could not use.
  // The parts a worker may go without.
  struct Optional {
    // Observes each fetch's round trip there (null: none).
    metrics::WorkerMetrics* metrics = nullptr;
    // Jobs held outside the pool (waiting for a limiter's reply), counted
    // by the prefetch as held (null: none).
    std::function<size_t()> extra_held;
  };

  Fetcher(uv::EventLoop& loop, redis::AsyncConnection& command, const QueueSet& queues,
          QueueHealth& health, const ProcessorPool& pool, int concurrency, const Clock& clock,
          const base::Logger& log, Events events, Optional optional);

  // Sends a fetch for what there is room for, unless one is on its way, the
  // connection is down, the pause after a refusal runs, or nothing fits;
  // true when it was sent. `only`, when given, limits it to those queues
  // (still in fetch order): the ones a wake-up named while the worker was
  // idle.
  bool Fetch(const std::vector<uint32_t>* only);
  // Ends the pause after a refusal without fetching (the server is closing).
  void Stop() { pause_timer_.Stop(); }

  bool in_flight() const { return in_flight_; }
  // How many jobs a fetch would ask for now.
  size_t Wanted() const {
    return prefetch_.Wanted(pool_.held() + (extra_held_ ? extra_held_() : 0));
  }
  const Prefetch& prefetch() const { return prefetch_; }

 private:
  void OnReply(const Status& status, protocol::FetchReply fetched, const std::vector<uint32_t>& order,
               size_t wanted);

  redis::AsyncConnection& command_;
  const QueueSet& queues_;
  QueueHealth& health_;
  const std::function<size_t()> extra_held_;
  metrics::WorkerMetrics* const metrics_;
  const ProcessorPool& pool_;
  const Clock& clock_;
  const base::Logger& log_;
  Events events_;
  Prefetch prefetch_;
  std::mt19937_64 random_;
  uv::Timer pause_timer_;
  std::chrono::milliseconds pause_{0};  // 0 while fetches succeed
  bool in_flight_ = false;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_FETCHER_H_
