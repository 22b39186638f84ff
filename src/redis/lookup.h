// Lookup: one way for a Discovery (discovery.h) to find the server its
// connections go to. Two kinds: SentinelLookup asks sentinels where the
// master is (sentinel_lookup.h); ClusterLookup asks cluster nodes which
// primary owns a hash slot (cluster_lookup.h). The Discovery around a
// Lookup keeps what they share: the answer, the epoch, one lookup at a
// time, Invalidate and NotMaster.
//
// Thread safety: a Discovery calls Ask and Demote under its lookup lock,
// one at a time; Describe may be called from any thread (it reads only
// what the constructor set).

#ifndef RELIABLEQ_REDIS_LOOKUP_H_
#define RELIABLEQ_REDIS_LOOKUP_H_

#include <string>

#include "redis/transport.h"
#include "reliableq/status.h"

namespace reliableq::redis {

class Lookup {
 public:
  virtual ~Lookup() = default;
  // Asks the sources (sentinels, cluster nodes) in turn, the one that
  // answered last first, and returns the server the first answer names.
  // Blocks within the bound the options set; on failure the message names
  // every source tried and what each said: kTimeout when every source
  // timed out, kIoError otherwise.
  virtual Result<Endpoint> Ask() = 0;
  // The server Ask named last is not the master (ROLE says replica,
  // READONLY): the source that named it is asked last next time, so that
  // a stale source cannot hide the others.
  virtual void Demote() = 0;
  // What is looked for, after "the": "master 'mymaster' of sentinels
  // 127.0.0.1:26379, 127.0.0.1:26380", "primary of slot 5061 (key
  // '{orders}') of cluster 127.0.0.1:7000".
  virtual std::string Describe() const = 0;
};

}  // namespace reliableq::redis

#endif  // RELIABLEQ_REDIS_LOOKUP_H_
