// HandBack: the end of a stop. Gives every job left in this process's
// working lists back to its queue and unregisters the process (forget.lua),
// trying again until the lists are empty and the process is forgotten, or
// until its patience runs out; then the janitor of another process returns
// the jobs once the heartbeat expires.
//
// Clean stop: nothing runs, so every job left in a working list (one a
// fetch whose reply was lost moved, say) goes back untouched, except
// those whose outcome Redis has not confirmed: should their ack be refused,
// they must not go back and run again (forget then refuses, and the
// hand-back is tried again). Hard stop: every job goes back, the ones still
// running with interrupted_count + 1.
//
// Thread safety: loop thread only.

#ifndef RELIABLEQ_SERVER_HAND_BACK_H_
#define RELIABLEQ_SERVER_HAND_BACK_H_

#include <chrono>
#include <functional>
#include <string>

#include "protocol/keys.h"
#include "base/log.h"
#include "redis/async_connection.h"
#include "reliableq/clock.h"
#include "server/outcomes.h"
#include "server/queue_set.h"
#include "server/reconciler.h"
#include "uv/handles.h"

namespace reliableq::server {

class HandBack {
 public:
  // `on_over` runs once: OK when every job went back and the process is
  // forgotten; otherwise why the hand-back gave up (its jobs then wait for
  // a janitor).
  HandBack(uv::EventLoop& loop, redis::AsyncConnection& command, const QueueSet& queues,
           Reconciler& reconciler, Outcomes& outcomes, const protocol::Keys& keys, std::string identity,
           const Clock& clock, const base::Logger& log, std::function<void(const Status&)> on_over);

  // `running`: per queue, the payloads of the jobs still running (hard stop
  // only; empty for a clean stop).
  void Start(bool hard, PayloadsByQueue running);

 private:
  void Attempt();
  void AttemptLater(std::chrono::milliseconds delay);
  void Forget();

  redis::AsyncConnection& command_;
  const QueueSet& queues_;
  Reconciler& reconciler_;
  Outcomes& outcomes_;
  const protocol::Keys& keys_;
  const std::string identity_;
  const Clock& clock_;
  const base::Logger& log_;
  std::function<void(const Status&)> on_over_;
  uv::Timer timer_;

  bool hard_ = false;
  PayloadsByQueue running_;
  std::chrono::steady_clock::time_point deadline_;
  bool in_flight_ = false;
  int attempts_ = 0;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_HAND_BACK_H_
