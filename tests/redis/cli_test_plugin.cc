// Plugins for tests/redis/cli_test.cc, built once per behaviour with
// -DCLI_TEST_PLUGIN_KIND=<n>:
//   1  reliableq_register returns 7 (the worker must refuse to start);
//   2  registers nothing (a usage error: no job classes);
//   3  registers one class, CliTestJob, that does nothing.

#include "reliableq/plugin.h"

#ifndef CLI_TEST_PLUGIN_KIND
#error "CLI_TEST_PLUGIN_KIND must be 1, 2 or 3"
#endif

extern "C" __attribute__((visibility("default"))) int reliableq_register(
    reliableq::HandlerRegistry* registry, int abi_version) {
  if (abi_version != RELIABLEQ_PLUGIN_ABI_VERSION) return 1;
#if CLI_TEST_PLUGIN_KIND == 1
  (void)registry;
  return 7;
#elif CLI_TEST_PLUGIN_KIND == 2
  (void)registry;
  return 0;
#else
  registry->Register("CliTestJob", [](const reliableq::JobView&) {});
  return 0;
#endif
}
