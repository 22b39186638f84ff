#include "server/queue_health.h"

#include <string>

namespace reliableq::server {

namespace {

// How often a queue that stays broken is logged again.
constexpr std::chrono::minutes kRelog{5};

}  // namespace

QueueHealth::QueueHealth(const QueueSet& queues, const Clock& clock, const base::Logger& log)
    : queues_(queues), clock_(clock), log_(log), states_(queues.size()) {}

QueueHealth::State& QueueHealth::StateOf(uint32_t queue) {
  if (queue >= states_.size()) states_.resize(queues_.size());
  return states_[queue];
}

void QueueHealth::Broken(uint32_t queue, std::string_view reason) {
  State& state = StateOf(queue);
  auto now = clock_.Monotonic();
  if (state.broken && now - state.logged < kRelog) return;
  log_.Log(LogLevel::kError,
           base::LogEvent("queue_broken").WithQueue(queues_[queue].name).WithError(reason),
           "queue %s is broken and skipped (%.*s); the other queues go on, and it is tried "
           "again on every fetch",
           queues_[queue].name.c_str(), static_cast<int>(reason.size()), reason.data());
  if (!state.broken) ++broken_count_;
  state.broken = true;
  state.logged = now;
}

void QueueHealth::Working(uint32_t queue) {
  State& state = StateOf(queue);
  if (!state.broken) return;
  state.broken = false;
  --broken_count_;
  log_.Log(LogLevel::kInfo, base::LogEvent("queue_recovered").WithQueue(queues_[queue].name),
           "queue %s works again", queues_[queue].name.c_str());
}

}  // namespace reliableq::server
