// LimitGate: the worker's side of limits (reliableq/limits.h). Between the
// fetch and the processors: a fetched job of a limited class starts only
// after limit_acquire.lua gave it a slot; otherwise the script parked it in
// Redis (the limiter's waiting list, or schedule for a full rate window)
// and the worker takes other work. Slots are given back with
// limit_release.lua when a job's outcome is taken or the job leaves the
// process unrun. A worker without limits has no gate: its fetched jobs go
// to the processors unparsed.
//
// Invariants it keeps:
// - a job waiting for its acquire reply is in this process's working list
//   and counted as held (AddPending), so that a reconcile keeps it;
// - a slot whose acquire reply was lost is given back (the release is
//   idempotent), so no slot of a live process leaks; the slots of a dead
//   one are the janitor's (limit_reap.lua, limit_reaper.h);
// - a job whose acquire Redis refused (an error reply: nothing written)
//   stays held and is tried again on the next beat, rather than lying in
//   the working list unheld until some reconcile.
//
// Thread safety: loop thread only.

#ifndef RELIABLEQ_SERVER_LIMIT_GATE_H_
#define RELIABLEQ_SERVER_LIMIT_GATE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "protocol/keys.h"
#include "base/log.h"
#include "metrics/worker_metrics.h"
#include "redis/async_connection.h"
#include "reliableq/clock.h"
#include "reliableq/limits.h"
#include "protocol/script_calls.h"
#include "server/queue_set.h"
#include "server/worker_jobs.h"

namespace reliableq::server {

// Which limiter a job falls under. Pure.
class LimitPlan {
 public:
  explicit LimitPlan(const std::vector<Limit>& limits);

  // The index in `limits` of the limiter of the job in `payload`, fetched
  // from queue `queue`; nullopt when its class is not limited. A payload
  // whose class is limited but whose top-level "queue" is not exactly
  // `queue`, written plainly ("queue":"<queue>", as the scripts that park
  // and unpark it read it), is not limited either (*mismatch set): a parked
  // job goes back to the queue its payload names. Nor is a job that has
  // expired at `now` (epoch seconds): the processor discards it unrun, so
  // it must not take a slot or a start of the rate window.
  std::optional<size_t> Find(std::string_view payload, std::string_view queue, double now,
                             bool* mismatch) const;

 private:
  std::map<std::string, size_t, std::less<>> by_class_;
};

class LimitGate {
 public:
  // Jobs that took a slot, to start. False: they must not start now (quiet
  // or stop began); the gate gives their slots back, and the caller's
  // reconcile returns them.
  using Admit = std::function<bool(std::vector<FetchedJob>* jobs)>;

  LimitGate(redis::AsyncConnection& command, const QueueSet& queues, const protocol::Keys& keys,
            std::string identity, std::vector<Limit> limits, const Clock& clock, const base::Logger& log,
            Admit admit, metrics::WorkerMetrics* metrics);

  // Leaves in `jobs` those of unlimited classes, to start now; sends the
  // others to limit_acquire.lua.
  void Filter(std::vector<FetchedJob>* jobs);
  // Gives back slot `slot` (0: none; one not held: nothing).
  void Release(uint64_t slot);
  // Gives back every slot held (the stop's hand-back).
  void ReleaseAll();
  // Sends the releases still owed (a lost connection, a refused release).
  void Flush();
  // Sends again the acquires Redis refused with an error reply (nothing
  // written: the job is still in the working list). Called on each beat
  // while running, so a broken limiter key costs one try per beat, not a
  // loop of fetches.
  void RetryRefused();
  // Stops holding the jobs whose acquire was refused (quiet, stop, a lost
  // heartbeat): the reconcile that follows returns them to their queues.
  void DropRefused();
  // Writes the definitions to the `limits` hash (at start; the janitor
  // reads the concurrency there, `reliableq limits` all of it).
  void Declare();

  // Per queue, the payloads waiting for an acquire reply.
  void AddPending(PayloadsByQueue* per_queue) const;
  size_t pending() const { return pending_; }

 private:
  struct Held {
    size_t limit;
    std::string holder;
  };
  void Acquire(size_t limit, FetchedJob job);
  // `read`: limit_acquire.lua's reply, or why there is none.
  void OnAcquired(size_t limit, uint64_t slot, FetchedJob job, Result<protocol::LimitAcquireReply> read);
  void SendRelease(size_t limit, std::vector<std::string> holders);
  protocol::LimitTerms Terms(size_t limit) const;

  redis::AsyncConnection& command_;
  const QueueSet& queues_;
  const protocol::Keys& keys_;
  const std::string identity_;
  const std::vector<Limit> limits_;
  const LimitPlan plan_;
  const Clock& clock_;
  const base::Logger& log_;
  Admit admit_;
  metrics::WorkerMetrics* const metrics_;  // null: none

  uint64_t next_slot_ = 1;
  std::unordered_map<uint64_t, Held> held_;
  // Jobs whose acquire is on its way, by slot number.
  std::map<uint64_t, FetchedJob> waiting_reply_;
  // Jobs whose acquire Redis refused, by limiter, to try again.
  std::vector<std::pair<size_t, FetchedJob>> refused_;
  // waiting_reply_ and refused_: in the working list, held by the gate.
  size_t pending_ = 0;
  // Releases not confirmed, by limiter.
  std::vector<std::vector<std::string>> owed_;
  bool mismatch_logged_ = false;
  bool release_error_logged_ = false;
  bool acquire_refused_logged_ = false;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_LIMIT_GATE_H_
