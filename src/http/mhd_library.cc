#include "http/mhd_library.h"

#include <memory>
#include <string>

#include "base/dynamic_library.h"

namespace reliableq::http {

namespace {

constexpr const char* kSoname = "libmicrohttpd.so.12";
constexpr const char* kPackageHint = " (Debian's package libmicrohttpd12 provides it)";

}  // namespace

Result<const MhdLibrary*> MhdLibrary::Load() {
  // A function-local static: the first caller opens the library while any
  // other waits, and every later call gets the same answer without a lock.
  static const Result<const MhdLibrary*> loaded = Open();
  return loaded;
}

Result<const MhdLibrary*> MhdLibrary::Open() {
  void* handle = dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Status::NotFound(std::string("serving HTTP needs ") + kSoname + kPackageHint + ": " +
                            (why != nullptr ? why : "dlopen failed"));
  }
  // On success never freed, like the library it points into.
  std::unique_ptr<MhdLibrary> mhd(new MhdLibrary());
  const char* missing = nullptr;
#define RELIABLEQ_RESOLVE(member, name) \
  if (missing == nullptr && !base::ResolveFunction(handle, name, &mhd->member)) missing = name
  RELIABLEQ_RESOLVE(start_daemon, "MHD_start_daemon");
  RELIABLEQ_RESOLVE(stop_daemon, "MHD_stop_daemon");
  RELIABLEQ_RESOLVE(get_connection_values, "MHD_get_connection_values");
  RELIABLEQ_RESOLVE(get_connection_info, "MHD_get_connection_info");
  RELIABLEQ_RESOLVE(create_response_from_buffer, "MHD_create_response_from_buffer");
  RELIABLEQ_RESOLVE(add_response_header, "MHD_add_response_header");
  RELIABLEQ_RESOLVE(queue_response, "MHD_queue_response");
  RELIABLEQ_RESOLVE(destroy_response, "MHD_destroy_response");
  RELIABLEQ_RESOLVE(suspend_connection, "MHD_suspend_connection");
  RELIABLEQ_RESOLVE(resume_connection, "MHD_resume_connection");
#undef RELIABLEQ_RESOLVE
  if (missing != nullptr) {
    dlclose(handle);
    return Status::NotFound(std::string(kSoname) + " lacks " + missing + kPackageHint);
  }
  return static_cast<const MhdLibrary*>(mhd.release());
}

}  // namespace reliableq::http
