// WakeListener: the worker's one pub/sub connection, which tells an idle
// worker when to look at its queues, and the poller when to look at
// `schedule` and `retry`, so that a worker holds a constant number of
// connections however many queues it serves (LMOVE cannot block on several
// lists, and a BLMOVE per queue cost a connection per queue).
//
// Always subscribed (from each connect): Keys::WakeScheduled() and the
// keyspace channels of `schedule` and `retry` (on_scheduled), and
// Keys::WakePaused() (on_pauses), which reaches busy workers too. Subscribed
// while the worker is idle (Listen(true)), per served queue: its wake
// channel Keys::WakeQueue(q), which reliableq's push publishes when it finds
// the queue empty, and its keyspace channel __keyspace@<db>__:queue:<q>,
// which Redis publishes on every push when notify-keyspace-events has K and
// l (Ruby's client publishes nothing); per queue namespace (QueueSet), the
// same two as patterns. Only pushes wake a worker (lpush, rpush, linsert;
// zadd for the sets): the pops of other workers' fetches are ignored.
// Also always subscribed: __redis__:invalidate, where Redis sends the
// messages of the command connection's CLIENT TRACKING (PushTracking) while
// the worker is idle: each names the queue keys any client wrote, pushes of
// Ruby's client included, without the event; a served queue it names counts
// as woken.
//
// A subscription is a hint, never a move: the fetch that follows is the
// ordinary fetch.lua on the command connection. A message can only be late
// or missing when the connection breaks, and each (re)subscription is
// followed by on_listening, after which the worker looks at every queue
// once; the idle poll covers what notifications cannot (reliableq-schema(7),
// "Wake-up signals").
//
// Thread safety: loop thread only.

#ifndef RELIABLEQ_SERVER_WAKE_LISTENER_H_
#define RELIABLEQ_SERVER_WAKE_LISTENER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "protocol/keys.h"
#include "base/log.h"
#include "redis/async_connection.h"
#include "server/queue_set.h"
#include "uv/event_loop.h"
#include "uv/handles.h"

namespace reliableq::server {

// The keyspace notification channel of `key` in database `db`.
std::string KeyspaceChannel(int db, std::string_view key);
// `text` with the glob characters of Redis's patterns escaped.
std::string GlobEscape(std::string_view text);

class WakeListener {
 public:
  struct Events {
    // Served queue `queue` may have received a job.
    std::function<void(uint32_t queue)> on_queue;
    // A queue a namespace matches, which is not served yet, received a job.
    std::function<void(std::string_view name)> on_new_queue;
    // `schedule` or `retry` may have a new earliest member, due at `score`
    // (epoch seconds, as published) or, when `score` is empty, unknown.
    std::function<void(std::string_view score)> on_scheduled;
    // The idle channels are subscribed (again): jobs pushed before the
    // subscription sent no message here, so look at every queue once.
    std::function<void()> on_listening;
    // A connection is up: its id goes into the next beat.
    std::function<void()> on_connected;
    // The connection broke (its id names nobody now).
    std::function<void()> on_disconnected;
    // A queue was paused or resumed: the message as published ("pause <q>"
    // or "resume <q>"; QueuePauses reads it).
    std::function<void(std::string_view message)> on_pauses;
  };

  WakeListener(uv::EventLoop& loop, const RedisOptions& redis, const std::string& client_name,
               const protocol::Keys& keys, const QueueSet& queues, const base::Logger& log, Events events);

  // Connects, and reconnects after a loss (100 ms doubling to 2 s), until
  // Stop().
  void Start();
  void Stop();
  // The master moved (Sentinel): the next reconnect comes after the
  // shortest delay, not the backoff the old master's failures built up.
  void ResetBackoff();
  // Whether the idle channels should be subscribed; a change is sent at
  // once, or when the one on its way is confirmed.
  void Listen(bool idle);
  // The idle channels are confirmed subscribed on the live connection.
  bool listening() const { return subscribed_idle_ && !changing_; }
  // Queues added to the set since the last subscription get theirs.
  void QueuesChanged();
  // Sends a PING, so that a connection that died silently is found within
  // the command timeout (a subscriber otherwise waits with nothing pending).
  void Ping();
  int64_t client_id() const { return connection_->client_id(); }
  const std::string& run_id() const { return connection_->run_id(); }

 private:
  void Connect();
  void OnMessage(redis::ReplyRef message);
  void OnQueueEvent(std::string_view queue_name, std::string_view event);
  // Sends the (un)subscriptions that bring the idle channels to want_idle_.
  void Update();
  void Subscribe(bool permanent_too);
  void Unsubscribe();
  void AddQueueChannels(size_t from, redis::CommandList* commands);

  const QueueSet& queues_;
  const base::Logger& log_;
  Events events_;
  const std::string scheduled_channel_;
  const std::string schedule_keyspace_;
  const std::string retry_keyspace_;
  const std::string paused_channel_;
  const std::string queue_key_prefix_;  // protocol::Keys::Queue(""): + name
  const std::string wake_prefix_;      // protocol::Keys::WakeQueue(""): + queue name
  const std::string keyspace_prefix_;  // KeyspaceChannel(db, "queue:"): + name
  std::unique_ptr<redis::AsyncConnection> connection_;
  uv::Timer reconnect_timer_;
  std::chrono::milliseconds reconnect_delay_;
  bool stopped_ = true;
  bool want_idle_ = false;
  bool subscribed_idle_ = false;  // as last sent
  bool changing_ = false;         // a (un)subscription is on its way
  size_t subscribed_queues_ = 0;  // queues [0, n) have their channels
  std::unordered_map<std::string, uint32_t> by_name_;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_WAKE_LISTENER_H_
