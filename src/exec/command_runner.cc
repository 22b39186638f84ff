#include "exec/command_runner.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <utility>

#include "base/errno_text.h"
#include "exec/outcome_channel.h"

namespace reliableq::exec {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// Bytes read from stdout or stderr at once: a pipe's whole default capacity.
constexpr size_t kReadChunk = 64 * 1024;
// How long the stop callback waits for the program's main process to end
// after its SIGKILL (it ends in microseconds unless the kernel is busy
// tearing down a large address space).
// Linux refuses (E2BIG) to exec with one environment string longer than
// this (MAX_ARG_STRLEN, 32 pages): a larger job goes to a file whatever
// inline_job_limit says.
constexpr size_t kMaxEnvironmentString = 32 * 4096;
constexpr std::string_view kJobVariable = "RELIABLEQ_JOB=";
// After the main process has ended and its group was killed: how long the
// remaining output is awaited. Only a process that left the group (setsid)
// can hold the pipes longer.
constexpr milliseconds kDrainWait{250};

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// A close-on-exec pipe whose two ends are above 3, so that the child's dup2
// onto 0, 1, 2 and 3 never overwrites a descriptor it still needs (a worker
// started with stdin closed gets fd 0 from its first pipe), and a dup2 onto
// 3 never finds its source there already (which would keep it
// close-on-exec).
Status MakePipe(UniqueFd* read_end, UniqueFd* write_end) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Status::IoError("pipe: " + base::ErrnoText(errno));
  read_end->reset(fds[0]);
  write_end->reset(fds[1]);
  for (UniqueFd* end : {read_end, write_end}) {
    if (end->get() > kOutcomeFd) continue;
    int moved = fcntl(end->get(), F_DUPFD_CLOEXEC, kOutcomeFd + 1);
    if (moved < 0) return Status::IoError("fcntl: " + base::ErrnoText(errno));
    end->reset(moved);
  }
  return Status::OK();
}

Status SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return Status::IoError("fcntl: " + base::ErrnoText(errno));
  }
  return Status::OK();
}

// write() that reports a reader gone as EPIPE and never raises SIGPIPE,
// whatever the process does with that signal. SIGPIPE from a write goes to
// the writing thread: blocked here, and taken back if this write raised it.
ssize_t WriteWithoutSigpipe(int fd, const char* data, size_t size) {
  sigset_t sigpipe, previous, pending;
  sigemptyset(&sigpipe);
  sigaddset(&sigpipe, SIGPIPE);
  sigpending(&pending);
  bool was_pending = sigismember(&pending, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &sigpipe, &previous);
  ssize_t n = write(fd, data, size);
  int write_errno = errno;
  if (n < 0 && write_errno == EPIPE && !was_pending) {
    timespec now = {0, 0};
    while (sigtimedwait(&sigpipe, nullptr, &now) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  errno = write_errno;
  return n;
}

// Keeps the last `limit` bytes of a stream in `tail`.
void KeepTail(std::string* tail, size_t limit, const char* data, size_t size) {
  if (limit == 0) return;
  if (size >= limit) {
    tail->assign(data + size - limit, limit);
    return;
  }
  size_t keep = std::min(tail->size(), limit - size);
  tail->erase(0, tail->size() - keep);
  tail->append(data, size);
}

// One output stream of the program: its pipe, its byte count, and its
// tail, or for the outcome channel the splitter its lines go to.
struct Output {
  UniqueFd fd;
  std::string* tail;
  uint64_t* bytes;
  LineSplitter* lines = nullptr;

  // Reads what is there. False once the pipe is at its end (or broken).
  bool ReadSome(std::vector<char>* buffer, size_t limit) {
    ssize_t n = read(fd.get(), buffer->data(), buffer->size());
    if (n > 0) {
      *bytes += static_cast<uint64_t>(n);
      if (lines != nullptr) {
        lines->Feed(std::string_view(buffer->data(), static_cast<size_t>(n)));
      } else {
        KeepTail(tail, limit, buffer->data(), static_cast<size_t>(n));
      }
      return true;
    }
    return n < 0 && (errno == EAGAIN || errno == EINTR);
  }
};

// The job written to a file for a program whose job is too large for its
// environment; the file goes when this does.
class JobFile {
 public:
  JobFile() = default;
  JobFile(const JobFile&) = delete;
  JobFile& operator=(const JobFile&) = delete;
  ~JobFile() {
    if (!path_.empty()) unlink(path_.c_str());
  }

  Status Write(std::string dir, std::string_view job) {
    if (dir.empty()) {
      const char* tmpdir = getenv("TMPDIR");
      dir = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
    }
    std::string path = dir + "/reliableq-job-XXXXXX";
    // mkostemp creates the file with mode 0600 and a name no one else has.
    UniqueFd fd(mkostemp(path.data(), O_CLOEXEC));
    if (!fd) return Status::IoError("job file in " + dir + ": " + base::ErrnoText(errno));
    path_ = std::move(path);
    while (!job.empty()) {
      ssize_t n = write(fd.get(), job.data(), job.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Status::IoError("job file " + path_ + ": " + base::ErrnoText(errno));
      job.remove_prefix(static_cast<size_t>(n));
    }
    return Status::OK();
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// What the child needs, all prepared before the fork: after it, the child
// may not allocate (another thread may have held the allocator's lock).
struct ChildPlan {
  int stdin_fd, stdout_fd, stderr_fd, channel_fd;
  int gate_fd;        // one byte: registered, go on; end of file: the worker is gone
  int exec_error_fd;  // close-on-exec; gets exec's errno if it fails
  const char* path;
  char* const* argv;
  char* const* envp;
};

[[noreturn]] void FailChild(int exec_error_fd, int err) {
  ssize_t ignored = write(exec_error_fd, &err, sizeof err);
  (void)ignored;
  _exit(127);
}

// The child, between fork and exec: async-signal-safe calls only.
[[noreturn]] void RunChild(const ChildPlan& plan) {
  setpgid(0, 0);
  // Every source is above kOutcomeFd (MakePipe), so no dup2 here overwrites
  // another's source, and each leaves its target without close-on-exec.
  if (dup2(plan.stdin_fd, 0) < 0 || dup2(plan.stdout_fd, 1) < 0 || dup2(plan.stderr_fd, 2) < 0 ||
      dup2(plan.channel_fd, kOutcomeFd) < 0) {
    FailChild(plan.exec_error_fd, errno);
  }
  // Nothing else of the worker's: not other jobs' pipes (a program holding
  // them would keep their readers waiting), not its sockets.
  int low = std::min(plan.gate_fd, plan.exec_error_fd);
  int high = std::max(plan.gate_fd, plan.exec_error_fd);
  if (low > kOutcomeFd + 1) close_range(kOutcomeFd + 1, low - 1, 0);
  if (high > low + 1) close_range(low + 1, high - 1, 0);
  close_range(high + 1, ~0U, 0);
  // The worker's handlers and ignored signals (SIGPIPE, say) are not the
  // program's: an ignored signal stays ignored across exec.
  struct sigaction action = {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &action, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  char go;
  ssize_t n;
  do {
    n = read(plan.gate_fd, &go, 1);
  } while (n < 0 && errno == EINTR);
  // The worker died (or gave up) before registering this process group:
  // run nothing that no one would stop.
  if (n != 1) _exit(127);
  execve(plan.path, plan.argv, plan.envp);
  FailChild(plan.exec_error_fd, errno);
}

// The program's main process until it is reaped. However RunCommand
// returns, its group is killed, unregistered from the guard, and then (not
// before: the number could then name another process) reaped.
class ChildProcess {
 public:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() { Reap(); }

  pid_t pid() const { return pid_; }
  void set_guard(ProcessGuard* guard) { guard_ = guard; }

  void Reap() {
    if (pid_ <= 0) return;
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);  // in case it never got its own group
    if (guard_ != nullptr) guard_->Remove(pid_);
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }

 private:
  pid_t pid_;
  ProcessGuard* guard_ = nullptr;
};

// Runs in the thread that requests the stop: kills the group, then waits
// (bounded) until the main process has ended, so that the caller of
// request_stop() knows the job's code no longer runs.
struct KillOnStop {
  pid_t pgid;
  std::atomic<bool>* stopped;

  // Only the SIGKILL, not the wait for the end: a server stopping many
  // handlers sends every SIGKILL first, then waits for them all
  // (ProcessorPool::StopRunning). A process sent SIGKILL runs no more code.
  void operator()() noexcept {
    stopped->store(true);
    kill(-pgid, SIGKILL);
  }
};

int PollWait(std::optional<steady_clock::time_point> deadline) {
  if (!deadline) return -1;
  auto left = std::chrono::ceil<milliseconds>(*deadline - steady_clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 60 * 60 * 1000));
}

std::string FormatDuration(milliseconds duration) {
  int64_t ms = duration.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  if (ms < 1000) return std::to_string(ms) + " ms";
  std::string fraction = std::to_string(1000 + ms % 1000).substr(1);
  while (fraction.back() == '0') fraction.pop_back();
  return std::to_string(ms / 1000) + "." + fraction + " s";
}

std::string SignalName(int sig) {
  const char* abbreviation = sigabbrev_np(sig);
  return abbreviation != nullptr ? std::string("SIG") + abbreviation
                                 : "signal " + std::to_string(sig);
}

// A descriptor that becomes readable when `pid` has ended (always
// close-on-exec). Through syscall(): glibc 2.36's <sys/pidfd.h> declares
// pidfd_open without C linkage, so C++ cannot link against it.
int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

std::vector<char*> NullTerminated(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (const std::string& s : strings) pointers.push_back(const_cast<char*>(s.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace

std::string CommandOutcome::Describe() const {
  switch (end) {
    case End::kExited:
      return "exited with status " + std::to_string(exit_status);
    case End::kSignaled:
      return "killed by signal " + std::to_string(signal) + " (" + SignalName(signal) + ")";
    case End::kTimedOut:
      if (signal == SIGKILL) {
        return "timed out after " + FormatDuration(timeout) + " (SIGTERM, then SIGKILL after " +
               FormatDuration(kill_grace) + ")";
      }
      return "timed out after " + FormatDuration(timeout) + " (" + SignalName(signal) + ")";
    case End::kStopped:
      return signal != 0 ? "stopped by the worker (" + SignalName(signal) + ")"
                         : "stopped by the worker before it started";
    case End::kNotStarted:
      return start_error;
  }
  return "ended";
}

CommandOutcome RunCommand(const CommandRequest& request, ProcessGuard* guard,
                          std::stop_token stop) {
  CommandOutcome outcome;
  outcome.timeout = request.timeout;
  outcome.kill_grace = request.kill_grace;
  if (stop.stop_requested()) {
    outcome.end = CommandOutcome::End::kStopped;
    return outcome;
  }
  const std::string program = request.argv.empty() ? std::string() : request.argv[0];
  auto not_started = [&](const std::string& why) {
    outcome.end = CommandOutcome::End::kNotStarted;
    outcome.start_error =
        "could not start " + (program.empty() ? "a command" : program) + ": " + why;
    return outcome;
  };
  if (program.empty()) return not_started("no program given");

  std::vector<std::string> environment = request.environment;
  JobFile job_file;
  size_t inline_limit =
      std::min(request.inline_job_limit, kMaxEnvironmentString - kJobVariable.size() - 1);
  if (request.job.size() <= inline_limit) {
    environment.push_back(std::string(kJobVariable) + std::string(request.job));
  } else {
    Status written = job_file.Write(request.job_file_dir, request.job);
    if (!written.ok()) return not_started(written.message());
    environment.push_back("RELIABLEQ_JOB_FILE=" + job_file.path());
  }
  environment.push_back("RELIABLEQ_OUTCOME_FD=" + std::to_string(kOutcomeFd));
  std::vector<char*> argv = NullTerminated(request.argv);
  std::vector<char*> envp = NullTerminated(environment);

  UniqueFd stdin_read, stdin_write, gate_read, gate_write, exec_error_read, exec_error_write;
  Output out{UniqueFd(), &outcome.stdout_tail, &outcome.stdout_bytes};
  Output err{UniqueFd(), &outcome.stderr_tail, &outcome.stderr_bytes};
  LineSplitter splitter([&request](std::string_view line, bool too_long, size_t length) {
    if (request.on_channel_line) request.on_channel_line(line, too_long, length);
  });
  Output channel{UniqueFd(), nullptr, &outcome.channel_bytes, &splitter};
  UniqueFd stdout_write, stderr_write, channel_write;
  for (auto [read_end, write_end] :
       {std::pair{&stdin_read, &stdin_write}, std::pair{&out.fd, &stdout_write},
        std::pair{&err.fd, &stderr_write}, std::pair{&channel.fd, &channel_write},
        std::pair{&gate_read, &gate_write}, std::pair{&exec_error_read, &exec_error_write}}) {
    Status made = MakePipe(read_end, write_end);
    if (!made.ok()) return not_started(made.message());
  }
  ChildPlan plan{stdin_read.get(),    stdout_write.get(), stderr_write.get(),
                 channel_write.get(), gate_read.get(),    exec_error_write.get(),
                 program.c_str(),     argv.data(),        envp.data()};

  // All signals blocked across the fork, so that none of the worker's
  // handlers runs in the child before RunChild resets them.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  pid_t pid = fork();
  if (pid == 0) RunChild(plan);
  int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (pid < 0) return not_started("fork: " + base::ErrnoText(fork_errno));
  ChildProcess child(pid);
  // The child does the same; whichever runs first, the group exists before
  // anyone signals it.
  setpgid(pid, pid);
  for (UniqueFd* child_end :
       {&stdin_read, &stdout_write, &stderr_write, &channel_write, &gate_read, &exec_error_write}) {
    child_end->reset();
  }
  UniqueFd pidfd(PidfdOpen(pid));
  if (!pidfd) return not_started("pidfd_open: " + base::ErrnoText(errno));
  if (guard != nullptr) {
    Status added = guard->Add(pid);
    if (!added.ok()) {
      outcome.end = CommandOutcome::End::kNotStarted;
      outcome.start_error = added.message();
      return outcome;
    }
    child.set_guard(guard);
  }
  std::atomic<bool> stopped{false};
  // Declared after `child` and `pidfd`, so destroyed before them: once it is
  // gone no other thread can signal the group, and only then is it reaped.
  std::optional<std::stop_callback<KillOnStop>> kill_on_stop;
  kill_on_stop.emplace(stop, KillOnStop{pid, &stopped});

  // Open the gate: the program may run.
  if (!stopped.load()) {
    char go = 1;
    while (write(gate_write.get(), &go, 1) < 0 && errno == EINTR) {
    }
  }
  gate_write.reset();
  const steady_clock::time_point started = steady_clock::now();

  // End of file: exec closed the descriptor, the program runs (or the child
  // was killed first, which its exit shows below). An errno: it could not.
  int exec_errno = 0;
  size_t got = 0;
  while (got < sizeof exec_errno) {
    ssize_t n = read(exec_error_read.get(), reinterpret_cast<char*>(&exec_errno) + got,
                     sizeof exec_errno - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  exec_error_read.reset();
  if (got == sizeof exec_errno && exec_errno != 0) {
    kill_on_stop.reset();
    child.Reap();
    return not_started(base::ErrnoText(exec_errno));
  }

  for (int fd : {stdin_write.get(), out.fd.get(), err.fd.get(), channel.fd.get()}) {
    Status set = SetNonBlocking(fd);
    if (!set.ok()) {
      kill_on_stop.reset();
      child.Reap();
      return not_started(set.message());
    }
  }
  std::string_view unwritten = request.job;
  if (unwritten.empty()) stdin_write.reset();
  std::vector<char> buffer(kReadChunk);

  std::optional<steady_clock::time_point> term_at, kill_at;
  if (request.timeout.count() > 0) {
    term_at = started + request.timeout;
    kill_at = *term_at + request.kill_grace;
  }
  int last_signal = 0;
  bool leader_ended = false;
  while (!leader_ended) {
    pollfd fds[5];
    nfds_t count = 0;
    fds[count++] = {pidfd.get(), POLLIN, 0};
    int in_index = -1, out_index = -1, err_index = -1, channel_index = -1;
    if (stdin_write) in_index = count, fds[count++] = {stdin_write.get(), POLLOUT, 0};
    if (out.fd) out_index = count, fds[count++] = {out.fd.get(), POLLIN, 0};
    if (err.fd) err_index = count, fds[count++] = {err.fd.get(), POLLIN, 0};
    if (channel.fd) channel_index = count, fds[count++] = {channel.fd.get(), POLLIN, 0};
    // The next deadline: none once SIGKILL is sent, only the exit is left.
    std::optional<steady_clock::time_point> next;
    if (last_signal == 0) next = term_at;
    if (last_signal == SIGTERM) next = kill_at;
    int ready = poll(fds, count, PollWait(next));
    if (ready < 0 && errno != EINTR) {
      // Cannot watch it any more: end it rather than leave it unwatched.
      kill(-pid, SIGKILL);
      break;
    }
    if (ready > 0 && fds[0].revents != 0) leader_ended = true;
    auto now = steady_clock::now();
    if (!leader_ended && term_at && last_signal == 0 && now >= *term_at) {
      kill(-pid, SIGTERM);
      last_signal = SIGTERM;
    }
    if (!leader_ended && kill_at && last_signal == SIGTERM && now >= *kill_at) {
      kill(-pid, SIGKILL);
      last_signal = SIGKILL;
    }
    if (ready <= 0) continue;
    if (in_index >= 0 && fds[in_index].revents != 0) {
      // Interleaved with the reads below, so that a program that writes
      // before it reads cannot deadlock with us. EPIPE: it does not read its
      // input, which is its right.
      ssize_t n = WriteWithoutSigpipe(stdin_write.get(), unwritten.data(), unwritten.size());
      if (n > 0) unwritten.remove_prefix(static_cast<size_t>(n));
      if (unwritten.empty() || (n < 0 && errno != EAGAIN && errno != EINTR)) stdin_write.reset();
    }
    if (out_index >= 0 && fds[out_index].revents != 0 &&
        !out.ReadSome(&buffer, request.output_tail)) {
      out.fd.reset();
    }
    if (err_index >= 0 && fds[err_index].revents != 0 &&
        !err.ReadSome(&buffer, request.output_tail)) {
      err.fd.reset();
    }
    if (channel_index >= 0 && fds[channel_index].revents != 0 &&
        !channel.ReadSome(&buffer, request.output_tail)) {
      channel.fd.reset();
    }
  }
  stdin_write.reset();

  // The main process has ended. Look without reaping (the number must stay
  // taken until the group is dealt with), end what it left in its group,
  // then take the rest of the output.
  siginfo_t info = {};
  while (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  outcome.elapsed = std::chrono::duration_cast<milliseconds>(steady_clock::now() - started);
  kill(-pid, SIGKILL);
  kill_on_stop.reset();
  auto drain_until = steady_clock::now() + kDrainWait;
  while (out.fd || err.fd || channel.fd) {
    pollfd fds[3];
    Output* streams[3];
    nfds_t count = 0;
    for (Output* stream : {&out, &err, &channel}) {
      if (!stream->fd) continue;
      streams[count] = stream;
      fds[count++] = {stream->fd.get(), POLLIN, 0};
    }
    int ready = poll(fds, count, PollWait(drain_until));
    if (ready == 0 || (ready < 0 && errno != EINTR)) break;
    for (nfds_t i = 0; i < count; ++i) {
      if (fds[i].revents != 0 && !streams[i]->ReadSome(&buffer, request.output_tail)) {
        streams[i]->fd.reset();
      }
    }
  }
  // A last line without its '\n' counts: the program has ended, so nothing
  // more of it will come.
  splitter.Finish();
  child.Reap();

  // A program that had ended on its own when the stop came is reported as
  // it ended: its job ran to its end.
  if (stopped.load() && info.si_code != CLD_EXITED) {
    outcome.end = CommandOutcome::End::kStopped;
    outcome.signal = SIGKILL;
  } else if (last_signal != 0) {
    outcome.end = CommandOutcome::End::kTimedOut;
    outcome.signal = last_signal;
  } else if (info.si_code == CLD_EXITED) {
    outcome.end = CommandOutcome::End::kExited;
    outcome.exit_status = info.si_status;
  } else {
    outcome.end = CommandOutcome::End::kSignaled;
    outcome.signal = info.si_status;
  }
  return outcome;
}

}  // namespace reliableq::exec
