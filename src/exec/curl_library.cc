#include "exec/curl_library.h"

#include <memory>
#include <string>

#include "base/dynamic_library.h"

namespace reliableq::exec {

namespace {

constexpr const char* kSoname = "libcurl.so.4";
constexpr const char* kPackageHint = " (Debian's package libcurl4 provides it)";
// CURLOPT_PROTOCOLS_STR, which keeps requests and redirects to http and
// https, came with 7.85.0; curl_easy_header with 7.83, curl_multi_poll and
// curl_multi_wakeup with 7.68.
constexpr unsigned kOldestVersion = 0x075500;

}  // namespace

Result<const CurlLibrary*> CurlLibrary::Load() {
  // A function-local static: the first caller opens the library while any
  // other waits, and every later call gets the same answer without a lock.
  static const Result<const CurlLibrary*> loaded = Open();
  return loaded;
}

Result<const CurlLibrary*> CurlLibrary::Open() {
  void* handle = dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Status::NotFound(std::string("HTTP handlers need ") + kSoname + kPackageHint + ": " +
                            (why != nullptr ? why : "dlopen failed"));
  }
  // On success never freed, like the library it points into: see Load in
  // the header. On failure both go: nothing points into them.
  std::unique_ptr<CurlLibrary> curl(new CurlLibrary());
  auto fail = [handle](Status status) {
    dlclose(handle);
    return status;
  };
  const char* missing = nullptr;
#define RELIABLEQ_RESOLVE(member, name) \
  if (missing == nullptr && !base::ResolveFunction(handle, name, &curl->member)) missing = name
  RELIABLEQ_RESOLVE(global_init, "curl_global_init");
  RELIABLEQ_RESOLVE(version_info, "curl_version_info");
  RELIABLEQ_RESOLVE(easy_init, "curl_easy_init");
  RELIABLEQ_RESOLVE(easy_setopt, "curl_easy_setopt");
  RELIABLEQ_RESOLVE(easy_getinfo, "curl_easy_getinfo");
  RELIABLEQ_RESOLVE(easy_reset, "curl_easy_reset");
  RELIABLEQ_RESOLVE(easy_cleanup, "curl_easy_cleanup");
  RELIABLEQ_RESOLVE(easy_strerror, "curl_easy_strerror");
  RELIABLEQ_RESOLVE(easy_header, "curl_easy_header");
  RELIABLEQ_RESOLVE(getdate, "curl_getdate");
  RELIABLEQ_RESOLVE(slist_append, "curl_slist_append");
  RELIABLEQ_RESOLVE(slist_free_all, "curl_slist_free_all");
  RELIABLEQ_RESOLVE(multi_init, "curl_multi_init");
  RELIABLEQ_RESOLVE(multi_add_handle, "curl_multi_add_handle");
  RELIABLEQ_RESOLVE(multi_remove_handle, "curl_multi_remove_handle");
  RELIABLEQ_RESOLVE(multi_perform, "curl_multi_perform");
  RELIABLEQ_RESOLVE(multi_poll, "curl_multi_poll");
  RELIABLEQ_RESOLVE(multi_wakeup, "curl_multi_wakeup");
  RELIABLEQ_RESOLVE(multi_info_read, "curl_multi_info_read");
  RELIABLEQ_RESOLVE(multi_strerror, "curl_multi_strerror");
  RELIABLEQ_RESOLVE(multi_cleanup, "curl_multi_cleanup");
#undef RELIABLEQ_RESOLVE
  if (missing != nullptr) {
    return fail(Status::NotFound(std::string(kSoname) + " lacks " + missing + kPackageHint));
  }
  const curl_version_info_data* info = curl->version_info(CURLVERSION_NOW);
  if (info == nullptr || info->version_num < kOldestVersion) {
    return fail(Status::NotFound(std::string(kSoname) + " is libcurl " +
                                 (info != nullptr ? info->version : "of an unknown version") +
                                 "; HTTP handlers need 7.85.0 or newer" + kPackageHint));
  }
  curl->version_ = info->version;
  CURLcode rc = curl->global_init(CURL_GLOBAL_DEFAULT);
  if (rc != CURLE_OK) {
    return fail(Status::NotFound(std::string(kSoname) +
                                 " could not initialise: " + curl->easy_strerror(rc)));
  }
  return static_cast<const CurlLibrary*>(curl.release());
}

bool CurlList::Append(const char* line) {
  curl_slist* head = curl_->slist_append(head_, line);
  if (head == nullptr) return false;
  head_ = head;
  return true;
}

}  // namespace reliableq::exec
