#include "support/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace reliableq::testing {

namespace {

pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            int out_fd, int err_fd) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(126);
  dup2(out_fd, STDOUT_FILENO);
  dup2(err_fd, STDERR_FILENO);
  int devnull = open("/dev/null", O_RDONLY);
  dup2(devnull, STDIN_FILENO);
  for (const std::string& entry : env) putenv(const_cast<char*>(entry.c_str()));
  // Signals ignored by the test binary (SIGPIPE) must not stay ignored.
  signal(SIGPIPE, SIG_DFL);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  std::fprintf(stderr, "exec %s failed\n", args[0]);
  _exit(127);
}

std::optional<int> WaitFor(pid_t pid, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

ChildProcess::ChildProcess(std::vector<std::string> argv, std::vector<std::string> env,
                           std::string log_path)
    : log_path_(std::move(log_path)) {
  int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  pid_ = Spawn(argv, env, fd, fd);
  close(fd);
}

ChildProcess::~ChildProcess() {
  if (!status_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

void ChildProcess::Signal(int signum) {
  if (!status_) kill(pid_, signum);
}

std::optional<int> ChildProcess::Wait(std::chrono::milliseconds limit) {
  if (!status_) status_ = WaitFor(pid_, limit);
  return status_;
}

bool ChildProcess::running() { return !Wait(std::chrono::milliseconds(0)); }

std::string ChildProcess::Log() const { return ReadFile(log_path_); }

CommandResult RunCommand(const std::vector<std::string>& argv, std::chrono::milliseconds limit,
                         const std::vector<std::string>& env) {
  char out_path[] = "/tmp/reliableq-cmd-out-XXXXXX";
  char err_path[] = "/tmp/reliableq-cmd-err-XXXXXX";
  int out_fd = mkstemp(out_path);
  int err_fd = mkstemp(err_path);
  pid_t pid = Spawn(argv, env, out_fd, err_fd);
  close(out_fd);
  close(err_fd);
  CommandResult result;
  std::optional<int> status = WaitFor(pid, limit);
  if (!status) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    result.exit_code = -1;  // timed out
  } else if (WIFEXITED(*status)) {
    result.exit_code = WEXITSTATUS(*status);
  } else if (WIFSIGNALED(*status)) {
    result.exit_code = 128 + WTERMSIG(*status);
  }
  result.out = ReadFile(out_path);
  result.err = ReadFile(err_path);
  unlink(out_path);
  unlink(err_path);
  return result;
}

std::string BuildPath(const char* variable) {
  const char* value = std::getenv(variable);
  if (value == nullptr || *value == '\0') {
    std::fprintf(stderr, "FATAL: %s is not set (run the tests through meson)\n", variable);
    std::_Exit(2);
  }
  return value;
}

}  // namespace reliableq::testing
