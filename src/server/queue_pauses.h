// QueuePauses: keeps the worker's QueueSet in step with the `paused` set
// that `reliableq queue pause|resume` (Admin::PauseQueue, ResumeQueue)
// writes. The set is read once when the server opens, before anything is
// fetched, and then on every heartbeat. After each change the admin call
// publishes "pause <q>" or "resume <q>" on Keys::WakePaused(), which every
// worker's wake-up connection listens to (WakeListener), idle or busy: the
// message is applied as it comes, with no read in between, so a live
// worker sends no fetch naming a paused queue from the moment it has read
// the message. The heartbeat's read is what catches up a worker that
// missed a message (its wake-up connection was down).
//
// What a pause does to the jobs the worker already holds is the server's
// (on_paused): running ones run to the end; fetched ones not started go
// back to the head of their queue.
//
// Thread safety: loop thread only (Load: before the loop runs).

#ifndef RELIABLEQ_SERVER_QUEUE_PAUSES_H_
#define RELIABLEQ_SERVER_QUEUE_PAUSES_H_

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/keys.h"
#include "base/log.h"
#include "redis/async_connection.h"
#include "redis/connection.h"
#include "server/queue_set.h"

namespace reliableq::server {

class QueuePauses {
 public:
  struct Events {
    // Served queues that were not paused and now are.
    std::function<void(const std::vector<uint32_t>&)> on_paused;
    // Served queues that were paused and no longer are, so the caller can
    // fetch from them.
    std::function<void(const std::vector<uint32_t>&)> on_resumed;
  };

  QueuePauses(redis::AsyncConnection& command, const protocol::Keys& keys, QueueSet& queues,
              const base::Logger& log, Events events);

  // Reads the set through `connection` and applies it. An error (say, the
  // key holds another type) is returned for the caller to report; the
  // queues then stay unpaused.
  Status Load(redis::Connection& connection);
  // Sends one SMEMBERS on the command connection and applies the reply. A
  // failed read changes nothing (the next beat reads again), nor does a
  // reply to a read sent before the last message came (it may be older
  // than the message).
  void Refresh();
  // A message of Keys::WakePaused(): applies "pause <q>" or "resume <q>" at
  // once; anything else is ignored (the next beat reads the set).
  void OnMessage(std::string_view message);

 private:
  void Apply(std::set<std::string> names);

  redis::AsyncConnection& command_;
  const std::string key_;
  QueueSet& queues_;
  const base::Logger& log_;
  Events events_;
  std::set<std::string> names_;  // as last applied
  uint64_t messages_ = 0;        // messages applied so far
  bool read_failure_logged_ = false;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_QUEUE_PAUSES_H_
