#include "server/janitor.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>

#include "redis/reply.h"
#include "server/limit_reaper.h"

namespace reliableq::server {

namespace {

// The longest a janitor pass holds the lease.
constexpr int64_t kLeaseCapMillis = 5000;
// janitor:last lives a day: a cluster with no worker left shows no stale
// "latest pass" for long. janitor:passes keeps the last 100 notable ones.
constexpr std::string_view kRecordTtlSeconds = "86400";
constexpr std::string_view kPassesKeptLast = "99";

protocol::RecoveryConfig ConfigFor(const protocol::Keys& keys, const std::string& identity, int max_interruptions,
                         const DeadSetLimits& dead_limits) {
  protocol::RecoveryConfig config;
  config.keys = keys;
  config.max_interruptions = max_interruptions;
  config.skip_identity = identity;
  config.dead_max_jobs = dead_limits.max_jobs;
  config.dead_timeout_seconds = dead_limits.timeout.count();
  return config;
}

const char* Evidence(DeathEvidence evidence) {
  switch (evidence) {
    case DeathEvidence::kConnectionsGone:
      return "its connections are gone";
    case DeathEvidence::kHeartbeatExpired:
      return "its heartbeat expired";
    case DeathEvidence::kNone:
      break;
  }
  return "forced";
}

}  // namespace

bool JanitorPassNotable(const Result<RecoveryReport>& pass) {
  if (!pass.ok()) return true;
  for (const IdentityRecovery& id : pass->identities) {
    if (!id.alive || !id.error.empty()) return true;
  }
  return false;
}

std::string JanitorPassJson(const Result<RecoveryReport>& pass, const std::string& by,
                            double at) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  auto string = [&w](std::string_view text) {
    w.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
  };
  w.StartObject();
  w.Key("at");
  w.Double(at);
  w.Key("by");
  string(by);
  w.Key("checked");
  w.Int64(pass.ok() ? static_cast<int64_t>(pass->identities.size()) : 0);
  w.Key("dead");
  w.StartArray();
  if (pass.ok()) {
    for (const IdentityRecovery& id : pass->identities) {
      if (id.alive) continue;
      int64_t requeued = 0, dead = 0;
      for (const QueueRecovery& q : id.queues) {
        requeued += q.requeued;
        dead += q.dead;
      }
      w.StartObject();
      w.Key("identity");
      string(id.identity);
      w.Key("evidence");
      // An entry that cannot be read has no evidence of its own: its
      // heartbeat is what the pass went by.
      string(id.evidence == DeathEvidence::kConnectionsGone ? "connections_gone"
                                                             : "heartbeat_expired");
      w.Key("requeued");
      w.Int64(requeued);
      w.Key("to_dead");
      w.Int64(dead);
      if (!id.error.empty()) {
        w.Key("error");
        string(id.error);
      }
      w.EndObject();
    }
  }
  w.EndArray();
  if (!pass.ok()) {
    w.Key("error");
    string(pass.status().ToString());
  }
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

Janitor::Janitor(uv::EventLoop& loop, RedisOptions redis_options,
                 std::unique_ptr<redis::Connection> redis, const protocol::Keys& keys,
                 const std::string& identity, int max_interruptions,
                 const DeadSetLimits& dead_limits, std::chrono::milliseconds interval,
                 const Clock& clock, const base::Logger& log, metrics::WorkerMetrics* metrics)
    : loop_(loop),
      redis_options_(std::move(redis_options)),
      redis_(std::move(redis)),
      config_(ConfigFor(keys, identity, max_interruptions, dead_limits)),
      interval_(interval),
      clock_(clock),
      log_(log),
      timer_(loop, [this] { BeginPass(); }),
      random_(std::random_device{}()),
      metrics_(metrics) {}

void Janitor::Start() {
  stopped_ = false;
  Schedule(std::chrono::milliseconds(0));
}

void Janitor::Stop() {
  stopped_ = true;
  timer_.Stop();
}

void Janitor::Schedule(std::chrono::milliseconds delay) {
  if (stopped_) return;
  timer_.Start(delay);
}

void Janitor::BeginPass() {
  if (running_ || stopped_) return;
  running_ = true;
  loop_.QueueWork([this] { RunPass(); }, [this] { Report(); });
}

void Janitor::ReapSlots(double now) {
  Result<int64_t> freed = ReapLimits(*redis_, config_.keys, now);
  if (!freed.ok()) {
    std::string error = freed.status().ToString();
    log_.Log(LogLevel::kWarn, base::LogEvent("limit_reap_failed").WithError(error),
             "janitor: limiter slots of dead processes not checked: %s", error.c_str());
  } else if (*freed > 0) {
    log_.Log(LogLevel::kInfo, "limit_slots_freed",
             "janitor: %lld limiter slots of dead processes freed",
             static_cast<long long>(*freed));
  }
}

void Janitor::RunPass() {
  won_lease_ = false;
  record_status_ = Status::OK();
  lease_left_ = interval_;
  lease_read_at_ = clock_.Monotonic();
  if (!redis_) {
    auto connection = redis::Connection::Open(redis_options_);
    if (!connection.ok()) {
      result_ = connection.status();
      return;
    }
    redis_ = std::move(connection.value());
  }
  // About one pass per interval across all workers. The lease expires on
  // its own, so a janitor that dies holding it delays the next pass by at
  // most the lease; the cap keeps a worker with a long interval from
  // holding back the others. PTTL tells a loser when to try again.
  const std::string lease_ms =
      std::to_string(std::min<int64_t>(interval_.count(), kLeaseCapMillis));
  auto lease = redis_->Pipeline(
      {{"SET", config_.keys.JanitorLease(), config_.skip_identity, "NX", "PX", lease_ms},
       {"PTTL", config_.keys.JanitorLease()}});
  lease_read_at_ = clock_.Monotonic();
  if (!lease.ok()) {
    result_ = lease.status();
    return;
  }
  redis::ReplyRef set = (*lease)[0];
  if (redis::IsErrorReply(set)) {
    result_ = redis_->ErrorOf(set);
    return;
  }
  Result<int64_t> pttl = redis::ToInteger((*lease)[1]);
  if (pttl.ok() && *pttl >= 0) {
    lease_left_ = std::chrono::milliseconds(std::min<int64_t>(*pttl, interval_.count()));
  }
  if (redis::IsNilReply(set)) {
    result_ = RecoveryReport{};
    return;
  }
  won_lease_ = true;
  double now = clock_.Now();
  result_ = protocol::RunRecoveryPass(*redis_, config_, now);
  ReapSlots(now);
  WriteRecord(now);
}

void Janitor::WriteRecord(double at) {
  std::string record = JanitorPassJson(result_, config_.skip_identity, at);
  const std::string last = config_.keys.JanitorLast();
  const std::string passes = config_.keys.JanitorPasses();
  std::vector<redis::Argv> commands = {{"SET", last, record, "EX", kRecordTtlSeconds}};
  if (JanitorPassNotable(result_)) {
    commands.push_back({"LPUSH", passes, record});
    commands.push_back({"LTRIM", passes, "0", kPassesKeptLast});
  }
  auto written = redis_->Pipeline(commands);
  record_status_ = written.status();
  if (!written.ok()) return;
  for (const redis::ReplyPtr& reply : *written) {
    if (redis::IsErrorReply(reply)) {
      record_status_ = redis_->ErrorOf(reply);
      return;
    }
  }
}

void Janitor::Report() {
  running_ = false;
  if (won_lease_ && !record_status_.ok()) {
    std::string error = record_status_.ToString();
    log_.Log(LogLevel::kDebug, base::LogEvent("janitor_not_recorded").WithError(error),
             "janitor: pass not recorded: %s", error.c_str());
  }
  if (won_lease_ && metrics_ != nullptr) {
    int64_t recovered = 0, poison = 0;
    if (result_.ok()) {
      for (const IdentityRecovery& id : result_->identities) {
        for (const QueueRecovery& q : id.queues) {
          recovered += q.requeued;
          poison += q.dead;
        }
      }
    }
    metrics_->JanitorPass(recovered, poison);
  }
  if (!result_.ok()) {
    std::string error = result_.status().ToString();
    log_.Log(LogLevel::kWarn, base::LogEvent("janitor_failed").WithError(error),
             "janitor pass failed: %s", error.c_str());
  } else {
    for (const IdentityRecovery& id : result_->identities) {
      if (!id.error.empty()) {
        log_.Log(LogLevel::kWarn, base::LogEvent("janitor_incomplete").WithError(id.error),
                 "janitor: cannot recover all jobs of dead process %s: %s", id.identity.c_str(),
                 id.error.c_str());
      }
      if (id.alive) continue;
      int64_t requeued = 0, dead = 0;
      for (const QueueRecovery& q : id.queues) {
        requeued += q.requeued;
        dead += q.dead;
      }
      log_.Log(LogLevel::kInfo, "janitor_recovered",
               "janitor: process %s is dead (%s): %lld jobs back to their queues, %lld to the "
               "dead set",
               id.identity.c_str(), Evidence(id.evidence), static_cast<long long>(requeued),
               static_cast<long long>(dead));
    }
  }
  // The winner waits a whole interval; a loser (or a pass that failed) waits
  // until the lease it found runs out. Both add up to a fifth of the
  // interval, so that the workers do not all try at the same instant.
  std::uniform_real_distribution<double> jitter(0.0, 0.2);
  auto spread = std::chrono::milliseconds(
      static_cast<int64_t>(static_cast<double>(interval_.count()) * jitter(random_)));
  std::chrono::milliseconds wait = interval_;
  if (!won_lease_) {
    auto since = std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Monotonic() -
                                                                       lease_read_at_);
    wait = std::max(std::chrono::milliseconds(0), lease_left_ - since);
  } else {
    // The lease was taken when the pass began; the interval counts from then.
    auto since = std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Monotonic() -
                                                                       lease_read_at_);
    wait = std::max(std::chrono::milliseconds(0), interval_ - since);
  }
  Schedule(wait + spread);
}

}  // namespace reliableq::server
