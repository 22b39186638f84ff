// A plugin for crash_test.cc: FailSlowlyJob throws, and its class's
// retry_in stalls for args[0] milliseconds first, which holds the worker in
// the window between a job's failure and its move to the retry set, so a
// test can SIGKILL it exactly there.

#include <chrono>
#include <stdexcept>
#include <thread>

#include "reliableq/plugin.h"

extern "C" __attribute__((visibility("default"))) int reliableq_register(
    reliableq::HandlerRegistry* registry, int abi_version) {
  if (abi_version != RELIABLEQ_PLUGIN_ABI_VERSION) return 1;
  reliableq::JobClassOptions options;
  options.retry_in = [](int, const reliableq::JobError&) {
    std::this_thread::sleep_for(std::chrono::seconds(30));
    return reliableq::RetryIn::Default();
  };
  registry->Register(
      "FailSlowlyJob",
      [](const reliableq::JobView&) { throw std::runtime_error("failing slowly"); }, options);
  return 0;
}
