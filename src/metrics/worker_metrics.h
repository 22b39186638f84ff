// WorkerMetrics: the recorder the worker's components report to, on
// prometheus-cpp metric types; the names, labels and meanings are listed in
// reliableq(1), METRICS. A server without an HTTP address has none (the
// components hold a null pointer and skip every call), so it pays nothing.
//
// The per-job path runs on processor threads, each with a Tally of its own
// that gathers the jobs it finishes and adds them to the shared series in
// one go: with 25 threads draining no-op jobs, an increment and two
// histogram locks per job, on series every thread shares, cost a tenth of
// the drain rate. A series is resolved once: a (class, queue) pair is
// looked up in a table indexed by the class's place among the registered
// classes and the queue's index, filled on first use under a mutex and read
// lock-free after that, so the common case neither allocates nor locks.
// Class and queue labels are bounded (label_bounder.h): an unregistered
// class is counted under "other", a queue of a namespace under the
// namespace's spec ("card:*").
//
// Thread safety: every method may be called from any thread; a Tally
// belongs to one thread.

#ifndef RELIABLEQ_METRICS_WORKER_METRICS_H_
#define RELIABLEQ_METRICS_WORKER_METRICS_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/label_bounder.h"
#include "metrics/process_collector.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace reliableq::metrics {

// How a job ended, as the worker counts it.
enum class JobResult : uint8_t {
  kSucceeded,
  kRetried,    // failed, to the retry set
  kDead,       // failed, to the dead set (also a payload that is not a job)
  kDiscarded,  // failed, dropped (`retry` false, or the class said discard)
  kSnoozed,    // not yet: to the scheduled set (not a failure)
};

class WorkerMetrics {
 public:
  // The most queue indexes with series of their own; a higher index (never
  // given by a server, which serves at most kMaxQueues) counts as "other".
  static constexpr size_t kQueueSlots = 1000;

  // `classes`: the registered job classes (the class label's values);
  // `queues`: the worker's queue specs (the queue label's values).
  WorkerMetrics(std::vector<std::string> classes, std::vector<std::string> queues,
                int concurrency);
  ~WorkerMetrics();
  WorkerMetrics(const WorkerMetrics&) = delete;
  WorkerMetrics& operator=(const WorkerMetrics&) = delete;

  struct Cell;
  struct Row;

  // One processor thread's jobs, not yet in the shared series. They go
  // there when a job's class or queue differs from the previous one's,
  // after kBatch jobs, kLatest seconds after the first one gathered, and at
  // Flush (the thread calls it before it waits for work, so an idle
  // worker's figures are exact).
  class Tally {
   public:
    static constexpr size_t kBatch = 256;
    static constexpr double kLatest = 0.1;

    // `metrics` null: every call does nothing.
    explicit Tally(WorkerMetrics* metrics);
    ~Tally() { Flush(); }
    Tally(const Tally&) = delete;
    Tally& operator=(const Tally&) = delete;

    // A job of `job_class` from queue index `queue` (named `queue_name`)
    // finished with `result` at `now` (epoch seconds) after `duration`
    // seconds; `pickup` seconds passed from its enqueued_at to its start
    // (negative: unknown, not observed).
    void Add(std::string_view job_class, uint32_t queue, std::string_view queue_name,
             JobResult result, double duration, double pickup, double now);
    bool pending() const { return jobs_ > 0; }
    void Flush();

   private:
    WorkerMetrics* metrics_;
    size_t class_index_ = 0;
    uint32_t queue_ = 0;
    Row* row_ = nullptr;  // queue_'s
    size_t pickups_ = 0;
    size_t jobs_ = 0;
    double first_at_ = 0;
    uint64_t counts_[5] = {0, 0, 0, 0, 0};  // by JobResult
    std::vector<double> duration_buckets_;
    double duration_sum_ = 0;
    std::vector<double> pickup_buckets_;
    double pickup_sum_ = 0;
  };

  // Tally::Add and Flush for one job (tests, and callers with few jobs).
  void JobFinished(std::string_view job_class, uint32_t queue, std::string_view queue_name,
                   JobResult result, double duration, double pickup);
  void FetchRoundTrip(double seconds);
  void AckRoundTrip(double seconds);
  // A janitor pass this process ran: jobs it put back in their queues, and
  // jobs it sent to the dead set for max_interruptions.
  void JanitorPass(int64_t recovered, int64_t poison_pills);
  // A finished job's record that Redis refused (its job was acknowledged).
  void RecordLost();

  // A job of `job_class` was still running at its timeout. Any thread.
  void JobTimedOut(std::string_view job_class);
  // A job of `job_class` was discarded unrun, expired. Any thread.
  void JobExpired(std::string_view job_class);

  // The periodic job `name` was pushed by this worker (one tick). Loop
  // thread; names are bounded by the worker's declarations.
  void PeriodicPushed(std::string_view name);

  // A job was parked by limit `limit` (a worker's own --limit names, so
  // the label is bounded) for `reason`: "concurrency" or "rate".
  void JobParked(std::string_view limit, std::string_view reason);

  // Values read at scrape time (metrics_endpoint.cc).
  void SetBusy(double threads);
  void SetOutcomesPending(double outcomes);
  // The running totals of a connection's errors and reconnects; counted by
  // what they grew since the last call.
  void SyncRedisTotals(uint64_t errors, uint64_t reconnects);

  // Every metric, in the text exposition format 0.0.4.
  std::string Serialize() const;

 private:
  Row* RowFor(uint32_t queue, std::string_view queue_name);
  Cell* CellFor(Row* row, size_t class_index);

  const LabelBounder classes_;
  const LabelBounder queues_;
  std::shared_ptr<prometheus::Registry> registry_;
  ProcessCollector process_;

  prometheus::Family<prometheus::Counter>* processed_;
  prometheus::Family<prometheus::Counter>* failed_;
  prometheus::Family<prometheus::Counter>* retried_;
  prometheus::Family<prometheus::Counter>* dead_;
  prometheus::Family<prometheus::Counter>* discarded_;
  prometheus::Family<prometheus::Counter>* snoozed_;
  prometheus::Family<prometheus::Counter>* periodic_pushed_;
  prometheus::Family<prometheus::Histogram>* pickup_;
  // By class index; made up front (a handful of series).
  std::vector<prometheus::Histogram*> duration_;
  std::vector<prometheus::Counter*> timed_out_;
  std::vector<prometheus::Counter*> expired_;
  prometheus::Family<prometheus::Counter>* parked_;
  prometheus::Histogram* fetch_round_trip_;
  prometheus::Histogram* ack_round_trip_;
  prometheus::Gauge* busy_;
  prometheus::Gauge* outcomes_pending_;
  prometheus::Counter* redis_errors_;
  prometheus::Counter* redis_reconnects_;
  prometheus::Counter* janitor_passes_;
  prometheus::Counter* janitor_recovered_;
  prometheus::Counter* janitor_poison_;
  prometheus::Counter* records_lost_;

  // Filled on first use; the slot past kQueueSlots is "other".
  std::unique_ptr<std::atomic<Row*>[]> rows_;
  std::mutex mu_;                 // guards the growth of rows and cells
  std::deque<Row> row_store_;     // guarded by mu_
  std::deque<Cell> cell_store_;   // guarded by mu_
  mutable std::mutex sync_mu_;    // guards the totals below
  uint64_t errors_seen_ = 0;
  uint64_t reconnects_seen_ = 0;
};

}  // namespace reliableq::metrics

#endif  // RELIABLEQ_METRICS_WORKER_METRICS_H_
