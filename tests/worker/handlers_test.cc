// Handlers in any language and timeouts that stop a job: command handlers
// (the examples in examples/, and programs that hang, fork, flood),
// HTTP handlers against the example webhook server, a C++ handler's stop
// token, and real worker processes killed or stopped while a handler runs.

#include <doctest/doctest.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "protocol/keys.h"
#include "reliableq/client.h"
#include "reliableq/server.h"
#include "support/log_capture.h"
#include "support/process.h"
#include "support/running_server.h"
#include "support/stall_proxy.h"
#include "support/testutil.h"
#include "worker/outcomes_fixture.h"

using namespace reliableq;
using namespace reliableq::protocol;
using namespace reliableq::testing;
using namespace std::chrono_literals;

namespace {

std::string Examples() { return BuildPath("RELIABLEQ_EXAMPLES_DIR"); }

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

std::vector<long> Pids(const std::string& path) {
  std::vector<long> pids;
  std::ifstream in(path);
  for (long pid; in >> pid;) pids.push_back(pid);
  return pids;
}

// Gone, or a zombie: it runs no more code.
bool Ended(long pid) {
  if (kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return true;
  char state = stat[paren + 2];
  return state == 'Z' || state == 'X';
}

// The peak resident memory of this process, in kB.
long PeakRssKb() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

class HandlersFixture : public RedisFixture {
 public:
  HandlersFixture() {
    char templ[] = "/tmp/reliableq-handlers-XXXXXX";
    dir_ = mkdtemp(templ);
    auto client = Client::Open(options());
    REQUIRE_MESSAGE(client.ok(), client.status().ToString());
    client_ = std::move(client.value());
  }
  ~HandlersFixture() {
    workers_.clear();
    std::string cmd = "rm -rf '" + dir_ + "'";
    int ignored = std::system(cmd.c_str());
    (void)ignored;
  }

  ServerOptions Options() {
    ServerOptions opts;
    opts.redis = options();
    opts.concurrency = 4;
    opts.heartbeat_ttl = 1000ms;
    opts.heartbeat_interval = 200ms;
    opts.idle_poll_interval = 50ms;
    opts.kill_grace = 300ms;
    opts.log_sink = log_->Sink();
    opts.log_level = LogLevel::kInfo;
    return opts;
  }

  std::string Push(const std::string& job_class, const std::string& args,
                   const std::string& extra = "{}", const std::string& jid = "") {
    Job job;
    job.job_class = job_class;
    job.args = args;
    job.extra = extra;
    job.jid = jid;
    return AcceptedJid(client_->Push(job));
  }

  // The retry set's entry of `jid`, waited for.
  std::string RetryEntry(const std::string& jid, std::chrono::milliseconds limit = 10s) {
    return SetEntry("retry", jid, limit);
  }

  // The entry of `jid` in the sorted set `set` (retry, dead), waited for.
  std::string SetEntry(const std::string& set, const std::string& jid,
                       std::chrono::milliseconds limit = 10s) {
    std::string found;
    WaitUntil(
        [&] {
          for (const std::string& entry : ZRange(set)) {
            if (entry.find(jid) != std::string::npos) found = entry;
          }
          return !found.empty();
        },
        limit);
    return found;
  }

  long long Processed() {
    std::string count = Get("stat:processed");
    return count.empty() ? 0 : std::stoll(count);
  }

  bool Drained() { return Integer({"LLEN", "queue:default"}) == 0 && Processed() > 0; }

  // A worker process on the test's Redis (or on `redis_url`).
  ChildProcess& StartWorker(std::vector<std::string> extra, std::string redis_url = "") {
    std::vector<std::string> argv = {BuildPath("RELIABLEQ_BIN"),
                                     "worker",
                                     "--redis",
                                     redis_url.empty() ? server().Url() : redis_url,
                                     "--heartbeat-ttl",
                                     "1",
                                     "--heartbeat-interval",
                                     "0.25",
                                     "--janitor-interval",
                                     "0.5"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    std::string log = dir_ + "/worker" + std::to_string(workers_.size()) + ".log";
    workers_.push_back(std::make_unique<ChildProcess>(argv, std::vector<std::string>{}, log));
    return *workers_.back();
  }

  // A handler that records each run ("<jid> <interrupted_count>") in
  // dir/ledger and, on its first run, writes its pid and a background
  // child's to dir/pids and waits for the child: an hour.
  std::string HoldScript() {
    return HoldingScript("hold.sh", "\"$RELIABLEQ_JID $RELIABLEQ_INTERRUPTED_COUNT\"", "ledger",
                         "\"$RELIABLEQ_INTERRUPTED_COUNT\" = 0");
  }

  // A handler script dir/`name` that appends `record` (shell words) to
  // dir/`log` and, while the test `holds_when` is true, writes its pid and a
  // background child's to dir/pids and waits for the child: an hour.
  std::string HoldingScript(const std::string& name, const std::string& record,
                            const std::string& log, const std::string& holds_when) {
    std::string path = dir_ + "/" + name;
    WriteFile(path, "#!/bin/sh\n"
                    "echo " + record + " >> " + dir_ + "/" + log + "\n" +
                    "if [ " + holds_when + " ]; then\n"
                    "  sleep 3600 &\n"
                    "  echo \"$$ $!\" >> " + dir_ + "/pids\n"
                    "  wait\n"
                    "fi\n");
    chmod(path.c_str(), 0755);
    return path;
  }

  std::string dir_;
  std::shared_ptr<LogCapture> log_ = std::make_shared<LogCapture>();
  std::unique_ptr<Client> client_;
  std::vector<std::unique_ptr<ChildProcess>> workers_;
};

}  // namespace

TEST_CASE_FIXTURE(HandlersFixture,
                  "the Python example sends a receipt once per jid, and fails "
                  "with its exit status and stderr on bad args") {
  std::string outbox = dir_ + "/outbox";
  REQUIRE(mkdir(outbox.c_str(), 0755) == 0);
  ServerOptions opts = Options();
  opts.command_handlers["ReceiptJob"] = {{"python3", Examples() + "/send_receipt.py"}};
  opts.handler_environment = {"OUTBOX=" + outbox};
  RunningServer server(opts, HandlerRegistry());

  std::string jid = Push("ReceiptJob", R"(["A-17", "ada@example.com"])");
  std::string message = outbox + "/" + jid + ".eml";
  REQUIRE(WaitUntil([&] { return ReadFile(message).find("Thank you.") != std::string::npos; }));
  CHECK(ReadFile(message).find("Subject: Your receipt for order A-17") != std::string::npos);
  // The same jid again (a retry, a recovered copy): nothing is sent twice.
  WriteFile(message, "the first one");
  Push("ReceiptJob", R"(["A-17", "ada@example.com"])", "{}", jid);
  REQUIRE(WaitUntil([&] { return Processed() == 2; }));
  CHECK(ReadFile(message) == "the first one");
  CHECK(Integer({"ZCARD", "retry"}) == 0);

  std::string bad = Push("ReceiptJob", R"([42])");
  std::string entry = RetryEntry(bad);
  REQUIRE_FALSE(entry.empty());
  CHECK(Field(entry, "error_class") == "Reliableq::CommandFailed");
  std::string error = Field(entry, "error_message");
  CHECK(error.find("exited with status 2") != std::string::npos);
  CHECK(error.find("ReceiptJob expects args [order_id, address]") != std::string::npos);
}

TEST_CASE_FIXTURE(HandlersFixture, "the shell example reads the job from its environment") {
  std::string exports = dir_ + "/exports";
  REQUIRE(mkdir(exports.c_str(), 0755) == 0);
  for (const char* name : {"c-1.csv", "c-1.json", "c-2.csv"}) WriteFile(exports + "/" + name, "x");
  ServerOptions opts = Options();
  opts.command_handlers["CleanupJob"] = {{Examples() + "/cleanup.sh"}};
  // The catch-all: every other class.
  std::string others = dir_ + "/others";
  opts.command_handlers["*"] = {
      {"/bin/sh", "-c",
       "echo \"$RELIABLEQ_CLASS $RELIABLEQ_QUEUE $RELIABLEQ_INTERRUPTED_COUNT $HANDLERS_TEST_SECRET\" >> " +
           others}};
  opts.command_handlers["NulJob"] = {
      {"/bin/sh", "-c", "printf 'before\\000after: the real error\\n' >&2; exit 1"}};
  opts.handler_environment = {"EXPORT_DIR=" + exports};
  setenv("HANDLERS_TEST_SECRET", "leaked", 1);
  RunningServer server(opts, HandlerRegistry());
  Push("CleanupJob", R"(["c-1"])");
  REQUIRE(WaitUntil([&] { return Drained(); }));
  Push("AnyOtherJob", "[]");
  REQUIRE(WaitUntil([&] { return !ReadFile(others).empty(); }));
  // The worker's own environment does not reach handlers.
  CHECK(ReadFile(others) == "AnyOtherJob default 0 \n");
  unsetenv("HANDLERS_TEST_SECRET");
  // A NUL byte in stderr does not cut the error message there.
  std::string nul = Push("NulJob", "[]");
  CHECK(Field(RetryEntry(nul), "error_message").find("after: the real error") !=
        std::string::npos);
  CHECK(access((exports + "/c-1.csv").c_str(), F_OK) != 0);
  CHECK(access((exports + "/c-1.json").c_str(), F_OK) != 0);
  CHECK(access((exports + "/c-2.csv").c_str(), F_OK) == 0);
  std::string bad = Push("CleanupJob", R"(["../etc"])");
  std::string entry = RetryEntry(bad);
  CHECK(Field(entry, "error_message").find("CleanupJob expects args [customer_id]") !=
        std::string::npos);
}

TEST_CASE_FIXTURE(HandlersFixture,
                  "a program past its timeout is stopped with its whole "
                  "process group, and the job fails as timed out") {
  ServerOptions opts = Options();
  std::string pids = dir_ + "/pids";
  // The handler and a grandchild it leaves in the background, both asleep.
  opts.command_handlers["HangJob"] = {
      {"/bin/sh", "-c", "sleep 3600 & echo \"$$ $!\" >> " + pids + "; wait"}};
  opts.job_timeouts["HangJob"] = 500ms;
  // The same program for a class without a timeout of its own.
  opts.command_handlers["SlowJob"] = {{"/bin/sleep", "3600"}};
  RunningServer server(opts, HandlerRegistry());

  auto began = std::chrono::steady_clock::now();
  std::string jid = Push("HangJob", "[]");
  std::string entry = RetryEntry(jid, 10s);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  REQUIRE_FALSE(entry.empty());
  // The timeout and the grace, plus start-up and the retry's write.
  CHECK(seconds < 0.5 + 0.3 + 1.5);
  CHECK(Field(entry, "error_class") == "Reliableq::JobTimeout");
  CHECK(Field(entry, "error_message").find("timed out after") != std::string::npos);
  std::vector<long> started = Pids(pids);
  REQUIRE(started.size() == 2);
  CHECK(WaitUntil([&] { return Ended(started[0]) && Ended(started[1]); }, 2s));

  // The job's own timeout field, on a class without one.
  std::string field_jid = Push("SlowJob", "[]", R"({"timeout": 0.3})");
  entry = RetryEntry(field_jid, 10s);
  CHECK(Field(entry, "error_class") == "Reliableq::JobTimeout");
  CHECK(log_->Count("sec: Reliableq::JobTimeout: timed out after") == 2);
}

TEST_CASE_FIXTURE(HandlersFixture, "a program that writes 1 GiB to stdout costs no memory") {
  ServerOptions opts = Options();
  opts.command_handlers["FloodJob"] = {{"/usr/bin/head", "-c", "1073741824", "/dev/zero"}};
  // The peak so far is this process's, from earlier tests: start afresh.
  {
    std::ofstream reset("/proc/self/clear_refs");
    reset << "5";
  }
  long before = PeakRssKb();
  RunningServer server(opts, HandlerRegistry());
  Push("FloodJob", "[]");
  REQUIRE(WaitUntil([&] { return Drained(); }, 60s));
  CHECK(Integer({"ZCARD", "retry"}) == 0);
  long growth_kb = PeakRssKb() - before;
  INFO("peak RSS grew by " << growth_kb << " kB");
  CHECK(growth_kb < 64 * 1024);
}

TEST_CASE_FIXTURE(HandlersFixture,
                  "a C++ handler sees its stop token at the timeout; one that "
                  "ignores it is reported as overrun") {
  HandlerRegistry registry;
  std::atomic<bool> saw_stop{false};
  registry.Register("PatientJob", [&](const JobView& job) {
    auto until = std::chrono::steady_clock::now() + 10s;
    while (!job.stop_requested() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(10ms);
    }
    saw_stop = job.stop_requested();
    job.ThrowIfStopRequested();
  });
  registry.Register("StubbornJob", [](const JobView&) { std::this_thread::sleep_for(1200ms); });
  ServerOptions opts = Options();
  opts.job_timeouts["*"] = 300ms;
  RunningServer server(opts, std::move(registry));

  std::string patient = Push("PatientJob", "[]");
  std::string entry = RetryEntry(patient);
  CHECK(saw_stop);
  CHECK(Field(entry, "error_class") == "Reliableq::JobTimeout");

  std::string stubborn = Push("StubbornJob", "[]");
  REQUIRE(
      WaitUntil([&] { return log_->Count("still running after its timeout (0.3 s)") >= 1; }, 5s));
  // It was let run on (OverrunAction::kKeepRunning), and its result stands.
  REQUIRE(WaitUntil([&] { return Processed() == 2; }, 5s));
  CHECK(RetryEntry(stubborn, 200ms).empty());
}

TEST_CASE_FIXTURE(HandlersFixture, "the example webhook server answers HTTP handler jobs") {
  std::string ledger = dir_ + "/ledger";
  std::string out = dir_ + "/webhook.log";
  ChildProcess webhook({FindProgram("python3"), Examples() + "/webhook_server.py", "--port", "0",
                        "--ledger", ledger},
                       {}, out);
  std::string port;
  REQUIRE(WaitUntil(
      [&] {
        std::string text = ReadFile(out);
        if (text.find('\n') == std::string::npos) return false;
        port = text.substr(0, text.find('\n'));
        return true;
      },
      10s));
  ServerOptions opts = Options();
  opts.http_handlers["WebhookJob"] = {"http://127.0.0.1:" + port + "/jobs"};
  // A token in a handler URL's query is a secret: the start-up log names
  // the handler with its value masked.
  opts.http_handlers["TokenJob"] = {"http://127.0.0.1:" + port + "/hook?token=hunter2"};
  RunningServer server(opts, HandlerRegistry());
  bool described = false;
  for (const std::string& line : log_->Lines()) {
    described = described || line.find("TokenJob: POST http://127.0.0.1:" + port +
                                       "/hook?token=***") != std::string::npos;
    CHECK_MESSAGE(line.find("hunter2") == std::string::npos, line);
  }
  CHECK(described);

  std::string jid = Push("WebhookJob", R"(["order.paid", {"order": "A-17"}])");
  REQUIRE(WaitUntil([&] { return ReadFile(ledger).find(jid) != std::string::npos; }));
  CHECK(ReadFile(ledger).find(jid + " order.paid {\"order\": \"A-17\"}") != std::string::npos);
  // A 4xx other than 408, 425 and 429: the request is wrong, and will stay
  // so: dead at once (reliableq(1), OUTCOMES).
  std::string bad = Push("WebhookJob", "[1]");
  std::string entry = SetEntry("dead", bad);
  CHECK(Field(entry, "error_class") == "Reliableq::HttpFailed");
  CHECK(Field(entry, "error_message").find("HTTP 422") != std::string::npos);
  CHECK(Field(entry, "error_message").find("expected a job with args") != std::string::npos);
  webhook.Signal(SIGKILL);
}

TEST_CASE_FIXTURE(HandlersFixture,
                  "SIGKILL of the worker mid-handler: no handler process "
                  "survives, and the job comes back and completes") {
  std::string jid = Push("HoldJob", "[]");
  ChildProcess& worker = StartWorker({"--exec", "HoldJob=" + HoldScript()});
  REQUIRE(WaitUntil([&] { return Pids(dir_ + "/pids").size() == 2; }, 10s));
  std::vector<long> held = Pids(dir_ + "/pids");
  worker.Signal(SIGKILL);
  REQUIRE(worker.Wait(5s));
  // The supervisor kills the handler's group: the handler and its child.
  CHECK(WaitUntil([&] { return Ended(held[0]) && Ended(held[1]); }, 3s));

  StartWorker({"--exec", "HoldJob=" + HoldScript()});
  REQUIRE(WaitUntil(
      [&] { return ReadFile(dir_ + "/ledger").find(jid + " 1") != std::string::npos; }, 15s));
  REQUIRE(WaitUntil([&] { return Processed() == 1; }, 5s));
  CHECK(Integer({"LLEN", "queue:default"}) == 0);
  CHECK(Integer({"ZCARD", "retry"}) == 0);
}

TEST_CASE_FIXTURE(HandlersFixture,
                  "TERM past the shutdown timeout kills the handler's process "
                  "group before its job goes back") {
  std::string jid = Push("HoldJob", "[]");
  ChildProcess& worker = StartWorker({"-t", "0.5", "--exec", "HoldJob=" + HoldScript()});
  REQUIRE(WaitUntil([&] { return Pids(dir_ + "/pids").size() == 2; }, 10s));
  std::vector<long> held = Pids(dir_ + "/pids");
  worker.Signal(SIGTERM);
  // The moment the job is back in its queue, nothing of its first run runs.
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", "queue:default"}) == 1; }, 5s));
  CHECK(Ended(held[0]));
  CHECK(Ended(held[1]));
  auto status = worker.Wait(5s);
  REQUIRE(status);
  CHECK(WEXITSTATUS(*status) == 0);
  CHECK(LRange("queue:default")[0].find(jid) != std::string::npos);
}

TEST_CASE_FIXTURE(HandlersFixture, "TERM past the shutdown timeout with ten handlers running: "
                                   "each job back in its queue once, none taken for a failure") {
  constexpr int kJobs = 10;
  std::set<std::string> jids;
  for (int i = 0; i < kJobs; ++i) {
    Job job;
    job.job_class = "HoldJob";
    job.retry = Retry::Disabled();  // a stop taken for a failure would drop it
    jids.insert(AcceptedJid(client_->Push(job)));
  }
  ChildProcess& worker = StartWorker(
      {"-c", std::to_string(kJobs), "-t", "0.5", "--exec", "HoldJob=" + HoldScript()});
  REQUIRE(WaitUntil([&] { return Pids(dir_ + "/pids").size() == 2 * kJobs; }, 15s));
  std::vector<long> held = Pids(dir_ + "/pids");
  worker.Signal(SIGTERM);
  auto status = worker.Wait(10s);
  REQUIRE(status);
  CHECK(WEXITSTATUS(*status) == 0);
  std::vector<std::string> queued = LRange("queue:default");
  CHECK(queued.size() == kJobs);
  std::set<std::string> back;
  for (const std::string& payload : queued) {
    back.insert(Field(payload, "jid"));
    CHECK(Field(payload, "interrupted_count") == "1");
  }
  CHECK(back == jids);
  CHECK(Get("stat:failed").empty());
  CHECK(Integer({"ZCARD", "retry"}) == 0);
  CHECK(Integer({"ZCARD", "dead"}) == 0);
  for (long pid : held) CHECK(Ended(pid));
  CHECK(worker.Log().find("JobStopped") == std::string::npos);
}

TEST_CASE_FIXTURE(HandlersFixture,
                  "--on-overrun exit: a C++ handler that will not stop ends "
                  "the worker, and the janitor gives its job back") {
  std::string jid = Push("SleepJob", "[1500]");
  ChildProcess& worker = StartWorker({"-r", BuildPath("RELIABLEQ_DEMO_PLUGIN"), "--job-timeout",
                                      "0.3", "--kill-grace", "0.2", "--on-overrun", "exit"});
  auto status = worker.Wait(10s);
  REQUIRE(status);
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 70);
  CHECK(worker.Log().find("the process exits (status 70)") != std::string::npos);
  // A worker without the timeout takes it back from the dead one and runs it.
  StartWorker({"-r", BuildPath("RELIABLEQ_DEMO_PLUGIN")});
  REQUIRE(WaitUntil([&] { return Processed() == 1; }, 15s));
  CHECK(Integer({"ZCARD", "retry"}) == 0);
}

TEST_CASE_FIXTURE(HandlersFixture,
                  "a worker cut off from Redis past its ttl has stopped its command handler "
                  "before a janitor may take the job, and after healing writes nothing about it") {
  StallProxy proxy(dir_ + "/proxy.sock", server().socket_path());
  std::string jid = Push("HoldJob", "[]");
  ChildProcess& worker =
      StartWorker({"--exec", "HoldJob=" + HoldScript()}, "unix://" + proxy.path() + "?db=0");
  REQUIRE(WaitUntil([&] { return Pids(dir_ + "/pids").size() == 2; }, 10s));
  std::vector<long> held = Pids(dir_ + "/pids");
  std::vector<std::string> identities = SMembers("processes");
  REQUIRE(identities.size() == 1);
  std::string heartbeat = Keys().Heartbeat(identities[0]);

  // A partition: the worker's connections stay open at both ends, and
  // nothing crosses. Its heartbeat key lapses after the ttl (1 s).
  proxy.Stall();
  REQUIRE(WaitUntil([&] { return !Exists(heartbeat); }, 5s));
  // The moment a janitor may take the job, nothing of its run runs.
  CHECK(Ended(held[0]));
  CHECK(Ended(held[1]));
  CommandResult recovered =
      RunCommand({BuildPath("RELIABLEQ_BIN"), "recover", "--redis", server().Url()});
  REQUIRE_MESSAGE(recovered.exit_code == 0, recovered.err);
  // Another worker takes it from its queue.
  REQUIRE(LRange("queue:default").size() == 1);
  Run({"LMOVE", "queue:default", "taken", "RIGHT", "LEFT"});
  std::vector<std::string> taken = LRange("taken");

  // Healed: the worker finds it was taken for dead and registers again,
  // without a word about the job it ran.
  proxy.Resume();
  REQUIRE(WaitUntil([&] { return Exists(heartbeat); }, 10s));
  std::this_thread::sleep_for(1s);  // room for an ack, a retry or a requeue to show
  CHECK(LRange("taken") == taken);
  CHECK(Integer({"LLEN", "queue:default"}) == 0);
  CHECK(Integer({"ZCARD", "retry"}) == 0);
  CHECK(Integer({"ZCARD", "dead"}) == 0);
  CHECK(Get("stat:processed").empty());
  CHECK(Get("stat:failed").empty());
  // One run only: the handler's ledger line, never a second.
  CHECK(ReadFile(dir_ + "/ledger") == jid + " 0\n");
  std::string log = worker.Log();
  CHECK(log.find("no heartbeat confirmed") != std::string::npos);
  if (log.find("no heartbeat confirmed") == std::string::npos) MESSAGE(log);
  CHECK(log.find("heartbeat key was gone") != std::string::npos);
}

TEST_CASE_FIXTURE(HandlersFixture,
                  "a job the fence stopped is interrupted, not failed: when the worker is "
                  "found alive again it goes back to its queue and runs again") {
  StallProxy proxy(dir_ + "/proxy.sock", server().socket_path());
  // Its first run holds (an hour, in a background child), the next ones end
  // at once: a run is a line of dir/runs.
  std::string script = HoldingScript("first_holds.sh", "\"$RELIABLEQ_JID\"", "runs",
                                     "\"$(wc -l < " + dir_ + "/runs)\" = 1");
  std::string jid = Push("HoldJob", "[]");
  // A ttl long enough that the fence (a second before the lease ends)
  // comes well before the heartbeat key could lapse.
  ChildProcess& worker = StartWorker(
      {"--heartbeat-ttl", "10", "--heartbeat-interval", "2.5", "--exec", "HoldJob=" + script},
      "unix://" + proxy.path() + "?db=0");
  REQUIRE(WaitUntil([&] { return Pids(dir_ + "/pids").size() == 2; }, 10s));
  std::vector<long> held = Pids(dir_ + "/pids");
  proxy.Stall();
  REQUIRE(WaitUntil(
      [&] { return worker.Log().find("no heartbeat confirmed") != std::string::npos; }, 15s));
  proxy.Resume();
  // The fence SIGKILLed the group as it logged; the kernel ends them soon
  // after (later under a sanitizer).
  CHECK(WaitUntil([&] { return Ended(held[0]) && Ended(held[1]); }, 5s));
  // Its second run ends at once, and succeeds. (An interruption by the
  // fence is not counted: the job did nothing to cause it.)
  bool done = WaitUntil([&] { return Processed() == 1; }, 15s);
  if (!done) MESSAGE(ReadFile(dir_ + "/runs"), worker.Log());
  REQUIRE(done);
  CHECK(ReadFile(dir_ + "/runs") == jid + "\n" + jid + "\n");
  CHECK(Integer({"ZCARD", "retry"}) == 0);
  CHECK(Get("stat:failed").empty());
  CHECK(worker.Log().find("heartbeat key was gone") == std::string::npos);
}

TEST_CASE_FIXTURE(HandlersFixture,
                  "a janitor that took a worker for dead leaves its jobs when it beats again "
                  "before the move: the script checks the heartbeat in the same step") {
  // Every run of the job holds; each is a line of dir/runs.
  std::string script =
      HoldingScript("always_holds.sh", "\"$RELIABLEQ_JID\"", "runs", "-n \"$RELIABLEQ_JID\"");
  std::string jid = Push("HoldJob", "[]");
  StallProxy victim_link(dir_ + "/victim.sock", server().socket_path());
  StallProxy janitor_link(dir_ + "/janitor.sock", server().socket_path());
  // The victim runs one janitor pass as it starts, none after: the passes
  // this test watches are the other worker's.
  StartWorker({"--janitor-interval", "3600", "--exec", "HoldJob=" + script},
              "unix://" + victim_link.path() + "?db=0");
  REQUIRE(WaitUntil([&] { return Pids(dir_ + "/pids").size() == 2; }, 10s));
  std::string victim;
  for (const std::string& identity : SMembers("processes")) victim = identity;
  REQUIRE_FALSE(victim.empty());
  // The janitor's worker: another queue, and a ttl long enough to be held a
  // few seconds without fencing itself.
  ChildProcess& janitor =
      StartWorker({"-q", "other", "--heartbeat-ttl", "10", "--heartbeat-interval", "2.5", "--exec",
                   "HoldJob=" + script},
                  "unix://" + janitor_link.path() + "?db=0");
  REQUIRE_MESSAGE(WaitUntil([&] { return SMembers("processes").size() == 2; }, 10s), janitor.Log());

  // The victim is cut off past its ttl: it fences itself, its heartbeat
  // key lapses.
  const std::string heartbeat = Keys().Heartbeat(victim);
  victim_link.Stall();
  REQUIRE(WaitUntil([&] { return !Exists(heartbeat); }, 5s));
  // The janitor's next pass reads that heartbeat (gone) and is held right
  // after, before it fences and moves anything.
  janitor_link.StallAfter(heartbeat);
  // (The lease the victim's first pass took holds the next one back up to 5 s.)
  REQUIRE(WaitUntil([&] { return janitor_link.stalled(); }, 10s));
  const std::string record_before = Get(Keys().JanitorLast());

  // Healed meanwhile: the victim beats again, gives the job it stopped back
  // to its queue and runs it again.
  victim_link.Resume();
  REQUIRE(WaitUntil([&] { return Exists(heartbeat) && Pids(dir_ + "/pids").size() == 4; }, 10s));
  const std::string working = Keys().Working(victim, "default");
  REQUIRE(LRange(working).size() == 1);

  // The held pass goes on: the victim is alive again when it would move its
  // list, and keeps its job and its registration.
  janitor_link.Resume();
  REQUIRE(WaitUntil([&] { return Get(Keys().JanitorLast()) != record_before; }, 10s));
  std::string record = Get(Keys().JanitorLast());
  // A third run would show within this second: the job is fetched at once.
  std::this_thread::sleep_for(1s);
  std::string runs = ReadFile(dir_ + "/runs");
  CHECK_MESSAGE(runs == jid + "\n" + jid + "\n",
                "the janitor moved a job of a live worker, which ran it twice at once: runs\n"
                    << runs << "pass " << record);
  CHECK(LRange(working).size() == 1);
  CHECK(Integer({"LLEN", "queue:default"}) == 0);
  CHECK(record.find(victim) == std::string::npos);
  CHECK(!HGet(Keys().Registry(), victim).empty());
}

TEST_CASE_FIXTURE(HandlersFixture,
                  "--backoff and --retry-for give a class its own retry schedule") {
  std::string script = dir_ + "/fails.sh";
  WriteFile(script, "#!/bin/sh\nexit 3\n");
  chmod(script.c_str(), 0755);
  // A second failure (retry_count 0 before it): the table's second entry.
  std::string again = Push("FailJob", "[]", R"({"retry_count":0,"failed_at":1.5})");
  // Its first failure long ago, past the class's window: dead, though its
  // count allows 25 retries.
  std::string late = Push("LateJob", "[]", R"({"retry_count":0,"failed_at":1000000000.5})");
  double before = NowSeconds();
  StartWorker({"--exec", "FailJob=" + script, "--exec", "LateJob=" + script, "--backoff",
               "FailJob=100,200,300", "--retry-for", "LateJob=3600"});
  REQUIRE(WaitUntil([&] { return Get("stat:failed") == "2"; }, 15s));
  auto retry = ZRangeWithScores("retry");
  REQUIRE(retry.size() == 1);
  CHECK(Field(retry[0].first, "jid") == again);
  // 200 s, plus Sidekiq's jitter: rand(10) * (1 + 1), at most 18 s.
  CHECK(retry[0].second >= before + 200);
  CHECK(retry[0].second <= NowSeconds() + 200 + 18);
  std::vector<std::string> dead = ZRange("dead");
  REQUIRE(dead.size() == 1);
  CHECK(Field(dead[0], "jid") == late);
}
