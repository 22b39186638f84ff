#include "server/control.h"

#include <csignal>
#include <utility>

namespace reliableq::server {

Control::Control(uv::EventLoop& loop, bool handle_signals, const base::Logger& log, Actions actions)
    : log_(log), actions_(std::move(actions)), wakeup_(loop, [this] { TakeRequests(); }) {
  wakeup_.Unref();
  if (!handle_signals) return;
  for (auto [signum, name] :
       {std::pair{SIGTERM, "TERM"}, std::pair{SIGINT, "TERM"}, std::pair{SIGTSTP, "TSTP"},
        std::pair{SIGUSR1, "USR1"}, std::pair{SIGTTIN, "TTIN"}, std::pair{SIGHUP, "HUP"},
        std::pair{SIGUSR2, "USR2"}}) {
    std::string meaning = name;
    signals_.push_back(std::make_unique<uv::SignalWatch>(
        loop, signum, [this, meaning](int) { Handle(meaning); }));
  }
}

void Control::Request(std::atomic<int>* counter) {
  counter->fetch_add(1);
  if (accepting_.load()) wakeup_.Send();
}

void Control::TakeRequests() {
  if (quiet_requested_.exchange(0) > 0) Handle("TSTP");
  int stops = stop_requested_.exchange(0);
  for (int i = 0; i < stops; ++i) Handle("TERM");
}

void Control::Handle(const std::string& name) {
  if (name == "TSTP" || name == "USR1") {
    actions_.quiet();
  } else if (name == "TERM" || name == "INT") {
    actions_.stop();
  } else if (name == "TTIN") {
    actions_.dump();
  } else if (name == "HUP") {
    log_.Log(LogLevel::kInfo, "reload_ignored",
             "HUP: nothing to reload (options and the config file are read at start only); "
             "still running");
  } else if (name == "USR2") {
    log_.Log(LogLevel::kInfo, "reopen_ignored",
             "USR2: no log file to reopen (logs go to stderr); still running");
  } else {
    log_.Log(LogLevel::kWarn, "signal_unknown", "ignoring unknown signal '%s'", name.c_str());
  }
}

}  // namespace reliableq::server
