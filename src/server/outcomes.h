// Outcomes: the end of each run, sent to Redis. A plain success is one LREM
// of its exact payload from its working list (pipelined with the stats
// counters); the successes of jobs whose payloads carry a feature marker (a
// unique key, a sequence key) are one ack.lua call per queue and round, and
// every other outcome is one finish.lua call: each moves the job and ends
// its features in one step (reliableq-schema(7), "The end of a job's
// life").
//
// Invariants it keeps:
// - an outcome is held (unsent, or carried by a round on its way) until
//   Redis confirms it; one Redis did not confirm is sent again, after a
//   pause when Redis refused it, so a finished job never runs again because
//   its ack was lost, and AddUnconfirmed lets a requeue keep such jobs;
// - one round at a time: outcomes that finish while a round is on its way
//   gather for the next, so a busy worker acks dozens of jobs per round
//   trip and the processors do not wake the loop for each;
// - each job is counted in stat:processed once: a count Redis refuses (out
//   of memory refuses INCRBY while LREM still runs) is added to the next
//   round's, and an outcome sent again after its reply was lost is counted
//   only if this time it still moved the job (finish.lua's count flag "2",
//   the LREM's count for an ack).
//
// Thread safety: loop thread only.

#ifndef RELIABLEQ_SERVER_OUTCOMES_H_
#define RELIABLEQ_SERVER_OUTCOMES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "base/log.h"
#include "metrics/worker_metrics.h"
#include "redis/async_connection.h"
#include "reliableq/dead_set.h"
#include "reliableq/clock.h"
#include "server/processor_pool.h"
#include "server/queue_set.h"
#include "uv/handles.h"

namespace reliableq::server {

class Outcomes {
 public:
  // `on_round_over` runs when a round was confirmed whole and no other is
  // on its way, or when the pause after a refusal is over: the caller then
  // collects again (Collect). A retry or snooze that becomes the earliest
  // of its set is announced on keys.WakeScheduled(), so that the pollers
  // wake at its time. `keys` name every key an outcome touches.
  // The parts a worker may go without.
  struct Optional {
    // Observes each ack round's round trip there (null: none).
    metrics::WorkerMetrics* metrics = nullptr;
    // Called with the limiter slot (FinishedJob::limit_slot) of each job
    // whose outcome is sent for the first time, after it is sent (null:
    // the worker has no limits).
    std::function<void(uint64_t)> on_slot_freed;
  };

  Outcomes(uv::EventLoop& loop, redis::AsyncConnection& command, const QueueSet& queues,
           ProcessorPool& pool, DeadSetLimits dead_limits, const protocol::Keys& keys, const Clock& clock,
           const base::Logger& log, std::function<void()> on_round_over, Optional optional);

  // Takes what the processors finished and sends it, unless a round is on
  // its way; arms the processors' wake-up when nothing is left to take.
  void Collect();
  // Takes what the processors finished, without sending it.
  void TakeFinished() { pool_.TakeFinished(&unsent_); }
  // Sends every outcome not sent yet as one round (if connected).
  void Send();
  // Sends the counts still owed (jobs acknowledged while Redis refused
  // INCRBY, or whose count was settled late) when no round is out; the
  // shell calls it on each beat, so an idle worker does not keep them.
  void FlushCounts();
  // No callback runs any more (the server is closing).
  void Close() {
    closed_ = true;
    retry_timer_.Stop();
  }

  bool in_flight() const { return !carried_.empty(); }
  // Appends, per queue, the payloads whose outcome Redis has not confirmed:
  // a requeue must keep them, since an ack refused after it would leave
  // them to run again.
  void AddUnconfirmed(PayloadsByQueue* per_queue) const;
  size_t Unconfirmed() const;

 private:
  using Settle = std::function<void(const Status& why, const std::vector<size_t>& refused)>;
  // Sends one round carrying `jobs` with `issue`, which calls the Settle it
  // is given once, with why and the indexes of the outcomes not confirmed.
  bool SendRound(std::vector<FinishedJob> jobs, const std::function<Status(Settle)>& issue);
  void SendAcks(std::vector<FinishedJob> acked, double now);
  // The successes of feature-marked jobs of one queue: one ack.lua call.
  void SendFeatureAcks(std::vector<FinishedJob> jobs);
  void SendFinish(FinishedJob job, double now);

  redis::AsyncConnection& command_;
  const QueueSet& queues_;
  ProcessorPool& pool_;
  const DeadSetLimits dead_limits_;
  const protocol::Keys keys_;
  const std::string wake_channel_;
  const Clock& clock_;
  const base::Logger& log_;
  std::function<void()> on_round_over_;
  metrics::WorkerMetrics* const metrics_;
  const std::function<void(uint64_t)> on_slot_freed_;
  uv::Timer retry_timer_;
  bool closed_ = false;

  // Outcomes taken from the pool and not yet sent.
  std::vector<FinishedJob> unsent_;
  // The outcomes each round on its way carries, one entry per pipeline or
  // script.
  std::vector<std::shared_ptr<std::vector<FinishedJob>>> carried_;
  // Acknowledged jobs not counted yet; added to the next ack's.
  int64_t uncounted_processed_ = 0;
  // Why Redis last refused outcomes (empty while it confirms them), and the
  // pause before they are sent again.
  std::string refusal_;
  std::chrono::milliseconds retry_pause_{200};
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_OUTCOMES_H_
