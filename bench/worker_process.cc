#include "worker_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

namespace reliableq::bench {

namespace {

int StatusOf(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

// Everything the child does between fork and exec must be async-signal-safe,
// so messages are written with write(2) only.
[[noreturn]] void ChildFail(const char* what) {
  const char* reason = std::strerror(errno);
  ssize_t ignored = ::write(STDERR_FILENO, what, std::strlen(what));
  ignored = ::write(STDERR_FILENO, ": ", 2);
  ignored = ::write(STDERR_FILENO, reason, std::strlen(reason));
  ignored = ::write(STDERR_FILENO, "\n", 1);
  (void)ignored;
  _exit(127);
}

}  // namespace

WorkerProcess::~WorkerProcess() {
  if (pid_ > 0 && !exit_status_) Stop(std::chrono::milliseconds(10000));
}

Status WorkerProcess::Start(const std::vector<std::string>& argv, const std::string& log_path,
                            const std::vector<std::string>& env) {
  if (argv.empty()) return Status::InvalidArgument("no worker command given");
  // Everything the child needs is prepared before fork: allocating after
  // fork in a program with threads is not safe.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The child's environment: ours, with `env` added or replacing.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    bool replaced = false;
    for (const std::string& extra : env) {
      std::string_view name = std::string_view(extra).substr(0, extra.find('=') + 1);
      if (entry.substr(0, name.size()) == name) replaced = true;
    }
    if (!replaced) env_strings.emplace_back(entry);
  }
  env_strings.insert(env_strings.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (std::string& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);
  int log_fd = -1;
  if (!log_path.empty()) {
    log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
      return Status::IoError("cannot open " + log_path + ": " + std::strerror(errno));
    }
  }
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    if (log_fd >= 0) ::close(log_fd);
    return Status::IoError(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) ChildFail("prctl");
    // The parent may have died before prctl took effect.
    if (::getppid() != parent) _exit(127);
    if (log_fd >= 0) {
      if (::dup2(log_fd, STDOUT_FILENO) < 0 || ::dup2(log_fd, STDERR_FILENO) < 0) {
        ChildFail("dup2");
      }
    }
    // The load generator may ignore or catch signals; the worker starts
    // with the defaults (it installs its own handlers).
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGINT, SIGTERM, SIGPIPE}) signal(sig, SIG_DFL);
    ::execvpe(args[0], args.data(), envp.data());
    ChildFail(args[0]);
  }
  if (log_fd >= 0) ::close(log_fd);
  pid_ = pid;
  exit_status_.reset();
  return Status::OK();
}

bool WorkerProcess::Running() {
  if (pid_ <= 0 || exit_status_) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_status_ = StatusOf(status);
    return false;
  }
  return true;
}

Result<ProcessSample> WorkerProcess::Sample() const {
  if (pid_ <= 0 || exit_status_) return Status::NotFound("the worker is not running");
  ProcessSample sample;
  std::string base = "/proc/" + std::to_string(pid_);
  std::ifstream status(base + "/status");
  if (!status) return Status::NotFound("cannot read " + base + "/status");
  std::string line;
  while (std::getline(status, line)) {
    long long kb = 0;
    if (std::sscanf(line.c_str(), "VmRSS: %lld kB", &kb) == 1) sample.vm_rss_kb = kb;
    if (std::sscanf(line.c_str(), "VmHWM: %lld kB", &kb) == 1) sample.vm_hwm_kb = kb;
  }
  // /proc/<pid>/stat: the command name (field 2) may contain spaces, so the
  // fields are counted from its closing parenthesis; utime and stime are
  // fields 14 and 15.
  std::ifstream stat(base + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');
  if (paren != std::string::npos) {
    std::istringstream fields(text.substr(paren + 2));
    std::string field;
    unsigned long long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && (fields >> field); ++i) {
      if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
      if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
    }
    sample.cpu_seconds = static_cast<double>(utime + stime) / ::sysconf(_SC_CLK_TCK);
  }
  // Handing a job from thread to thread costs context switches; counting
  // them tells a scheduling cost from a computing one.
  std::error_code ignored;
  for (const auto& task : std::filesystem::directory_iterator(base + "/task", ignored)) {
    std::ifstream task_status(task.path() / "status");
    while (std::getline(task_status, line)) {
      long long n = 0;
      if (std::sscanf(line.c_str(), "voluntary_ctxt_switches: %lld", &n) == 1 ||
          std::sscanf(line.c_str(), "nonvoluntary_ctxt_switches: %lld", &n) == 1) {
        sample.context_switches += n;
      }
    }
  }
  return sample;
}

std::optional<int> WorkerProcess::Stop(std::chrono::milliseconds patience) {
  if (pid_ <= 0) return std::nullopt;
  if (!Running()) return exit_status_;
  ::kill(pid_, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + patience;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!Running()) return exit_status_;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid_, SIGKILL);
  int status = 0;
  if (::waitpid(pid_, &status, 0) == pid_) exit_status_ = StatusOf(status);
  return exit_status_;
}

std::optional<int> WorkerProcess::Kill() {
  if (pid_ <= 0) return std::nullopt;
  if (!Running()) return exit_status_;
  ::kill(pid_, SIGKILL);
  int status = 0;
  if (::waitpid(pid_, &status, 0) == pid_) exit_status_ = StatusOf(status);
  return exit_status_;
}

}  // namespace reliableq::bench
