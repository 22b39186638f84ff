// What the libraries opened with dlopen share (exec/curl_library.cc,
// http/mhd_library.cc): their functions, each resolved by name into a
// pointer of the type its header declares.

#ifndef RELIABLEQ_BASE_DYNAMIC_LIBRARY_H_
#define RELIABLEQ_BASE_DYNAMIC_LIBRARY_H_

#include <dlfcn.h>

namespace reliableq::base {

// Sets `*slot` to the function `name` of `handle`; false when it is absent.
template <typename Function>
bool ResolveFunction(void* handle, const char* name, Function* slot) {
  *slot = reinterpret_cast<Function>(dlsym(handle, name));
  return *slot != nullptr;
}

}  // namespace reliableq::base

#endif  // RELIABLEQ_BASE_DYNAMIC_LIBRARY_H_
