#include "exec/process_guard.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "base/errno_text.h"

namespace reliableq::exec {
namespace {

// One message on the socket pair. SOCK_SEQPACKET delivers each send whole
// and alone, so a reader never sees half of one, whatever the threads do.
struct Message {
  int32_t op;
  int32_t pgid;
};
constexpr int32_t kAdd = 1;
constexpr int32_t kRemove = 2;

// The supervisor's list of live groups. Static rather than on the stack: the
// supervisor runs on a copy of whichever thread's stack called Start. In the
// worker these pages are never touched, so they cost it no memory.
pid_t supervised_groups[ProcessGuard::kMaxGroups];

// The supervisor, in the child of a fork from a process that may have other
// threads: their locks may be held forever here, so only async-signal-safe
// system calls from now on (no allocation, no C++ library, no stdio).
[[noreturn]] void Supervise(int fd) {
  // Hold nothing of the worker's: no other socket, pipe or file stays open
  // for as long as this process lives.
  if (fd > 0) close_range(0, fd - 1, 0);
  close_range(fd + 1, ~0U, 0);
  // A group of its own: a SIGKILL to the worker's whole process group
  // (kill -9 -PGID, a process manager's group kill) must not take the
  // supervisor with it, or the handlers would run on unattended.
  setpgid(0, 0);

  // The worker's signal handlers mean nothing here. Then ignore what a
  // terminal or a service manager sends to the worker's whole group
  // (Ctrl-C, say): the supervisor must outlive the worker.
  struct sigaction action = {};
  sigemptyset(&action.sa_mask);
  action.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &action, nullptr);
  }
  action.sa_handler = SIG_IGN;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGTSTP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE}) {
    sigaction(sig, &action, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  prctl(PR_SET_NAME, "rq-guard", 0, 0, 0);
  // Keep no directory busy (an unmount of the worker's directory, say).
  if (chdir("/") != 0) {
    // Harmless: the supervisor opens no file by a relative path.
  }

  size_t count = 0;
  for (;;) {
    Message message;
    ssize_t n = recv(fd, &message, sizeof message, 0);
    if (n < 0 && errno == EINTR) continue;
    // 0: the worker's end is closed, the worker is gone (or dropped its
    // guard). An error: it can no longer tell us anything either.
    if (n <= 0) break;
    if (n != static_cast<ssize_t>(sizeof message) || message.pgid <= 0) continue;
    if (message.op == kAdd) {
      // Add refuses beyond kMaxGroups, so this is full only if it was misused.
      if (count < ProcessGuard::kMaxGroups) supervised_groups[count++] = message.pgid;
    } else if (message.op == kRemove) {
      for (size_t i = count; i-- > 0;) {
        if (supervised_groups[i] == message.pgid) {
          supervised_groups[i] = supervised_groups[--count];
          break;
        }
      }
    }
  }
  for (size_t i = 0; i < count; ++i) kill(-supervised_groups[i], SIGKILL);
  _exit(0);
}

}  // namespace

Result<std::unique_ptr<ProcessGuard>> ProcessGuard::Start() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    return Status::IoError("process supervisor: socketpair: " + base::ErrnoText(errno));
  }
  // All signals blocked across the fork, so that none of the worker's
  // handlers runs in the child before Supervise resets them.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  pid_t pid = fork();
  if (pid == 0) Supervise(fds[1]);
  int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    return Status::IoError("process supervisor: fork: " + base::ErrnoText(fork_errno));
  }
  return std::unique_ptr<ProcessGuard>(new ProcessGuard(pid, fds[0]));
}

ProcessGuard::ProcessGuard(pid_t supervisor_pid, int socket_fd)
    : supervisor_pid_(supervisor_pid), socket_fd_(socket_fd) {}

ProcessGuard::~ProcessGuard() {
  close(socket_fd_);
  // The supervisor exits as soon as it reads the end of its socket; the
  // bound is for a supervisor that was stopped (SIGSTOP) or is not ours.
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    pid_t reaped = waitpid(supervisor_pid_, nullptr, WNOHANG);
    if (reaped == supervisor_pid_ || (reaped < 0 && errno != EINTR)) return;
    if (std::chrono::steady_clock::now() >= give_up) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

Status ProcessGuard::Add(pid_t pgid) {
  if (registered_.fetch_add(1) >= kMaxGroups) {
    registered_.fetch_sub(1);
    return Status::Refused("process supervisor: " + std::to_string(kMaxGroups) +
                           " process groups registered already");
  }
  Message message{kAdd, static_cast<int32_t>(pgid)};
  ssize_t n;
  // MSG_NOSIGNAL: a supervisor that is gone is an error here, not a SIGPIPE
  // that would end the worker.
  do {
    n = send(socket_fd_, &message, sizeof message, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof message)) {
    int err = n < 0 ? errno : EIO;
    registered_.fetch_sub(1);
    return Status::IoError("the process supervisor is gone: " + base::ErrnoText(err));
  }
  return Status::OK();
}

void ProcessGuard::Remove(pid_t pgid) {
  Message message{kRemove, static_cast<int32_t>(pgid)};
  ssize_t n;
  do {
    n = send(socket_fd_, &message, sizeof message, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  // A supervisor that is gone has nothing to forget; the next Add says so.
  registered_.fetch_sub(1);
}

}  // namespace reliableq::exec
