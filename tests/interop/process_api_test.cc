// Sidekiq's own Ruby API (ruby-sidekiq 6.4.1, run with the system's ruby)
// reads the state of live reliableq workers and acts on it:
// - Stats, Queue, ProcessSet, Workers and the Web UI against a Server whose
//   handlers block, then Queue#clear, JobRecord#delete and Process#quiet!
//   (process_api_check.rb, steps running and idle);
// - Process#dump_threads, #quiet! and #stop! against a `reliableq worker`
//   process, which must log its threads, stop fetching, hand its running
//   jobs back and exit (step stop);
// - ScheduledSet, RetrySet and DeadSet actions on entries from real
//   failures and PushIn/PushAt, after which a reliableq worker runs what
//   Sidekiq moved (process_api_sets.rb).
// Every state the scripts read was written by a reliableq Server or worker
// and the C++ Client; nothing is written by hand.
//
// The scripts are in $RELIABLEQ_INTEROP_DIR (tests/interop/meson.build). A missing
// ruby or Sidekiq gem is a failure, never a skip: tools/setup installs both.

#include <doctest/doctest.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "interop_util.h"
#include "protocol/keys.h"
#include "support/process.h"
#include "reliableq/client.h"
#include "reliableq/server.h"
#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::protocol;
using namespace reliableq::testing;
using namespace std::chrono_literals;

namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

constexpr const char* kFailure = "process api: failed on purpose, na\u00efve \u2603";

// The hostname a worker of this machine reports, as the Server picks it.
std::string ExpectedHostname() {
  if (const char* dyno = std::getenv("DYNO"); dyno != nullptr && *dyno) return dyno;
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

// Writes `spec` for `step` next to the redis-server's files and runs
// `script` (in tests/interop) on it against `redis`; every one of its checks
// must pass.
void RunProcessApiScript(const RedisServer& redis, const std::string& script,
                         const std::string& spec, const std::string& step) {
  const std::string spec_path = redis.dir() + "/process-api-" + step + ".json";
  WriteFile(spec_path, spec);
  // ProcessApi.start names the script without ".rb" in its summary line.
  const std::string name = script.substr(0, script.rfind(".rb"));
  RunRubyChecks({InteropFile(script), redis.Url(), spec_path, step}, name + " " + step + ": ");
}

// Beats every 300 ms, as each ProcessSpec tells the scripts (beat_interval
// 0.3), so that the beats they wait for come soon.
ServerOptions ProcessApiOptions(const RedisOptions& redis, std::vector<QueueSpec> queues,
                                int concurrency) {
  ServerOptions options = InteropServerOptions(redis, std::move(queues), concurrency);
  options.heartbeat_interval = 300ms;
  return options;
}

// Handlers that wait here until the test opens it (or a minute passes, so
// that a failed test never leaves a thread behind for long).
class Gate {
 public:
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, 60s, [this] { return open_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// Opens the gate when it goes out of scope: declared after the server, it
// lets the blocked handlers finish before the server stops.
struct GateOpener {
  std::shared_ptr<Gate> gate;
  ~GateOpener() { gate->Open(); }
};

// What each job saw when it ran: jid -> retry_count (or -100 without one).
class RunLog {
 public:
  void Add(const JobView& job) {
    std::lock_guard<std::mutex> lock(mu_);
    ran_[std::string(job.jid())].push_back(job.retry_count().value_or(-100));
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return ran_.size();
  }
  std::map<std::string, std::vector<int>> runs() {
    std::lock_guard<std::mutex> lock(mu_);
    return ran_;
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::vector<int>> ran_;
};

struct Pushed {
  std::string jid;
  std::string job_class;
  std::string args;
  std::string queue;
  double pushed_after = 0;   // epoch seconds just before the push
  double pushed_before = 0;  // ... and just after it
  double at = 0;             // scheduled jobs: when
};

class Pusher {
 public:
  explicit Pusher(const RedisOptions& redis) {
    auto client = Client::Open(redis);
    REQUIRE_MESSAGE(client.ok(), client.status().ToString());
    client_ = std::move(client.value());
  }

  Pushed Push(const std::string& job_class, const std::string& args, const std::string& queue,
              Retry retry = Retry::Enabled()) {
    Pushed pushed = Make(job_class, args, queue);
    pushed.pushed_after = NowSeconds();
    Result<PushResult> result = client_->Push(MakeJob(pushed, retry));
    pushed.pushed_before = NowSeconds();
    pushed.jid = AcceptedJid(result);
    return pushed;
  }

  // PushIn when `in` is set, else PushAt(at).
  Pushed Schedule(const std::string& job_class, const std::string& args, const std::string& queue,
                  double at, bool in) {
    Pushed pushed = Make(job_class, args, queue);
    pushed.pushed_after = NowSeconds();
    Result<PushResult> result = in ? client_->PushIn(MakeJob(pushed, Retry::Enabled()), at)
                                   : client_->PushAt(MakeJob(pushed, Retry::Enabled()), at);
    pushed.pushed_before = NowSeconds();
    pushed.jid = AcceptedJid(result);
    pushed.at = in ? 0 : at;
    return pushed;
  }

 private:
  static Pushed Make(const std::string& job_class, const std::string& args,
                     const std::string& queue) {
    Pushed pushed;
    pushed.job_class = job_class;
    pushed.args = args;
    pushed.queue = queue;
    return pushed;
  }
  static Job MakeJob(const Pushed& pushed, Retry retry) {
    Job job;
    job.job_class = pushed.job_class;
    job.args = pushed.args;
    job.queue = pushed.queue;
    job.retry = retry;
    return job;
  }

  std::unique_ptr<Client> client_;
};

void WriteJob(JsonWriter& w, const Pushed& job) {
  w.StartObject();
  w.Key("jid");
  w.String(job.jid);
  w.Key("class");
  w.String(job.job_class);
  w.Key("args");
  w.RawValue(job.args.data(), job.args.size(), rapidjson::kArrayType);
  w.Key("queue");
  w.String(job.queue);
  w.Key("pushed_after");
  w.Double(job.pushed_after);
  w.Key("pushed_before");
  w.Double(job.pushed_before);
  if (job.at > 0) {
    w.Key("at");
    w.Double(job.at);
  }
  w.Key("error_class");
  w.String("std::runtime_error");
  w.Key("error_message");
  w.String(kFailure);
  w.EndObject();
}

void WriteJobs(JsonWriter& w, const char* key, const std::vector<Pushed>& jobs) {
  w.Key(key);
  w.StartArray();
  for (const Pushed& job : jobs) WriteJob(w, job);
  w.EndArray();
}

void WriteStrings(JsonWriter& w, const char* key, const std::vector<std::string>& values) {
  w.Key(key);
  w.StartArray();
  for (const std::string& value : values) w.String(value);
  w.EndArray();
}

struct ProcessSpec {
  std::string identity;
  int pid = 0;
  int concurrency = 0;
  std::vector<std::string> queues;
  std::vector<std::string> labels;
  std::string tag;
  double started_after = 0;
  double started_before = 0;
  double beat_interval = 0;
};

void WriteProcess(JsonWriter& w, const ProcessSpec& p) {
  w.Key("process");
  w.StartObject();
  w.Key("identity");
  w.String(p.identity);
  w.Key("hostname");
  w.String(ExpectedHostname());
  w.Key("pid");
  w.Int(p.pid);
  w.Key("concurrency");
  w.Int(p.concurrency);
  WriteStrings(w, "queues", p.queues);
  WriteStrings(w, "labels", p.labels);
  w.Key("tag");
  w.String(p.tag);
  w.Key("started_after");
  w.Double(p.started_after);
  w.Key("started_before");
  w.Double(p.started_before);
  w.Key("beat_interval");
  w.Double(p.beat_interval);
  w.EndObject();
}

// The jids of the jobs in queue:<name>.
std::set<std::string> QueuedJids(RedisFixture& fixture, const std::string& name) {
  std::set<std::string> jids;
  for (const std::string& payload : fixture.LRange(Keys().Queue(name))) {
    size_t at = payload.find("\"jid\":\"");
    if (at != std::string::npos) jids.insert(payload.substr(at + 7, 24));
  }
  return jids;
}

std::string Seconds(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", seconds);
  return buf;
}

}  // namespace

TEST_CASE_FIXTURE(RedisFixture,
                  "Sidekiq's Stats, Queue, ProcessSet and Workers read a running reliableq "
                  "worker, and quiet! quiets it") {
  Pusher pusher(options());
  // Jobs that wait in queues no worker serves: two for Queue and latency
  // checks (one of them deleted through JobRecord#delete), two for
  // Queue#clear.
  const std::string unicode_args = R"([1,"zwei",{"drei":[3.5,null,true]},"caf\u00e9 \u2603"])";
  std::vector<Pushed> queued = {
      pusher.Push("QueuedJob", unicode_args, "default"),
      pusher.Push("QueuedJob", R"([{"nested":{"deep":["x",2]}}])", "default"),
      pusher.Push("TrashJob", "[1]", "trash"),
      pusher.Push("TrashJob", "[2]", "trash"),
  };

  auto gate = std::make_shared<Gate>();
  auto log = std::make_shared<RunLog>();
  HandlerRegistry registry;
  registry.Register("BlockJob", [gate, log](const JobView& job) {
    gate->Wait();
    log->Add(job);
  });
  registry.Register("OkJob", [log](const JobView& job) { log->Add(job); });
  registry.Register("FailJob", [](const JobView&) { throw std::runtime_error(kFailure); });

  ServerOptions server_options =
      ProcessApiOptions(options(), {{"critical", 3}, {"work", 1}}, /*concurrency=*/4);
  server_options.tag = "interop-b";
  server_options.labels = {"reliableq", "c++ worker"};

  ProcessSpec process;
  process.pid = static_cast<int>(getpid());
  process.concurrency = 4;
  process.queues = {"critical", "work"};
  process.labels = server_options.labels;
  process.tag = server_options.tag;
  process.beat_interval = 0.3;
  process.started_after = NowSeconds();
  RunningServer worker(server_options, std::move(registry));
  GateOpener opener{gate};
  process.identity = worker.identity();
  REQUIRE(WaitUntil([&] { return Exists(process.identity); }, 5s));
  process.started_before = NowSeconds();

  // Stats from real executions: 2 successes, 1 failure to retry, 1 to dead.
  pusher.Push("OkJob", "[1]", "work");
  pusher.Push("OkJob", "[2]", "work");
  pusher.Push("FailJob", "[3]", "critical");
  pusher.Push("FailJob", "[4]", "critical", Retry::Times(0));
  REQUIRE_MESSAGE(WaitUntil([&] {
                    return Get("stat:processed") == "4" && Integer({"ZCARD", "retry"}) == 1 &&
                           Integer({"ZCARD", "dead"}) == 1;
                  }, 10s),
                  "the worker did not run the jobs for the stats");
  pusher.Schedule("LaterJob", "[]", "work", 3600, /*in=*/true);

  std::vector<Pushed> running;
  for (int i = 0; i < 3; ++i) {
    running.push_back(pusher.Push("BlockJob", "[" + std::to_string(i) + R"(,"blocked"])", "work"));
  }
  // Both work hashes and busy come from one beat.
  REQUIRE_MESSAGE(WaitUntil([&] {
                    return HGet(process.identity, "busy") == "3" &&
                           Integer({"HLEN", Keys().Work(process.identity)}) == 3;
                  }, 10s),
                  "the worker did not report 3 busy threads");
  // The oldest job of `default` waits at least a second: its latency is
  // then clearly not zero.
  double min_latency = 1.0;
  while (NowSeconds() < queued[0].pushed_before + min_latency + 0.05) {
    std::this_thread::sleep_for(50ms);
  }

  {
    rapidjson::StringBuffer buffer;
    JsonWriter w(buffer);
    w.StartObject();
    WriteProcess(w, process);
    WriteJobs(w, "running", running);
    WriteJobs(w, "queued", queued);
    w.Key("stats");
    w.StartObject();
    w.Key("processed");
    w.Int(4);
    w.Key("failed");
    w.Int(2);
    w.Key("scheduled");
    w.Int(1);
    w.Key("retry");
    w.Int(1);
    w.Key("dead");
    w.Int(1);
    w.Key("processes");
    w.Int(1);
    w.Key("workers");
    w.Int(3);
    w.Key("enqueued");
    w.Int(4);
    w.Key("queues");
    w.StartObject();
    for (auto [name, size] : {std::pair{"default", 2}, {"trash", 2}, {"work", 0},
                              {"critical", 0}}) {
      w.Key(name);
      w.Int(size);
    }
    w.EndObject();
    w.EndObject();
    w.Key("latency");
    w.StartObject();
    w.Key("pushed_after");
    w.Double(queued[0].pushed_after);
    w.Key("pushed_before");
    w.Double(queued[0].pushed_before);
    w.Key("min");
    w.Double(min_latency);
    w.EndObject();
    w.Key("delete");
    w.String(queued[1].jid);
    w.Key("clear");
    w.String("trash");
    w.EndObject();
    RunProcessApiScript(server(), "process_api_check.rb", buffer.GetString(), "running");
  }
  // What Sidekiq's actions did to our queues.
  CHECK(QueuedJids(*this, "default") == std::set<std::string>{queued[0].jid});
  CHECK_FALSE(Exists(Keys().Queue("trash")));
  CHECK(Integer({"SISMEMBER", "queues", "trash"}) == 0);
  CHECK(Integer({"SISMEMBER", "queues", "default"}) == 1);

  gate->Open();
  REQUIRE_MESSAGE(WaitUntil([&] {
                    return Get("stat:processed") == "7" &&
                           HGet(process.identity, "busy") == "0" &&
                           !Exists(Keys().Work(process.identity)) &&
                           !Exists(Keys().Workers(process.identity));
                  }, 10s),
                  "the blocked jobs did not finish");
  // The two OkJobs and the three blocked jobs ran, once each.
  std::map<std::string, std::vector<int>> runs = log->runs();
  for (const Pushed& job : running) CHECK(runs[job.jid].size() == 1);
  CHECK(log->size() == 5);

  {
    rapidjson::StringBuffer buffer;
    JsonWriter w(buffer);
    w.StartObject();
    WriteProcess(w, process);
    w.Key("stats");
    w.StartObject();
    w.Key("processed");
    w.Int(7);
    w.Key("failed");
    w.Int(2);
    w.EndObject();
    w.EndObject();
    RunProcessApiScript(server(), "process_api_check.rb", buffer.GetString(), "idle");
  }
  CHECK(HGet(process.identity, "quiet") == "true");
  // Quiet means no fetching: a job pushed now stays in its queue while the
  // worker beats several times.
  Pushed late = pusher.Push("OkJob", R"(["after quiet"])", "work");
  std::this_thread::sleep_for(1500ms);
  CHECK(QueuedJids(*this, "work") == std::set<std::string>{late.jid});
  CHECK(log->size() == 5);
  CHECK(HGet(process.identity, "quiet") == "true");
  CHECK(worker.Stop().ok());
  CHECK(SMembers("processes").empty());
  CHECK(QueuedJids(*this, "work") == std::set<std::string>{late.jid});
}

TEST_CASE_FIXTURE(RedisFixture,
                  "Sidekiq's dump_threads, quiet! and stop! reach a reliableq worker process") {
  ProcessSpec process;
  process.concurrency = 2;
  process.queues = {"stopq"};
  process.labels = {"process-test"};
  process.tag = "cli";
  process.beat_interval = 0.3;
  process.started_after = NowSeconds();
  // A short shutdown timeout: the running jobs (20 s sleeps) go back to
  // their queue after 1 s.
  ChildProcess worker(
      {BuildPath("RELIABLEQ_BIN"), "worker", "--redis", server().Url(), "-r",
       BuildPath("RELIABLEQ_DEMO_PLUGIN"), "-q", "stopq", "-c", "2", "-t", "1",
       "--heartbeat-interval", "0.3", "--heartbeat-ttl", "2", "--tag", "cli", "--label",
       "process-test"},
      {}, server().dir() + "/process-api-worker.log");
  process.pid = static_cast<int>(worker.pid());
  INFO("worker log: " << worker.Log());
  REQUIRE_MESSAGE(WaitUntil([&] { return SMembers("processes").size() == 1; }, 10s),
                  "the worker did not register");
  process.identity = SMembers("processes")[0];
  process.started_before = NowSeconds();

  Pusher pusher(options());
  std::vector<Pushed> running = {pusher.Push("SleepJob", "[20000]", "stopq"),
                                 pusher.Push("SleepJob", "[20000]", "stopq")};
  REQUIRE_MESSAGE(WaitUntil([&] {
                    return HGet(process.identity, "busy") == "2" &&
                           Integer({"HLEN", Keys().Workers(process.identity)}) == 2;
                  }, 10s),
                  "the worker did not start both jobs");

  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  WriteProcess(w, process);
  WriteJobs(w, "running", running);
  w.EndObject();
  auto stop_began = std::chrono::steady_clock::now();
  RunProcessApiScript(server(), "process_api_check.rb", buffer.GetString(), "stop");

  // stop! ends the process: its shutdown timeout (1 s) and the hand-back
  // fit well within the bound.
  std::optional<int> status = worker.Wait(10s);
  REQUIRE_MESSAGE(status.has_value(), "the worker still runs 10 s after stop!");
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
  MESSAGE("stop! to exit: "
          << Seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - stop_began)
                         .count())
          << " s, including the checks in between");
  // dump_threads (TTIN) made it log its state.
  std::string log = worker.Log();
  CHECK(log.find("state: identity=" + process.identity) != std::string::npos);
  for (const Pushed& job : running) {
    CHECK(log.find("running SleepJob jid=" + job.jid + " from queue stopq") != std::string::npos);
  }
  CHECK(SMembers("processes").empty());
  CHECK_FALSE(Exists(process.identity));
  CHECK_FALSE(Exists(Keys().Working(process.identity, "stopq")));
  CHECK(HGet(Keys().Registry(), process.identity).empty());
  std::set<std::string> back = QueuedJids(*this, "stopq");
  CHECK(back.size() == 3);  // the two running jobs and the one pushed after quiet!
  for (const Pushed& job : running) CHECK(back.count(job.jid) == 1);
}

TEST_CASE_FIXTURE(RedisFixture,
                  "Sidekiq's ScheduledSet, RetrySet and DeadSet actions move reliableq's "
                  "entries, and a reliableq worker runs what they moved") {
  const std::string queue = "sets";
  Pusher pusher(options());
  auto log = std::make_shared<RunLog>();
  auto registry = [log](bool fail) {
    HandlerRegistry r;
    r.Register("FlakyJob", [log, fail](const JobView& job) {
      log->Add(job);
      if (fail) throw std::runtime_error(kFailure);
    });
    r.Register("LaterJob", [log](const JobView& job) { log->Add(job); });
    return r;
  };
  ServerOptions server_options = ProcessApiOptions(options(), {{queue, 0}}, /*concurrency=*/2);

  // Real failures: four retries and one dead job (retry 0).
  std::vector<Pushed> failing;
  for (int i = 0; i < 4; ++i) {
    failing.push_back(pusher.Push("FlakyJob", "[" + std::to_string(i) + R"(,"flaky"])", queue));
  }
  Pushed dead = pusher.Push("FlakyJob", R"([{"once":true}])", queue, Retry::Times(0));
  {
    RunningServer worker(server_options, registry(/*fail=*/true));
    bool failed_all = WaitUntil(
        [&] { return Integer({"ZCARD", "retry"}) == 4 && Integer({"ZCARD", "dead"}) == 1; }, 10s);
    CHECK(worker.Stop().ok());
    REQUIRE_MESSAGE(failed_all, "the worker did not fail every job into retry and dead");
  }
  // Scheduled: two with PushIn, one with PushAt.
  const double now = NowSeconds();
  std::vector<Pushed> scheduled = {
      pusher.Schedule("LaterJob", R"(["in",1])", queue, 3600, /*in=*/true),
      pusher.Schedule("LaterJob", R"(["in",2])", queue, 3700, /*in=*/true),
      pusher.Schedule("LaterJob",
                      R"(["at",3,"caf\u00e9/\u2603 \"q\" \\ \t",)"
                      R"({"f":[0.1,1e20,-0.0,1.5e-7,12345678901234567890]}])",
                      queue, now + 7200.25, /*in=*/false),
  };
  // PushIn's time is read back from the set: it is the score.
  for (Pushed& job : scheduled) {
    if (job.at == 0) {
      for (const auto& [member, score] : ZRangeWithScores("schedule")) {
        if (member.find(job.jid) != std::string::npos) job.at = score;
      }
      CHECK(job.at >= job.pushed_after + 3600);
    }
  }

  {
    rapidjson::StringBuffer buffer;
    JsonWriter w(buffer);
    w.StartObject();
    w.Key("queue");
    w.String(queue);
    WriteJobs(w, "scheduled", scheduled);
    WriteJobs(w, "retry", failing);
    WriteJobs(w, "dead", {dead});
    w.Key("add_to_queue");
    w.String(scheduled[0].jid);
    w.Key("delete_scheduled");
    w.String(scheduled[1].jid);
    w.Key("reschedule");
    w.String(scheduled[2].jid);
    w.Key("kill");
    w.String(failing[0].jid);
    w.Key("delete_retry");
    w.String(failing[1].jid);
    w.EndObject();
    RunProcessApiScript(server(), "process_api_sets.rb", buffer.GetString(), "act");
  }
  CHECK(QueuedJids(*this, queue) ==
        std::set<std::string>{scheduled[0].jid, failing[2].jid, failing[3].jid});
  CHECK(ZRange("schedule").size() == 1);
  CHECK(Integer({"ZCARD", "retry"}) == 0);
  CHECK(Integer({"ZCARD", "dead"}) == 0);

  // The worker runs what Sidekiq pushed: the scheduled job, and the two
  // retried ones with retry_count 0 - 1, which fail again.
  {
    RunningServer worker(server_options, registry(/*fail=*/true));
    bool done = WaitUntil([&] {
      std::map<std::string, std::vector<int>> now_runs = log->runs();
      return now_runs.count(scheduled[0].jid) == 1 && now_runs[failing[2].jid].size() == 2 &&
             now_runs[failing[3].jid].size() == 2 && Integer({"ZCARD", "retry"}) == 2 &&
             Integer({"LLEN", "queue:sets"}) == 0;
    }, 10s);
    CHECK(worker.Stop().ok());
    REQUIRE_MESSAGE(done, "the worker did not run the jobs Sidekiq moved");
  }
  std::map<std::string, std::vector<int>> runs = log->runs();
  CHECK(runs[scheduled[0].jid] == std::vector<int>{-100});
  CHECK(runs[failing[2].jid] == std::vector<int>{-100, -1});
  CHECK(runs[failing[3].jid] == std::vector<int>{-100, -1});
  CHECK(runs.count(scheduled[1].jid) == 0);
  CHECK(runs.count(scheduled[2].jid) == 0);

  {
    rapidjson::StringBuffer buffer;
    JsonWriter w(buffer);
    w.StartObject();
    w.Key("queue");
    w.String(queue);
    WriteJobs(w, "retry", {failing[2], failing[3]});
    w.EndObject();
    RunProcessApiScript(server(), "process_api_sets.rb", buffer.GetString(), "kill_all");
  }
  CHECK(QueuedJids(*this, queue) == std::set<std::string>{failing[2].jid, failing[3].jid});

  // Retried from the dead set, they run once more (retry_count -1 again)
  // and succeed.
  {
    RunningServer worker(server_options, registry(/*fail=*/false));
    bool done = WaitUntil([&] {
      std::map<std::string, std::vector<int>> now_runs = log->runs();
      return now_runs[failing[2].jid].size() == 3 && now_runs[failing[3].jid].size() == 3 &&
             Integer({"LLEN", "queue:sets"}) == 0 && Get("stat:processed") == "10";
    }, 10s);
    CHECK(worker.Stop().ok());
    REQUIRE_MESSAGE(done, "the worker did not run the jobs Sidekiq retried from the dead set");
  }
  runs = log->runs();
  CHECK(runs[failing[2].jid] == std::vector<int>{-100, -1, -1});
  CHECK(runs[failing[3].jid] == std::vector<int>{-100, -1, -1});
  CHECK(Integer({"ZCARD", "retry"}) == 0);
  CHECK(Integer({"ZCARD", "dead"}) == 0);
  // 5 + 3 + 2 executions, of which 5 + 2 failed.
  CHECK(Get("stat:processed") == "10");
  CHECK(Get("stat:failed") == "7");
}
