// Reconciler: brings this process's working lists back in line with what it
// holds. Whenever the process may have jobs in its working lists that it
// does not know of (a lost fetch reply, a lost heartbeat, quiet),
// a reconcile is owed: every job in its working lists that it is not
// running, holding or waiting to have acknowledged goes back to its queue
// (requeue.lua, mode "keep"). The hand-back at stop uses the same requeue.
//
// It owns the two ordering rules that make this safe, and keeps them in one
// place (Run):
// - no requeue while a fetch reply may still arrive: a job in such a reply
//   would be handed back and run here as well (it waits for the fetch; the
//   fetcher is the only part that moves jobs into the working lists);
// - acks before the requeue, on the same connection: a finished job must be
//   acknowledged before the requeue could take it for a stray; and
//   connections of ours that broke are killed first, so nothing they still
//   had queued in Redis runs after it.
//
// Thread safety: loop thread only.

#ifndef RELIABLEQ_SERVER_RECONCILER_H_
#define RELIABLEQ_SERVER_RECONCILER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/log.h"
#include "redis/async_connection.h"
#include "reliableq/dead_set.h"
#include "reliableq/clock.h"
#include "protocol/script_calls.h"
#include "server/fetcher.h"
#include "server/outcomes.h"
#include "server/processor_pool.h"
#include "server/queue_set.h"

namespace reliableq::server {

class Reconciler {
 public:
  struct Parts {
    redis::AsyncConnection& command;
    const QueueSet& queues;
    ProcessorPool& pool;
    Outcomes& outcomes;
    const Fetcher& fetcher;
    const Clock& clock;
    const base::Logger& log;
    int max_interruptions;
    DeadSetLimits dead_limits;
    // Adds the jobs held outside the pool and outcomes (the limit gate's
    // jobs waiting for a slot); empty: none.
    std::function<void(PayloadsByQueue*)> add_held = {};
  };

  // `on_done` runs after each reconcile Redis confirmed.
  Reconciler(Parts parts, std::function<void()> on_done);

  // A reconcile is owed; sent as soon as it may be (Run).
  void Request();
  // Sends the owed reconcile if nothing can still bring a job and the
  // connection is up; otherwise it stays owed (the caller calls again when
  // a reply is in or the connection is back).
  void Run();
  // No reconcile is sent any more (the stop's hand-back takes over).
  void Close() { closed_ = true; }

  // While true, nothing may be fetched: a reconcile is owed or on its way.
  bool blocks_fetching() const { return owed_ || running_ > 0; }

  // A connection of ours broke; it is killed before the next requeue when
  // the command connection is on a server of the same `run` again. On
  // another run (a restart, a failover) the id names someone else's
  // connection now, maybe another worker's, which a kill would make look
  // dead to the janitors; and the broken connection died with its run.
  // Where the run is unknown (INFO refused), it is not killed either.
  void AddStaleClient(int64_t id, std::string run) {
    stale_clients_.push_back({id, std::move(run)});
  }
  // Sends CLIENT KILL for every stale connection, on the command connection.
  void FenceStaleClients();

  // One requeue.lua per queue with the payloads listed for it; `done` runs
  // once, with the first error or OK.
  void Requeue(protocol::RequeueMode mode, PayloadsByQueue listed,
               std::function<void(const Status&)> done);

 private:
  Parts parts_;
  std::function<void()> on_done_;
  bool closed_ = false;
  bool owed_ = false;
  int running_ = 0;
  struct StaleClient {
    int64_t id;
    std::string run;
  };
  std::vector<StaleClient> stale_clients_;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_RECONCILER_H_
