// Real worker processes (`reliableq worker -r libdemo_jobs.so`), killed with
// real signals. These are the tests behind the promise that no job is lost:
// every job pushed before a SIGKILL completes after recovery.

#include <doctest/doctest.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "protocol/keys.h"
#include "protocol/process_entry.h"
#include "reliableq/client.h"
#include "support/process.h"
#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::protocol;
using namespace reliableq::testing;
using namespace std::chrono_literals;

namespace {

// Short liveness settings so that recovery happens within seconds.
constexpr double kTtl = 1.0;
constexpr double kJanitor = 0.5;

class WorkerFixture : public RedisFixture {
 public:
  WorkerFixture() {
    char templ[] = "/tmp/reliableq-crash-XXXXXX";
    dir_ = mkdtemp(templ);
    record_log_ = dir_ + "/executions.log";
  }
  ~WorkerFixture() {
    workers_.clear();  // SIGKILLs what still runs
    std::string cmd = "rm -rf '" + dir_ + "'";
    int ignored = std::system(cmd.c_str());
    (void)ignored;
  }

  // Starts `reliableq worker` with the demo plugin and short timings.
  ChildProcess& StartWorker(std::vector<std::string> extra = {}) {
    std::vector<std::string> timings = {"--heartbeat-ttl", std::to_string(kTtl),
                                        "--heartbeat-interval", "0.25"};
    if (std::find(extra.begin(), extra.end(), "--janitor-interval") == extra.end()) {
      extra.push_back("--janitor-interval");
      extra.push_back(std::to_string(kJanitor));
    }
    timings.insert(timings.end(), extra.begin(), extra.end());
    return Launch(timings, record_log_);
  }

  // Starts `reliableq worker` with the demo plugin and only `options`
  // (the defaults for everything else); RecordJob writes to `record_log`.
  ChildProcess& Launch(const std::vector<std::string>& options, const std::string& record_log) {
    std::vector<std::string> argv = {BuildPath("RELIABLEQ_BIN"), "worker", "--redis",
                                     server().Url(), "-r", BuildPath("RELIABLEQ_DEMO_PLUGIN")};
    argv.insert(argv.end(), options.begin(), options.end());
    std::string log = dir_ + "/worker" + std::to_string(workers_.size()) + ".log";
    workers_.push_back(std::make_unique<ChildProcess>(
        argv, std::vector<std::string>{"RELIABLEQ_DEMO_LOG=" + record_log}, log));
    return *workers_.back();
  }

  // The jids RecordJob wrote, with how often each ran.
  std::map<std::string, int> Executions() {
    std::map<std::string, int> counts;
    std::ifstream in(record_log_);
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty()) ++counts[line];
    }
    return counts;
  }

  // The identity of a worker, from the processes set, by its pid.
  std::string IdentityOf(pid_t pid) {
    std::string found;
    WaitUntil([&] {
      for (const std::string& id : SMembers("processes")) {
        if (id.find(":" + std::to_string(pid) + ":") != std::string::npos) found = id;
      }
      return !found.empty();
    });
    return found;
  }

  std::unique_ptr<Client> OpenClient() {
    auto client = Client::Open(options());
    REQUIRE_MESSAGE(client.ok(), client.status().ToString());
    return std::move(client.value());
  }

  std::string dir_;
  std::string record_log_;
  std::vector<std::unique_ptr<ChildProcess>> workers_;
};

std::string Push(Client& client, const std::string& cls, const std::string& args,
                 const std::string& queue = "default") {
  Job job;
  job.job_class = cls;
  job.args = args;
  job.queue = queue;
  return AcceptedJid(client.Push(job));
}

// The jids listed in a RecordJob log, with how often each appears.
std::map<std::string, int> Recorded(const std::string& path) {
  std::map<std::string, int> counts;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) ++counts[line];
  }
  return counts;
}

}  // namespace

TEST_CASE_FIXTURE(WorkerFixture, "SIGKILL mid-run: every job completes, none is lost") {
  auto client = OpenClient();
  std::set<std::string> pushed;
  for (int i = 0; i < 300; ++i) pushed.insert(Push(*client, "RecordJob", "[\"x\", 5]"));
  ChildProcess& first = StartWorker({"-c", "5"});
  std::string first_id = IdentityOf(first.pid());
  REQUIRE_FALSE(first_id.empty());
  REQUIRE(WaitUntil([&] { return Executions().size() >= 40; }));
  first.Signal(SIGKILL);
  REQUIRE(first.Wait(5s));
  auto killed_at = std::chrono::steady_clock::now();
  const std::string orphan_list = Keys().Working(first_id, "default");
  size_t orphaned = static_cast<size_t>(Integer({"LLEN", orphan_list}));
  INFO("jobs orphaned by the kill: " << orphaned);
  CHECK(orphaned > 0);

  StartWorker({"-c", "5"});
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", orphan_list}) == 0; }, 15s));
  double recovery = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at)
                        .count();
  // I3: back within heartbeat ttl + janitor interval (plus scheduling slack).
  CHECK(recovery < kTtl + kJanitor + 2.0);

  REQUIRE(WaitUntil([&] {
    return Executions().size() == pushed.size() && Integer({"LLEN", "queue:default"}) == 0;
  }, 60s));
  std::map<std::string, int> runs = Executions();
  size_t lost = 0, twice = 0;
  for (const std::string& jid : pushed) {
    if (runs.count(jid) == 0) ++lost;
    if (runs[jid] > 1) ++twice;
  }
  CHECK(lost == 0);
  // Only jobs the killed worker held can run twice (I2).
  CHECK(twice <= orphaned);
  CHECK(runs.size() == pushed.size());
  // The dead process is gone from every record.
  REQUIRE(WaitUntil([&] { return HGet(Keys().Registry(), first_id).empty(); }));
  CHECK(SMembers("processes").size() == 1);
}

TEST_CASE_FIXTURE(WorkerFixture, "a job that kills its worker every time ends in the dead set") {
  auto client = OpenClient();
  std::string jid = Push(*client, "CrashJob", "[]");
  int crashes = 0;
  for (int attempt = 0; attempt < 8; ++attempt) {
    ChildProcess& worker = StartWorker({"-c", "1", "--max-interruptions", "3"});
    bool ended = WaitUntil([&] { return !worker.running() || Integer({"ZCARD", "dead"}) == 1; },
                           15s);
    REQUIRE(ended);
    if (!worker.running()) {
      int status = *worker.Wait(0ms);
      CHECK(WIFSIGNALED(status));
      CHECK(WTERMSIG(status) == SIGABRT);
      ++crashes;
      continue;
    }
    worker.Signal(SIGTERM);
    auto status = worker.Wait(10s);
    REQUIRE(status);
    CHECK(WIFEXITED(*status));
    CHECK(WEXITSTATUS(*status) == 0);
    break;
  }
  // I4: runs max_interruptions + 1 times, then stops in the dead set.
  CHECK(crashes == 4);
  std::vector<std::string> dead = ZRange("dead");
  REQUIRE(dead.size() == 1);
  rapidjson::Document doc;
  doc.Parse(dead[0].c_str());
  REQUIRE_FALSE(doc.HasParseError());
  CHECK(std::string(doc["jid"].GetString()) == jid);
  CHECK(doc["interrupted_count"].GetInt() == 4);
  CHECK(std::string(doc["error_class"].GetString()) == "Reliableq::Interrupted");
  CHECK(std::string(doc["error_message"].GetString()).find("interrupted 4 times") !=
        std::string::npos);
  CHECK(Integer({"LLEN", "queue:default"}) == 0);
}

TEST_CASE_FIXTURE(WorkerFixture, "TERM waits for the timeout, then hands the running job back") {
  auto client = OpenClient();
  std::string jid = Push(*client, "SleepJob", "[5000]");
  ChildProcess& worker = StartWorker({"-c", "2", "-t", "0.5"});
  std::string id = IdentityOf(worker.pid());
  REQUIRE(WaitUntil([&] { return HGet(id, "busy") == "1"; }));
  auto began = std::chrono::steady_clock::now();
  worker.Signal(SIGTERM);
  auto status = worker.Wait(10s);
  REQUIRE(status);
  CHECK(std::chrono::steady_clock::now() - began < 3s);
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
  std::vector<std::string> queued = LRange("queue:default");
  REQUIRE(queued.size() == 1);
  CHECK(queued[0].find(jid) != std::string::npos);
  CHECK(queued[0].find("\"interrupted_count\":1") != std::string::npos);
  CHECK(Integer({"LLEN", Keys().Working(id, "default")}) == 0);
  CHECK(SMembers("processes").empty());
  CHECK(HGet(Keys().Registry(), id).empty());
  CHECK_FALSE(Exists(Keys().Heartbeat(id)));
}

TEST_CASE_FIXTURE(WorkerFixture, "a second TERM stops at once, still handing jobs back") {
  auto client = OpenClient();
  Push(*client, "SleepJob", "[8000]");
  ChildProcess& worker = StartWorker({"-c", "1", "-t", "20"});
  std::string id = IdentityOf(worker.pid());
  REQUIRE(WaitUntil([&] { return HGet(id, "busy") == "1"; }));
  worker.Signal(SIGTERM);
  std::this_thread::sleep_for(200ms);
  CHECK(worker.running());  // waiting for the job, up to 20 s
  worker.Signal(SIGTERM);
  auto status = worker.Wait(5s);
  REQUIRE(status);
  CHECK(WEXITSTATUS(*status) == 0);
  CHECK(Integer({"LLEN", "queue:default"}) == 1);
  CHECK(Integer({"LLEN", Keys().Working(id, "default")}) == 0);
}

TEST_CASE_FIXTURE(WorkerFixture, "TSTP quiets: prefetched jobs go back, nothing new is taken") {
  auto client = OpenClient();
  for (int i = 0; i < 3; ++i) Push(*client, "RecordJob", "[\"x\", 600]");
  ChildProcess& worker = StartWorker({"-c", "1"});
  std::string id = IdentityOf(worker.pid());
  REQUIRE(WaitUntil([&] { return HGet(id, "busy") == "1"; }));
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", Keys().Working(id, "default")}) == 2; }));
  worker.Signal(SIGTSTP);
  REQUIRE(WaitUntil([&] { return HGet(id, "quiet") == "true"; }));
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", "queue:default"}) == 2; }));
  // The running job finishes and is acknowledged; nothing else starts.
  REQUIRE(WaitUntil([&] { return Executions().size() == 1; }));
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", Keys().Working(id, "default")}) == 0; }));
  Push(*client, "RecordJob", "[\"x\"]");
  std::this_thread::sleep_for(500ms);
  CHECK(Executions().size() == 1);
  CHECK(Integer({"LLEN", "queue:default"}) == 3);
  worker.Signal(SIGTERM);
  auto status = worker.Wait(5s);
  REQUIRE(status);
  CHECK(WEXITSTATUS(*status) == 0);
  CHECK(Integer({"LLEN", "queue:default"}) == 3);
}

TEST_CASE_FIXTURE(WorkerFixture, "HUP and USR2 are logged and ignored; USR1 quiets like TSTP") {
  // Each of these used to end the worker on the spot, with no hand-back.
  ChildProcess& worker = StartWorker({"-c", "1"});
  std::string id = IdentityOf(worker.pid());
  REQUIRE(WaitUntil([&] { return HGet(id, "quiet") == "false"; }));
  worker.Signal(SIGHUP);
  REQUIRE(WaitUntil([&] { return worker.Log().find("HUP: nothing to reload") != std::string::npos; }));
  worker.Signal(SIGUSR2);
  REQUIRE(WaitUntil([&] { return worker.Log().find("USR2: no log file") != std::string::npos; }));
  CHECK(worker.running());
  CHECK(HGet(id, "quiet") == "false");
  worker.Signal(SIGUSR1);
  REQUIRE(WaitUntil([&] { return HGet(id, "quiet") == "true"; }));
  worker.Signal(SIGTERM);
  auto status = worker.Wait(5s);
  REQUIRE(status);
  CHECK(WEXITSTATUS(*status) == 0);
  CHECK_FALSE(Exists(Keys().Heartbeat(id)));
}

TEST_CASE_FIXTURE(WorkerFixture, "TERM while the worker starts stops it cleanly once it runs") {
  // Redis paused: the worker connects (the kernel completes the handshake)
  // and waits in its start-up probe, its signal handlers not yet in place.
  // TERM's default action ended it there with no log line.
  REQUIRE(kill(server().pid(), SIGSTOP) == 0);
  ChildProcess& worker = StartWorker({"-c", "1"});
  std::this_thread::sleep_for(300ms);
  worker.Signal(SIGTERM);
  worker.Signal(SIGTSTP);  // stopped it too, before
  std::this_thread::sleep_for(100ms);
  REQUIRE(kill(server().pid(), SIGCONT) == 0);
  auto status = worker.Wait(10s);
  REQUIRE(status);
  INFO(worker.Log());
  REQUIRE(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
  CHECK(worker.Log().find("stopped") != std::string::npos);
  CHECK(SMembers("processes").empty());
}

TEST_CASE_FIXTURE(WorkerFixture, "a worker whose connections are killed logs that it reconnected") {
  ChildProcess& worker = StartWorker({"-c", "1"});
  std::string id = IdentityOf(worker.pid());
  REQUIRE(WaitUntil([&] { return HGet(id, "quiet") == "false"; }));
  Run({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
  REQUIRE(WaitUntil([&] { return worker.Log().find("reconnected to Redis at") != std::string::npos; }));
  auto client = OpenClient();
  Push(*client, "RecordJob", "[\"after\"]");
  REQUIRE(WaitUntil([&] { return Executions().size() == 1; }));
}

TEST_CASE_FIXTURE(
    WorkerFixture,
    "a worker whose Redis password changes keeps retrying and resumes once it is back") {
  // Its own server: the password changes under the worker.
  RedisServer own;
  auto admin_opened = redis::Connection::Open(own.Options());
  REQUIRE(admin_opened.ok());
  redis::Connection& admin = **admin_opened;  // stays authenticated throughout
  REQUIRE(admin.Command({"CONFIG", "SET", "requirepass", "pw1"}).ok());
  ChildProcess worker({BuildPath("RELIABLEQ_BIN"), "worker", "--redis", own.Url() + "&password=pw1",
                       "-r", BuildPath("RELIABLEQ_DEMO_PLUGIN"), "-c", "1", "--heartbeat-ttl", "2",
                       "--heartbeat-interval", "0.25", "--janitor-interval", "0.5"},
                      {"RELIABLEQ_DEMO_LOG=" + record_log_}, dir_ + "/worker.log");
  auto processes = [&] {
    auto reply = admin.Command({"SCARD", "processes"});
    return reply.ok() ? (*reply)->integer : -1;
  };
  REQUIRE_MESSAGE(WaitUntil([&] { return processes() == 1; }), worker.Log());

  REQUIRE(admin.Command({"CONFIG", "SET", "requirepass", "pw2"}).ok());
  REQUIRE(admin.Command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}).ok());
  // The lines that say a connect was refused and will be tried again.
  auto refusals = [&] {
    std::istringstream log(worker.Log());
    int count = 0;
    for (std::string line; std::getline(log, line);) {
      if (line.find("Redis unreachable") != std::string::npos &&
          line.find("WRONGPASS") != std::string::npos && line.ends_with("; retrying")) {
        ++count;
      }
    }
    return count;
  };
  // It tries again and again (a connect refused once aborted the worker).
  CHECK_MESSAGE(WaitUntil([&] { return refusals() >= 3; }, 10s), worker.Log());
  REQUIRE_MESSAGE(worker.running(), worker.Log());
  CHECK(worker.Log().find("pw1") == std::string::npos);
  CHECK(worker.Log().find("pw2") == std::string::npos);

  REQUIRE(admin.Command({"CONFIG", "SET", "requirepass", "pw1"}).ok());
  REQUIRE_MESSAGE(
      WaitUntil([&] { return worker.Log().find("reconnected to Redis at") != std::string::npos; },
                10s),
      worker.Log());
  RedisOptions options = own.Options();
  options.password = "pw1";
  auto client = Client::Open(options);
  REQUIRE_MESSAGE(client.ok(), client.status().ToString());
  Push(**client, "RecordJob", "[\"after\"]");
  CHECK_MESSAGE(WaitUntil([&] { return Executions().size() == 1; }, 10s), worker.Log());

  worker.Signal(SIGTERM);
  auto status = worker.Wait(20s);
  REQUIRE(status);
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
  CHECK(processes() == 0);
}

TEST_CASE_FIXTURE(WorkerFixture, "recover --dry-run changes nothing; recover moves the jobs") {
  auto client = OpenClient();
  Push(*client, "SleepJob", "[10000]");
  Push(*client, "SleepJob", "[10000]");
  // A janitor interval far beyond the test, so only the CLI recovers.
  ChildProcess& worker = StartWorker({"-c", "2", "--janitor-interval", "600"});
  std::string id = IdentityOf(worker.pid());
  const std::string list = Keys().Working(id, "default");
  REQUIRE(WaitUntil([&] { return HGet(id, "busy") == "2"; }));
  worker.Signal(SIGKILL);
  REQUIRE(worker.Wait(5s));
  REQUIRE(WaitUntil([&] { return !Exists(Keys().Heartbeat(id)); }, 5s));

  auto dump = [&](const std::string& key) {
    auto reply = redis().Command({"DUMP", key});
    REQUIRE(reply.ok());
    return std::string((*reply)->str ? (*reply)->str : "", (*reply)->len);
  };
  std::string before_list = dump(list), before_registry = dump(Keys().Registry());
  CommandResult dry = RunCommand({BuildPath("RELIABLEQ_BIN"), "recover", "--redis", server().Url(),
                                  "--dry-run", "--json"});
  CHECK(dry.exit_code == 0);
  INFO(dry.out << dry.err);
  CHECK(dry.out.find(id) != std::string::npos);
  CHECK(dry.out.find("\"requeued\":2") != std::string::npos);
  CHECK(dump(list) == before_list);
  CHECK(dump(Keys().Registry()) == before_registry);
  CHECK(Integer({"LLEN", "queue:default"}) == 0);

  CommandResult real = RunCommand({BuildPath("RELIABLEQ_BIN"), "recover", "--redis",
                                   server().Url(), "--json"});
  CHECK(real.exit_code == 0);
  CHECK(real.out.find("\"requeued\":2") != std::string::npos);
  CHECK(Integer({"LLEN", "queue:default"}) == 2);
  CHECK(Integer({"LLEN", list}) == 0);
  CHECK(HGet(Keys().Registry(), id).empty());
}

TEST_CASE_FIXTURE(WorkerFixture, "a stopped worker cannot take a job after it was recovered") {
  // The zombie is idle, subscribed to its queue's wake-up channel.
  ChildProcess& zombie = StartWorker({"-c", "1", "--janitor-interval", "600"});
  std::string id = IdentityOf(zombie.pid());
  REQUIRE_FALSE(id.empty());
  REQUIRE(WaitUntil([&] {
    auto numsub = redis().Command({"PUBSUB", "NUMSUB", "reliableq:wake:queue:default"});
    return numsub.ok() && (*numsub)->elements == 2 && (*numsub)->element[1]->integer == 1;
  }));
  zombie.Signal(SIGSTOP);
  REQUIRE(WaitUntil([&] { return !Exists(Keys().Heartbeat(id)); }, 5s));
  CommandResult recovered =
      RunCommand({BuildPath("RELIABLEQ_BIN"), "recover", "--redis", server().Url()});
  REQUIRE(recovered.exit_code == 0);
  REQUIRE(HGet(Keys().Registry(), id).empty());

  // The push wakes the zombie's connection if the janitor had not closed
  // it; whatever the zombie had queued must not move the job into a
  // working list nobody would ever recover once it is unregistered.
  auto client = OpenClient();
  std::string jid = Push(*client, "RecordJob", "[\"x\"]");
  std::this_thread::sleep_for(100ms);
  zombie.Signal(SIGKILL);
  REQUIRE(zombie.Wait(5s));
  CHECK(Integer({"LLEN", Keys().Working(id, "default")}) == 0);

  StartWorker({"-c", "1"});
  CHECK(WaitUntil([&] { return Executions().count(jid) == 1; }, 10s));
}

TEST_CASE_FIXTURE(WorkerFixture, "SIGKILL between a failure and its retry leaves one copy") {
  auto client = OpenClient();
  std::string jid = Push(*client, "FailSlowlyJob", "[]");
  std::vector<std::string> argv = {BuildPath("RELIABLEQ_BIN"), "worker", "--redis", server().Url(),
                                   "-r", BuildPath("RELIABLEQ_CRASH_PLUGIN"), "-c", "1",
                                   "--heartbeat-ttl", "1", "--heartbeat-interval", "0.25",
                                   "--janitor-interval", "0.5"};
  auto worker = std::make_unique<ChildProcess>(argv, std::vector<std::string>{},
                                               dir_ + "/failing.log");
  std::string id = IdentityOf(worker->pid());
  // The handler has thrown and the worker is deciding the retry: the job
  // is still in the working list, and nowhere else.
  REQUIRE(WaitUntil([&] { return worker->Log().find("failing slowly") != std::string::npos; }));
  worker->Signal(SIGKILL);
  REQUIRE(worker->Wait(5s));
  auto copies = [&] {
    size_t n = 0;
    for (const std::string& key : {std::string("queue:default"), Keys().Working(id, "default")}) {
      for (const std::string& payload : LRange(key)) n += payload.find(jid) != std::string::npos;
    }
    for (const char* set : {"retry", "dead", "schedule"}) {
      for (const std::string& payload : ZRange(set)) n += payload.find(jid) != std::string::npos;
    }
    return n;
  };
  CHECK(copies() == 1);
  CHECK(Integer({"LLEN", Keys().Working(id, "default")}) == 1);
  // A janitor returns it to its queue: still exactly one copy.
  CommandResult recovered = {};
  REQUIRE(WaitUntil([&] {
    recovered = RunCommand({BuildPath("RELIABLEQ_BIN"), "recover", "--redis", server().Url()});
    return Integer({"LLEN", "queue:default"}) == 1;
  }, 5s));
  CHECK(copies() == 1);
  CHECK(Integer({"ZCARD", "retry"}) == 0);
}

TEST_CASE_FIXTURE(WorkerFixture, "SIGKILL, default settings: jobs back in seconds, not the ttl") {
  // Default liveness settings (heartbeat ttl 30 s, janitor interval 1 s),
  // on whatever the shared server's uptime: the entries say which run gave
  // out their ids (clients_run).
  auto client = OpenClient();
  ChildProcess& live = Launch({"-q", "live", "-c", "2"}, record_log_);
  const std::string live_id = IdentityOf(live.pid());
  std::set<std::string> live_jids;
  for (int i = 0; i < 2; ++i) {
    live_jids.insert(Push(*client, "RecordJob", "[\"live\", 6000]", "live"));
  }
  const std::string live_list = Keys().Working(live_id, "live");
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", live_list}) == 2; }));

  ChildProcess& doomed = Launch({"-q", "doomed", "-c", "2"}, record_log_);
  const std::string doomed_id = IdentityOf(doomed.pid());
  std::set<std::string> doomed_jids;
  for (int i = 0; i < 2; ++i) {
    doomed_jids.insert(Push(*client, "RecordJob", "[\"doomed\", 6000]", "doomed"));
  }
  const std::string doomed_list = Keys().Working(doomed_id, "doomed");
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", doomed_list}) == 2; }));

  doomed.Signal(SIGKILL);
  auto killed_at = std::chrono::steady_clock::now();
  REQUIRE(doomed.Wait(5s));
  // Nobody else works queue "doomed": the jobs wait there once recovered.
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", "queue:doomed"}) == 2; }, 25s));
  double recovery =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  MESSAGE("SIGKILL to jobs back in their queue, default settings: " << recovery << " s");
  // Far below the heartbeat ttl: its connections told the janitor.
  CHECK(recovery < 10.0);
  CHECK(Integer({"LLEN", doomed_list}) == 0);
  for (const std::string& payload : LRange("queue:doomed")) {
    CHECK(payload.find("\"interrupted_count\":1") != std::string::npos);
  }
  REQUIRE(WaitUntil([&] { return HGet(Keys().Registry(), doomed_id).empty(); }));
  // The janitor logs the pass after it has recorded it (one more round
  // trip): the jobs may be back a moment before the line is written.
  CHECK(WaitUntil([&] {
    return live.Log().find("process " + doomed_id + " is dead (its connections are gone)") !=
           std::string::npos;
  }));

  // The live worker beside it keeps its running jobs and its registration.
  CHECK(Integer({"LLEN", live_list}) == 2);
  CHECK_FALSE(HGet(Keys().Registry(), live_id).empty());
  CHECK(Exists(Keys().Heartbeat(live_id)));
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", live_list}) == 0; }, 15s));
  std::map<std::string, int> runs = Executions();
  for (const std::string& jid : live_jids) CHECK(runs[jid] == 1);
  for (const std::string& jid : doomed_jids) CHECK(runs.count(jid) == 0);
  CHECK(live.Log().find("heartbeat key was gone") == std::string::npos);
}

TEST_CASE_FIXTURE(WorkerFixture, "a SIGSTOPped worker waits for its ttl, runs no recovered job") {
  constexpr auto kZombieTtl = 4s;
  // The connections rule is in force (the entry names its run's ids): only
  // the open sockets keep the zombie from being taken for dead before its
  // ttl.
  auto client = OpenClient();
  const std::string zombie_log = dir_ + "/zombie-executions.log";
  ChildProcess& zombie =
      Launch({"-c", "1", "--heartbeat-ttl", "4", "--heartbeat-interval", "0.5"}, zombie_log);
  const std::string id = IdentityOf(zombie.pid());
  const std::string list = Keys().Working(id, "default");
  std::set<std::string> jids;
  for (int i = 0; i < 4; ++i) jids.insert(Push(*client, "RecordJob", "[\"z\", 3000]"));
  // One job running, at least one fetched and not started.
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", list}) >= 2; }));
  size_t held = static_cast<size_t>(Integer({"LLEN", list}));
  zombie.Signal(SIGSTOP);
  auto stopped_at = std::chrono::steady_clock::now();

  // Another worker, with the default settings, runs the janitor.
  ChildProcess& survivor = Launch({"-c", "4"}, record_log_);
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", list}) == 0; }, 20s));
  double recovered_after =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped_at).count();
  MESSAGE("SIGSTOP to recovery: " << recovered_after << " s (ttl 4 s, beat every 0.5 s)");
  // Its last beat came at most one interval before the stop.
  CHECK(recovered_after >= 4.0 - 0.5 - 0.2);
  CHECK(WaitUntil([&] {
    return survivor.Log().find("process " + id + " is dead (its heartbeat expired)") !=
           std::string::npos;
  }));
  REQUIRE(WaitUntil([&] { return Executions().size() == jids.size(); }, 20s));

  const std::map<std::string, int> before = Recorded(zombie_log);
  zombie.Signal(SIGCONT);
  REQUIRE(WaitUntil(
      [&] { return zombie.Log().find("heartbeat key was gone") != std::string::npos; }, 10s));
  // Long enough for the job it was running to end, and for a job it held
  // but had not started to run too, if it wrongly did.
  std::this_thread::sleep_for(4s);
  std::map<std::string, int> after = Recorded(zombie_log);
  size_t new_runs = 0;
  for (const auto& [jid, n] : after) new_runs += static_cast<size_t>(n - before.count(jid));
  INFO("zombie held " << held << " jobs; it recorded " << new_runs << " after SIGCONT");
  // Only the one job it was running when stopped (concurrency 1) may end
  // after SIGCONT; the fetched ones were recovered and run elsewhere.
  CHECK(new_runs <= 1);
  std::map<std::string, int> runs = Executions();
  for (const std::string& jid : jids) CHECK(runs[jid] == 1);
  CHECK(Integer({"LLEN", "queue:default"}) == 0);

  zombie.Signal(SIGTERM);
  auto status = zombie.Wait(10s);
  REQUIRE(status);
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
}

TEST_CASE("a Redis restart under running workers recovers none of their jobs") {
  // Its own server: an append-only file, so that the restart keeps every
  // key, registry entries and heartbeats included.
  RedisServer durable({"--appendonly", "yes", "--appendfsync", "always"});
  auto admin_opened = redis::Connection::Open(durable.Options());
  REQUIRE(admin_opened.ok());
  redis::Connection& admin = **admin_opened;
  char templ[] = "/tmp/reliableq-restart-XXXXXX";
  REQUIRE(mkdtemp(templ) != nullptr);
  const std::string dir = templ;
  const std::string record_log = dir + "/executions.log";
  auto integer = [&](const redis::Argv& command) {
    auto reply = admin.Command(command);
    return reply.ok() ? (*reply)->integer : -1;
  };

  // A short ttl, so that this test also watches the time after the new
  // server has been up longer than it, when only the run_id tells the old
  // entries apart; a janitor pass every 0.1 s on each worker, so that many
  // passes judge the entries while the workers reconnect and beat from new
  // connections (the storm the clients_run rule is for).
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> argv = {
        BuildPath("RELIABLEQ_BIN"), "worker", "--redis", durable.Url(), "-r",
        BuildPath("RELIABLEQ_DEMO_PLUGIN"), "-c", "2", "--heartbeat-ttl", "3",
        "--heartbeat-interval", "0.5", "--janitor-interval", "0.1"};
    workers.push_back(std::make_unique<ChildProcess>(
        argv, std::vector<std::string>{"RELIABLEQ_DEMO_LOG=" + record_log},
        dir + "/worker" + std::to_string(i) + ".log"));
  }
  REQUIRE(WaitUntil([&] { return integer({"SCARD", "processes"}) == 2; }));
  auto client = Client::Open(durable.Options());
  REQUIRE_MESSAGE(client.ok(), client.status().ToString());
  std::set<std::string> jids;
  for (int i = 0; i < 8; ++i) jids.insert(Push(**client, "RecordJob", "[\"r\", 2500]"));
  // Each worker runs two jobs.
  REQUIRE(WaitUntil([&] { return integer({"LLEN", "queue:default"}) <= 2; }));

  durable.KillAndRestart();
  for (auto& worker : workers) {
    CHECK(WaitUntil(
        [&] { return worker->Log().find("reconnected to Redis at") != std::string::npos; }, 10s));
  }
  // Past the ttl of the workers on the new server.
  std::this_thread::sleep_for(5s);
  REQUIRE(WaitUntil(
      [&] {
        return Recorded(record_log).size() == jids.size() &&
               integer({"LLEN", "queue:default"}) == 0;
      },
      30s));
  std::map<std::string, int> runs = Recorded(record_log);
  for (const std::string& jid : jids) CHECK(runs[jid] == 1);
  for (auto& worker : workers) {
    INFO(worker->Log());
    CHECK(worker->Log().find("is dead") == std::string::npos);
    CHECK(worker->Log().find("heartbeat key was gone") == std::string::npos);
    CHECK(worker->running());
  }
  CHECK(integer({"SCARD", "processes"}) == 2);
  CHECK(integer({"HLEN", Keys().Registry()}) == 2);

  for (auto& worker : workers) worker->Signal(SIGTERM);
  for (auto& worker : workers) CHECK(worker->Wait(30s));
  workers.clear();
  std::string cmd = "rm -rf '" + dir + "'";
  CHECK(std::system(cmd.c_str()) == 0);
}

// A worker that lost its connection kills it by id once it is connected
// again (a fetch sent on it must not complete unseen). Client ids start
// again when Redis restarts: the old id may name another client of the new
// run by then, here the test's own connections. Killing another worker's
// connection made that worker look dead to the janitors, which ran its
// running jobs a second time (seen in "a Redis restart under running
// workers ...").
TEST_CASE("after a Redis restart, a worker kills no connection by an id of the run before") {
  RedisServer own({"--appendonly", "yes", "--appendfsync", "always"});
  char templ[] = "/tmp/reliableq-reuse-XXXXXX";
  REQUIRE(mkdtemp(templ) != nullptr);
  const std::string dir = templ;
  const std::string record_log = dir + "/executions.log";
  // Ids burnt first, so that the worker's are higher than any the restart
  // itself takes on the new run (its start-up PINGs): the test can take
  // them there before the worker comes back.
  for (int i = 0; i < 50; ++i) REQUIRE(redis::Connection::Open(own.Options()).ok());
  std::vector<std::string> argv = {BuildPath("RELIABLEQ_BIN"),
                                   "worker",
                                   "--redis",
                                   own.Url(),
                                   "-r",
                                   BuildPath("RELIABLEQ_DEMO_PLUGIN"),
                                   "-c",
                                   "1",
                                   "--heartbeat-ttl",
                                   "10",
                                   "--heartbeat-interval",
                                   "0.25"};
  auto worker = std::make_unique<ChildProcess>(
      argv, std::vector<std::string>{"RELIABLEQ_DEMO_LOG=" + record_log}, dir + "/worker.log");

  // The ids of the worker's connections on the first run, as it published them.
  std::string identity;
  ProcessEntry entry;
  {
    auto admin = redis::Connection::Open(own.Options());
    REQUIRE(admin.ok());
    REQUIRE(WaitUntil([&] {
      auto reply = (*admin)->Command({"HGETALL", Keys().Registry()});
      if (!reply.ok() || (*reply)->elements != 2) return false;
      identity = std::string((*reply)->element[0]->str, (*reply)->element[0]->len);
      std::string json((*reply)->element[1]->str, (*reply)->element[1]->len);
      return DecodeProcessEntry(json, &entry) && entry.clients.size() == 2;
    }));
  }
  const int64_t highest = *std::max_element(entry.clients.begin(), entry.clients.end());

  // Stopped, the worker cannot reconnect before the test's connections
  // have taken every id it published.
  worker->Signal(SIGSTOP);
  own.KillAndRestart();
  std::vector<std::unique_ptr<redis::Connection>> holders;
  std::set<int64_t> held;
  for (int attempt = 0; attempt < 1000 && (held.empty() || *held.rbegin() < highest); ++attempt) {
    auto opened = redis::Connection::Open(own.Options());
    REQUIRE(opened.ok());
    auto id = (*opened)->Command({"CLIENT", "ID"});
    REQUIRE(id.ok());
    held.insert((*id)->integer);
    holders.push_back(std::move(*opened));
  }
  for (int64_t id : entry.clients)
    REQUIRE_MESSAGE(held.count(id) == 1,
                    id << " not in " << *held.begin() << ".." << *held.rbegin());
  worker->Signal(SIGCONT);

  // Once it beats from the new run, and two beats later: the kill, if it
  // were sent, went out on the same connection before them.
  redis::Connection& admin = *holders.front();
  auto field = [&](const std::string& key, const std::string& name) {
    auto reply = admin.Command({"HGET", key, name});
    return reply.ok() && (*reply)->type == REDIS_REPLY_STRING
               ? std::string((*reply)->str, (*reply)->len)
               : std::string();
  };
  auto info = admin.Command({"INFO", "server"});
  REQUIRE(info.ok());
  const std::string info_text((*info)->str, (*info)->len);
  const size_t at = info_text.find("run_id:");
  REQUIRE(at != std::string::npos);
  const std::string run = info_text.substr(at + 7, 40);
  REQUIRE(WaitUntil(
      [&] {
        ProcessEntry now;
        return DecodeProcessEntry(field(Keys().Registry(), identity), &now) &&
               now.clients_run == run;
      },
      10s));
  for (int beats = 0; beats < 2; ++beats) {
    const std::string before = field(identity, "beat");
    REQUIRE(WaitUntil([&] { return field(identity, "beat") != before; }, 5s));
  }
  INFO(worker->Log());
  CHECK(worker->Log().find("reconnected to Redis at") != std::string::npos);
  for (auto& holder : holders) {
    auto pong = holder->Command({"PING"});
    CHECK_MESSAGE(pong.ok(), pong.status().ToString());
  }

  worker->Signal(SIGTERM);
  CHECK(worker->Wait(30s));
  worker.reset();
  std::string cmd = "rm -rf '" + dir + "'";
  CHECK(std::system(cmd.c_str()) == 0);
}

TEST_CASE_FIXTURE(WorkerFixture, "recover takes a SIGKILLed worker before its ttl and says why") {
  auto client = OpenClient();
  Push(*client, "SleepJob", "[10000]");
  Push(*client, "SleepJob", "[10000]");
  // The default ttl (30 s); its own janitor never runs again.
  ChildProcess& worker = Launch({"-c", "2", "--janitor-interval", "600"}, record_log_);
  const std::string id = IdentityOf(worker.pid());
  const std::string list = Keys().Working(id, "default");
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", list}) == 2; }));
  worker.Signal(SIGKILL);
  REQUIRE(worker.Wait(5s));
  REQUIRE(WaitUntil([&] {
    auto clients = redis().Command({"CLIENT", "LIST"});
    return clients.ok() && std::string((*clients)->str, (*clients)->len)
                                   .find("name=" + Keys().ClientName(id)) == std::string::npos;
  }));
  CHECK(Exists(Keys().Heartbeat(id)));

  CommandResult dry = RunCommand({BuildPath("RELIABLEQ_BIN"), "recover", "--redis", server().Url(),
                                  "--dry-run", "--json"});
  INFO(dry.out << dry.err);
  CHECK(dry.exit_code == 0);
  CHECK(dry.out.find("\"alive\":false,\"evidence\":\"connections_gone\"") != std::string::npos);
  CHECK(dry.out.find("\"requeued\":2") != std::string::npos);
  CHECK(Exists(Keys().Heartbeat(id)));
  CHECK(Integer({"LLEN", list}) == 2);

  CommandResult real =
      RunCommand({BuildPath("RELIABLEQ_BIN"), "recover", "--redis", server().Url()});
  INFO(real.out << real.err);
  CHECK(real.exit_code == 0);
  CHECK(real.out.find(id + ": 2 back to default (connections gone)\n") != std::string::npos);
  CHECK(Integer({"LLEN", "queue:default"}) == 2);
  CHECK(Integer({"LLEN", list}) == 0);
  CHECK(HGet(Keys().Registry(), id).empty());
  CHECK_FALSE(Exists(Keys().Heartbeat(id)));
}

// On a Redis up for less than the heartbeat ttl (a fresh deployment, a
// restart), a SIGKILLed worker's jobs come back as fast as on an old one:
// its entry says that every id it lists was given out by this server run
// (clients_run), so its connections tell. It used to wait for the server to
// be older than the ttl: 25 s more here, with the default 30 s ttl.
TEST_CASE("SIGKILL on a Redis up 5 s, default settings: jobs back in seconds") {
  RedisServer young;
  auto admin_opened = redis::Connection::Open(young.Options());
  REQUIRE(admin_opened.ok());
  redis::Connection& admin = **admin_opened;
  char templ[] = "/tmp/reliableq-young-XXXXXX";
  REQUIRE(mkdtemp(templ) != nullptr);
  const std::string dir = templ;
  auto integer = [&](const redis::Argv& command) {
    auto reply = admin.Command(command);
    return reply.ok() ? (*reply)->integer : -1;
  };
  auto launch = [&](const std::string& queue) {
    std::vector<std::string> argv = {BuildPath("RELIABLEQ_BIN"), "worker", "--redis",
                                     young.Url(), "-r", BuildPath("RELIABLEQ_DEMO_PLUGIN"),
                                     "-q", queue, "-c", "2"};
    return std::make_unique<ChildProcess>(
        argv, std::vector<std::string>{"RELIABLEQ_DEMO_LOG=" + dir + "/executions.log"},
        dir + "/" + queue + ".log");
  };
  const auto started = std::chrono::steady_clock::now();
  std::unique_ptr<ChildProcess> janitor = launch("live");
  std::unique_ptr<ChildProcess> doomed = launch("doomed");
  REQUIRE(WaitUntil([&] { return integer({"SCARD", "processes"}) == 2; }));
  auto client = Client::Open(young.Options());
  REQUIRE_MESSAGE(client.ok(), client.status().ToString());
  for (int i = 0; i < 2; ++i) Push(**client, "RecordJob", "[\"doomed\", 60000]", "doomed");
  REQUIRE(WaitUntil([&] { return integer({"LLEN", "queue:doomed"}) == 0; }));
  // Both jobs fetched and a beat since: the entry names the connections.
  std::this_thread::sleep_until(started + 5s);

  doomed->Signal(SIGKILL);
  const auto killed_at = std::chrono::steady_clock::now();
  REQUIRE(doomed->Wait(5s));
  // Nobody serves queue "doomed": the jobs wait there once recovered.
  CHECK_MESSAGE(WaitUntil([&] { return integer({"LLEN", "queue:doomed"}) == 2; }, 10s),
                janitor->Log());
  double recovery =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  MESSAGE("SIGKILL to jobs back on a Redis up 5 s, default settings: " << recovery << " s");
  CHECK(recovery < 5.0);
  // The janitor logs the pass after it has recorded it.
  CHECK(WaitUntil([&] {
    return janitor->Log().find("is dead (its connections are gone)") != std::string::npos;
  }));
  janitor->Signal(SIGTERM);
  CHECK(janitor->Wait(30s));
  std::string cmd = "rm -rf '" + dir + "'";
  CHECK(std::system(cmd.c_str()) == 0);
}

