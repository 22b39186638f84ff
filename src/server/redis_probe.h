// The worker's look at Redis before it starts: is it there, does it speak
// LMOVE (6.2 or later), are the scripts loaded, and is it set up so that it
// keeps jobs: a warning, logged once per Open, for a maxmemory-policy that
// may evict them, for a Redis without an append-only file (appendonly no),
// whose restart loses them, and for TLS without a check of the server's
// certificate.

#ifndef RELIABLEQ_SERVER_REDIS_PROBE_H_
#define RELIABLEQ_SERVER_REDIS_PROBE_H_

#include <memory>

#include "protocol/keys.h"
#include "base/log.h"
#include "redis/connection.h"
#include "reliableq/redis_options.h"
#include "reliableq/status.h"

namespace reliableq::server {

// The connection it probed through, ready for reuse. kIoError/kTimeout
// naming where it tried when Redis is unreachable; kInvalidArgument for a
// Redis older than 6.2, a node of a Redis Cluster reached without cluster
// options (options.cluster empty: it would answer MOVED), or one whose data
// follows another key layout than this build's (VerifyLayout, which records
// ours when there is none);
// kProtocol when INFO cannot be read; the error of a script Redis refused
// to load. In layout 2 it also lists the group in the directory of groups
// (AddToGroups).
Result<std::unique_ptr<redis::Connection>> ProbeRedis(const RedisOptions& options,
                                                      const protocol::Keys& keys, const base::Logger& log);

// SADD keys.group() to keys.Groups(), the one key outside every group, on a
// connection of its own that serves that key's slot (cluster.route_key), so
// that `reliableq groups` finds the group; nothing in layout 1. The entry
// outlives the group's data, harmlessly: a directory entry without data
// reads as an empty group. Errors as the connection reports them.
Status AddToGroups(const RedisOptions& options, const protocol::Keys& keys);

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_REDIS_PROBE_H_
