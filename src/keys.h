// Key names: the one place that spells every Redis key reliableq uses.
// Sidekiq's keys are fixed by its data contract; reliableq's own keys carry
// a configurable prefix ("reliableq:" by default). Pure; reliableq-schema(7)
// documents each key.

#ifndef RELIABLEQ_KEYS_H_
#define RELIABLEQ_KEYS_H_

#include <string>
#include <string_view>

namespace reliableq {

class Keys {
 public:
  explicit Keys(std::string prefix = "reliableq:") : prefix_(std::move(prefix)) {}

  // Sidekiq's keys.
  static constexpr std::string_view kQueues = "queues";          // SET of queue names
  static constexpr std::string_view kSchedule = "schedule";      // ZSET
  static constexpr std::string_view kRetry = "retry";            // ZSET
  static constexpr std::string_view kDead = "dead";              // ZSET
  static constexpr std::string_view kProcesses = "processes";    // SET of identities
  static constexpr std::string_view kProcessed = "stat:processed";
  static constexpr std::string_view kFailed = "stat:failed";
  static std::string Queue(std::string_view queue) { return "queue:" + std::string(queue); }
  // Strips "queue:"; returns "" when `key` is not a queue key.
  static std::string_view QueueName(std::string_view key);
  static std::string Process(std::string_view identity) { return std::string(identity); }
  static std::string Work(std::string_view identity) { return std::string(identity) + ":work"; }
  static std::string Workers(std::string_view identity) {
    return std::string(identity) + ":workers";
  }
  static std::string Signals(std::string_view identity) {
    return std::string(identity) + "-signals";
  }

  // reliableq's keys.
  std::string Working(std::string_view identity, std::string_view queue) const {
    return prefix_ + "working:" + std::string(identity) + ":" + std::string(queue);
  }
  std::string Heartbeat(std::string_view identity) const {
    return prefix_ + "heartbeat:" + std::string(identity);
  }
  std::string Registry() const { return prefix_ + "registry"; }
  std::string JanitorLease() const { return prefix_ + "janitor"; }
  // The janitor's record of its work, for the dashboard (reliableq-schema(7),
  // "Janitor passes"): the latest pass, and the last passes that found a dead
  // process or failed, newest first.
  std::string JanitorLast() const { return prefix_ + "janitor:last"; }
  std::string JanitorPasses() const { return prefix_ + "janitor:passes"; }
  // The dashboard's audit trail: its last actions, newest first.
  std::string Audit() const { return prefix_ + "audit"; }
  // Pub/sub channels (not keys): the wake-up signals of idle workers.
  // A push that finds queue <q> empty publishes the queue's name on
  // WakeQueue(q); a scheduled push or a retry that becomes the earliest
  // member of schedule or retry publishes its score on WakeScheduled().
  // reliableq-schema(7), "Wake-up signals".
  std::string WakeQueue(std::string_view queue) const {
    return prefix_ + "wake:queue:" + std::string(queue);
  }
  std::string WakeScheduled() const { return prefix_ + "wake:scheduled"; }
  // SET of the names of paused queues: workers take no job from them
  // (`reliableq queue pause`).
  std::string Paused() const { return prefix_ + "paused"; }
  // Limits (limits.h; reliableq-schema(7), "Limits"): the directory of
  // limiter definitions (HASH name -> JSON), and per limiter its slot
  // holders (HASH "<n>@<identity>" -> start time), its rate window (ZSET
  // holder -> start time) and its parked jobs (LIST).
  std::string Limits() const { return prefix_ + "limits"; }
  std::string Limit(std::string_view name) const {
    return prefix_ + "limit:" + std::string(name);
  }
  std::string LimitStarts(std::string_view name) const { return Limit(name) + ":starts"; }
  std::string LimitWaiting(std::string_view name) const { return Limit(name) + ":waiting"; }
  // Unique jobs and expiry (reliableq-schema(7), "Unique jobs"): the STRING
  // holding the jid of the job that holds unique key `key`, and the count
  // of jobs discarded as expired.
  std::string Unique(std::string_view key) const { return prefix_ + "unique:" + std::string(key); }
  std::string StatExpired() const { return prefix_ + "stat:expired"; }
  // Periodic jobs (reliableq-schema(7), "Periodic jobs"): the SET of their
  // names, each one's HASH (declaration and bookkeeping), and the ZSET of
  // the ticks pushed for it.
  std::string Periodic() const { return prefix_ + "periodic"; }
  std::string PeriodicJob(std::string_view name) const {
    return prefix_ + "periodic:" + std::string(name);
  }
  std::string PeriodicTicks(std::string_view name) const {
    return prefix_ + "periodic:" + std::string(name) + ":ticks";
  }
  // The layout version the data follows (layout_version.h).
  std::string Schema() const { return prefix_ + "schema"; }
  // The CLIENT SETNAME of a worker's connections; the janitor matches it
  // before it kills them. Redis refuses spaces in names.
  std::string ClientName(std::string_view identity) const;

  const std::string& prefix() const { return prefix_; }

 private:
  std::string prefix_;
};

// "YYYY-MM-DD" of a UTC epoch time, as in Sidekiq's dated stat keys.
std::string UtcDate(double epoch_seconds);

}  // namespace reliableq

#endif  // RELIABLEQ_KEYS_H_
