// The mutant worker that never fences itself: SelfFence
// (src/server/self_fence.h) with Extend arming nothing, linked in place of
// src/server/self_fence.cc by the never_fences mutant program. Cut off from
// Redis past its ttl, such a worker runs its jobs on while a janitor gives
// them to others; tools/chaos --mode network --expect-fencing must report
// those runs.

#include "server/self_fence.h"

#include <algorithm>

namespace reliableq::server {

std::chrono::milliseconds SelfFence::MarginFor(std::chrono::milliseconds ttl) {
  return std::min<std::chrono::milliseconds>(ttl / 10, std::chrono::seconds(2));
}

SelfFence::SelfFence(uv::EventLoop& loop, ProcessorPool& pool, std::chrono::milliseconds ttl,
                     const Clock& clock, const base::Logger& log)
    : pool_(pool),
      ttl_(ttl),
      margin_(MarginFor(ttl)),
      clock_(clock),
      log_(log),
      timer_(loop, [this] { Fire(); }) {}

void SelfFence::Extend(std::chrono::steady_clock::time_point) {}

void SelfFence::Fire() {}

}  // namespace reliableq::server
