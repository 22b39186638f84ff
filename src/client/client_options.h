// The checks Client::Open makes of its options before it connects, and the
// Redis options its connection gets from them.
//
// Thread safety: a pure function.

#ifndef RELIABLEQ_CLIENT_CLIENT_OPTIONS_H_
#define RELIABLEQ_CLIENT_CLIENT_OPTIONS_H_

#include "reliableq/client.h"
#include "reliableq/redis_options.h"
#include "reliableq/status.h"

namespace reliableq::client {

// Checks wait_replicas, wait_timeout and, with a spool, its replay window,
// and the key prefix with the queue
// group of `options` (CheckKeyLayout), and returns `options` with the
// command timeout lengthened by wait_timeout when the client waits for
// replicas: a round trip's last reply, WAIT's, may come that much later
// than the replies before it, and the connection takes a reply that is
// later than its command timeout for a broken Redis. kInvalidArgument with
// a one-line reason.
Result<RedisOptions> ClientConnectionOptions(const RedisOptions& options,
                                             const ClientOptions& client);

}  // namespace reliableq::client

#endif  // RELIABLEQ_CLIENT_CLIENT_OPTIONS_H_
