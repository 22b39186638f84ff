// WorkerProcess: a worker program (a reliableq worker or a Sidekiq process)
// that the load generator starts, watches and stops, so that one program
// knows both when the worker started and how much memory it holds.
//
// The child gets PR_SET_PDEATHSIG(SIGTERM): if the load generator dies, its
// worker is told to stop too, and nothing is left running after a crash or a
// Ctrl-C.
//
// Thread safety: one thread at a time.

#ifndef RELIABLEQ_BENCH_WORKER_PROCESS_H_
#define RELIABLEQ_BENCH_WORKER_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reliableq/status.h"

namespace reliableq::bench {

// What /proc/<pid>/status and /proc/<pid>/stat say about a process.
struct ProcessSample {
  int64_t vm_rss_kb = 0;   // resident now
  int64_t vm_hwm_kb = 0;   // peak resident since the process started
  double cpu_seconds = 0;  // user + system time so far
  // Voluntary and involuntary context switches of its threads alive now.
  int64_t context_switches = 0;
};

class WorkerProcess {
 public:
  WorkerProcess() = default;
  // Stops a child that is still running (TERM, then KILL after 10 s).
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Starts `argv` (argv[0] is looked up in PATH), its stdout and stderr
  // appended to `log_path` ("" keeps the load generator's). `env` entries
  // ("NAME=value") are added to the child's environment.
  Status Start(const std::vector<std::string>& argv, const std::string& log_path,
               const std::vector<std::string>& env);

  // True while the child runs. Reaps it once it has exited.
  bool Running();

  // The child's memory and CPU time; kNotFound once it has exited.
  Result<ProcessSample> Sample() const;

  // Sends TERM and waits up to `patience` for the child to exit, then sends
  // KILL. Returns the exit status (128 + signal for a signal), or nullopt
  // when no child was started.
  std::optional<int> Stop(std::chrono::milliseconds patience);

  // Sends SIGKILL and reaps the child: a crash, as the recovery benchmark
  // needs it. Returns the exit status, or nullopt when no child runs.
  std::optional<int> Kill();

  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_status_;
};

}  // namespace reliableq::bench

#endif  // RELIABLEQ_BENCH_WORKER_PROCESS_H_
