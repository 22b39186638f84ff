// ProcessGuard: a small supervisor process that kills the process groups of
// command handlers when the worker dies, however it dies.
//
// A worker SIGKILLed while handlers run must not leave them, or what they
// started, running unattended: the janitor hands their jobs to another worker
// within about a second, and a handler still running here would run the job
// twice at the same time. PR_SET_PDEATHSIG does not do this: it follows the
// thread that forked, and reaches the direct child only.
//
// Start() forks the supervisor, which holds one end of a socket pair. The
// worker registers each handler's process group (Add) before the handler may
// run any of its own code, and unregisters it (Remove) once it has ended. When
// the worker's end closes (exit, crash, SIGKILL: the kernel closes it), the
// supervisor sends SIGKILL to every group still registered and exits. SIGKILL
// at once, not SIGTERM: a handler in a TERM grace period would overlap the
// copy of its job the janitor gives to another worker.
//
// Limits:
// - A handler that leaves its process group (setsid, setpgid) escapes.
// - The supervisor has a process group of its own, so a SIGKILL to the
//   worker's group spares it; a kill of the whole session or cgroup (systemd
//   stopping the unit past its timeout) ends handlers and supervisor alike.
// - The protection lasts while the supervisor lives. If it is killed alone,
//   the next Add fails with kIoError (the caller logs it and does not start
//   the handler unprotected).
// - At most kMaxGroups groups at once (the worker's concurrency is at most
//   1000); Add refuses more.
// - The supervisor is a fork of the worker: until the worker writes to them,
//   it shares the worker's pages; the ones the worker writes afterwards are
//   kept twice. Start it early, before the worker's memory grows.
//
// Thread safety: Add and Remove may be called from any number of threads at
// once; each sends one message, which the kernel delivers whole.

#ifndef RELIABLEQ_EXEC_PROCESS_GUARD_H_
#define RELIABLEQ_EXEC_PROCESS_GUARD_H_

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <memory>

#include "reliableq/status.h"

namespace reliableq::exec {

class ProcessGuard {
 public:
  // The most process groups registered at once.
  static constexpr size_t kMaxGroups = 4096;

  // Forks the supervisor. Safe to call while other threads run: the child
  // makes async-signal-safe system calls only. kIoError when the socket pair
  // or the fork fails.
  static Result<std::unique_ptr<ProcessGuard>> Start();

  // Closes the worker's end (the supervisor kills whatever is still
  // registered, normally nothing, and exits), then reaps the supervisor,
  // waiting at most 2 s for it.
  ~ProcessGuard();

  ProcessGuard(const ProcessGuard&) = delete;
  ProcessGuard& operator=(const ProcessGuard&) = delete;

  // Registers the process group `pgid`: the supervisor will SIGKILL it if the
  // worker dies before Remove(pgid). kIoError when the supervisor is gone;
  // kRefused when kMaxGroups groups are registered already.
  Status Add(pid_t pgid);

  // Unregisters `pgid`, which an Add returned OK for. Call it after the
  // group's leader has ended and before it is reaped (so that the number
  // cannot be reused by another group meanwhile).
  void Remove(pid_t pgid);

  pid_t supervisor_pid() const { return supervisor_pid_; }

 private:
  ProcessGuard(pid_t supervisor_pid, int socket_fd);

  const pid_t supervisor_pid_;
  const int socket_fd_;
  // Groups registered and not yet removed, so that Add can refuse the one
  // the supervisor would have no room for.
  std::atomic<size_t> registered_{0};
};

}  // namespace reliableq::exec

#endif  // RELIABLEQ_EXEC_PROCESS_GUARD_H_
