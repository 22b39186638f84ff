#include "server/service_notifier.h"

#include <dlfcn.h>
#include <systemd/sd-daemon.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "uv/handles.h"

namespace reliableq::server {

namespace {

// libsystemd.so.0, open for as long as this lives.
class LibSystemd {
 public:
  // Null, with the reason in `error`, when the library or a symbol is missing.
  static std::unique_ptr<LibSystemd> Load(std::string* error) {
    void* handle = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      *error = why != nullptr ? why : "dlopen failed";
      return nullptr;
    }
    auto lib = std::unique_ptr<LibSystemd>(new LibSystemd(handle));
    lib->notify = reinterpret_cast<decltype(&sd_notify)>(dlsym(handle, "sd_notify"));
    lib->watchdog_enabled =
        reinterpret_cast<decltype(&sd_watchdog_enabled)>(dlsym(handle, "sd_watchdog_enabled"));
    if (lib->notify == nullptr || lib->watchdog_enabled == nullptr) {
      *error = "libsystemd.so.0 lacks sd_notify or sd_watchdog_enabled";
      return nullptr;
    }
    return lib;
  }

  ~LibSystemd() { dlclose(handle_); }
  LibSystemd(const LibSystemd&) = delete;
  LibSystemd& operator=(const LibSystemd&) = delete;

  decltype(&sd_notify) notify = nullptr;
  decltype(&sd_watchdog_enabled) watchdog_enabled = nullptr;

 private:
  explicit LibSystemd(void* handle) : handle_(handle) {}
  void* handle_;
};

// One line of the protocol's "KEY=VALUE" lines: a newline in the value
// would start another assignment.
std::string OneLine(std::string_view text) {
  std::string line(text);
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return line;
}

class SystemdNotifier final : public ServiceNotifier {
 public:
  SystemdNotifier(uv::EventLoop& loop, std::unique_ptr<LibSystemd> lib, const base::Logger& log)
      : lib_(std::move(lib)), log_(log), watchdog_(loop, [this] { Send("WATCHDOG=1"); }) {
    uint64_t usec = 0;
    // > 0 only when WATCHDOG_USEC is set and WATCHDOG_PID, if set, is ours.
    if (lib_->watchdog_enabled(0, &usec) > 0 && usec > 0) {
      auto half = std::chrono::milliseconds(std::max<uint64_t>(1, usec / 2000));
      watchdog_.Start(half, half);
      log_.Log(LogLevel::kInfo, "systemd_watchdog", "systemd watchdog: pinging every %.3f s",
               static_cast<double>(half.count()) / 1000);
    }
  }

  void Ready(std::string_view status) override {
    Send((ready_ ? "" : "READY=1\n") + ("STATUS=" + OneLine(status)));
    ready_ = true;
  }
  void Status(std::string_view status) override { Send("STATUS=" + OneLine(status)); }
  void Stopping(std::string_view status) override { Send("STOPPING=1\nSTATUS=" + OneLine(status)); }

 private:
  void Send(const std::string& message) {
    int rc = lib_->notify(0, message.c_str());
    // Logged once: a manager that went away would otherwise fill the log
    // at every watchdog tick.
    if (rc < 0 && !failure_logged_) {
      failure_logged_ = true;
      const char* why = std::strerror(-rc);
      log_.Log(LogLevel::kWarn, base::LogEvent("systemd_notify_failed").WithError(why),
               "systemd notification failed: %s", why);
    }
  }

  std::unique_ptr<LibSystemd> lib_;
  const base::Logger& log_;
  uv::Timer watchdog_;
  bool ready_ = false;
  bool failure_logged_ = false;
};

}  // namespace

std::unique_ptr<ServiceNotifier> ServiceNotifier::FromEnvironment(uv::EventLoop& loop,
                                                                  const base::Logger& log) {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  if (socket == nullptr || *socket == '\0') return nullptr;
  std::string error;
  std::unique_ptr<LibSystemd> lib = LibSystemd::Load(&error);
  if (lib == nullptr) {
    log.Log(LogLevel::kWarn, base::LogEvent("systemd_unavailable").WithError(error),
            "NOTIFY_SOCKET is set but systemd cannot be told: %s", error.c_str());
    return nullptr;
  }
  return std::make_unique<SystemdNotifier>(loop, std::move(lib), log);
}

}  // namespace reliableq::server
