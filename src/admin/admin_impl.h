// The implementation of Admin, shared by admin.cc (stats, recovery, job
// sets by jid, queues) and admin_pages.cc (pages, score-addressed entries,
// processes, the dashboard's records), so neither file grows past a
// readable size. Private: callers use include/reliableq/admin.h.
//
// Thread safety: one AdminImpl per thread, as Admin.

#ifndef RELIABLEQ_ADMIN_ADMIN_IMPL_H_
#define RELIABLEQ_ADMIN_ADMIN_IMPL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/keys.h"
#include "redis/connection.h"
#include "redis/reply.h"
#include "reliableq/admin.h"

namespace reliableq::admin_internal {

// Members per script call of the bulk moves: a batch keeps Redis busy for
// well under a millisecond, and the set is walked in few round trips.
inline constexpr int64_t kBulkBatch = 100;

// Seconds since the job in `payload` was enqueued (Sidekiq's latency).
double Latency(std::string_view payload, double now);
// An entry read from a member and its score.
SetEntry MakeEntry(std::string payload, double score);
// The entries of a WITHSCORES reply (redis::ScoredMembers).
std::vector<SetEntry> EntriesOf(redis::ReplyRef reply);
// A queue's stats from the replies of LLEN and LRANGE -1 -1 (its oldest
// job) of its key; paused is left false.
QueueStats ReadQueueStats(std::string name, redis::ReplyRef size, redis::ReplyRef oldest,
                          double now);
// `score` in fixed notation, the shortest text that reads back as the same
// double (so ZRANGEBYSCORE with it meets the member's exact score).
std::string ScoreText(double score);
// kInvalidArgument for unusable dead-set limits.
Status CheckLimits(const DeadSetLimits& limits);

class AdminImpl final : public Admin {
 public:
  // `keys`: the prefix of `options` and the group of the Redis options.
  AdminImpl(std::unique_ptr<redis::Connection> redis, Keys keys, AdminOptions options)
      : redis_(std::move(redis)),
        keys_(std::move(keys)),
        set_keys_{keys_.Schedule(), keys_.Retry(), keys_.Dead()},
        clock_(options.clock ? std::move(options.clock) : SystemClock()) {}

  Result<Stats> GetStats() override;
  Result<RecoveryReport> Recover(const RecoverOptions& options) override;
  Result<SetListing> List(JobSet set, int64_t limit) override;
  Result<SetEntry> Find(JobSet set, std::string_view jid) override;
  Result<SetEntry> RetryNow(JobSet set, std::string_view jid) override;
  Result<BulkResult> RetryAll(JobSet set) override;
  Result<SetEntry> Delete(JobSet set, std::string_view jid) override;
  Result<int64_t> DeleteAll(JobSet set) override;
  Result<SetEntry> Kill(std::string_view jid, const DeadSetLimits& limits) override;
  Result<BulkResult> KillAll(const DeadSetLimits& limits) override;
  Result<std::vector<QueueStats>> ListQueues() override;
  Result<int64_t> ClearQueue(std::string_view name) override;

  // admin_queues.cc
  Result<PauseChange> PauseQueue(std::string_view name, PauseOptions options) override;
  Result<PauseChange> ResumeQueue(std::string_view name) override;
  // Marks the paused queues of `queues` (sorted by name) and adds, in
  // order, the paused names it lacks (size 0): a paused queue is listed
  // even while the queues set does not name it.
  Status MarkPaused(std::vector<QueueStats>* queues);

  // admin_limits.cc
  Result<std::vector<LimitInfo>> ListLimits() override;
  // The jobs in the waiting lists of every limiter (Stats::parked).
  Result<int64_t> CountParked();

  // admin_pages.cc
  Result<SetListing> ListPage(JobSet set, int64_t offset, int64_t limit) override;
  Result<SetEntry> FindAt(JobSet set, const EntryRef& ref) override;
  Result<ActionResult> ActOn(JobSet set, SetAction action, const std::vector<EntryRef>& refs,
                             const DeadSetLimits& limits) override;
  Result<ActionResult> ActOnAll(JobSet set, SetAction action,
                                const DeadSetLimits& limits) override;
  Result<QueuePage> ListQueue(std::string_view name, int64_t offset, int64_t limit) override;
  Result<std::vector<ProcessInfo>> ListProcesses() override;
  Status SignalProcess(std::string_view identity, ProcessSignal signal) override;
  Result<std::vector<Orphan>> ListOrphans(int64_t jobs_per_process) override;
  Result<JanitorRecord> ReadJanitorRecord() override;
  // In periodic_admin.cc.
  Result<std::vector<PeriodicInfo>> ListPeriodic() override;
  Status AppendAudit(std::string_view entry_json) override;
  Result<std::vector<std::string>> ReadAudit(int64_t limit) override;
  Result<RedisServerInfo> ServerInfo() override;

 private:
  // OK when `name` is a known queue: named in `queues` or holding a job
  // (ClearQueue's test), or paused; otherwise kNotFound naming the close
  // names among those of `queues` and `paused`.
  Status CheckKnown(std::string_view name);
  // SADD (pause) or SREM of `name` in `paused`, then the message on
  // Keys::WakePaused().
  Result<PauseChange> ChangePause(std::string_view name, bool pause);
  // Members [offset, offset + count) of `set` in its display order.
  Result<std::vector<SetEntry>> Range(JobSet set, int64_t offset, int64_t count);
  // One retry_now.lua call for `entries` (all valid).
  Result<std::pair<int64_t, int64_t>> PushNow(JobSet set, const std::vector<SetEntry>& entries);
  // One clear.lua call: {size, keys and names removed}.
  Result<std::pair<int64_t, int64_t>> Clear(std::string_view key, std::string_view queue);
  // One kill.lua call for `entries` of `from` (retry or schedule).
  Result<std::pair<int64_t, int64_t>> MoveToDead(JobSet from, const std::vector<SetEntry>& entries,
                                                 const DeadSetLimits& limits);
  // `action` on `entries` (found in `set`), in batches; adds to *result.
  Status Apply(JobSet set, SetAction action, std::vector<SetEntry> entries,
               const DeadSetLimits& limits, ActionResult* result);

  // The key of `set` (JobSetKey is its name; the key carries the group's
  // prefix in layout 2).
  const std::string& SetKey(JobSet set) const {
    return set_keys_[set == JobSet::kScheduled ? 0 : set == JobSet::kRetry ? 1 : 2];
  }

  // A reply read on redis_ (a pipelined error reply comes in place) as a
  // Status naming `what` when it is an error; OK otherwise.
  Status CheckReply(redis::ReplyRef reply, std::string_view what) const;
  // The first error of a pipeline's `replies`, named by its command and
  // first argument, or their failure in the context `what`; OK otherwise.
  Status Failed(const Result<std::vector<redis::ReplyPtr>>& replies,
                const std::vector<redis::Argv>& commands, std::string_view what) const;

  std::unique_ptr<redis::Connection> redis_;
  Keys keys_;
  const std::string set_keys_[3];  // schedule, retry, dead
  std::shared_ptr<const Clock> clock_;
};

}  // namespace reliableq::admin_internal

#endif  // RELIABLEQ_ADMIN_ADMIN_IMPL_H_
