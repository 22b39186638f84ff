// MhdLibrary: GNU libmicrohttpd, loaded with dlopen when the first
// HttpListener starts (the worker's --http, `reliableq web`).
//
// Why not link it: Debian builds libmicrohttpd with GnuTLS, and loading
// GnuTLS with its libraries costs a process about 3 MB of resident memory
// (the idle worker is about 5 MB), whether or not it serves HTTP; the
// library is linked by every program that pushes a job. The header gives
// the types and constants; the functions come from libmicrohttpd.so.12 at
// run time, only in a process with a listener.
//
// Thread safety: Load from any thread, at the same time too; the library
// and its function pointers are then immutable.

#ifndef RELIABLEQ_HTTP_MHD_LIBRARY_H_
#define RELIABLEQ_HTTP_MHD_LIBRARY_H_

#include <microhttpd.h>

#include "reliableq/status.h"

namespace reliableq::http {

class MhdLibrary {
 public:
  // libmicrohttpd.so.12, opened once per process; later calls return the
  // same library, or the same error. Never unloaded. kNotFound naming the
  // library, dlerror()'s reason and the Debian package that provides it
  // (libmicrohttpd12) when it is missing or lacks a function.
  static Result<const MhdLibrary*> Load();

  MhdLibrary(const MhdLibrary&) = delete;
  MhdLibrary& operator=(const MhdLibrary&) = delete;

  decltype(&MHD_start_daemon) start_daemon = nullptr;
  decltype(&MHD_stop_daemon) stop_daemon = nullptr;
  decltype(&MHD_get_connection_values) get_connection_values = nullptr;
  decltype(&MHD_get_connection_info) get_connection_info = nullptr;
  decltype(&MHD_create_response_from_buffer) create_response_from_buffer = nullptr;
  decltype(&MHD_add_response_header) add_response_header = nullptr;
  decltype(&MHD_queue_response) queue_response = nullptr;
  decltype(&MHD_destroy_response) destroy_response = nullptr;
  decltype(&MHD_suspend_connection) suspend_connection = nullptr;
  decltype(&MHD_resume_connection) resume_connection = nullptr;

 private:
  MhdLibrary() = default;
  static Result<const MhdLibrary*> Open();
};

}  // namespace reliableq::http

#endif  // RELIABLEQ_HTTP_MHD_LIBRARY_H_
