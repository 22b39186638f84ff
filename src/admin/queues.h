// Admin's queues: every queue's size, latency and pause, a page of one
// queue's jobs, clearing a queue, and pausing and resuming one (the
// `paused` set and its message to the workers).
// Private: callers use include/reliableq/admin.h, which documents each call.
//
// Thread safety: as AdminContext.

#ifndef RELIABLEQ_ADMIN_QUEUES_H_
#define RELIABLEQ_ADMIN_QUEUES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "admin/admin_context.h"
#include "reliableq/admin.h"

namespace reliableq::admin {

// Seconds since the job in `payload` was enqueued (Sidekiq's latency).
double Latency(std::string_view payload, double now);
// Appends the reads ReadQueueStats takes of the queue whose key is `key`
// (which must outlive the commands): LLEN, and LRANGE -1 -1 for its oldest
// job.
void AddQueueStatsReads(const std::string& key, std::vector<redis::Argv>* commands);
// A queue's stats from the replies of LLEN and LRANGE -1 -1 (its oldest
// job) of its key; paused is left false.
QueueStats ReadQueueStats(std::string name, redis::ReplyRef size, redis::ReplyRef oldest,
                          double now);

class Queues {
 public:
  explicit Queues(AdminContext& context);

  Result<std::vector<QueueStats>> ListQueues();
  Result<int64_t> ClearQueue(std::string_view name);
  Result<QueuePage> ListQueue(std::string_view name, int64_t offset, int64_t limit);
  Result<PauseChange> PauseQueue(std::string_view name, PauseOptions options);
  Result<PauseChange> ResumeQueue(std::string_view name);
  // Marks the paused queues of `queues` (sorted by name) and adds, in
  // order, the paused names it lacks (size 0): a paused queue is listed
  // even while the queues set does not name it.
  Status MarkPaused(std::vector<QueueStats>* queues);

 private:
  // OK when `name` is a known queue: named in `queues` or holding a job
  // (ClearQueue's test), or paused; otherwise kNotFound naming the close
  // names among those of `queues` and `paused`.
  Status CheckKnown(std::string_view name);
  // SADD (pause) or SREM of `name` in `paused`, then the message on
  // Keys::WakePaused().
  Result<PauseChange> ChangePause(std::string_view name, bool pause);

  AdminContext& context_;
};

}  // namespace reliableq::admin

#endif  // RELIABLEQ_ADMIN_QUEUES_H_
