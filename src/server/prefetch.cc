#include "server/prefetch.h"

#include <algorithm>

namespace reliableq::server {

Prefetch::Prefetch(int concurrency)
    : concurrency_(concurrency),
      min_(std::max(1, concurrency / 4)),
      max_(std::max(min_, 8 * concurrency)),
      prefetch_(min_) {}

size_t Prefetch::Wanted(size_t held) const {
  size_t limit = static_cast<size_t>(concurrency_ + prefetch_);
  return held >= limit ? 0 : limit - held;
}

void Prefetch::OnReply(TimePoint sent, TimePoint now, uint64_t finished_total) {
  // Enough jobs to keep every thread busy for four round trips at the rate
  // jobs finished since the last fetch (Little's law): the next fetch goes
  // out only when the ack on its way comes back, so a refill waits for up
  // to two round trips, and a bigger batch takes Redis longer. The rate is
  // taken over the whole time between fetches, not over one round trip:
  // long jobs that end together must not look like a fast stream.
  double elapsed = std::chrono::duration<double>(now - last_reply_).count();
  double round_trip = std::chrono::duration<double>(now - sent).count();
  if (elapsed > 0 && last_reply_ != TimePoint()) {
    double rate = static_cast<double>(finished_total - finished_at_last_reply_) / elapsed;
    double target = std::clamp(4 * rate * round_trip, static_cast<double>(min_),
                               static_cast<double>(max_));
    // Halfway each time: one odd interval moves it only so far.
    prefetch_ = static_cast<int>((prefetch_ + target) / 2);
  }
  last_reply_ = now;
  finished_at_last_reply_ = finished_total;
}

}  // namespace reliableq::server
