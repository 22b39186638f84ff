// The plugin entry point: how `reliableq worker -r ./libmyjobs.so` finds the
// job classes of a shared library (Sidekiq's `-r`).
//
// A plugin is a shared library that defines exactly this C function:
//
//   #include "reliableq/plugin.h"
//   extern "C" int reliableq_register(reliableq::HandlerRegistry* registry,
//                                     int abi_version) {
//     if (abi_version != RELIABLEQ_PLUGIN_ABI_VERSION) return 1;
//     registry->Register("EmailJob", [](const reliableq::JobView& job) { ... });
//     return 0;
//   }
//
// Contract:
// - The worker dlopens each -r library in the order given and calls its
//   reliableq_register once, on the main thread, before any job runs.
// - `registry` is valid only during the call; the handlers registered stay
//   in use until the worker exits, and the library is never unloaded.
// - Return 0 on success. Any other value stops the worker before it starts,
//   with exit status 1 and a message naming the library.
// - The plugin must be built with the same compiler and standard library as
//   the worker (the registry holds C++ objects), against the same version of
//   these headers; `abi_version` lets it refuse a mismatch.

#ifndef RELIABLEQ_PLUGIN_H_
#define RELIABLEQ_PLUGIN_H_

#include "reliableq/handler.h"

// Bumped whenever HandlerRegistry, Handler, JobView or the outcomes a
// handler throws (handler.h) change layout.
#define RELIABLEQ_PLUGIN_ABI_VERSION 5

// The symbol the worker looks up.
#define RELIABLEQ_PLUGIN_ENTRY_POINT "reliableq_register"

extern "C" {
typedef int (*reliableq_register_fn)(reliableq::HandlerRegistry* registry, int abi_version);
}

#endif  // RELIABLEQ_PLUGIN_H_
