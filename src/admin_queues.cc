// Admin: pausing and resuming queues (the `paused` set; QueuePauses is the
// worker's side).

#include <algorithm>

#include "admin_impl.h"
#include "reliableq/job.h"  // CheckQueueName
#include "redis/reply.h"

namespace reliableq::admin_internal {

Result<bool> AdminImpl::PauseQueue(std::string_view name) {
  if (Status s = CheckQueueName(name); !s.ok()) return s;
  std::string key = keys_.Paused();
  Result<redis::ReplyPtr> added = redis_->Command({"SADD", key, name});
  if (!added.ok()) return added.status().WithContext("pausing queue");
  return (*added)->integer == 1;
}

Result<bool> AdminImpl::ResumeQueue(std::string_view name) {
  if (Status s = CheckQueueName(name); !s.ok()) return s;
  std::string key = keys_.Paused();
  Result<redis::ReplyPtr> removed = redis_->Command({"SREM", key, name});
  if (!removed.ok()) return removed.status().WithContext("resuming queue");
  // Idle workers sleep until a push finds a queue empty, and the pushes
  // made while it was paused found it full: wake them. A lost wake-up only
  // delays the jobs to the workers' next look at their queues.
  std::string channel = keys_.WakeQueue(name);
  (void)redis_->Command({"PUBLISH", channel, name});
  return (*removed)->integer == 1;
}

Status AdminImpl::MarkPaused(std::vector<QueueStats>* queues) {
  std::string key = keys_.Paused();
  Result<redis::ReplyPtr> members = redis_->Command({"SMEMBERS", key});
  if (!members.ok()) return members.status().WithContext("reading the paused queues");
  std::vector<std::string> paused = StringArray(members->get());
  std::sort(paused.begin(), paused.end());
  std::vector<QueueStats> merged;
  merged.reserve(queues->size() + paused.size());
  auto p = paused.begin();
  for (QueueStats& queue : *queues) {
    for (; p != paused.end() && *p < queue.name; ++p) {
      merged.push_back({.name = *p, .paused = true});
    }
    if (p != paused.end() && *p == queue.name) {
      queue.paused = true;
      ++p;
    }
    merged.push_back(std::move(queue));
  }
  for (; p != paused.end(); ++p) merged.push_back({.name = *p, .paused = true});
  *queues = std::move(merged);
  return Status::OK();
}

}  // namespace reliableq::admin_internal
