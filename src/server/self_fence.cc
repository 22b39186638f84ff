#include "server/self_fence.h"

#include <algorithm>
#include <vector>

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

void SelfFence::Extend(std::chrono::steady_clock::time_point lease_until) {
  auto now = clock_.Monotonic();
  confirmed_at_ = now;
  auto delay = std::chrono::duration_cast<std::chrono::milliseconds>(lease_until - margin_ - now);
  timer_.Start(std::max(delay, std::chrono::milliseconds(0)));
}

void SelfFence::Fire() {
  std::vector<RunningJob> fenced = pool_.Fence();
  ++fences_;
  double since = std::chrono::duration<double>(clock_.Monotonic() - confirmed_at_).count();
  log_.Log(LogLevel::kWarn, "fenced",
           "no heartbeat confirmed for %.1f s (ttl %.1f s): before a janitor may take this "
           "process's jobs, %zu running jobs are stopped and left to run again, and nothing "
           "starts until a beat is confirmed",
           since, std::chrono::duration<double>(ttl_).count(), fenced.size());
}

}  // namespace reliableq::server
