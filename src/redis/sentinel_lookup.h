// SentinelLookup: the master of a Sentinel setup, found by asking the
// sentinels, in turn, `SENTINEL get-master-addr-by-name NAME` (the
// clients' procedure of Redis's Sentinel documentation). The sentinel that
// answered is asked first next time; one that named a replica goes last.
// Each sentinel gets options.sentinel.timeout to connect and as much for
// each reply (AUTH, the question).
//
// Thread safety: see lookup.h.

#ifndef RELIABLEQ_REDIS_SENTINEL_LOOKUP_H_
#define RELIABLEQ_REDIS_SENTINEL_LOOKUP_H_

#include <cstddef>
#include <string>
#include <vector>

#include "redis/lookup.h"
#include "reliableq/redis_options.h"

namespace reliableq::redis {

class SentinelLookup : public Lookup {
 public:
  explicit SentinelLookup(const RedisOptions& options);

  Result<Endpoint> Ask() override;
  void Demote() override;
  std::string Describe() const override;

 private:
  const RedisSentinelOptions options_;
  const RedisTlsOptions tls_;
  std::vector<size_t> order_;  // sentinels in the order to ask
  size_t named_by_ = 0;        // the sentinel that named the last answer
};

// How to reach sentinel `i` of `sentinel`: no database, the sentinels' own
// credentials, their timeout, the TLS of the master's.
RedisOptions SentinelConnectionOptions(const RedisSentinelOptions& sentinel,
                                       const RedisTlsOptions& tls, size_t i);

}  // namespace reliableq::redis

#endif  // RELIABLEQ_REDIS_SENTINEL_LOOKUP_H_
