// Sequences in the worker: jobs of one key run one at a time and in push
// order across two in-process workers; a retry holds the key (or lets it
// go, when the job says so); a real worker process SIGKILLed while it runs
// a key's job: that job runs again first, then the next.

#include <doctest/doctest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "protocol/keys.h"
#include "reliableq/client.h"
#include "reliableq/server.h"
#include "support/process.h"
#include "support/running_server.h"
#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::protocol;
using namespace reliableq::testing;
using namespace std::chrono_literals;

namespace {

ServerOptions QuickOptions(const RedisOptions& redis, int concurrency) {
  ServerOptions options;
  options.redis = redis;
  options.concurrency = concurrency;
  options.heartbeat_ttl = 1000ms;
  options.heartbeat_interval = 200ms;
  options.janitor_interval = 300ms;
  options.shutdown_timeout = 2000ms;
  options.idle_poll_interval = 50ms;
  options.log_level = LogLevel::kError;
  return options;
}

std::unique_ptr<Client> Open(const RedisOptions& options) {
  auto client = Client::Open(options);
  REQUIRE_MESSAGE(client.ok(), client.status().ToString());
  return std::move(client.value());
}

// A job of sequence `key` whose args are [key, index].
Job Keyed(const std::string& key, int index) {
  Job job;
  job.job_class = "Step";
  job.args = "[\"" + key + "\"," + std::to_string(index) + "]";
  job.sequence = Sequence{key};
  return job;
}

// What the handlers saw: each run's key, index and start and end times.
struct HandlerRun {
  std::string key;
  int index = 0;
  std::chrono::steady_clock::time_point start, end;
};

class RunLog {
 public:
  void Add(HandlerRun run) {
    std::lock_guard<std::mutex> lock(mutex_);
    runs_.push_back(std::move(run));
  }
  std::vector<HandlerRun> Runs() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return runs_;
  }
  size_t Size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return runs_.size();
  }
  // The indexes of `key`'s runs in the order they started.
  std::vector<int> Order(const std::string& key) const {
    std::vector<HandlerRun> runs = Runs();
    std::vector<HandlerRun> mine;
    for (const HandlerRun& run : runs) {
      if (run.key == key) mine.push_back(run);
    }
    std::sort(mine.begin(), mine.end(),
              [](const HandlerRun& a, const HandlerRun& b) { return a.start < b.start; });
    std::vector<int> order;
    for (const HandlerRun& run : mine) order.push_back(run.index);
    return order;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<HandlerRun> runs_;
};

// A handler for "Step" that records each run, sleeping `sleep` in it.
void RegisterStep(HandlerRegistry* registry, std::shared_ptr<RunLog> log,
                  std::chrono::milliseconds sleep) {
  registry->Register("Step", [log, sleep](const JobView& job) {
    HandlerRun run;
    run.key = job.args()[0].GetString();
    run.index = job.args()[1].GetInt();
    run.start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(sleep);
    run.end = std::chrono::steady_clock::now();
    log->Add(run);
  });
}

}  // namespace

TEST_CASE_FIXTURE(RedisFixture,
                  "two workers run each key's jobs one at a time, in push order, and leave "
                  "no sequence key behind") {
  constexpr int kKeys = 20;
  constexpr int kPerKey = 8;
  auto client = Open(options());
  std::vector<Job> jobs;
  // Interleaved: every key has a job in each stretch of the queue.
  for (int i = 0; i < kPerKey; ++i) {
    for (int k = 0; k < kKeys; ++k) jobs.push_back(Keyed("customer-" + std::to_string(k), i));
  }
  // Jobs of no sequence run beside them, unordered.
  for (int i = 0; i < 20; ++i) {
    Job plain;
    plain.job_class = "Step";
    plain.args = "[\"plain\"," + std::to_string(i) + "]";
    jobs.push_back(plain);
  }
  AcceptedJids(client->PushBulk(jobs));

  auto log = std::make_shared<RunLog>();
  HandlerRegistry first, second;
  RegisterStep(&first, log, 2ms);
  RegisterStep(&second, log, 2ms);
  RunningServer a(QuickOptions(options(), 5), std::move(first));
  RunningServer b(QuickOptions(options(), 5), std::move(second));
  REQUIRE(WaitUntil([&] { return log->Size() == jobs.size(); }, 30s));

  std::vector<HandlerRun> runs = log->Runs();
  for (int k = 0; k < kKeys; ++k) {
    std::string key = "customer-" + std::to_string(k);
    CAPTURE(key);
    std::vector<int> want(kPerKey);
    for (int i = 0; i < kPerKey; ++i) want[i] = i;
    CHECK(log->Order(key) == want);
    // One at a time: each run of the key starts after the one before it
    // ended.
    std::vector<HandlerRun> mine;
    for (const HandlerRun& run : runs) {
      if (run.key == key) mine.push_back(run);
    }
    std::sort(mine.begin(), mine.end(),
              [](const HandlerRun& x, const HandlerRun& y) { return x.start < y.start; });
    for (size_t i = 1; i < mine.size(); ++i) CHECK(mine[i].start >= mine[i - 1].end);
  }
  // Every key was let go once its last job was done: nothing is left.
  CHECK(WaitUntil([&] { return !Exists(Keys().Sequences()); }));
  CHECK_FALSE(Exists(Keys().SequencesSince()));
  CHECK(Integer({"EVAL", "return #redis.call('KEYS', ARGV[1])", "0", "reliableq:sequence*"}) == 0);
}

TEST_CASE_FIXTURE(RedisFixture,
                  "a retry holds the key until the job succeeds; release_on_retry lets the "
                  "next start") {
  auto client = Open(options());
  auto log = std::make_shared<RunLog>();
  auto failures = std::make_shared<std::atomic<int>>(0);
  HandlerRegistry registry;
  RegisterStep(&registry, log, 0ms);
  // Fails its first run, then records the runs that succeed.
  registry.Register("Flaky", [log, failures](const JobView& job) {
    if (failures->fetch_add(1) == 0) throw JobRetry(3600, "try again");
    HandlerRun run;
    run.key = job.args()[0].GetString();
    run.index = job.args()[1].GetInt();
    run.start = run.end = std::chrono::steady_clock::now();
    log->Add(run);
  });

  SUBCASE("held") {
    Job flaky = Keyed("k", 0);
    flaky.job_class = "Flaky";
    AcceptedJid(client->Push(flaky));
    AcceptedJid(client->Push(Keyed("k", 1)));
    RunningServer server(QuickOptions(options(), 4), std::move(registry));
    REQUIRE(WaitUntil([&] { return Integer({"ZCARD", "retry"}) == 1; }));
    // Well past the time job 1 would have taken to run: it waits.
    std::this_thread::sleep_for(500ms);
    CHECK(log->Size() == 0);
    CHECK(Integer({"LLEN", Keys().SequenceWaiting("k")}) == 1);
    // The retry is due now: the poller puts it back, it runs, then job 1.
    Run({"EVAL",
         "local m = redis.call('ZRANGE', 'retry', 0, 0); redis.call('ZADD', 'retry', 1, m[1])",
         "0"});
    REQUIRE(WaitUntil([&] { return log->Size() == 2; }));
    CHECK(log->Order("k") == std::vector<int>{0, 1});
  }
  SUBCASE("released on retry") {
    Job flaky = Keyed("k", 0);
    flaky.job_class = "Flaky";
    flaky.sequence->release_on_retry = true;
    AcceptedJid(client->Push(flaky));
    AcceptedJid(client->Push(Keyed("k", 1)));
    RunningServer server(QuickOptions(options(), 4), std::move(registry));
    REQUIRE(WaitUntil([&] { return log->Size() == 1; }));
    CHECK(log->Order("k") == std::vector<int>{1});
    CHECK(Integer({"ZCARD", "retry"}) == 1);
  }
}

TEST_CASE_FIXTURE(RedisFixture,
                  "a worker SIGKILLed while it runs a key's job: that job runs again first, "
                  "then the next") {
  char templ[] = "/tmp/reliableq-sequence-XXXXXX";
  std::string dir = mkdtemp(templ);
  std::string record = dir + "/runs.log";
  std::vector<std::unique_ptr<ChildProcess>> workers;
  auto start = [&]() -> ChildProcess& {
    std::vector<std::string> argv = {BuildPath("RELIABLEQ_BIN"),
                                     "worker",
                                     "--redis",
                                     server().Url(),
                                     "-r",
                                     BuildPath("RELIABLEQ_DEMO_PLUGIN"),
                                     "-c",
                                     "4",
                                     "--heartbeat-ttl",
                                     "1",
                                     "--heartbeat-interval",
                                     "0.25",
                                     "--janitor-interval",
                                     "0.5"};
    workers.push_back(std::make_unique<ChildProcess>(
        argv, std::vector<std::string>{"RELIABLEQ_DEMO_LOG=" + record},
        dir + "/worker" + std::to_string(workers.size()) + ".log"));
    return *workers.back();
  };
  auto client = Open(options());
  Job slow;
  slow.job_class = "RecordJob";
  slow.args = R"(["capture", 1500])";
  slow.sequence = Sequence{"cus_42"};
  std::string first_jid = AcceptedJid(client->Push(slow));
  Job next = slow;
  next.args = R"(["refund"])";
  std::string next_jid = AcceptedJid(client->Push(next));

  ChildProcess& victim = start();
  REQUIRE(WaitUntil([&] {
    return Integer({"LLEN", Keys().SequenceWaiting("cus_42")}) == 1 &&
           HGet(Keys().Sequences(), "cus_42") == first_jid;
  }));
  std::this_thread::sleep_for(200ms);  // it runs now (1.5 s)
  victim.Signal(SIGKILL);
  REQUIRE(victim.Wait(5s));

  // Its janitor-less death leaves the key held by the job it ran; a new
  // worker's janitor gives that job back, and it runs before the refund.
  start();
  REQUIRE(WaitUntil([&] { return !Exists(Keys().Sequences()); }, 20s));
  std::string runs;
  {
    FILE* f = std::fopen(record.c_str(), "r");
    REQUIRE(f != nullptr);
    char buf[256];
    while (std::fgets(buf, sizeof buf, f)) runs += buf;
    std::fclose(f);
  }
  CHECK(runs == first_jid + "\n" + next_jid + "\n");
  workers.clear();
  std::string cmd = "rm -rf '" + dir + "'";
  int ignored = std::system(cmd.c_str());
  (void)ignored;
}
