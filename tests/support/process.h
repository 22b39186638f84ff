// ChildProcess: a real process for tests that kill workers. Its stdout and
// stderr go to a log file; it gets SIGKILL if the test binary dies
// (PR_SET_PDEATHSIG) and when the object is destroyed while it still runs.

#ifndef RELIABLEQ_TESTS_PROCESS_H_
#define RELIABLEQ_TESTS_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace reliableq::testing {

class ChildProcess {
 public:
  // Starts argv[0] (a path) with the current environment plus `env`
  // ("NAME=value" entries).
  ChildProcess(std::vector<std::string> argv, std::vector<std::string> env,
               std::string log_path);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int signum);
  // Waits up to `limit` for the process to end; its wait status, or nullopt
  // if it is still running.
  std::optional<int> Wait(std::chrono::milliseconds limit);
  bool running();
  // Everything it wrote so far.
  std::string Log() const;

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string log_path_;
};

// Runs a command to completion (bounded by `limit`): its exit code (or
// 128+signal), and its stdout and stderr.
struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
CommandResult RunCommand(const std::vector<std::string>& argv,
                         std::chrono::milliseconds limit = std::chrono::seconds(20),
                         const std::vector<std::string>& env = {});

// Path of a file the build points to through an environment variable
// (RELIABLEQ_BIN, RELIABLEQ_DEMO_PLUGIN); fails the test binary if unset.
std::string BuildPath(const char* variable);

}  // namespace reliableq::testing

#endif  // RELIABLEQ_TESTS_PROCESS_H_
