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
// Invalidate: the next Master() asks the sentinels again.
//
// One Discovery per sentinel setup per process (For() shares them), so a
// worker's command, wake-up and janitor connections, and every Client and
// Admin of the process on the same sentinels, move together.
//
// Master() blocks: each sentinel gets options.sentinel.timeout to connect
// and answer, so a lookup takes at most that times the number of
// sentinels. An AsyncConnection calls it on the loop thread: a bound the
// worker's heartbeat ttl comfortably covers with the defaults (reliableq(1)).
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

  // A connection made at `epoch` found its server is not (or no longer)
  // the master: the next Find() asks the sentinels again. An older epoch
  // is ignored: the master was found again since.
  void Invalidate(uint64_t epoch);

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

  const RedisSentinelOptions options_;
  const RedisTlsOptions tls_;
  std::mutex mu_;
  bool known_ = false;             // guarded by mu_
  Endpoint master_;                // guarded by mu_
  std::vector<size_t> order_;      // guarded by mu_: sentinels in the order to ask
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
