// The dead set's limits.
//
// Thread safety: a plain value.

#ifndef RELIABLEQ_DEAD_SET_H_
#define RELIABLEQ_DEAD_SET_H_

#include <chrono>
#include <cstdint>

namespace reliableq {

// Sidekiq's dead-set limits, which a worker applies to each job it kills
// (ServerOptions::dead_set) and Admin's Kill and KillAll to theirs: at most
// max_jobs - 1 members after an insert (Sidekiq's off-by-one) and none
// older than timeout. The defaults are Sidekiq's.
struct DeadSetLimits {
  int64_t max_jobs = 10000;
  std::chrono::seconds timeout{180 * 24 * 3600};
};

}  // namespace reliableq

#endif  // RELIABLEQ_DEAD_SET_H_
