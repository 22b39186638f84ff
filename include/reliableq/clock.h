// Clock: where reliableq reads the time, so that tests can set it.
//
// Two readings, because they answer different questions:
// - Now(): wall time in epoch seconds, for what Redis stores and Sidekiq
//   reads (enqueued_at, retry and schedule scores, failed_at, the dated stat
//   keys, a process's beat);
// - Monotonic(): for deadlines and leases inside one process (the shutdown
//   timeout, how long a heartbeat is known to hold), which must not move
//   when the wall clock is set.
//
// ServerOptions, ClientOptions and AdminOptions take a clock; an empty one
// means SystemClock(). Timers of the worker's event loop still run on real
// time: a fake clock decides what is due when they fire, not when they fire.
//
// Thread safety: a Clock is read from every thread of a Server (the loop and
// the processors), so an implementation must be safe for concurrent reads.

#ifndef RELIABLEQ_CLOCK_H_
#define RELIABLEQ_CLOCK_H_

#include <chrono>
#include <memory>

namespace reliableq {

class Clock {
 public:
  virtual ~Clock() = default;

  // Seconds since the Unix epoch, with sub-second precision.
  virtual double Now() const = 0;

  // A clock that never goes back; only differences between its readings
  // mean anything.
  virtual std::chrono::steady_clock::time_point Monotonic() const = 0;
};

// The system's clocks (system_clock and steady_clock). Never null; lives
// until the program ends.
std::shared_ptr<const Clock> SystemClock();

}  // namespace reliableq

#endif  // RELIABLEQ_CLOCK_H_
