// Prefetch: how many jobs a worker holds beyond its thread count, following
// how fast jobs finish. Pure: the times and counts come from the caller.
//
// A few jobs beyond the thread count keep threads busy across the round
// trip of the next fetch without holding many jobs back from other
// workers. Short jobs need more of them: enough to cover the fetch's round
// trip and the ack's before it, up to eight times the thread count; the
// least is a quarter of the thread count (at least 1).
//
// Thread safety: loop thread only.

#ifndef RELIABLEQ_SERVER_PREFETCH_H_
#define RELIABLEQ_SERVER_PREFETCH_H_

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace reliableq::server {

class Prefetch {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  explicit Prefetch(int concurrency);

  // How many jobs a fetch may ask for while `held` are in memory (ready or
  // running): the thread count plus the prefetch, less what is held.
  size_t Wanted(size_t held) const;

  // After each fetch reply: the fetch left at `sent`, its reply came at
  // `now`, and `finished_total` jobs had finished by then (ever).
  void OnReply(TimePoint sent, TimePoint now, uint64_t finished_total);

  int value() const { return prefetch_; }
  int min() const { return min_; }
  int max() const { return max_; }

 private:
  int concurrency_;
  int min_;
  int max_;
  int prefetch_;
  TimePoint last_reply_{};
  uint64_t finished_at_last_reply_ = 0;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_PREFETCH_H_
