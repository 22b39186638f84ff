// Key names: the one place that spells every Redis key reliableq uses.
//
// Layout 1 (no group): Sidekiq's keys carry no prefix, fixed by its data
// contract ("queue:<q>", "retry", ...); reliableq's own keys carry a
// configurable prefix P ("reliableq:" by default).
// Layout 2 (a queue group G, for Redis Cluster): every key of the group,
// Sidekiq's included, is "P{G}:" + its layout-1 name without P, so that all
// of them hash to one slot and every script stays in it; the one key outside
// a group is the directory of groups, "P groups".
// Pure; reliableq-schema(7) documents each key.
//
// Thread safety: an immutable value.

#ifndef RELIABLEQ_PROTOCOL_KEYS_H_
#define RELIABLEQ_PROTOCOL_KEYS_H_

#include <string>
#include <string_view>

#include "reliableq/redis_options.h"
#include "reliableq/status.h"

namespace reliableq::protocol {

class Keys {
 public:
  // `group` empty: layout 1; otherwise layout 2 for that group (checked by
  // CheckGroup at the boundary, not here).
  explicit Keys(std::string prefix = "reliableq:", std::string_view group = {});

  // The keys of prefix `prefix` for the group `redis` names (RedisOptions::
  // group; none: layout 1).
  static Keys For(std::string_view prefix, const RedisOptions& redis) {
    return Keys(std::string(prefix), redis.group);
  }

  // Sidekiq's keys (layout 1: unprefixed).
  std::string Queues() const { return sidekiq_ + "queues"; }        // SET of queue names
  std::string Schedule() const { return sidekiq_ + "schedule"; }    // ZSET
  std::string Retry() const { return sidekiq_ + "retry"; }          // ZSET
  std::string Dead() const { return sidekiq_ + "dead"; }            // ZSET
  std::string Processes() const { return sidekiq_ + "processes"; }  // SET of identities
  // The counters, and with `date` ("YYYY-MM-DD", UtcDate) that day's.
  std::string Processed(std::string_view date = {}) const { return Stat("processed", date); }
  std::string Failed(std::string_view date = {}) const { return Stat("failed", date); }
  std::string Queue(std::string_view queue) const {
    return sidekiq_ + "queue:" + std::string(queue);
  }
  // The queue name in queue key `key` (Queue's inverse); "" when `key` is
  // not a queue key of this layout and group.
  std::string_view QueueName(std::string_view key) const;
  std::string Process(std::string_view identity) const { return sidekiq_ + std::string(identity); }
  std::string Work(std::string_view identity) const { return Process(identity) + ":work"; }
  std::string Workers(std::string_view identity) const { return Process(identity) + ":workers"; }
  std::string Signals(std::string_view identity) const { return Process(identity) + "-signals"; }

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
  // Where `reliableq queue pause|resume` (Admin::PauseQueue, ResumeQueue)
  // publishes "pause <q>" or "resume <q>" after changing Paused(): every
  // worker's wake-up connection listens, so a pause reaches live workers at
  // once rather than at their next heartbeat.
  std::string WakePaused() const { return prefix_ + "wake:paused"; }
  // SET of the names of paused queues: workers take no job from them
  // (`reliableq queue pause`).
  std::string Paused() const { return prefix_ + "paused"; }
  // Limits (limits.h; reliableq-schema(7), "Limits"): the directory of
  // limiter definitions (HASH name -> JSON), and per limiter its slot
  // holders (HASH "<n>@<identity>" -> start time), its rate window (ZSET
  // holder -> start time) and its parked jobs (LIST).
  std::string Limits() const { return prefix_ + "limits"; }
  std::string Limit(std::string_view name) const { return prefix_ + "limit:" + std::string(name); }
  std::string LimitStarts(std::string_view name) const { return Limit(name) + ":starts"; }
  std::string LimitWaiting(std::string_view name) const { return Limit(name) + ":waiting"; }
  // Unique jobs and expiry (reliableq-schema(7), "Unique jobs"): the STRING
  // holding the jid of the job that holds unique key `key`, and the count
  // of jobs discarded as expired.
  std::string Unique(std::string_view key) const { return prefix_ + "unique:" + std::string(key); }
  std::string StatExpired() const { return prefix_ + "stat:expired"; }
  // Sequences (reliableq-schema(7), "Sequences"): the HASH of held keys
  // (sequence key -> the holder's jid), the ZSET of when each was taken
  // (sequence key -> epoch seconds), and per held key the LIST of the jobs
  // that wait for it. The scripts build these names from SequencePrefix()
  // (lib/sequence.lua), which this spells once for them.
  std::string SequencePrefix() const { return prefix_; }
  std::string Sequences() const { return prefix_ + "sequences"; }
  std::string SequencesSince() const { return prefix_ + "sequences:since"; }
  std::string SequenceWaiting(std::string_view key) const {
    return prefix_ + "sequence:" + std::string(key);
  }
  // The record that job `jid` was pushed by a client with a spool or by a
  // spool's drain (push_once.lua; reliableq-schema(7), "Client spool"): a
  // STRING that lives for the replay window, so that the same jid sent again
  // within it stores nothing.
  std::string Pushed(std::string_view jid) const { return prefix_ + "pushed:" + std::string(jid); }
  // The final record of job `jid` (reliableq-schema(7), "Job records"): a
  // STRING of JSON written where the job's life ends, when its class keeps
  // records, expiring after the class's retention.
  std::string JobRecord(std::string_view jid) const { return prefix_ + "job:" + std::string(jid); }
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
  // The layout version the data follows (layout_version.h): "P schema" in
  // layout 1, the group's "P{G}:schema" in layout 2.
  std::string Schema() const { return prefix_ + "schema"; }
  // The directory of groups (SET of names), the one key outside every group:
  // "P groups", in its own slot. Layout 2 writes it; layout 1 never does.
  std::string Groups() const { return root_ + "groups"; }
  // The CLIENT SETNAME of a worker's connections; the janitor matches it
  // before it kills them. Redis refuses spaces in names.
  std::string ClientName(std::string_view identity) const;

  // What reliableq's own keys begin with: P in layout 1, "P{G}:" in layout 2
  // (scripts get key prefixes built from it in ARGV).
  const std::string& prefix() const { return prefix_; }
  // The prefix as configured (P), and the group ("" in layout 1).
  const std::string& root_prefix() const { return root_; }
  const std::string& group() const { return group_; }
  // 1 without a group, 2 with one.
  int layout() const { return group_.empty() ? 1 : 2; }

 private:
  std::string Stat(std::string_view name, std::string_view date) const;

  std::string root_;     // P
  std::string group_;    // G, or ""
  std::string prefix_;   // P, or "P{G}:"
  std::string sidekiq_;  // "", or "P{G}:"
};

// OK when `group` may name a queue group: 1 to 64 letters, digits, '_', '-'
// or '.'; otherwise kInvalidArgument with a one-line reason.
Status CheckGroup(std::string_view group);

// The checks of a prefix and group pair every process makes at its
// boundary: CheckGroup when `group` is set, and then a prefix without '{' or
// '}' (the hash tag of every key must be the group's). kInvalidArgument with
// a one-line reason.
Status CheckKeyLayout(std::string_view prefix, std::string_view group);

// "YYYY-MM-DD" of a UTC epoch time, as in Sidekiq's dated stat keys.
std::string UtcDate(double epoch_seconds);

}  // namespace reliableq::protocol

#endif  // RELIABLEQ_PROTOCOL_KEYS_H_
