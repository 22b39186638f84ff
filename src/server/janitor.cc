#include "server/janitor.h"

#include <algorithm>

namespace reliableq {

namespace {

// The longest a janitor pass holds the lease.
constexpr int64_t kLeaseCapMillis = 5000;

}  // namespace

namespace {

RecoveryConfig ConfigFor(const Keys& keys, const std::string& identity, int max_interruptions,
                         const DeadSetLimits& dead_limits) {
  RecoveryConfig config;
  config.keys = keys;
  config.max_interruptions = max_interruptions;
  config.skip_identity = identity;
  config.dead_max_jobs = dead_limits.max_jobs;
  config.dead_timeout_seconds = dead_limits.timeout.count();
  return config;
}

}  // namespace

Janitor::Janitor(uv::EventLoop& loop, RedisOptions redis_options,
                 std::unique_ptr<redis::Connection> redis, const Keys& keys,
                 const std::string& identity, int max_interruptions,
                 const DeadSetLimits& dead_limits, std::chrono::milliseconds interval,
                 const Clock& clock, const Logger& log)
    : loop_(loop),
      redis_options_(std::move(redis_options)),
      redis_(std::move(redis)),
      config_(ConfigFor(keys, identity, max_interruptions, dead_limits)),
      interval_(interval),
      clock_(clock),
      log_(log),
      timer_(loop, [this] { BeginPass(); }),
      random_(std::random_device{}()) {}

void Janitor::Start() {
  stopped_ = false;
  Schedule(true);
}

void Janitor::Stop() {
  stopped_ = true;
  timer_.Stop();
}

void Janitor::Schedule(bool now) {
  if (stopped_) return;
  std::chrono::milliseconds delay{0};
  if (!now) {
    std::uniform_real_distribution<double> jitter(0.5, 1.0);
    delay = std::chrono::milliseconds(
        static_cast<int64_t>(static_cast<double>(interval_.count()) * jitter(random_)));
  }
  timer_.Start(delay);
}

void Janitor::BeginPass() {
  if (running_ || stopped_) return;
  running_ = true;
  loop_.QueueWork([this] { RunPass(); }, [this] { Report(); });
}

void Janitor::RunPass() {
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
  // holding back the others.
  std::string lease_ms = std::to_string(std::min<int64_t>(interval_.count(), kLeaseCapMillis));
  auto lease = redis_->Command(
      {"SET", config_.keys.JanitorLease(), config_.skip_identity, "NX", "PX", lease_ms});
  if (!lease.ok()) {
    result_ = lease.status();
    return;
  }
  if ((*lease)->type == REDIS_REPLY_NIL) {
    result_ = RecoveryReport{};
    return;
  }
  result_ = RunRecoveryPass(*redis_, config_, clock_.Now());
}

void Janitor::Report() {
  running_ = false;
  if (!result_.ok()) {
    log_.Log(LogLevel::kWarn, "janitor pass failed: %s", result_.status().ToString().c_str());
  } else {
    for (const IdentityRecovery& id : result_->identities) {
      if (!id.error.empty()) {
        log_.Log(LogLevel::kWarn, "janitor: cannot recover all jobs of dead process %s: %s",
                 id.identity.c_str(), id.error.c_str());
      }
      if (id.alive) continue;
      int64_t requeued = 0, dead = 0;
      for (const QueueRecovery& q : id.queues) {
        requeued += q.requeued;
        dead += q.dead;
      }
      log_.Log(LogLevel::kInfo,
               "janitor: process %s is dead: %lld jobs back to their queues, %lld to the dead "
               "set",
               id.identity.c_str(), static_cast<long long>(requeued),
               static_cast<long long>(dead));
    }
  }
  Schedule(false);
}

}  // namespace reliableq
