// Discovery: where the master is, for every connection of a process.
//
// With a fixed address (redis://, rediss://, unix://) there is nothing to
// discover and no Discovery object: connections use Endpoint::Of(options).
// Two kinds of lookup (lookup.h) sit behind the same contract:
// - Sentinel (options.sentinel.master_name set): the sentinels are asked,
//   in turn, `SENTINEL get-master-addr-by-name NAME` (sentinel_lookup.h).
// - Redis Cluster (options.cluster.seeds set): the seeds, then the nodes
//   they named, are asked CLUSTER SLOTS, and the answer is the primary
//   owning the slot of the connection's route key, "{group}" unless
//   cluster.route_key says otherwise (cluster_lookup.h). A MOVED reply for
//   that slot names its new owner: Moved() takes it as found.
// Each connection then checks ROLE after it connects (Connection,
// AsyncConnection): the sentinels may still name a master that was just
// demoted, a cluster node a primary that failed over.
//
// The epoch: a number that moves on each time the master found differs
// from the one before. A connection remembers the epoch it was made at;
// once the epoch moved, it reconnects before its next command (Connection)
// or drops at once (AsyncConnection's watchdog), so that every connection
// of a process follows the master together, including one that is idle
// and would not notice by itself (the worker's wake-up connection, the
// janitor's). A connection that finds its server is not the master (a
// failed connect, a broken connection, READONLY, ROLE says replica) calls
// Invalidate: the next Find() asks the sentinels again.
//
// One Discovery per setup per process (For() shares those with the same
// sentinels, master, database, sentinel credentials, timeout and TLS; or
// the same seeds, slot, node credentials, connect timeout and TLS), so a
// worker's command, wake-up and janitor connections, and every Client and
// Admin of the process on the same servers, move together.
//
// Find() blocks while it asks: each sentinel gets options.sentinel.timeout
// to connect and as much for each reply (AUTH, the question), so a lookup
// takes at most about that times two or three, times the number of
// sentinels; each cluster node gets connect_timeout the same way. One
// lookup runs at a time: a Find that arrives meanwhile
// waits for it and takes its answer, success or failure, rather than
// asking again, and Invalidate never waits for it. An AsyncConnection
// calls Find on the loop thread: a bound the worker's heartbeat ttl covers
// with the defaults (reliableq(1)).
//
// A sentinel or node that named an address that is not a master (ROLE,
// READONLY) goes to the end of the order, so that a stale one cannot hide
// the others.
//
// Thread safety: safe from any thread.

#ifndef RELIABLEQ_REDIS_DISCOVERY_H_
#define RELIABLEQ_REDIS_DISCOVERY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <hiredis/hiredis.h>

#include "redis/lookup.h"
#include "redis/transport.h"
#include "reliableq/redis_options.h"
#include "reliableq/status.h"

namespace reliableq::redis {

class Discovery {
 public:
  // The process's Discovery for the sentinels and master name, or the
  // cluster seeds and slot, of `options`, made on first use; null when
  // options name neither (or fail RedisOptions::Validate: a connection
  // refuses those before it asks).
  static std::shared_ptr<Discovery> For(const RedisOptions& options);

  struct Master {
    Endpoint endpoint;
    uint64_t epoch = 0;
  };

  // The master as last found; when none is known (at first, or after
  // Invalidate), asks the sentinels or the cluster. Fails with kIoError
  // (kTimeout when every one timed out) naming every sentinel or node tried
  // and what each said, within the bound above.
  Result<Master> Find();

  // A connection made at `epoch` lost its server (a failed connect, a
  // broken connection): the next Find() asks the sentinels again. An older
  // epoch is ignored: the master was found again since.
  void Invalidate(uint64_t epoch);
  // The same, when the server is there and is not the master (ROLE says
  // replica, READONLY): the sentinel that named it is asked last next time.
  void NotMaster(uint64_t epoch);

  // The sentinels announced a new master (+switch-master): taken as found.
  void Announce(const Endpoint& master);
  // A cluster node answered MOVED for this Discovery's slot, naming its
  // owner now (a resharding, a failover): taken as found, so that the
  // epoch moves and every connection of the slot follows.
  void Moved(const Endpoint& owner) { Announce(owner); }

  // True for a Sentinel setup (a +switch-master watch makes sense), false
  // for a cluster.
  bool sentinel() const { return !options_.master_name.empty(); }
  // The hash slot a cluster Discovery serves; -1 with Sentinel.
  int slot() const { return slot_; }
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }

  // "master 'mymaster' of sentinels 127.0.0.1:26379, 127.0.0.1:26380",
  // "primary of slot 5061 (key '{orders}') of cluster 127.0.0.1:7000".
  std::string Describe() const;

  // The sentinels (empty for a cluster).
  const RedisSentinelOptions& options() const { return options_; }
  // How to reach sentinel `i` (of options().sentinels): no database, the
  // sentinels' own credentials, their timeout, the TLS of the master's.
  RedisOptions SentinelOptions(size_t i) const;

  explicit Discovery(const RedisOptions& options);

 private:
  // Under mu_: records `found` as the master, raising the epoch when it
  // differs from the last one.
  void Take(const Endpoint& found);

  const RedisSentinelOptions options_;
  const RedisTlsOptions tls_;
  const int slot_;
  std::unique_ptr<Lookup> lookup_;  // used under lookup_mu_ only
  std::mutex lookup_mu_;            // held by the one lookup under way
  std::mutex mu_;                   // held briefly; never while asking
  bool known_ = false;              // guarded by mu_
  bool demote_ = false;             // guarded by mu_: NotMaster came; Demote before asking
  Endpoint master_;                 // guarded by mu_
  uint64_t lookups_ = 0;            // guarded by mu_: lookups finished
  Status last_failure_;             // guarded by mu_: of the last lookup, if it failed
  std::atomic<uint64_t> epoch_{1};
};

// True when an error reply (the Status FromErrorReply made) says the
// server is a replica: "READONLY You can't write against a read only
// replica."
bool IsReadOnlyReply(const Status& status);

// The role ROLE answered: "master", "slave", "sentinel"; empty when the
// reply is not ROLE's.
std::string RoleOf(const redisReply* reply);

}  // namespace reliableq::redis

#endif  // RELIABLEQ_REDIS_DISCOVERY_H_
