// QueuePauses: keeps the worker's QueueSet in step with the `paused` set
// that `reliableq queue pause|resume` (Admin::PauseQueue, ResumeQueue)
// writes. The set is read once when the server opens, before anything is
// fetched, and then on every heartbeat, so a pause takes effect within one
// heartbeat interval: no fetch asks for a paused queue after that, while
// the jobs already taken from it run and are acknowledged as usual. A
// resume is noticed the same way; resuming also wakes idle workers at once
// (the admin call publishes the queue's wake-up signal), and the worker
// fetches from the queue as soon as its next read has seen the resume.
//
// Thread safety: loop thread only (Load: before the loop runs).

#ifndef RELIABLEQ_SERVER_QUEUE_PAUSES_H_
#define RELIABLEQ_SERVER_QUEUE_PAUSES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "keys.h"
#include "log.h"
#include "redis/async_connection.h"
#include "redis/connection.h"
#include "server/queue_set.h"

namespace reliableq {

class QueuePauses {
 public:
  // `on_resumed` gets the indexes of queues that were paused and no longer
  // are, so the caller can fetch from them.
  QueuePauses(redis::AsyncConnection& command, const Keys& keys, QueueSet& queues,
              const Logger& log, std::function<void(const std::vector<uint32_t>&)> on_resumed);

  // Reads the set through `connection` and applies it. An error (say, the
  // key holds another type) is returned for the caller to report; the
  // queues then stay unpaused.
  Status Load(redis::Connection& connection);
  // Sends one SMEMBERS on the command connection and applies the reply. A
  // failed read changes nothing (the next beat reads again).
  void Refresh();

 private:
  void Apply(const std::vector<std::string>& names);

  redis::AsyncConnection& command_;
  const std::string key_;
  QueueSet& queues_;
  const Logger& log_;
  std::function<void(const std::vector<uint32_t>&)> on_resumed_;
  bool read_failure_logged_ = false;
};

}  // namespace reliableq

#endif  // RELIABLEQ_SERVER_QUEUE_PAUSES_H_
