// QueueHealth: which of the served queues Redis cannot take jobs from (its
// queue or working list exists with another type than LIST), so that one
// broken queue is reported clearly and skipped while the others run.
//
// A fetch tells it, for every queue it tried, whether fetch.lua skipped it;
// a broken queue is left out of the idle poll (whose EXISTS would find it
// every time) until a fetch finds it working again. Queues added to the set
// later (a namespace's) start working.
// The log says so once when a queue breaks, again at most every 5 minutes
// while it stays broken, and once when it works again.
//
// Thread safety: loop thread only.

#ifndef RELIABLEQ_SERVER_QUEUE_HEALTH_H_
#define RELIABLEQ_SERVER_QUEUE_HEALTH_H_

#include <chrono>
#include <cstdint>
#include <string_view>
#include <vector>

#include "base/log.h"
#include "reliableq/clock.h"
#include "server/queue_set.h"

namespace reliableq::server {

class QueueHealth {
 public:
  QueueHealth(const QueueSet& queues, const Clock& clock, const base::Logger& log);

  void Broken(uint32_t queue, std::string_view reason);
  void Working(uint32_t queue);

  bool broken(uint32_t queue) const {
    return queue < states_.size() && states_[queue].broken;
  }
  bool any_broken() const { return broken_count_ > 0; }

 private:
  struct State {
    bool broken = false;
    std::chrono::steady_clock::time_point logged;
  };
  const QueueSet& queues_;
  const Clock& clock_;
  const base::Logger& log_;
  State& StateOf(uint32_t queue);

  std::vector<State> states_;
  size_t broken_count_ = 0;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_QUEUE_HEALTH_H_
