// IdleWaiter: while the worker is idle, one blocking connection per queue
// waits in BLMOVE queue:<q> -> working list, so that a pushed job starts
// about a millisecond later without polling.
//
// Invariants it keeps: a connection waits only once its CLIENT ID was
// published in the registry (Arm says kUnpublished otherwise), so a janitor
// can always fence a connection that may move a job; and `waiting()` is true
// while any BLMOVE reply may still bring a job, which the reconciler waits
// for (Interrupt cuts the waits short with CLIENT UNBLOCK).
//
// Thread safety: loop thread only.

#ifndef RELIABLEQ_SERVER_IDLE_WAITER_H_
#define RELIABLEQ_SERVER_IDLE_WAITER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "log.h"
#include "redis/async_connection.h"
#include "server/queue_health.h"
#include "server/queue_set.h"
#include "uv/event_loop.h"

namespace reliableq {

class IdleWaiter {
 public:
  struct Events {
    // A BLMOVE moved `payload` into queue `queue`'s working list.
    std::function<void(uint32_t queue, std::string payload)> on_job;
    // A wait ended without a job: it timed out, or failed with `why` (a
    // broken connection also calls on_lost).
    std::function<void(uint32_t queue, const Status& why)> on_empty;
    // The connection of a queue broke; `client_id` is the id it had, so
    // that it can be fenced before anything trusts its replies are over.
    std::function<void(int64_t client_id)> on_lost;
    // A new connection is ready; it waits once its id is published.
    std::function<void()> on_connected;
  };
  enum class Arm { kWaiting, kConnecting, kUnpublished, kBroken };

  // A wait Redis refuses with WRONGTYPE marks its queue broken in `health`.
  IdleWaiter(uv::EventLoop& loop, const RedisOptions& redis, const std::string& client_name,
             const QueueSet& queues, QueueHealth& health, std::chrono::milliseconds block_timeout,
             const Logger& log, Events events);

  // Makes queue `i` wait, unless it already does or is broken. `published`
  // says whether a client id is in the registry.
  Arm Start(uint32_t i, const std::function<bool(int64_t)>& published);

  bool waiting() const;
  // Asks Redis, through `command`, to end every wait now (once per wait).
  void Interrupt(redis::AsyncConnection& command);
  // Closes every connection; the waits on their way end with kShutdown
  // (on_empty), at once. Closing our end does not tell when Redis has
  // dropped the client: take their ids first (AppendClientIds) to fence them.
  void CloseAll();
  // The ids of the connections that are ready.
  void AppendClientIds(std::vector<int64_t>* ids) const;

 private:
  struct Waiter {
    std::unique_ptr<redis::AsyncConnection> connection;
    bool waiting = false;
    bool connecting = false;
    bool unblock_sent = false;
  };

  const QueueSet& queues_;
  QueueHealth& health_;
  const std::chrono::milliseconds block_timeout_;
  const Logger& log_;
  Events events_;
  std::vector<Waiter> waiters_;
};

}  // namespace reliableq

#endif  // RELIABLEQ_SERVER_IDLE_WAITER_H_
