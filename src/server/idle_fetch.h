// IdleFetch: what a worker does between a fetch that found its queues dry
// and the next job. It listens for wake-ups (WakeListener, and PushTracking
// for pushes that publish none) and fetches only the queues they name; it looks at every queue now and then (EXISTS of all,
// a fetch only when one has jobs) for pushes that send no message; and it
// stays subscribed for a second after work resumes, so that a worker going
// idle and busy by turns does not resubscribe every queue each time.
//
// Why this is safe: no job moves here except through Fetcher (fetch.lua on
// the command connection), so the ordering rules the server keeps for
// fetches (register before fetch, no reconcile while one is on its way)
// hold as they do for any fetch. A missed message costs time, never a job:
// the job stays in its queue until the next look.
//
// Thread safety: loop thread only.

#ifndef RELIABLEQ_SERVER_IDLE_FETCH_H_
#define RELIABLEQ_SERVER_IDLE_FETCH_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/keys.h"
#include "base/log.h"
#include "redis/async_connection.h"
#include "server/fetcher.h"
#include "server/push_tracking.h"
#include "server/queue_health.h"
#include "server/queue_set.h"
#include "server/wake_listener.h"
#include "uv/event_loop.h"
#include "uv/handles.h"

namespace reliableq::server {

class IdleFetch {
 public:
  struct Hooks {
    // Fetching is allowed now: the worker runs, is registered, and owes no
    // reconcile.
    std::function<bool()> may_fetch;
    // A fetch of every queue (the server's own, which checks may_fetch).
    std::function<void()> fetch_all;
    // A namespace matched a queue not served yet.
    std::function<void(std::string_view name)> on_new_queue;
    // `schedule` or `retry` may have a new earliest member (WakeListener).
    std::function<void(std::string_view score)> on_scheduled;
    // The listener's connection is up: its id goes into the next beat.
    std::function<void()> on_connected;
    // A queue was paused or resumed (WakeListener::Events::on_pauses).
    std::function<void(std::string_view message)> on_pauses;
  };
  struct Intervals {
    // The look at every queue, without keyspace notifications for lists.
    std::chrono::milliseconds poll;
    // The same as a safety net, when every push sends a message.
    std::chrono::milliseconds safety_poll;
  };

  IdleFetch(uv::EventLoop& loop, const RedisOptions& redis, const std::string& client_name,
            const protocol::Keys& keys, const QueueSet& queues, const QueueHealth& health,
            redis::AsyncConnection& command, Fetcher& fetcher, Intervals intervals,
            const base::Logger& log, Hooks hooks);

  // Connects the listener (the scheduled-job wake-ups flow from then on).
  void Start();
  // Closes the listener and stops every timer.
  void Stop();
  // The master moved: the listener reconnects without its backoff.
  void MasterMoved() { listener_->ResetBackoff(); }

  bool idle() const { return idle_; }
  // Queue `queue` may hold jobs (as a wake-up naming it would say).
  void Wake(uint32_t queue) { OnWoken(queue); }
  // A fetch came back: `drained` when it found fewer jobs than it asked for.
  void OnFetched(bool drained);
  // A job finished: looks for the next one as cheaply as idleness allows.
  void OnFinished();
  // Quiet or stop: no more listening or looking.
  void Leave();
  // A fetch of every queue was sent: it covers every wake-up so far.
  void FetchedAll();
  // Once per heartbeat: a ping on the listener, and whether the server
  // sends keyspace notifications for lists.
  void OnBeat();
  // The command connection (re)connected: push tracking starts again.
  void CommandConnected() { tracking_.CommandConnected(); }
  // Queues were added (a namespace's): they get their channels.
  void QueuesChanged() { listener_->QueuesChanged(); }
  int64_t client_id() const { return listener_->client_id(); }
  const std::string& run_id() const { return listener_->run_id(); }

 private:
  // Subscribes the idle channels and tracks pushes, or stops both.
  void Listen(bool idle);
  void Enter();
  void OnWoken(uint32_t queue);
  void MarkWoken(uint32_t queue);
  void FetchWoken();
  void OnPoll();
  void LookAtQueues();
  void ClearWoken();
  // Keyspace notifications for lists are on and subscribed: every push to
  // an idle worker's queue sends it a message.
  bool EveryPushWakes() const;
  std::chrono::milliseconds PollInterval() const;

  const QueueSet& queues_;
  const QueueHealth& health_;
  redis::AsyncConnection& command_;
  Fetcher& fetcher_;
  const Intervals intervals_;
  Hooks hooks_;
  std::unique_ptr<WakeListener> listener_;
  uv::Timer poll_timer_;
  uv::Timer unlisten_timer_;
  PushTracking tracking_;
  bool idle_ = false;
  // Queues a wake-up named since the last fetch that looked at them.
  std::vector<bool> woken_;
  std::vector<uint32_t> woken_list_;
  // The server's notify-keyspace-events has K and l: a Ruby push wakes an
  // idle worker too, so the look at every queue is only a safety net.
  bool list_notifications_ = false;
  bool look_in_flight_ = false;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_IDLE_FETCH_H_
