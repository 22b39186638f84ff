// ServiceNotifier: tells the service manager that started the worker
// (systemd's notify protocol, Type=notify) how it is doing: READY=1 once the
// first heartbeat is in Redis, STOPPING=1 when a stop begins, STATUS= lines
// for `systemctl status`, and, when the unit sets WatchdogSec, WATCHDOG=1
// every half of it from the loop, so that a loop which no longer turns gets
// the process restarted. Redis being down does not stop the pings: a restart
// would not bring Redis back, and the worker reconnects by itself.
//
// libsystemd's sd_notify does the talking. It is loaded with dlopen only
// when NOTIFY_SOCKET is set: linked, it and the five libraries it needs would
// add about 1 MB to the resident memory of every worker, under systemd or
// not. Without NOTIFY_SOCKET there is no notifier at all.
//
// Thread safety: loop thread only.

#ifndef RELIABLEQ_SERVER_SERVICE_NOTIFIER_H_
#define RELIABLEQ_SERVER_SERVICE_NOTIFIER_H_

#include <memory>
#include <string_view>

#include "base/log.h"
#include "uv/event_loop.h"

namespace reliableq::server {

class ServiceNotifier {
 public:
  // Null when NOTIFY_SOCKET is not set, or (logged as a warning) when
  // libsystemd cannot be loaded. Starts the watchdog pings when the
  // environment asks for them (WATCHDOG_USEC, for this process).
  static std::unique_ptr<ServiceNotifier> FromEnvironment(uv::EventLoop& loop, const base::Logger& log);

  virtual ~ServiceNotifier() = default;
  // READY=1 with a status line; once, later calls only update the status.
  virtual void Ready(std::string_view status) = 0;
  virtual void Status(std::string_view status) = 0;
  // STOPPING=1 with a status line; the watchdog pings go on until the
  // notifier is destroyed (a stop waits for running jobs).
  virtual void Stopping(std::string_view status) = 0;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_SERVICE_NOTIFIER_H_
