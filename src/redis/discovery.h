// Discovery: where the master is, for every connection of a process.
//
// With a fixed address (redis://, rediss://, unix://) there is nothing to
// discover and no Discovery object: connections use Endpoint::Of(options).
// With Sentinel (options.sentinel.master_name set), a Discovery asks the
// sentinels, in turn, `SENTINEL get-master-addr-by-name NAME`; the first
// that names an address is asked first next time (the clients' procedure
// of Redis's Sentinel documentation). Each connection then checks ROLE
// after it connects (Connection, AsyncConnection): the sentinels may still
// name a master that was just demoted.
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
// One Discovery per sentinel setup per process (For() shares those with
// the same sentinels, master, database, sentinel credentials, timeout and
// TLS), so a
// worker's command, wake-up and janitor connections, and every Client and
// Admin of the process on the same sentinels, move together.
//
// Find() blocks while it asks: each sentinel gets options.sentinel.timeout
// to connect and as much for each reply (AUTH, the question), so a lookup
// takes at most about that times two or three, times the number of
// sentinels. One lookup runs at a time: a Find that arrives meanwhile
// waits for it and takes its answer, success or failure, rather than
// asking again, and Invalidate never waits for it. An AsyncConnection
// calls Find on the loop thread: a bound the worker's heartbeat ttl covers
// with the defaults (reliableq(1)).
//
// A sentinel that named an address that is not a master (ROLE, READONLY)
// goes to the end of the order, so that a stale sentinel cannot hide the
// others.
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

#include "redis/transport.h"
#include "reliableq/redis_options.h"
#include "reliableq/status.h"

namespace reliableq::redis {

class Discovery {
 public:
  // The process's Discovery for the sentinels and master name of
  // `options`, made on first use; null when options name no sentinel.
  static std::shared_ptr<Discovery> For(const RedisOptions& options);

  struct Master {
    Endpoint endpoint;
    uint64_t epoch = 0;
  };

  // The master as last found; when none is known (at first, or after
  // Invalidate), asks the sentinels. Fails with kIoError (kTimeout when
  // every sentinel timed out) naming every sentinel tried and what each
  // said, within the bound above.
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

  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }

  // "master 'mymaster' of sentinels 127.0.0.1:26379, 127.0.0.1:26380".
  std::string Describe() const;

  const RedisSentinelOptions& options() const { return options_; }
  // How to reach sentinel `i` (of options().sentinels): no database, the
  // sentinels' own credentials, their timeout, the TLS of the master's.
  RedisOptions SentinelOptions(size_t i) const;

  explicit Discovery(const RedisOptions& options);

 private:
  // Under mu_: records `found` as the master, raising the epoch when it
  // differs from the last one.
  void Take(const Endpoint& found);
  // Asks the sentinels in `order` (without mu_): the master and the index
  // in `order` of the sentinel that named it.
  Result<std::pair<Endpoint, size_t>> Ask(const std::vector<size_t>& order) const;

  const RedisSentinelOptions options_;
  const RedisTlsOptions tls_;
  std::mutex lookup_mu_;           // held by the one lookup under way
  std::mutex mu_;                  // held briefly; never while asking
  bool known_ = false;             // guarded by mu_
  Endpoint master_;                // guarded by mu_
  size_t named_by_ = 0;            // guarded by mu_: the sentinel that named master_
  std::vector<size_t> order_;      // guarded by mu_: sentinels in the order to ask
  uint64_t lookups_ = 0;           // guarded by mu_: lookups finished
  Status last_failure_;            // guarded by mu_: of the last lookup, if it failed
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
