// ClusterLookup: the primary that owns one hash slot of a Redis Cluster,
// found by asking the seeds, then the other nodes learned from earlier
// answers, CLUSTER SLOTS. The node that answered is asked first next time;
// one that named a primary that turned out to be a replica goes last.
//
// Why CLUSTER SLOTS and not CLUSTER SHARDS: SLOTS is served by every
// cluster since Redis 3.0 and by the managed forms that restrict commands,
// and its answer (slot ranges, each with its primary first) is exactly the
// question asked here; SHARDS needs Redis 7 and adds per-node health that a
// connection does not use (a dead primary shows as a failed connect, a
// demoted one through ROLE). SLOTS being deprecated in 7 changes nothing
// yet: it is still served and documented.
//
// Each node gets options.connect_timeout to connect and as much for each
// reply (AUTH, CLUSTER SLOTS), with the connection's credentials and TLS.
// At most kMaxNodes nodes are remembered, so a lookup is bounded by about
// that many nodes times two or three times connect_timeout.
//
// Thread safety: see lookup.h.

#ifndef RELIABLEQ_REDIS_CLUSTER_LOOKUP_H_
#define RELIABLEQ_REDIS_CLUSTER_LOOKUP_H_

#include <hiredis/hiredis.h>

#include <string>
#include <vector>

#include "redis/lookup.h"
#include "reliableq/redis_options.h"

namespace reliableq::redis {

class ClusterLookup : public Lookup {
 public:
  static constexpr size_t kMaxNodes = 64;

  explicit ClusterLookup(const RedisOptions& options);

  Result<Endpoint> Ask() override;
  void Demote() override;
  std::string Describe() const override;

 private:
  // How to reach `node`: its address, the connection's credentials, TLS
  // and connect timeout (also as the command timeout), no cluster.
  RedisOptions NodeOptions(const Endpoint& node) const;
  // Adds `node` to nodes_ unless known or nodes_ is full.
  void Learn(const Endpoint& node);

  const RedisOptions options_;  // the connection's, for NodeOptions
  const int slot_;
  const std::string description_;
  std::vector<Endpoint> nodes_;  // in the order to ask: seeds, then learned
  Endpoint named_by_;            // the node that named the last answer
};

// From a CLUSTER SLOTS reply asked of `asked`: the primary owning `slot`
// (NotFound when no range covers it) and, in *nodes, every node the reply
// names. A node named with an empty or "?" address is `asked`'s host (a
// node that does not know its own address).
Result<Endpoint> ParseClusterSlots(const redisReply* reply, int slot, const Endpoint& asked,
                                   std::vector<Endpoint>* nodes);

}  // namespace reliableq::redis

#endif  // RELIABLEQ_REDIS_CLUSTER_LOOKUP_H_
