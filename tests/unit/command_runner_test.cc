// RunCommand and ProcessGuard with real processes (/bin/sh, sleep, head...):
// how a program ends and is described, what it receives, timeouts, its
// grandchildren, output floods, the worker's hard stop, the supervisor that
// outlives a SIGKILLed worker, and descriptors that never leak.

#include "exec/command_runner.h"

#include <dirent.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "exec/process_guard.h"

using namespace reliableq;
using namespace reliableq::exec;
using namespace std::chrono_literals;
using End = CommandOutcome::End;

namespace {

CommandRequest Request(std::vector<std::string> argv, std::string_view job = "{}") {
  CommandRequest request;
  request.argv = std::move(argv);
  request.environment = {"PATH=/usr/bin:/bin"};
  request.job = job;
  return request;
}

CommandOutcome Run(const CommandRequest& request, ProcessGuard* guard = nullptr) {
  return RunCommand(request, guard, std::stop_token());
}

int OpenFdCount() {
  int count = 0;
  DIR* dir = opendir("/proc/self/fd");
  REQUIRE(dir != nullptr);
  while (readdir(dir) != nullptr) ++count;
  closedir(dir);
  return count;
}

// True when `pid` no longer runs: gone, or a zombie (a process that is not
// our child is reaped by whoever inherited it, maybe late).
bool Ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  size_t paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] == 'Z' ||
         line[paren + 2] == 'X';
}

bool EndsWithin(pid_t pid, std::chrono::milliseconds bound) {
  auto give_up = std::chrono::steady_clock::now() + bound;
  while (!Ended(pid)) {
    if (std::chrono::steady_clock::now() >= give_up) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// The whole content of `path` once it exists, or "" after `bound`.
std::string WaitForFile(const std::string& path, std::chrono::milliseconds bound) {
  auto give_up = std::chrono::steady_clock::now() + bound;
  while (std::chrono::steady_clock::now() < give_up) {
    std::ifstream in(path);
    if (in) {
      std::stringstream content;
      content << in.rdbuf();
      if (!content.str().empty() && content.str().back() == '\n') return content.str();
    }
    std::this_thread::sleep_for(10ms);
  }
  return "";
}

long StatusKb(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::string(field).size()));
  }
  return -1;
}

struct TempDir {
  std::string path;
  TempDir() {
    char name[] = "/tmp/command_runner_test-XXXXXX";
    REQUIRE(mkdtemp(name) != nullptr);
    path = name;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

}  // namespace

TEST_CASE("RunCommand: /bin/true succeeds") {
  CommandOutcome outcome = Run(Request({"/bin/true"}));
  CHECK(outcome.end == End::kExited);
  CHECK(outcome.succeeded());
  CHECK(outcome.Describe() == "exited with status 0");
}

TEST_CASE("RunCommand: an exit status is reported with the tail of stderr") {
  CommandOutcome outcome = Run(Request({"/bin/sh", "-c", "echo out; echo oops >&2; exit 3"}));
  CHECK(outcome.end == End::kExited);
  CHECK(outcome.exit_status == 3);
  CHECK_FALSE(outcome.succeeded());
  CHECK(outcome.stdout_tail == "out\n");
  CHECK(outcome.stderr_tail == "oops\n");
  CHECK(outcome.stderr_bytes == 5);
  CHECK(outcome.Describe() == "exited with status 3");
}

TEST_CASE("RunCommand: a program killed by a signal") {
  CommandOutcome outcome = Run(Request({"/bin/sh", "-c", "kill -USR1 $$"}));
  CHECK(outcome.end == End::kSignaled);
  CHECK(outcome.signal == SIGUSR1);
  CHECK(outcome.Describe() == "killed by signal 10 (SIGUSR1)");
}

TEST_CASE("RunCommand: a program that does not exist is not started, with exec's reason") {
  CommandOutcome outcome = Run(Request({"/nonexistent/handler"}));
  CHECK(outcome.end == End::kNotStarted);
  CHECK(outcome.Describe() == "could not start /nonexistent/handler: No such file or directory");
  TempDir dir;
  const std::string not_executable = dir.path + "/handler";
  std::ofstream(not_executable) << "#!/bin/sh\n";
  outcome = Run(Request({not_executable}));
  CHECK(outcome.end == End::kNotStarted);
  CHECK(outcome.start_error == "could not start " + not_executable + ": Permission denied");
}

TEST_CASE("RunCommand: the job arrives on stdin and in RELIABLEQ_JOB") {
  const std::string job = R"({"class":"EmailJob","args":[1,"two"],"jid":"abc"})";
  CommandOutcome outcome =
      Run(Request({"/bin/sh", "-c", "cat; printf %s \"$RELIABLEQ_JOB\" >&2"}, job));
  CHECK(outcome.succeeded());
  CHECK(outcome.stdout_tail == job);
  CHECK(outcome.stderr_tail == job);
}

TEST_CASE("RunCommand: a job over inline_job_limit arrives in RELIABLEQ_JOB_FILE, then goes") {
  TempDir dir;
  const std::string job = "{\"args\":[\"" + std::string(1000, 'x') + "\"]}";
  CommandRequest request = Request({"/bin/sh", "-c",
                                    "test -z \"${RELIABLEQ_JOB+set}\" || exit 9; "
                                    "cat \"$RELIABLEQ_JOB_FILE\"; "
                                    "stat -c '%a %n' \"$RELIABLEQ_JOB_FILE\" >&2"},
                                   job);
  request.inline_job_limit = 100;
  request.job_file_dir = dir.path;
  CommandOutcome outcome = Run(request);
  REQUIRE(outcome.succeeded());
  CHECK(outcome.stdout_tail == job);
  // "600 <path>\n": the file was private to the user, in the directory asked for.
  REQUIRE(outcome.stderr_tail.rfind("600 " + dir.path + "/", 0) == 0);
  std::string path = outcome.stderr_tail.substr(4, outcome.stderr_tail.size() - 5);
  CHECK(access(path.c_str(), F_OK) != 0);
  CHECK(std::filesystem::is_empty(dir.path));
}

TEST_CASE("RunCommand: a job too large for any environment string goes to a file") {
  const std::string job(200 * 1024, 'j');
  CommandRequest request = Request(
      {"/bin/sh", "-c", "test -z \"${RELIABLEQ_JOB+set}\" && wc -c < \"$RELIABLEQ_JOB_FILE\""},
      job);
  request.inline_job_limit = 1 << 20;
  CommandOutcome outcome = Run(request);
  CHECK(outcome.succeeded());
  CHECK(outcome.stdout_tail == "204800\n");
}

TEST_CASE("RunCommand: a program that writes much before it reads much does not deadlock") {
  // Both more than a pipe holds: we must read its output while we write.
  const std::string job(300000, 'j');
  CommandRequest request = Request({"/bin/sh", "-c", "head -c 300000 /dev/zero; wc -c"}, job);
  request.inline_job_limit = 0;  // in a file: too large for the environment anyway
  CommandOutcome outcome = Run(request);
  CHECK(outcome.succeeded());
  CHECK(outcome.stdout_bytes == 300000 + 7);
  CHECK(outcome.stdout_tail.substr(outcome.stdout_tail.size() - 7) == "300000\n");
}

TEST_CASE("RunCommand: a program that never reads its stdin is fine") {
  const std::string job(1 << 20, 'j');
  CommandRequest request = Request({"/bin/sh", "-c", "exec 0<&-; echo done"}, job);
  request.inline_job_limit = 0;
  CommandOutcome outcome = Run(request);
  CHECK(outcome.succeeded());
  CHECK(outcome.stdout_tail == "done\n");
}

TEST_CASE("RunCommand: the environment is exactly the one given, plus the job") {
  setenv("COMMAND_RUNNER_TEST_LEAK", "1", 1);
  CommandRequest request = Request({"/usr/bin/env"});
  request.environment = {"A=1", "B=two words"};
  CommandOutcome outcome = Run(request);
  unsetenv("COMMAND_RUNNER_TEST_LEAK");
  CHECK(outcome.succeeded());
  CHECK(outcome.stdout_tail == "A=1\nB=two words\nRELIABLEQ_JOB={}\nRELIABLEQ_OUTCOME_FD=3\n");
}

TEST_CASE("RunCommand: the program holds none of the worker's descriptors") {
  int extra = open("/dev/null", O_RDONLY);  // without O_CLOEXEC, on purpose
  REQUIRE(extra >= 0);
  CommandOutcome outcome = Run(Request({"/bin/ls", "/proc/self/fd"}));
  close(extra);
  CHECK(outcome.succeeded());
  // 3: the outcome channel; 4: the directory ls reads.
  CHECK(outcome.stdout_tail == "0\n1\n2\n3\n4\n");
  // fd 3 is the write end of a pipe, and only that.
  outcome = Run(Request({"/bin/sh", "-c", "ls -l /proc/$$/fd/3 | sed 's/.*-> //'"}));
  CHECK(outcome.stdout_tail.rfind("pipe:[", 0) == 0);
  outcome = Run(Request({"/bin/sh", "-c", "grep ^flags /proc/$$/fdinfo/3"}));
  CHECK(outcome.stdout_tail == "flags:\t01\n");  // O_WRONLY; not O_CLOEXEC, not O_NONBLOCK
}

TEST_CASE("RunCommand: lines on fd 3 reach the callback in order, and the exit is kept") {
  CommandRequest request =
      Request({"/bin/sh", "-c",
               "echo 'log info starting' >&3; echo out; echo err >&2; "
               "printf 'snooze 5\r\nprogress 50\n' >&3; printf 'dead at the end' >&3; exit 3"});
  std::vector<std::string> lines;
  request.on_channel_line = [&](std::string_view line, bool too_long, size_t) {
    CHECK_FALSE(too_long);
    lines.emplace_back(line);
  };
  CommandOutcome outcome = Run(request);
  CHECK(outcome.end == End::kExited);
  CHECK(outcome.exit_status == 3);
  CHECK(outcome.stdout_tail == "out\n");
  CHECK(outcome.stderr_tail == "err\n");
  CHECK(lines == std::vector<std::string>{"log info starting", "snooze 5", "progress 50",
                                          "dead at the end"});
  CHECK(outcome.channel_bytes == 55);
}

TEST_CASE("RunCommand: 100 MB on fd 3 in one line costs no memory and is one line too long") {
  long before = StatusKb("VmHWM:");
  CommandRequest request =
      Request({"/bin/sh", "-c",
               "head -c 100000000 /dev/zero | tr '\\0' x >&3; echo >&3; echo 'fail late' >&3"});
  std::vector<std::pair<size_t, bool>> lines;
  std::string last;
  request.on_channel_line = [&](std::string_view line, bool too_long, size_t length) {
    lines.emplace_back(length, too_long);
    last = line;
  };
  CommandOutcome outcome = Run(request);
  CHECK(outcome.succeeded());
  CHECK(outcome.channel_bytes == 100000000 + 1 + 10);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == std::pair<size_t, bool>{100000000, true});
  CHECK(lines[1] == std::pair<size_t, bool>{9, false});
  CHECK(last == "fail late");
  CHECK(StatusKb("VmHWM:") - before < 20 * 1024);
}

TEST_CASE("RunCommand: a program that never writes fd 3, or closes it, ends as before") {
  int calls = 0;
  CommandRequest request = Request({"/bin/sh", "-c", "exec 3>&-; exit 4"});
  request.on_channel_line = [&](std::string_view, bool, size_t) { ++calls; };
  CommandOutcome outcome = Run(request);
  CHECK(outcome.end == End::kExited);
  CHECK(outcome.exit_status == 4);
  CHECK(calls == 0);
  CHECK(Run(Request({"/bin/sh", "-c", "echo snooze 1 >&3"})).succeeded());  // no callback: dropped
}

TEST_CASE("RunCommand: no signal is ignored or blocked in the program") {
  // This process ignores SIGPIPE (doctest_main.cc), and an ignored signal
  // stays ignored across exec unless the child resets it.
  struct sigaction current;
  REQUIRE(sigaction(SIGPIPE, nullptr, &current) == 0);
  REQUIRE((current.sa_handler == SIG_IGN));
  CommandOutcome outcome = Run(Request({"/bin/grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status"}));
  CHECK(outcome.succeeded());
  CHECK(outcome.stdout_tail == "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
}

TEST_CASE("RunCommand: a program past its timeout gets SIGTERM") {
  CommandRequest request = Request({"/bin/sleep", "3600"});
  request.timeout = 200ms;
  auto start = std::chrono::steady_clock::now();
  CommandOutcome outcome = Run(request);
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(outcome.end == End::kTimedOut);
  CHECK(outcome.signal == SIGTERM);
  CHECK(outcome.elapsed >= 200ms);
  CHECK(took < 200ms + request.kill_grace);
  CHECK(outcome.Describe() == "timed out after 200 ms (SIGTERM)");
}

TEST_CASE("RunCommand: a program that ignores SIGTERM gets SIGKILL after the grace") {
  // trap "" makes TERM ignored in the shell and in the sleep it starts.
  CommandRequest request = Request({"/bin/sh", "-c", "trap '' TERM; sleep 3600"});
  request.timeout = 200ms;
  request.kill_grace = 300ms;
  auto start = std::chrono::steady_clock::now();
  CommandOutcome outcome = Run(request);
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(outcome.end == End::kTimedOut);
  CHECK(outcome.signal == SIGKILL);
  CHECK(outcome.elapsed >= 500ms);
  CHECK(took < 3s);
  CHECK(outcome.Describe() == "timed out after 200 ms (SIGTERM, then SIGKILL after 300 ms)");
}

TEST_CASE("RunCommand: what the program left running in its group is killed") {
  auto start = std::chrono::steady_clock::now();
  CommandOutcome outcome = Run(Request({"/bin/sh", "-c", "sleep 3600 & echo $!; exit 0"}));
  // The grandchild holds stdout: it must not keep RunCommand waiting.
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  CHECK(outcome.succeeded());
  pid_t grandchild = std::stoi(outcome.stdout_tail);
  REQUIRE(grandchild > 0);
  bool ended = EndsWithin(grandchild, 2s);
  CHECK(ended);
  if (!ended) kill(grandchild, SIGKILL);  // not left running when this fails
}

TEST_CASE("RunCommand: 1 GiB on stdout is counted, its tail kept, and costs no memory") {
  const uint64_t gib = uint64_t{1} << 30;
  // Reset the peak resident size (VmHWM), so that it says what this test used.
  std::ofstream("/proc/self/clear_refs") << "5";
  long before = StatusKb("VmRSS:");
  CommandOutcome outcome = Run(Request({"/usr/bin/head", "-c", std::to_string(gib), "/dev/zero"}));
  long peak = StatusKb("VmHWM:");
  CHECK(outcome.succeeded());
  CHECK(outcome.stdout_bytes == gib);
  CHECK(outcome.stdout_tail == std::string(4096, '\0'));
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // A sanitizer's shadow memory and quarantine make resident sizes mean
  // something else: only the outcome is checked.
  (void)before;
  (void)peak;
#else
  CHECK(peak - before < 64 * 1024);
#endif
}

TEST_CASE("RunCommand: the output tail keeps the last bytes") {
  CommandRequest request = Request({"/bin/sh", "-c", "printf 0123456789; printf abcdefgh >&2"});
  request.output_tail = 4;
  CommandOutcome outcome = Run(request);
  CHECK(outcome.stdout_tail == "6789");
  CHECK(outcome.stderr_tail == "efgh");
  CHECK(outcome.stdout_bytes == 10);
  CHECK(outcome.stderr_bytes == 8);
}

TEST_CASE("RunCommand: a stop sends the group SIGKILL before request_stop returns") {
  TempDir dir;
  const std::string pid_file = dir.path + "/pid";
  std::stop_source stop;
  CommandRequest request = Request(
      {"/bin/sh", "-c", "echo $$ > \"$0.tmp\" && mv \"$0.tmp\" \"$0\"; exec sleep 3600", pid_file});
  auto running = std::async(std::launch::async,
                            [&] { return RunCommand(request, nullptr, stop.get_token()); });
  std::string pid_text = WaitForFile(pid_file, 5s);
  REQUIRE(!pid_text.empty());
  pid_t pid = std::stoi(pid_text);
  CHECK_FALSE(Ended(pid));
  stop.request_stop();
  // Sent, not yet waited for (the caller waits for many at once): the
  // process runs no more code, and ends within moments.
  REQUIRE(running.wait_for(2s) == std::future_status::ready);
  CHECK(Ended(pid));
  CommandOutcome outcome = running.get();
  CHECK(outcome.end == End::kStopped);
  CHECK(outcome.signal == SIGKILL);
  CHECK(outcome.Describe() == "stopped by the worker (SIGKILL)");
}

TEST_CASE("RunCommand: a stop requested before the call starts nothing") {
  TempDir dir;
  const std::string marker = dir.path + "/ran";
  std::stop_source stop;
  stop.request_stop();
  CommandOutcome outcome =
      RunCommand(Request({"/usr/bin/touch", marker}), nullptr, stop.get_token());
  CHECK(outcome.end == End::kStopped);
  CHECK(outcome.Describe() == "stopped by the worker before it started");
  CHECK(access(marker.c_str(), F_OK) != 0);
}

TEST_CASE("RunCommand: many threads at once each get their own program's output") {
  constexpr int kThreads = 8;
  std::vector<std::future<CommandOutcome>> runs;
  for (int i = 0; i < kThreads; ++i) {
    runs.push_back(std::async(std::launch::async, [i] {
      return Run(Request({"/bin/sh", "-c", "cat; echo \" $0\"", std::to_string(i)},
                         "job" + std::to_string(i)));
    }));
  }
  for (int i = 0; i < kThreads; ++i) {
    CommandOutcome outcome = runs[i].get();
    CHECK(outcome.succeeded());
    CHECK(outcome.stdout_tail == "job" + std::to_string(i) + " " + std::to_string(i) + "\n");
  }
}

TEST_CASE("RunCommand: no descriptor is left open, whatever the end") {
  Run(Request({"/bin/true"}));  // whatever the first run opens once (none expected)
  int before = OpenFdCount();
  Run(Request({"/bin/true"}));
  Run(Request({"/nonexistent/handler"}));
  CommandRequest slow = Request({"/bin/sleep", "3600"});
  slow.timeout = 50ms;
  Run(slow);
  const std::string large_job(2000, 'x');
  CommandRequest large = Request({"/bin/cat"}, large_job);
  large.inline_job_limit = 10;
  Run(large);
  std::stop_source stop;
  stop.request_stop();
  RunCommand(Request({"/bin/true"}), nullptr, stop.get_token());
  CHECK(OpenFdCount() == before);
}

TEST_CASE("CommandOutcome::Describe names durations in seconds or milliseconds") {
  CommandOutcome outcome;
  outcome.end = End::kTimedOut;
  outcome.signal = SIGKILL;
  outcome.timeout = 2000ms;
  outcome.kill_grace = 5000ms;
  CHECK(outcome.Describe() == "timed out after 2 s (SIGTERM, then SIGKILL after 5 s)");
  outcome.timeout = 1500ms;
  outcome.kill_grace = 1250ms;
  CHECK(outcome.Describe() == "timed out after 1.5 s (SIGTERM, then SIGKILL after 1.25 s)");
  outcome.end = End::kSignaled;
  outcome.signal = SIGKILL;
  CHECK(outcome.Describe() == "killed by signal 9 (SIGKILL)");
}

TEST_CASE("ProcessGuard: a group still registered when the guard goes is killed") {
  auto guard = ProcessGuard::Start();
  REQUIRE(guard.ok());
  pid_t supervisor = (*guard)->supervisor_pid();
  // Named once it has run its first lines.
  std::string name;
  auto give_up = std::chrono::steady_clock::now() + 2s;
  while (name != "rq-guard" && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(5ms);
    std::ifstream comm("/proc/" + std::to_string(supervisor) + "/comm");
    std::getline(comm, name);
  }
  CHECK(name == "rq-guard");

  // Two programs in groups of their own: one registered, one removed again.
  auto spawn = [] {
    pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      execl("/bin/sleep", "sleep", "3600", static_cast<char*>(nullptr));
      _exit(127);
    }
    setpgid(pid, pid);
    return pid;
  };
  pid_t registered = spawn();
  pid_t removed = spawn();
  REQUIRE(registered > 0);
  REQUIRE(removed > 0);
  CHECK((*guard)->Add(registered).ok());
  CHECK((*guard)->Add(removed).ok());
  (*guard)->Remove(removed);
  guard->reset();            // destroys the guard
  CHECK(Ended(supervisor));  // reaped by the destructor

  int status = 0;
  give_up = std::chrono::steady_clock::now() + 2s;
  pid_t reaped = 0;
  while ((reaped = waitpid(registered, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(5ms);
  }
  CHECK(reaped == registered);
  if (reaped == registered) {
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGKILL);
  } else {
    kill(registered, SIGKILL);  // this test's own child: not left behind when it fails
    waitpid(registered, &status, 0);
  }
  CHECK(waitpid(removed, &status, WNOHANG) == 0);  // still running
  kill(removed, SIGKILL);
  waitpid(removed, &status, 0);
}

TEST_CASE("ProcessGuard: once the supervisor is gone, Add fails and nothing starts") {
  auto guard = ProcessGuard::Start();
  REQUIRE(guard.ok());
  kill((*guard)->supervisor_pid(), SIGKILL);
  // Its end of the socket closes when the kernel has ended it.
  auto give_up = std::chrono::steady_clock::now() + 2s;
  while (!Ended((*guard)->supervisor_pid()) && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(5ms);
  }
  Status added = (*guard)->Add(getpid());
  CHECK(added.IsIoError());
  CHECK(added.message().find("supervisor is gone") != std::string::npos);

  TempDir dir;
  const std::string marker = dir.path + "/ran";
  CommandOutcome outcome = Run(Request({"/usr/bin/touch", marker}), guard->get());
  CHECK(outcome.end == End::kNotStarted);
  CHECK(outcome.start_error.find("supervisor is gone") != std::string::npos);
  CHECK(access(marker.c_str(), F_OK) != 0);
}

TEST_CASE("RunCommand with a ProcessGuard: a handler runs and is unregistered") {
  auto guard = ProcessGuard::Start();
  REQUIRE(guard.ok());
  CommandOutcome outcome = Run(Request({"/bin/sh", "-c", "exit 4"}), guard->get());
  CHECK(outcome.end == End::kExited);
  CHECK(outcome.exit_status == 4);
  outcome = Run(Request({"/nonexistent/handler"}), guard->get());
  CHECK(outcome.end == End::kNotStarted);
}

// The worker SIGKILLed alone, or with its whole process group (kill -9
// -PGID, as a process manager may): the supervisor is in a group of its own.
void CheckSigkilledWorker(bool whole_group) {
  // The helper stands in for the worker (see guard_helper.cc); found next to
  // this binary when not run by meson.
  const char* from_env = getenv("RELIABLEQ_GUARD_HELPER");
  std::string helper =
      from_env != nullptr
          ? from_env
          : std::filesystem::read_symlink("/proc/self/exe").parent_path() / "guard_helper";
  REQUIRE(access(helper.c_str(), X_OK) == 0);
  TempDir dir;
  const std::string pid_file = dir.path + "/pids";
  pid_t worker = fork();
  if (worker == 0) {
    setpgid(0, 0);  // a group of its own, as a worker started by a shell
    execl(helper.c_str(), helper.c_str(), pid_file.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  REQUIRE(worker > 0);
  std::string pids = WaitForFile(pid_file, 5s);
  std::string guard_pid = WaitForFile(pid_file + ".guard", 1s);
  if (pids.empty() || guard_pid.empty()) {
    kill(worker, SIGKILL);
    waitpid(worker, nullptr, 0);
    FAIL("the helper did not start its handler");
  }
  pid_t handler = 0, grandchild = 0;
  std::istringstream(pids) >> handler >> grandchild;
  pid_t supervisor = std::stoi(guard_pid);
  CHECK_FALSE(Ended(handler));
  CHECK_FALSE(Ended(grandchild));

  kill(whole_group ? -worker : worker, SIGKILL);
  int status = 0;
  waitpid(worker, &status, 0);
  CHECK(WIFSIGNALED(status));
  bool handler_ended = EndsWithin(handler, 2s);
  bool grandchild_ended = EndsWithin(grandchild, 2s);
  CHECK(handler_ended);
  CHECK(grandchild_ended);
  CHECK(EndsWithin(supervisor, 2s));
  // When it fails, what this test started is not left running.
  if (!handler_ended) kill(handler, SIGKILL);
  if (!grandchild_ended) kill(grandchild, SIGKILL);
}

TEST_CASE("ProcessGuard: a SIGKILLed worker leaves no handler or grandchild running") {
  CheckSigkilledWorker(false);
}

TEST_CASE("ProcessGuard: a SIGKILL to the worker's whole process group spares the supervisor") {
  CheckSigkilledWorker(true);
}
