// SentinelWatch: a worker's subscription to its sentinels' +switch-master
// channel, so that every connection of the process moves to a new master
// as soon as the sentinels announce it, instead of when each connection
// happens to fail. It holds one connection to one sentinel (the next one
// after a loss), subscribed to +switch-master; a message for the worker's
// master ("<name> <old-ip> <old-port> <new-ip> <new-port>") goes to the
// process's Discovery (Announce), whose epoch then drops every
// AsyncConnection within a watchdog tick and makes the blocking ones
// reconnect before their next command (discovery.h).
//
// A PING every few seconds on the subscription finds a sentinel that
// stopped answering (its watchdog drops the connection), and the next one
// is tried.
//
// Nothing depends on it for correctness: a connection that meets the old
// master (a broken connection, READONLY, ROLE) finds the new one anyway.
// Without Sentinel it is not made.
//
// Thread safety: loop thread only.

#ifndef RELIABLEQ_SERVER_SENTINEL_WATCH_H_
#define RELIABLEQ_SERVER_SENTINEL_WATCH_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "base/log.h"
#include "redis/async_connection.h"
#include "redis/discovery.h"
#include "uv/event_loop.h"
#include "uv/handles.h"

namespace reliableq::server {

class SentinelWatch {
 public:
  // `on_switch` runs after each announcement was passed on: the owner's
  // connections reconnect at once rather than after their backoff.
  SentinelWatch(uv::EventLoop& loop, std::shared_ptr<redis::Discovery> discovery,
                const base::Logger& log, std::function<void()> on_switch);
  ~SentinelWatch();
  SentinelWatch(const SentinelWatch&) = delete;
  SentinelWatch& operator=(const SentinelWatch&) = delete;

  void Start();
  // Drops the subscription; Close also closes the timer (the loop is
  // about to end).
  void Stop();
  void Close();

 private:
  void Connect();
  void OnMessage(redis::ReplyRef message);
  void Retry();

  uv::EventLoop& loop_;
  std::shared_ptr<redis::Discovery> discovery_;
  const base::Logger& log_;
  std::function<void()> on_switch_;
  std::unique_ptr<redis::AsyncConnection> connection_;
  uv::Timer retry_timer_;
  uv::Timer ping_timer_;
  size_t next_ = 0;  // the sentinel to try next
  bool stopped_ = true;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_SENTINEL_WATCH_H_
