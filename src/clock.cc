#include "reliableq/clock.h"

namespace reliableq {

namespace {

class SystemClockImpl final : public Clock {
 public:
  double Now() const override {
    using namespace std::chrono;
    return duration<double>(system_clock::now().time_since_epoch()).count();
  }
  std::chrono::steady_clock::time_point Monotonic() const override {
    return std::chrono::steady_clock::now();
  }
};

}  // namespace

std::shared_ptr<const Clock> SystemClock() {
  // Never destroyed: servers on detached threads may read it during exit.
  static const auto* clock = new std::shared_ptr<const Clock>(std::make_shared<SystemClockImpl>());
  return *clock;
}

}  // namespace reliableq
