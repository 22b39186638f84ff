// Unique jobs and expiry in the worker: in-process (each end of a job's
// life releases or keeps its key; expired jobs are discarded unrun), and a
// real worker process SIGKILLed while it runs a unique job.

#include <doctest/doctest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "protocol/keys.h"
#include "support/process.h"
#include "redis/connection.h"
#include "reliableq/client.h"
#include "reliableq/server.h"
#include "support/running_server.h"
#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::protocol;
using namespace reliableq::testing;
using namespace std::chrono_literals;

namespace {

ServerOptions QuickOptions(const RedisOptions& redis) {
  ServerOptions options;
  options.redis = redis;
  options.concurrency = 2;
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

Job UniqueJob(const std::string& cls, const std::string& key,
              UniqueUntil until = UniqueUntil::kSuccess) {
  Job job;
  job.job_class = cls;
  job.args = "[\"" + key + "\"]";
  job.unique = Uniqueness{key, until};
  return job;
}

}  // namespace

TEST_CASE_FIXTURE(RedisFixture,
                  "worker: success, dead and start release a key, retry keeps it, "
                  "expired jobs are discarded unrun") {
  auto client = Open(options());
  std::string succeeded = AcceptedJid(client->Push(UniqueJob("Ok", "ok")));
  Job retried = UniqueJob("Fail", "retried");
  retried.retry = Retry::Times(3);
  std::string retried_jid = AcceptedJid(client->Push(retried));
  Job dead = UniqueJob("Fail", "dead");
  dead.retry = Retry::Times(0);
  AcceptedJid(client->Push(dead));
  AcceptedJid(client->Push(UniqueJob("SeesKey", "started", UniqueUntil::kStart)));
  Job expired = UniqueJob("Ok", "expired");
  expired.expires_at = NowSeconds() - 1;
  AcceptedJid(client->Push(expired));
  // An expiry field the worker cannot read is ignored: the job runs.
  Job odd;
  odd.job_class = "Ok";
  odd.args = R"(["odd"])";
  odd.extra = R"({"expires_at":"soon"})";
  AcceptedJid(client->Push(odd));
  CHECK(Get("reliableq:unique:ok") == succeeded);

  auto ran = std::make_shared<std::atomic<int>>(0);
  auto key_seen = std::make_shared<std::atomic<int>>(-1);
  HandlerRegistry registry;
  registry.Register("Ok", [ran](const JobView&) { ++*ran; });
  registry.Register("Fail", [](const JobView&) { throw std::runtime_error("declined"); });
  // The release is sent right after the fetch that took the job, so it may
  // land a moment after the handler began: the handler looks (for up to
  // 2 s) whether the key goes while it still runs, long before its success.
  registry.Register("SeesKey", [key_seen, redis = options()](const JobView&) {
    auto connection = redis::Connection::Open(redis);
    if (!connection.ok()) return;
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    int seen = 1;
    while (seen != 0 && std::chrono::steady_clock::now() < until) {
      auto exists = (*connection)->Command({"EXISTS", "reliableq:unique:started"});
      if (!exists.ok()) return;
      seen = static_cast<int>((*exists)->integer);
      if (seen != 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    *key_seen = seen;
  });
  RunningServer server(QuickOptions(options()), std::move(registry));
  REQUIRE(WaitUntil([&] {
    return ran->load() == 2 && key_seen->load() >= 0 && Integer({"ZCARD", "retry"}) == 1 &&
           Integer({"ZCARD", "dead"}) == 1 && Get("reliableq:stat:expired") == "1" &&
           !Exists("reliableq:unique:ok");
  }));
  CHECK(key_seen->load() == 0);  // released while it ran
  CHECK(Get("reliableq:unique:retried") == retried_jid);
  CHECK_FALSE(Exists("reliableq:unique:dead"));
  CHECK_FALSE(Exists("reliableq:unique:expired"));
  CHECK_FALSE(Exists("reliableq:unique:started"));
  CHECK(Integer({"LLEN", Keys().Working(server.identity(), "default")}) == 0);
  // The unique ack counts the execution like a plain one; the expired job
  // never ran and is not counted as processed.
  CHECK(WaitUntil([&] { return Get("stat:processed") == "5"; }));
  // A key released by success can be taken again.
  CHECK(client->Push(UniqueJob("Ok", "ok"))->outcome == PushOutcome::kAccepted);
  CHECK(client->Push(retried)->outcome == PushOutcome::kDuplicate);
}

TEST_CASE_FIXTURE(RedisFixture,
                  "a worker SIGKILLed mid-run: the job completes elsewhere, and "
                  "its key is held until it succeeded") {
  char templ[] = "/tmp/reliableq-unique-XXXXXX";
  std::string dir = mkdtemp(templ);
  std::string record = dir + "/executions.log";
  std::vector<std::unique_ptr<ChildProcess>> workers;
  auto start = [&](const std::string& queue) -> ChildProcess& {
    std::vector<std::string> argv = {BuildPath("RELIABLEQ_BIN"),
                                     "worker",
                                     "--redis",
                                     server().Url(),
                                     "-r",
                                     BuildPath("RELIABLEQ_DEMO_PLUGIN"),
                                     "-q",
                                     queue,
                                     "-c",
                                     "1",
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
  Job job;
  job.job_class = "RecordJob";
  job.args = R"(["charge", 1500])";
  job.unique = Uniqueness{"charge-17"};
  std::string jid = AcceptedJid(client->Push(job));
  const std::string key = "reliableq:unique:charge-17";

  ChildProcess& first = start("default");
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", "queue:default"}) == 0; }));
  std::this_thread::sleep_for(200ms);  // it runs now (1.5 s)
  first.Signal(SIGKILL);
  REQUIRE(first.Wait(5s));
  CHECK(Get(key) == jid);

  // A worker on another queue: its janitor gives the job back to its queue,
  // where it waits with its key held (kept during recovery).
  start("elsewhere");
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", "queue:default"}) == 1; }, 15s));
  CHECK(Get(key) == jid);
  Result<PushResult> again = client->Push(job);
  REQUIRE(again.ok());
  CHECK(again->outcome == PushOutcome::kDuplicate);
  CHECK(again->duplicate_of == jid);

  // It completes on a third worker, and its success frees the key.
  start("default");
  REQUIRE(WaitUntil([&] { return !Exists(key); }, 15s));
  CHECK(Integer({"LLEN", "queue:default"}) == 0);
  std::string log;
  {
    FILE* f = std::fopen(record.c_str(), "r");
    REQUIRE(f != nullptr);
    char buf[256];
    while (std::fgets(buf, sizeof buf, f)) log += buf;
    std::fclose(f);
  }
  CHECK(log.find(jid) != std::string::npos);
  CHECK(client->Push(job)->outcome == PushOutcome::kAccepted);
  workers.clear();
  std::string cmd = "rm -rf '" + dir + "'";
  int ignored = std::system(cmd.c_str());
  (void)ignored;
}

TEST_CASE_FIXTURE(RedisFixture,
                  "unique jobs' successes are counted once each as soon as their acks are "
                  "confirmed, not at the next beat") {
  auto client = Open(options());
  constexpr int kJobs = 200;
  for (int i = 0; i < kJobs; ++i) {
    AcceptedJid(client->Push(UniqueJob("Ok", "counted-" + std::to_string(i))));
  }
  HandlerRegistry registry;
  registry.Register("Ok", [](const JobView&) {});
  ServerOptions opts = QuickOptions(options());
  // No beat while the test looks: counts owed must not wait for one.
  opts.heartbeat_ttl = 60000ms;
  opts.heartbeat_interval = 20000ms;
  RunningServer server(opts, std::move(registry));
  CHECK(WaitUntil([&] { return Get("stat:processed") == std::to_string(kJobs); }, 5s));
}
