// RunCommand: one job run as one program, in a process group of its own.
//
// The program gets the job's JSON on its standard input and in its
// environment (or in a file, for a large job), a clean environment, no shell
// and no file descriptor of the worker's: only 0, 1, 2 and 3, the write end
// of its outcome channel (exec/outcome_channel.h). Its standard output and
// error are read as they come and only their last bytes kept, so a program
// that writes without end costs no memory and never blocks on a full pipe;
// the channel is read in the same loop and cut into lines, each handed to
// the request's callback as it comes. A timeout
// sends SIGTERM to the whole group, then SIGKILL after a grace period; when
// the program ends, whatever it left running in its group is SIGKILLed too.
//
// Time is the steady clock's: the deadlines are poll() timeouts on the
// process itself, which a test cannot move by injecting a clock anyway.
//
// Thread safety: any number of threads may call RunCommand at once; they
// share nothing but the ProcessGuard they are given.

#ifndef RELIABLEQ_EXEC_COMMAND_RUNNER_H_
#define RELIABLEQ_EXEC_COMMAND_RUNNER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "exec/process_guard.h"

namespace reliableq::exec {

struct CommandRequest {
  // argv[0] is the program's absolute path; there is no shell and no PATH
  // search.
  std::vector<std::string> argv;
  // The complete environment of the program, "NAME=VALUE" each. RunCommand
  // adds RELIABLEQ_JOB or RELIABLEQ_JOB_FILE (below) and
  // RELIABLEQ_OUTCOME_FD=3, and nothing else.
  std::vector<std::string> environment;
  // The job's JSON: written to the program's stdin (then stdin is closed; a
  // program that does not read it is fine), and also given as
  // RELIABLEQ_JOB=<json> in its environment when at most `inline_job_limit`
  // bytes, else written to a file (mode 0600, in `job_file_dir`, default
  // $TMPDIR or /tmp; unique name) whose path is given as RELIABLEQ_JOB_FILE,
  // and which is removed when the program has ended. Past 128 KiB a job
  // always goes to a file: Linux execs no longer environment string.
  std::string_view job;
  size_t inline_job_limit = 64 * 1024;
  std::string job_file_dir;
  // 0: none. After `timeout` the process group gets SIGTERM; after
  // `kill_grace` more, SIGKILL. Counted from the moment the program may start.
  std::chrono::milliseconds timeout{0};
  std::chrono::milliseconds kill_grace{5000};
  // Bytes kept of stdout and of stderr each: the last ones. Output beyond is
  // read and dropped.
  size_t output_tail = 4096;
  // Called, on the calling thread, for each line the program writes on fd 3
  // (LineSplitter::OnLine: a line too long comes as its head); until the
  // program has ended and the channel is drained, which is bounded as the
  // output's is. Empty: the lines are read and dropped. It should be quick:
  // the program's output waits while it runs.
  std::function<void(std::string_view line, bool too_long, size_t length)> on_channel_line;
};

struct CommandOutcome {
  enum class End { kExited, kSignaled, kTimedOut, kStopped, kNotStarted };
  End end = End::kNotStarted;
  int exit_status = 0;      // kExited
  int signal = 0;           // kSignaled: the signal that ended it; kTimedOut: the last one
                            // sent (SIGTERM, or SIGKILL after the grace); kStopped: SIGKILL
  std::string start_error;  // kNotStarted: why, one line ("could not start /bin/x: No such
                            // file or directory"; "the process supervisor is gone: ...")
  std::string stdout_tail, stderr_tail;
  uint64_t stdout_bytes = 0, stderr_bytes = 0, channel_bytes = 0;
  // From the moment the program could start to the end of its process.
  std::chrono::milliseconds elapsed{0};
  // kTimedOut: the request's timeout and kill_grace, for Describe().
  std::chrono::milliseconds timeout{0};
  std::chrono::milliseconds kill_grace{0};

  bool succeeded() const { return end == End::kExited && exit_status == 0; }
  // One line: "exited with status 3", "killed by signal 9 (SIGKILL)", "timed
  // out after 2 s (SIGTERM, then SIGKILL after 5 s)", "timed out after 200 ms
  // (SIGTERM)", "stopped by the worker (SIGKILL)", or start_error.
  std::string Describe() const;
};

// Runs one program to its end and says how it ended.
//
// `guard` may be null (no supervisor). With one, the process group is
// registered before the program may run any code of its own (the child waits
// on a gate until then), and unregistered after it has ended; if the
// registration fails the program is not run (kNotStarted, the guard's error
// in start_error).
//
// `stop`: when stop is requested (the worker's hard stop), the whole process
// group gets SIGKILL synchronously in the thread that calls request_stop(),
// which also waits (at most 1 s) until the program's main process has ended:
// when request_stop() returns, no process of the job runs more user code. The
// outcome is then kStopped. If stop was requested before the call, nothing
// starts (kStopped).
CommandOutcome RunCommand(const CommandRequest& request, ProcessGuard* guard, std::stop_token stop);

}  // namespace reliableq::exec

#endif  // RELIABLEQ_EXEC_COMMAND_RUNNER_H_
