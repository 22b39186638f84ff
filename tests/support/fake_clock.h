// A clock that moves only when the test moves it, for code that takes its
// time from an injected Clock (include/reliableq/clock.h).

#ifndef RELIABLEQ_TESTS_FAKE_CLOCK_H_
#define RELIABLEQ_TESTS_FAKE_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>

#include "reliableq/clock.h"

namespace reliableq::testing {

// Advance moves Now() and Monotonic() together. Safe to read from every
// thread.
class FakeClock final : public Clock {
 public:
  // Starts at the real time of construction: Now() at the wall clock's (so
  // Redis's own TTLs and Sidekiq's readers still see plausible times),
  // Monotonic() at the steady clock's.
  FakeClock();
  // Starts at the readings given, for tests that compare with exact times.
  FakeClock(double now, std::chrono::steady_clock::time_point monotonic);

  double Now() const override;
  std::chrono::steady_clock::time_point Monotonic() const override;
  void Advance(std::chrono::milliseconds by);

 private:
  const double start_wall_;
  const std::chrono::steady_clock::time_point start_steady_;
  std::atomic<int64_t> offset_ms_{0};
};

}  // namespace reliableq::testing

#endif  // RELIABLEQ_TESTS_FAKE_CLOCK_H_
