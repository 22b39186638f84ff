// SelfFence: stops this process's running jobs before a janitor may take
// them.
//
// A janitor takes a process for dead once its heartbeat key is gone (after
// the ttl of the last beat Redis applied) and gives its jobs to others. A
// worker cut off from Redis (a partition, a Redis that stalls) cannot beat,
// but its handlers go on running, so without a fence the same job would run
// here and elsewhere at once. The lease (Heartbeat's `lease_until`: the
// send time of the last confirmed beat plus nine tenths of the ttl) is the
// moment up to which no janitor can have done that; kMargin before it, with
// no newer beat confirmed, the fence:
// - stops every running job (ProcessorPool::Fence: a C++ handler's stop
//   token, a command handler's process group SIGKILLed, an HTTP request
//   abandoned) and drops its outcome: the job stays in its working list,
//   for the janitor to recover, or for the reconcile to requeue when the
//   next beat finds this process alive;
// - starts nothing more: the pool starts jobs only within the lease.
// A beat confirmed later moves the fence (Extend); the jobs fenced before
// it still end without an outcome.
//
// The window left: a C++ handler that ignores its stop token runs on, and
// a process that is not scheduled at all (SIGSTOP, a frozen VM) fences
// nothing; both may run a job that a janitor gave to another worker
// (reliableq-schema(7), I2b).
//
// Thread safety: loop thread only.

#ifndef RELIABLEQ_SERVER_SELF_FENCE_H_
#define RELIABLEQ_SERVER_SELF_FENCE_H_

#include <chrono>
#include <cstdint>

#include "base/log.h"
#include "reliableq/clock.h"
#include "server/processor_pool.h"
#include "uv/event_loop.h"
#include "uv/handles.h"

namespace reliableq::server {

class SelfFence {
 public:
  // How long before the lease runs out the fence stops the running jobs:
  // time for command handlers' groups to die and HTTP requests to be
  // abandoned, and for C++ handlers to see their token, at most a tenth of
  // the ttl.
  static std::chrono::milliseconds MarginFor(std::chrono::milliseconds ttl);

  SelfFence(uv::EventLoop& loop, ProcessorPool& pool, std::chrono::milliseconds ttl,
            const Clock& clock, const base::Logger& log);

  // A beat was confirmed: the fence moves to `lease_until` - margin (on
  // the clock's Monotonic()).
  void Extend(std::chrono::steady_clock::time_point lease_until);
  // The fence fires no more (the stop's hand-back takes over).
  void Close() { timer_.Close(); }

  // Fences fired since the start.
  uint64_t fences() const { return fences_; }

 private:
  void Fire();

  ProcessorPool& pool_;
  const std::chrono::milliseconds ttl_;
  const std::chrono::milliseconds margin_;
  const Clock& clock_;
  const base::Logger& log_;
  uv::Timer timer_;
  std::chrono::steady_clock::time_point confirmed_at_{};
  uint64_t fences_ = 0;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_SELF_FENCE_H_
