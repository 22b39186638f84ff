// Admin: a facade over its parts, each of which owns its reads and writes
// (job sets, queues, processes, limits, sequences, periodic jobs, the
// audit trail, the stats), sharing one AdminContext.

#include "reliableq/admin.h"

#include <charconv>
#include <cmath>
#include <system_error>
#include <utility>

#include "admin/admin_context.h"
#include "admin/audit_trail.h"
#include "admin/job_lookup.h"
#include "admin/job_sets.h"
#include "admin/limiters.h"
#include "admin/periodic_jobs.h"
#include "admin/processes.h"
#include "admin/queues.h"
#include "admin/sequences.h"
#include "admin/stats_reader.h"

namespace reliableq {

namespace admin {
namespace {

class AdminImpl final : public Admin {
 public:
  // `keys`: the prefix of `options` and the group of the Redis options.
  AdminImpl(std::unique_ptr<redis::Connection> redis, protocol::Keys keys, AdminOptions options)
      : context_{std::move(redis), std::move(keys),
                 options.clock ? std::move(options.clock) : SystemClock()} {}

  Result<Stats> GetStats() override { return stats_.Read(); }
  Result<RecoveryReport> Recover(const RecoverOptions& options) override {
    return processes_.Recover(options);
  }

  Result<SetListing> List(JobSet set, int64_t limit) override { return job_sets_.List(set, limit); }
  Result<SetEntry> Find(JobSet set, std::string_view jid) override {
    return job_sets_.Find(set, jid);
  }
  Result<SetEntry> RetryNow(JobSet set, std::string_view jid) override {
    return job_sets_.RetryNow(set, jid);
  }
  Result<BulkResult> RetryAll(JobSet set) override { return job_sets_.RetryAll(set); }
  Result<SetEntry> Delete(JobSet set, std::string_view jid) override {
    return job_sets_.Delete(set, jid);
  }
  Result<int64_t> DeleteAll(JobSet set) override { return job_sets_.DeleteAll(set); }
  Result<SetEntry> Kill(std::string_view jid, const DeadSetLimits& limits) override {
    return job_sets_.Kill(jid, limits);
  }
  Result<BulkResult> KillAll(const DeadSetLimits& limits) override {
    return job_sets_.KillAll(limits);
  }
  Result<SetListing> ListPage(JobSet set, int64_t offset, int64_t limit) override {
    return job_sets_.ListPage(set, offset, limit);
  }
  Result<SetEntry> FindAt(JobSet set, const EntryRef& ref) override {
    return job_sets_.FindAt(set, ref);
  }
  Result<ActionResult> ActOn(JobSet set, SetAction action, const std::vector<EntryRef>& refs,
                             const DeadSetLimits& limits) override {
    return job_sets_.ActOn(set, action, refs, limits);
  }
  Result<ActionResult> ActOnAll(JobSet set, SetAction action,
                                const DeadSetLimits& limits) override {
    return job_sets_.ActOnAll(set, action, limits);
  }

  Result<std::vector<QueueStats>> ListQueues() override { return queues_.ListQueues(); }
  Result<int64_t> ClearQueue(std::string_view name) override { return queues_.ClearQueue(name); }
  Result<PauseChange> PauseQueue(std::string_view name, PauseOptions options) override {
    return queues_.PauseQueue(name, options);
  }
  Result<PauseChange> ResumeQueue(std::string_view name) override {
    return queues_.ResumeQueue(name);
  }
  Result<QueuePage> ListQueue(std::string_view name, int64_t offset, int64_t limit) override {
    return queues_.ListQueue(name, offset, limit);
  }

  Result<std::vector<LimitInfo>> ListLimits() override { return limiters_.List(); }

  Result<SequenceListing> ListSequences(int64_t limit) override { return sequences_.List(limit); }
  Result<SequenceRelease> ReleaseSequence(std::string_view key) override {
    return sequences_.Release(key);
  }
  Result<SequenceSkip> SkipSequenceHead(std::string_view key,
                                        const DeadSetLimits& limits) override {
    return sequences_.SkipHead(key, limits);
  }

  Result<std::vector<ProcessInfo>> ListProcesses() override { return processes_.ListProcesses(); }
  Status SignalProcess(std::string_view identity, ProcessSignal signal) override {
    return processes_.SignalProcess(identity, signal);
  }
  Result<std::vector<Orphan>> ListOrphans(int64_t jobs_per_process) override {
    return processes_.ListOrphans(jobs_per_process);
  }
  Result<JanitorRecord> ReadJanitorRecord() override { return processes_.ReadJanitorRecord(); }

  Result<std::vector<PeriodicInfo>> ListPeriodic() override { return periodic_.List(); }

  Status AppendAudit(std::string_view entry_json) override { return audit_.Append(entry_json); }
  Result<std::vector<std::string>> ReadAudit(int64_t limit) override { return audit_.Read(limit); }

  Result<JobLookup> FindJob(std::string_view jid, const JobLookupOptions& options) override {
    return lookups_.Find(jid, options);
  }

  Result<RedisServerInfo> ServerInfo() override { return stats_.ServerInfo(); }

 private:
  // The parts hold references to context_, stats_ to queues_ and
  // limiters_, and lookups_ to job_sets_: declared first, built first.
  AdminContext context_;
  JobSets job_sets_{context_};
  Queues queues_{context_};
  Processes processes_{context_};
  Limiters limiters_{context_};
  Sequences sequences_{context_};
  PeriodicJobs periodic_{context_};
  AuditTrail audit_{context_};
  StatsReader stats_{context_, queues_, limiters_};
  JobLookups lookups_{context_, job_sets_};
};

}  // namespace
}  // namespace admin

std::optional<EntryRef> EntryRef::Parse(std::string_view id) {
  EntryRef ref;
  auto [end, error] = std::from_chars(id.data(), id.data() + id.size(), ref.score);
  if (error != std::errc() || end == id.data() + id.size() || *end != '-' ||
      !std::isfinite(ref.score)) {
    return std::nullopt;
  }
  ref.jid = std::string(end + 1, id.data() + id.size());
  return ref;
}

std::string EntryRef::ToString() const { return admin::ScoreText(score) + "-" + jid; }

std::string EntryIdOf(const SetEntry& entry) { return EntryRef{entry.score, entry.jid}.ToString(); }

std::string_view JobSetKey(JobSet set) {
  switch (set) {
    case JobSet::kScheduled:
      return "schedule";
    case JobSet::kRetry:
      return "retry";
    case JobSet::kDead:
      return "dead";
  }
  return "retry";
}

Admin::~Admin() = default;

Result<std::unique_ptr<Admin>> Admin::Open(const RedisOptions& options,
                                           AdminOptions admin_options) {
  if (Status s = protocol::CheckKeyLayout(admin_options.prefix, options.group); !s.ok()) return s;
  Result<std::unique_ptr<redis::Connection>> redis = redis::Connection::Open(options);
  if (!redis.ok()) return redis.status();
  Status s = (*redis)->LoadScripts();
  if (!s.ok()) return s;
  protocol::Keys keys = protocol::Keys::For(admin_options.prefix, options);
  return std::unique_ptr<Admin>(new admin::AdminImpl(
      std::move(redis.value()), std::move(keys), std::move(admin_options)));
}

}  // namespace reliableq
