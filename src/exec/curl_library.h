// CurlLibrary: libcurl, loaded with dlopen the first time an HTTP handler
// needs it, and RAII owners for its handles.
//
// Why not link it: linking libcurl (and through it its TLS, SSH, LDAP and
// HTTP/2 libraries) costs every process of the program about 4 MB of
// resident memory, more than half of an idle worker, whether or not it has
// HTTP handlers. The headers give the types and constants; the functions
// come from libcurl.so.4 at run time, only in a worker that posts jobs.
//
//   Result<const CurlLibrary*> curl = CurlLibrary::Load();
//   if (!curl.ok()) return curl.status();
//   CurlEasy easy((*curl)->NewEasy());
//
// Thread safety: Load from any thread, at the same time too; the library
// and its function pointers are then immutable. Handles follow libcurl's
// rule: one thread at a time per handle.

#ifndef RELIABLEQ_EXEC_CURL_LIBRARY_H_
#define RELIABLEQ_EXEC_CURL_LIBRARY_H_

#include <curl/curl.h>

#include <utility>

#include "reliableq/status.h"

namespace reliableq::exec {

class CurlLibrary {
 public:
  // libcurl.so.4, opened and initialised (curl_global_init) once per
  // process; later calls return the same library, or the same error. It is
  // never unloaded: libcurl's global cleanup is not safe while other
  // libraries (OpenSSL) may still be in use. kNotFound naming libcurl.so.4,
  // dlerror()'s reason and the Debian package that provides it (libcurl4)
  // when it is missing, lacks a function or is older than 7.85 (the first
  // with CURLOPT_PROTOCOLS_STR).
  static Result<const CurlLibrary*> Load();

  CurlLibrary(const CurlLibrary&) = delete;
  CurlLibrary& operator=(const CurlLibrary&) = delete;

  // "7.88.1", from curl_version_info.
  const char* version() const { return version_; }

  decltype(&curl_global_init) global_init = nullptr;
  decltype(&curl_version_info) version_info = nullptr;
  decltype(&curl_easy_init) easy_init = nullptr;
  decltype(&curl_easy_setopt) easy_setopt = nullptr;
  decltype(&curl_easy_getinfo) easy_getinfo = nullptr;
  decltype(&curl_easy_reset) easy_reset = nullptr;
  decltype(&curl_easy_cleanup) easy_cleanup = nullptr;
  decltype(&curl_easy_strerror) easy_strerror = nullptr;
  decltype(&curl_easy_header) easy_header = nullptr;
  decltype(&curl_getdate) getdate = nullptr;
  decltype(&curl_slist_append) slist_append = nullptr;
  decltype(&curl_slist_free_all) slist_free_all = nullptr;
  decltype(&curl_multi_init) multi_init = nullptr;
  decltype(&curl_multi_add_handle) multi_add_handle = nullptr;
  decltype(&curl_multi_remove_handle) multi_remove_handle = nullptr;
  decltype(&curl_multi_perform) multi_perform = nullptr;
  decltype(&curl_multi_poll) multi_poll = nullptr;
  decltype(&curl_multi_wakeup) multi_wakeup = nullptr;
  decltype(&curl_multi_info_read) multi_info_read = nullptr;
  decltype(&curl_multi_strerror) multi_strerror = nullptr;
  decltype(&curl_multi_cleanup) multi_cleanup = nullptr;

 private:
  CurlLibrary() = default;
  static Result<const CurlLibrary*> Open();

  const char* version_ = "";
};

// Owns a handle that CurlLibrary's `Init` makes and `Free` releases. Empty
// when default-made or when `Init` failed.
template <typename Handle, auto Init, auto Free>
class CurlHandle {
 public:
  CurlHandle() = default;
  explicit CurlHandle(const CurlLibrary& curl) : curl_(&curl), handle_((curl.*Init)()) {}
  ~CurlHandle() { Reset(); }
  CurlHandle(CurlHandle&& other) noexcept
      : curl_(other.curl_), handle_(std::exchange(other.handle_, nullptr)) {}
  CurlHandle& operator=(CurlHandle&& other) noexcept {
    if (this != &other) {
      Reset();
      curl_ = other.curl_;
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }

  Handle* get() const { return handle_; }
  explicit operator bool() const { return handle_ != nullptr; }

 private:
  void Reset() {
    if (handle_ != nullptr) (curl_->*Free)(handle_);
    handle_ = nullptr;
  }

  const CurlLibrary* curl_ = nullptr;
  Handle* handle_ = nullptr;
};

// A CURL* easy handle (curl_easy_cleanup).
using CurlEasy = CurlHandle<CURL, &CurlLibrary::easy_init, &CurlLibrary::easy_cleanup>;
// A CURLM* multi handle (curl_multi_cleanup); remove easy handles before it
// goes.
using CurlMulti = CurlHandle<CURLM, &CurlLibrary::multi_init, &CurlLibrary::multi_cleanup>;

// Owns a curl_slist (curl_slist_free_all), the list of header lines.
class CurlList {
 public:
  explicit CurlList(const CurlLibrary& curl) : curl_(&curl) {}
  ~CurlList() {
    if (head_ != nullptr) curl_->slist_free_all(head_);
  }
  CurlList(const CurlList&) = delete;
  CurlList& operator=(const CurlList&) = delete;

  // Appends a copy of `line`; false when out of memory (the list is kept).
  bool Append(const char* line);
  curl_slist* get() const { return head_; }

 private:
  const CurlLibrary* curl_;
  curl_slist* head_ = nullptr;
};

}  // namespace reliableq::exec

#endif  // RELIABLEQ_EXEC_CURL_LIBRARY_H_
