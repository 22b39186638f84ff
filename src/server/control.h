// Control: how a worker is told to quiet, stop or report, and the one place
// that gives each signal its meaning. Requests come from three sources:
// Server::Quiet()/Stop() on any thread or in a signal handler, the process's
// signals (when ServerOptions::handle_signals), and the remote signals the
// heartbeat pops from <identity>-signals (Sidekiq's Web UI).
//
//   TERM  stop (INT too): quiet, wait up to the shutdown timeout, hand back;
//         a second one during the wait hands the running jobs back at once
//   TSTP  quiet: fetch nothing more, hand back what has not started
//   USR1  quiet too (Sidekiq's quiet signal before 5.0)
//   TTIN  log the state of every processor thread
//   HUP   reload: today there is nothing to reload (no config file), so it
//         is logged and ignored; the worker keeps running
//   USR2  reopen log files (Sidekiq's old meaning): logs go to stderr, so
//         it is logged and ignored
//
// reliableq(1) documents the same table; a signal's name from the remote
// signals list means what the signal means.
//
// Invariant it keeps: RequestQuiet/RequestStop are async-signal-safe (an
// atomic counter and uv_async_send) and safe at any time until Shutdown();
// the actions themselves always run on the loop thread.
//
// Thread safety: RequestQuiet/RequestStop from anywhere; the rest on the
// loop thread.

#ifndef RELIABLEQ_SERVER_CONTROL_H_
#define RELIABLEQ_SERVER_CONTROL_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "uv/handles.h"

namespace reliableq::server {

class Control {
 public:
  struct Actions {
    std::function<void()> quiet;
    std::function<void()> stop;  // once per request: a second one is a hard stop
    std::function<void()> dump;
  };

  Control(uv::EventLoop& loop, bool handle_signals, const base::Logger& log, Actions actions);

  void RequestQuiet() { Request(&quiet_requested_); }
  void RequestStop() { Request(&stop_requested_); }

  // Runs what was requested since the last look (also what was requested
  // before the loop ran).
  void TakeRequests();
  // A signal by name, from the process or from the remote signals list.
  void Handle(const std::string& name);

  // The process's signals get their default actions back.
  void CloseSignals() { signals_.clear(); }
  // Requests are ignored from now on (the server is being destroyed).
  void Shutdown() { accepting_.store(false); }

 private:
  void Request(std::atomic<int>* counter);

  const base::Logger& log_;
  Actions actions_;
  std::atomic<bool> accepting_{true};
  std::atomic<int> quiet_requested_{0};
  std::atomic<int> stop_requested_{0};
  // Requests and signals may come at any time until the server is
  // destroyed, so this wake-up stays open until then; unreferenced, it does
  // not keep the loop from ending.
  uv::Wakeup wakeup_;
  std::vector<std::unique_ptr<uv::SignalWatch>> signals_;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_CONTROL_H_
