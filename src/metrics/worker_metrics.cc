#include "metrics/worker_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <sstream>

namespace reliableq::metrics {

namespace {

// Job durations: from a no-op job to a long batch job.
const prometheus::Histogram::BucketBoundaries kDurationBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1,      2.5,   5,      10,    30,   60,    300,  900, 3600};
// Time in the queue: from an idle worker's few milliseconds to a backlog of
// hours.
const prometheus::Histogram::BucketBoundaries kPickupBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
    2.5,   5,      10,    30,   60,    300,  900, 3600, 21600, 86400};
// Redis round trips: tens of microseconds on loopback, milliseconds across
// a network, seconds when something is wrong.
const prometheus::Histogram::BucketBoundaries kRoundTripBuckets = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};

// The bucket a value falls in, as Histogram::Observe finds it: the first
// bound at or above it, or the last (+Inf) one. A linear scan: most values
// (short jobs, round trips) fall in the first few buckets.
size_t BucketOf(const prometheus::Histogram::BucketBoundaries& bounds, double value) {
  size_t i = 0;
  while (i < bounds.size() && bounds[i] < value) ++i;
  return i;
}

}  // namespace

struct WorkerMetrics::Cell {
  prometheus::Counter* processed;
  prometheus::Counter* failed;
  prometheus::Counter* retried;
  prometheus::Counter* dead;
  prometheus::Counter* discarded;
  prometheus::Counter* snoozed;
};

struct WorkerMetrics::Row {
  std::string queue;
  prometheus::Histogram* pickup = nullptr;
  std::unique_ptr<std::atomic<Cell*>[]> cells;  // by class index
};

WorkerMetrics::WorkerMetrics(std::vector<std::string> classes, std::vector<std::string> queues,
                             int concurrency)
    : classes_(std::move(classes)),
      queues_(LabelBounder::ForQueues(std::move(queues))),
      registry_(std::make_shared<prometheus::Registry>()),
      rows_(new std::atomic<Row*>[kQueueSlots + 1]) {
  for (size_t i = 0; i <= kQueueSlots; ++i) rows_[i].store(nullptr, std::memory_order_relaxed);
  prometheus::Registry& r = *registry_;
  auto counter = [&r](const char* name, const char* help) -> prometheus::Family<prometheus::Counter>* {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(r);
  };
  processed_ = counter("reliableq_jobs_processed_total",
                       "Jobs finished by this worker, whatever their outcome (Sidekiq's processed).");
  failed_ = counter("reliableq_jobs_failed_total", "Jobs whose handler failed (Sidekiq's failed).");
  retried_ = counter("reliableq_jobs_retried_total", "Failed jobs sent to the retry set.");
  dead_ = counter("reliableq_jobs_dead_total",
                  "Failed jobs sent to the dead set (retries exhausted, or not a job).");
  discarded_ = counter("reliableq_jobs_discarded_total",
                       "Failed jobs dropped: retry false, or discarded by their class.");
  snoozed_ = counter("reliableq_jobs_snoozed_total",
                     "Jobs that snoozed: to the scheduled set, no retry spent (not failed).");
  periodic_pushed_ = counter("reliableq_periodic_pushed_total",
                             "Ticks of periodic jobs this worker pushed (reliableq(1), PERIODIC "
                             "JOBS).");
  pickup_ = &prometheus::BuildHistogram()
                 .Name("reliableq_job_pickup_latency_seconds")
                 .Help("Time from a job's enqueued_at to its start.")
                 .Register(r);
  auto& duration = prometheus::BuildHistogram()
                       .Name("reliableq_job_duration_seconds")
                       .Help("Time a job's handler (with middleware) ran.")
                       .Register(r);
  for (size_t i = 0; i < classes_.size(); ++i) {
    duration_.push_back(
        &duration.Add({{"class", std::string(classes_.Name(i))}}, kDurationBuckets));
  }
  auto& timed_out = *counter("reliableq_jobs_timed_out_total",
                             "Jobs still running when their timeout passed (each is stopped, "
                             "or asked to stop; reliableq(1), TIMEOUTS).");
  for (size_t i = 0; i < classes_.size(); ++i) {
    timed_out_.push_back(&timed_out.Add({{"class", std::string(classes_.Name(i))}}));
  }
  auto& expired = *counter("reliableq_jobs_expired_total",
                           "Jobs discarded unrun because their expires_at had passed when they "
                           "were about to start (reliableq(1), EXPIRY).");
  for (size_t i = 0; i < classes_.size(); ++i) {
    expired_.push_back(&expired.Add({{"class", std::string(classes_.Name(i))}}));
  }
  parked_ = counter("reliableq_jobs_parked_total",
                    "Jobs that could not start for a full limit and were parked in Redis "
                    "(reliableq(1), LIMITS).");
  fetch_round_trip_ = &prometheus::BuildHistogram()
                           .Name("reliableq_fetch_round_trip_seconds")
                           .Help("Time from sending a fetch to its reply.")
                           .Register(r)
                           .Add({}, kRoundTripBuckets);
  ack_round_trip_ = &prometheus::BuildHistogram()
                         .Name("reliableq_ack_round_trip_seconds")
                         .Help("Time from sending a round of acknowledgements to its reply.")
                         .Register(r)
                         .Add({}, kRoundTripBuckets);
  busy_ = &prometheus::BuildGauge()
               .Name("reliableq_busy_threads")
               .Help("Processor threads running a job.")
               .Register(r)
               .Add({});
  prometheus::BuildGauge()
      .Name("reliableq_concurrency")
      .Help("Processor threads (the worker's concurrency).")
      .Register(r)
      .Add({})
      .Set(concurrency);
  outcomes_pending_ = &prometheus::BuildGauge()
                           .Name("reliableq_outcomes_pending")
                           .Help("Finished jobs whose outcome Redis has not confirmed yet.")
                           .Register(r)
                           .Add({});
  redis_errors_ = &counter("reliableq_redis_errors_total",
                           "Commands Redis refused and connections that failed, on the "
                           "worker's command connection.")
                       ->Add({});
  redis_reconnects_ = &counter("reliableq_redis_reconnects_total",
                               "Connections to Redis made again after one was lost.")
                           ->Add({});
  janitor_passes_ =
      &counter("reliableq_janitor_passes_total", "Janitor passes this process ran.")->Add({});
  janitor_recovered_ = &counter("reliableq_janitor_jobs_recovered_total",
                                "Jobs of dead processes this process's janitor put back in "
                                "their queues.")
                            ->Add({});
  janitor_poison_ = &counter("reliableq_janitor_poison_pills_total",
                             "Jobs this process's janitor sent to the dead set because their "
                             "processes died while running them more than max_interruptions "
                             "times.")
                         ->Add({});
  records_lost_ = &counter("reliableq_job_records_lost_total",
                           "Final records of acknowledged jobs that Redis refused to store.")
                       ->Add({});
}

WorkerMetrics::~WorkerMetrics() = default;

WorkerMetrics::Row* WorkerMetrics::RowFor(uint32_t queue, std::string_view queue_name) {
  size_t slot = queue < kQueueSlots ? queue : kQueueSlots;
  Row* row = rows_[slot].load(std::memory_order_acquire);
  if (row != nullptr) return row;
  std::lock_guard<std::mutex> lock(mu_);
  row = rows_[slot].load(std::memory_order_relaxed);
  if (row != nullptr) return row;
  row = &row_store_.emplace_back();
  // Queues of one label share its series (Family::Add finds them).
  row->queue = std::string(slot == kQueueSlots ? LabelBounder::kOther : queues_.Bound(queue_name));
  row->pickup = &pickup_->Add({{"queue", row->queue}}, kPickupBuckets);
  row->cells.reset(new std::atomic<Cell*>[classes_.size()]);
  for (size_t i = 0; i < classes_.size(); ++i) row->cells[i].store(nullptr, std::memory_order_relaxed);
  rows_[slot].store(row, std::memory_order_release);
  return row;
}

WorkerMetrics::Cell* WorkerMetrics::CellFor(Row* row, size_t class_index) {
  Cell* cell = row->cells[class_index].load(std::memory_order_acquire);
  if (cell != nullptr) return cell;
  std::lock_guard<std::mutex> lock(mu_);
  cell = row->cells[class_index].load(std::memory_order_relaxed);
  if (cell != nullptr) return cell;
  prometheus::Labels labels = {{"class", std::string(classes_.Name(class_index))},
                               {"queue", row->queue}};
  cell = &cell_store_.emplace_back(Cell{&processed_->Add(labels), &failed_->Add(labels),
                                        &retried_->Add(labels), &dead_->Add(labels),
                                        &discarded_->Add(labels), &snoozed_->Add(labels)});
  row->cells[class_index].store(cell, std::memory_order_release);
  return cell;
}

WorkerMetrics::Tally::Tally(WorkerMetrics* metrics) : metrics_(metrics) {
  if (metrics_ == nullptr) return;
  duration_buckets_.assign(kDurationBuckets.size() + 1, 0);
  pickup_buckets_.assign(kPickupBuckets.size() + 1, 0);
}

void WorkerMetrics::Tally::Add(std::string_view job_class, uint32_t queue,
                               std::string_view queue_name, JobResult result, double duration,
                               double pickup, double now) {
  if (metrics_ == nullptr) return;
  const LabelBounder& classes = metrics_->classes_;
  // Most jobs in a row are of the class before: one comparison, no search.
  size_t class_index = jobs_ > 0 && class_index_ != classes.other_index() &&
                               classes.Name(class_index_) == job_class
                           ? class_index_
                           : classes.Index(job_class);
  if (jobs_ > 0 && (class_index != class_index_ || queue != queue_)) Flush();
  if (jobs_ == 0) {
    class_index_ = class_index;
    if (row_ == nullptr || queue != queue_) row_ = metrics_->RowFor(queue, queue_name);
    queue_ = queue;
    first_at_ = now;
  }
  ++jobs_;
  ++counts_[static_cast<size_t>(result)];
  duration = std::max(duration, 0.0);
  duration_buckets_[BucketOf(kDurationBuckets, duration)] += 1;
  duration_sum_ += duration;
  if (pickup >= 0) {
    ++pickups_;
    pickup_buckets_[BucketOf(kPickupBuckets, pickup)] += 1;
    pickup_sum_ += pickup;
  }
  if (jobs_ >= kBatch || now - first_at_ >= kLatest || now < first_at_) Flush();
}

void WorkerMetrics::Tally::Flush() {
  if (metrics_ == nullptr || jobs_ == 0) return;
  Cell* cell = metrics_->CellFor(row_, class_index_);
  cell->processed->Increment(static_cast<double>(jobs_));
  const uint64_t retried = counts_[static_cast<size_t>(JobResult::kRetried)];
  const uint64_t dead = counts_[static_cast<size_t>(JobResult::kDead)];
  const uint64_t discarded = counts_[static_cast<size_t>(JobResult::kDiscarded)];
  if (retried + dead + discarded > 0) {
    cell->failed->Increment(static_cast<double>(retried + dead + discarded));
  }
  if (retried > 0) cell->retried->Increment(static_cast<double>(retried));
  if (dead > 0) cell->dead->Increment(static_cast<double>(dead));
  if (discarded > 0) cell->discarded->Increment(static_cast<double>(discarded));
  const uint64_t snoozed = counts_[static_cast<size_t>(JobResult::kSnoozed)];
  if (snoozed > 0) cell->snoozed->Increment(static_cast<double>(snoozed));
  metrics_->duration_[class_index_]->ObserveMultiple(duration_buckets_, duration_sum_);
  if (pickups_ > 0) {
    row_->pickup->ObserveMultiple(pickup_buckets_, pickup_sum_);
    std::fill(pickup_buckets_.begin(), pickup_buckets_.end(), 0);
  }
  std::fill(duration_buckets_.begin(), duration_buckets_.end(), 0);
  std::fill(std::begin(counts_), std::end(counts_), 0);
  jobs_ = 0;
  pickups_ = 0;
  duration_sum_ = 0;
  pickup_sum_ = 0;
}

void WorkerMetrics::JobFinished(std::string_view job_class, uint32_t queue,
                                std::string_view queue_name, JobResult result, double duration,
                                double pickup) {
  Tally tally(this);
  tally.Add(job_class, queue, queue_name, result, duration, pickup, 0);
  tally.Flush();
}

void WorkerMetrics::FetchRoundTrip(double seconds) { fetch_round_trip_->Observe(seconds); }

void WorkerMetrics::AckRoundTrip(double seconds) { ack_round_trip_->Observe(seconds); }

void WorkerMetrics::RecordLost() { records_lost_->Increment(); }

void WorkerMetrics::JanitorPass(int64_t recovered, int64_t poison_pills) {
  janitor_passes_->Increment();
  if (recovered > 0) janitor_recovered_->Increment(static_cast<double>(recovered));
  if (poison_pills > 0) janitor_poison_->Increment(static_cast<double>(poison_pills));
}

void WorkerMetrics::PeriodicPushed(std::string_view name) {
  periodic_pushed_->Add({{"name", std::string(name)}}).Increment();
}

void WorkerMetrics::JobTimedOut(std::string_view job_class) {
  timed_out_[classes_.Index(job_class)]->Increment();
}

void WorkerMetrics::JobExpired(std::string_view job_class) {
  expired_[classes_.Index(job_class)]->Increment();
}

void WorkerMetrics::JobParked(std::string_view limit, std::string_view reason) {
  // Family::Add finds the series made by an earlier call (under its lock):
  // parking is not on the path of a job that runs.
  parked_->Add({{"limit", std::string(limit)}, {"reason", std::string(reason)}}).Increment();
}

void WorkerMetrics::SetBusy(double threads) { busy_->Set(threads); }

void WorkerMetrics::SetOutcomesPending(double outcomes) { outcomes_pending_->Set(outcomes); }

void WorkerMetrics::SyncRedisTotals(uint64_t errors, uint64_t reconnects) {
  std::lock_guard<std::mutex> lock(sync_mu_);
  if (errors > errors_seen_) redis_errors_->Increment(static_cast<double>(errors - errors_seen_));
  if (reconnects > reconnects_seen_) {
    redis_reconnects_->Increment(static_cast<double>(reconnects - reconnects_seen_));
  }
  errors_seen_ = std::max(errors_seen_, errors);
  reconnects_seen_ = std::max(reconnects_seen_, reconnects);
}

std::string WorkerMetrics::Serialize() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  std::vector<prometheus::MetricFamily> process = process_.Collect();
  for (prometheus::MetricFamily& family : process) families.push_back(std::move(family));
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace reliableq::metrics
