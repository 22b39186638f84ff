#include "server/fetcher.h"

#include <algorithm>

namespace reliableq::server {

namespace {

constexpr std::chrono::milliseconds kFirstPause{100};
constexpr std::chrono::milliseconds kLongestPause{2000};

}  // namespace

Fetcher::Fetcher(uv::EventLoop& loop, redis::AsyncConnection& command, const QueueSet& queues,
                 QueueHealth& health, const ProcessorPool& pool, int concurrency,
                 const Clock& clock, const base::Logger& log, Events events, Optional optional)
    : command_(command),
      queues_(queues),
      health_(health),
      extra_held_(std::move(optional.extra_held)),
      metrics_(optional.metrics),
      pool_(pool),
      clock_(clock),
      log_(log),
      events_(std::move(events)),
      prefetch_(concurrency),
      random_(std::random_device{}()),
      pause_timer_(loop, [this] { events_.on_pause_over(); }) {}

bool Fetcher::Fetch(const std::vector<uint32_t>* only) {
  if (in_flight_ || !command_.ready() || pause_timer_.active()) return false;
  size_t wanted = Wanted();
  if (wanted == 0) return false;
  std::vector<uint32_t> order = queues_.FetchOrder(random_);
  if (only != nullptr) {
    std::vector<bool> named(queues_.size(), false);
    for (uint32_t q : *only) {
      if (q < named.size()) named[q] = true;
    }
    std::erase_if(order, [&named](uint32_t q) { return !named[q]; });
  }
  // Every queue paused (or none named is served): nothing to ask for.
  if (order.empty()) return false;
  std::vector<std::pair<std::string_view, std::string_view>> pairs;
  pairs.reserve(order.size());
  for (uint32_t i : order) pairs.emplace_back(queues_[i].queue_key, queues_[i].working_key);
  in_flight_ = true;
  auto sent_at = clock_.Monotonic();
  Status sent = command_.Eval(
      protocol::FetchCall(pairs, wanted, &queues_.keys()),
      [this, order = std::move(order), wanted, sent_at](const Status& s, redis::ReplyRef r) {
        auto now = clock_.Monotonic();
        prefetch_.OnReply(sent_at, now, pool_.finished_total());
        if (metrics_ != nullptr && s.ok()) {
          metrics_->FetchRoundTrip(std::chrono::duration<double>(now - sent_at).count());
        }
        protocol::FetchReply fetched;
        if (s.ok()) {
          // A reply of another shape (a broken script) brings no job, as an
          // empty one does.
          Result<protocol::FetchReply> read = protocol::ReadFetchReply(r);
          if (read.ok()) fetched = std::move(*read);
        }
        OnReply(s, std::move(fetched), order, wanted);
      });
  if (!sent.ok()) in_flight_ = false;
  return sent.ok();
}

void Fetcher::OnReply(const Status& status, protocol::FetchReply fetched, const std::vector<uint32_t>& order,
                      size_t wanted) {
  in_flight_ = false;
  if (!status.ok()) {
    if (!status.IsShutdown()) {
      std::string error = status.ToString();
      log_.Log(LogLevel::kWarn, base::LogEvent("fetch_failed").WithError(error), "fetch failed: %s",
               error.c_str());
    }
    if (!status.IsIoError() && !status.IsTimeout() && !status.IsShutdown()) {
      pause_ = pause_.count() == 0 ? kFirstPause : std::min(pause_ * 2, kLongestPause);
      pause_timer_.Start(pause_);
    }
    events_.on_failed(status);
    return;
  }
  pause_ = std::chrono::milliseconds(0);
  std::vector<FetchedJob> jobs;
  jobs.reserve(fetched.jobs.size());
  for (protocol::FetchedPayload& job : fetched.jobs) {
    if (job.pair < order.size()) jobs.push_back({order[job.pair], std::move(job.payload)});
  }
  for (const protocol::SkippedPair& skipped : fetched.skipped) {
    if (skipped.pair < order.size()) health_.Broken(order[skipped.pair], skipped.reason);
  }
  if (health_.any_broken()) {
    // Every queue fetch.lua did not report was usable.
    std::vector<bool> reported(queues_.size(), false);
    for (const protocol::SkippedPair& skipped : fetched.skipped) {
      if (skipped.pair < order.size()) reported[order[skipped.pair]] = true;
    }
    for (uint32_t q : order) {
      if (!reported[q]) health_.Working(q);
    }
  }
  // Jobs that went to wait for their sequence were taken from the queues
  // too: a fetch that parked some did not find the queues dry.
  bool drained = jobs.size() + fetched.waiting < wanted;
  events_.on_jobs(std::move(jobs), drained);
}

}  // namespace reliableq::server
