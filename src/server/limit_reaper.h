// ReapLimits: the janitor's pass over limits (reliableq/limits.h), the
// counterpart of LimitGate (limit_gate.h) for the slots of processes that
// died holding them.
//
// Thread safety: blocking; on the janitor's thread, with its connection.

#ifndef RELIABLEQ_SERVER_LIMIT_REAPER_H_
#define RELIABLEQ_SERVER_LIMIT_REAPER_H_

#include <cstdint>

#include "protocol/keys.h"
#include "redis/connection.h"
#include "reliableq/status.h"

namespace reliableq::server {

// Frees the slots of dead processes and moves parked jobs back while there
// is room (limit_reap.lua per limiter in `limits`). Returns the number of
// slots freed.
Result<int64_t> ReapLimits(redis::Connection& redis, const protocol::Keys& keys, double now);

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_LIMIT_REAPER_H_
