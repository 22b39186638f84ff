#include "support/fake_clock.h"

namespace reliableq::testing {

namespace {

double WallSeconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

}  // namespace

FakeClock::FakeClock() : FakeClock(WallSeconds(), std::chrono::steady_clock::now()) {}

FakeClock::FakeClock(double now, std::chrono::steady_clock::time_point monotonic)
    : start_wall_(now), start_steady_(monotonic) {}

double FakeClock::Now() const {
  return start_wall_ + static_cast<double>(offset_ms_.load()) / 1000.0;
}

std::chrono::steady_clock::time_point FakeClock::Monotonic() const {
  return start_steady_ + std::chrono::milliseconds(offset_ms_.load());
}

void FakeClock::Advance(std::chrono::milliseconds by) { offset_ms_ += by.count(); }

}  // namespace reliableq::testing
