// The worker in-process: a Server with handlers registered from the test,
// against the private redis-server. Crash cases with real processes are in
// crash_test.cc.

#include "reliableq/server.h"

#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/backtrace_decode.h"
#include "protocol/keys.h"
#include "support/log_capture.h"
#include "support/process.h"
#include "reliableq/admin.h"
#include "reliableq/client.h"
#include "support/running_server.h"
#include "support/fake_clock.h"
#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::protocol;
using namespace reliableq::testing;
using namespace std::chrono_literals;

namespace {

ServerOptions FastOptions(const RedisOptions& redis) {
  ServerOptions options;
  options.redis = redis;
  options.concurrency = 4;
  options.heartbeat_ttl = 1000ms;
  options.heartbeat_interval = 200ms;
  options.janitor_interval = 300ms;
  options.shutdown_timeout = 2000ms;
  options.idle_poll_interval = 50ms;
  options.log_level = LogLevel::kError;
  return options;
}

std::string PushJob(Client& client, const std::string& cls, const std::string& args,
                    const std::string& queue = "default") {
  Job job;
  job.job_class = cls;
  job.args = args;
  job.queue = queue;
  return AcceptedJid(client.Push(job));
}

std::unique_ptr<Client> OpenClient(const RedisOptions& options) {
  auto client = Client::Open(options);
  REQUIRE_MESSAGE(client.ok(), client.status().ToString());
  return std::move(client.value());
}

// A gate handlers wait on until the test opens it (shared, so a handler
// left running after a hard stop never touches freed memory).
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::atomic<int> waiting{0};
  void Wait() {
    std::unique_lock<std::mutex> lock(mu);
    ++waiting;
    cv.wait_for(lock, 20s, [this] { return open; });
    --waiting;
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
};

// A field of INFO (for example "blocked_clients", or, from a line of
// commandstats, "cmdstat_zrange:calls" or "cmdstat_evalsha:failed_calls");
// 0 when it is absent.
long long InfoNumber(RedisFixture& fixture, const char* section, const std::string& field) {
  Result<redis::ReplyPtr> info = fixture.redis().Command({"INFO", section});
  REQUIRE(info.ok());
  std::string text((*info)->str, (*info)->len);
  size_t colon = field.find(':');
  if (colon == std::string::npos) {
    size_t at = text.find(field + ":");
    return at == std::string::npos ? 0 : std::atoll(text.c_str() + at + field.size() + 1);
  }
  size_t line = text.find(field.substr(0, colon + 1));
  if (line == std::string::npos) return 0;
  size_t end = text.find('\n', line);
  std::string row = text.substr(line + colon + 1, end - line - colon - 1);
  std::string key = field.substr(colon + 1) + "=";
  size_t at = row.find(key);
  if (at != 0) at = row.find("," + key) == std::string::npos ? std::string::npos : row.find("," + key) + 1;
  return at == std::string::npos ? 0 : std::atoll(row.c_str() + at + key.size());
}

std::string FormatEpochForTest(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f", seconds);
  return buf;
}

rapidjson::Document Parse(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  REQUIRE_FALSE_MESSAGE(doc.HasParseError(), json);
  return doc;
}

}  // namespace

TEST_CASE_FIXTURE(RedisFixture, "every pushed job runs once, is acknowledged and counted") {
  auto client = OpenClient(options());
  std::set<std::string> jids;
  for (int i = 0; i < 300; ++i) {
    jids.insert(PushJob(*client, "Count", "[" + std::to_string(i) + "]", i % 2 ? "a" : "b"));
  }
  auto seen = std::make_shared<std::multiset<std::string>>();
  auto mu = std::make_shared<std::mutex>();
  HandlerRegistry registry;
  registry.Register("Count", [seen, mu](const JobView& job) {
    REQUIRE(job.args().IsArray());
    std::lock_guard<std::mutex> lock(*mu);
    seen->insert(std::string(job.jid()));
  });
  ServerOptions opts = FastOptions(options());
  opts.queues = {{"a", 0}, {"b", 0}};
  RunningServer server(opts, std::move(registry));
  Keys keys;
  REQUIRE(WaitUntil([&] {
    std::lock_guard<std::mutex> lock(*mu);
    return seen->size() == 300;
  }));
  REQUIRE(WaitUntil([&] { return Get("stat:processed") == "300"; }));
  CHECK(Integer({"LLEN", keys.Working(server.identity(), "a")}) == 0);
  CHECK(Integer({"LLEN", keys.Working(server.identity(), "b")}) == 0);
  CHECK(Integer({"LLEN", "queue:a"}) == 0);
  CHECK(Get("stat:processed:" + UtcDate(NowSeconds())) == "300");
  CHECK(Integer({"TTL", "stat:processed:" + UtcDate(NowSeconds())}) > 157680000 - 100);
  {
    std::lock_guard<std::mutex> lock(*mu);
    CHECK(std::set<std::string>(seen->begin(), seen->end()) == jids);
    CHECK(seen->size() == jids.size());  // none twice
  }
  CHECK(server.StopAndWait());
  // A clean stop removes every trace of the process.
  CHECK_FALSE(Exists(keys.Heartbeat(server.identity())));
  CHECK(HGet(keys.Registry(), server.identity()).empty());
  CHECK(SMembers("processes").empty());
  CHECK_FALSE(Exists(server.identity()));
}

TEST_CASE_FIXTURE(RedisFixture,
                  "a C++ handler's outcomes each end in one move: snooze to schedule and "
                  "back, retry after, discard, dead now") {
  auto client = OpenClient(options());
  PushJob(*client, "Snoozer", "[]");
  std::string later = PushJob(*client, "Later", "[]");
  std::string gone = PushJob(*client, "Gone", "[]");
  std::string refused = PushJob(*client, "Refused", "[]");
  auto runs = std::make_shared<std::atomic<int>>(0);
  HandlerRegistry registry;
  // Snoozes a second on its first run, succeeds on its second.
  registry.Register("Snoozer", [runs](const JobView& job) {
    ++*runs;
    if (!job.payload().HasMember("snooze_count")) throw JobSnooze(1000ms);
  });
  registry.Register("Later", [](const JobView&) { throw JobRetry(600, "busy"); });
  registry.Register("Gone", [](const JobView&) { throw JobDiscard("deleted"); });
  registry.Register("Refused", [](const JobView&) { throw JobDead("refused"); });
  ServerOptions opts = FastOptions(options());
  opts.random_below = [](int) { return 0; };
  double started = NowSeconds();
  RunningServer server(opts, std::move(registry));

  // Each failure is one move, counted processed and failed once.
  REQUIRE(WaitUntil([&] { return Get("stat:failed") == "3"; }));
  auto retry = ZRangeWithScores("retry");
  REQUIRE(retry.size() == 1);
  CHECK(Parse(retry[0].first)["jid"].GetString() == later);
  CHECK(Parse(retry[0].first)["retry_count"].GetInt() == 0);
  CHECK(retry[0].second >= started + 600);
  CHECK(retry[0].second <= NowSeconds() + 600);
  auto dead = ZRange("dead");
  REQUIRE(dead.size() == 1);
  CHECK(Parse(dead[0])["jid"].GetString() == refused);
  // The discarded job is nowhere: not in dead, not in retry, not queued.
  for (const std::string& key : {std::string("retry"), std::string("dead")}) {
    for (const std::string& entry : ZRange(key)) CHECK(entry.find(gone) == std::string::npos);
  }
  // The snoozed job came back from schedule after its second, and ran again:
  // two runs, no failure and no retry spent.
  REQUIRE(WaitUntil([&] { return runs->load() == 2 && Get("stat:processed") == "5"; }));
  CHECK(Get("stat:failed") == "3");
  CHECK(Integer({"ZCARD", "schedule"}) == 0);
  CHECK(Integer({"LLEN", "queue:default"}) == 0);
  CHECK(NowSeconds() >= started + 1.0);
  Keys keys;
  CHECK(Integer({"LLEN", keys.Working(server.identity(), "default")}) == 0);
}

TEST_CASE_FIXTURE(RedisFixture, "strict queue order takes the first non-empty queue first") {
  auto client = OpenClient(options());
  for (int i = 0; i < 20; ++i) PushJob(*client, "Order", "[\"low\"]", "low");
  for (int i = 0; i < 20; ++i) PushJob(*client, "Order", "[\"high\"]", "high");
  auto order = std::make_shared<std::vector<std::string>>();
  auto mu = std::make_shared<std::mutex>();
  HandlerRegistry registry;
  registry.Register("Order", [order, mu](const JobView& job) {
    std::lock_guard<std::mutex> lock(*mu);
    order->push_back(job.args()[0].GetString());
  });
  ServerOptions opts = FastOptions(options());
  opts.concurrency = 1;
  opts.queues = {{"high", 0}, {"low", 0}};
  RunningServer server(opts, std::move(registry));
  REQUIRE(WaitUntil([&] {
    std::lock_guard<std::mutex> lock(*mu);
    return order->size() == 40;
  }));
  std::lock_guard<std::mutex> lock(*mu);
  for (int i = 0; i < 20; ++i) CHECK((*order)[static_cast<size_t>(i)] == "high");
  for (int i = 20; i < 40; ++i) CHECK((*order)[static_cast<size_t>(i)] == "low");
}

TEST_CASE_FIXTURE(RedisFixture, "a paused queue is not fetched from; its running job finishes; "
                                "resume brings its jobs back") {
  auto admin = Admin::Open(options());
  REQUIRE(admin.ok());
  auto client = OpenClient(options());
  // Paused before the worker starts, and before its first job: never
  // fetched from, not even once.
  REQUIRE((*admin)->PauseQueue("held", {.allow_unknown = true}).ok());
  std::set<std::string> held;
  for (int i = 0; i < 3; ++i) held.insert(PushJob(*client, "Run", "[]", "held"));
  auto ran = std::make_shared<std::vector<std::string>>();
  auto mu = std::make_shared<std::mutex>();
  auto gate = std::make_shared<Gate>();
  HandlerRegistry registry;
  registry.Register("Run", [ran, mu](const JobView& job) {
    std::lock_guard<std::mutex> lock(*mu);
    ran->push_back(std::string(job.jid()));
  });
  registry.Register("Slow", [gate](const JobView&) { gate->Wait(); });
  auto ran_count = [ran, mu] {
    std::lock_guard<std::mutex> lock(*mu);
    return ran->size();
  };
  ServerOptions opts = FastOptions(options());
  opts.queues = {{"held", 0}, {"free", 0}};
  RunningServer server(opts, std::move(registry));
  for (int i = 0; i < 3; ++i) PushJob(*client, "Run", "[]", "free");
  REQUIRE(WaitUntil([&] { return ran_count() == 3; }));
  // Several beats (200 ms apart) and idle polls (50 ms) later, still there.
  std::this_thread::sleep_for(600ms);
  CHECK(ran_count() == 3);
  CHECK(LRange("queue:held").size() == 3);
  {
    std::lock_guard<std::mutex> lock(*mu);
    for (const std::string& jid : *ran) CHECK(held.count(jid) == 0);
  }

  REQUIRE((*admin)->ResumeQueue("held").ok());
  REQUIRE(WaitUntil([&] { return ran_count() == 6; }, 5s));
  CHECK_FALSE(Exists("queue:held"));

  // Paused while one of its jobs runs: that job finishes and is acked; the
  // next push waits in the queue.
  PushJob(*client, "Slow", "[]", "held");
  REQUIRE(WaitUntil([&] { return gate->waiting.load() == 1; }));
  REQUIRE((*admin)->PauseQueue("held", {}).ok());
  std::string waiting = PushJob(*client, "Run", "[]", "held");
  gate->Open();
  REQUIRE(WaitUntil([&] { return Integer({"GET", "stat:processed"}) == 7; }));
  std::this_thread::sleep_for(400ms);
  CHECK(ran_count() == 6);
  std::vector<std::string> left = LRange("queue:held");
  REQUIRE(left.size() == 1);
  CHECK(left[0].find(waiting) != std::string::npos);
  REQUIRE((*admin)->ResumeQueue("held").ok());
  REQUIRE(WaitUntil([&] { return ran_count() == 7; }, 5s));
}

// How many subscribers channel `channel` has.
long long Subscribers(RedisFixture& fixture, const std::string& channel) {
  Result<redis::ReplyPtr> reply = fixture.redis().Command({"PUBSUB", "NUMSUB", channel});
  REQUIRE(reply.ok());
  REQUIRE((*reply)->elements == 2);
  return (*reply)->element[1]->integer;
}

// A worker whose heartbeats are far apart (30 s; 5 s by default): what
// reaches it within seconds cannot be the heartbeat's read of the paused set.
ServerOptions SlowBeatOptions(const RedisOptions& redis) {
  ServerOptions options = FastOptions(redis);
  options.heartbeat_interval = 30000ms;
  options.heartbeat_ttl = 60000ms;
  return options;
}

TEST_CASE_FIXTURE(RedisFixture, "queue pause reaches idle workers at once: jobs pushed right after "
                                "it returns do not start") {
  auto client = OpenClient(options());
  auto mu = std::make_shared<std::mutex>();
  auto mailed = std::make_shared<std::vector<std::string>>();
  auto marks = std::make_shared<std::atomic<int>>(0);
  auto registry = [&] {
    HandlerRegistry r;
    r.Register("Mail", [mu, mailed](const JobView& job) {
      std::lock_guard<std::mutex> lock(*mu);
      mailed->push_back(std::string(job.jid()));
    });
    r.Register("Mark", [marks](const JobView&) { ++*marks; });
    return r;
  };
  auto mailed_count = [mu, mailed] {
    std::lock_guard<std::mutex> lock(*mu);
    return mailed->size();
  };
  ServerOptions opts = SlowBeatOptions(options());
  opts.queues = {{"mailers", 0}, {"other", 0}};
  RunningServer first(opts, registry());
  RunningServer second(opts, registry());
  PushJob(*client, "Mail", "[]", "mailers");
  REQUIRE(WaitUntil([&] { return mailed_count() == 1; }));
  Keys keys;
  REQUIRE(WaitUntil([&] { return Subscribers(*this, keys.WakePaused()) == 2; }));

  // As an operator does it in an incident: the command, then (here at
  // once) the pushes of the application.
  CommandResult paused =
      RunCommand({BuildPath("RELIABLEQ_BIN"), "queue", "pause", "mailers", "--redis", server().Url()});
  auto returned = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) PushJob(*client, "Mail", "[]", "mailers");
  PushJob(*client, "Mark", "[]", "other");
  CHECK(paused.exit_code == 0);
  CHECK(paused.out ==
        "queue mailers paused: 2 live workers told at once; any other applies it within one "
        "heartbeat (5 s by default)\n");
  // The workers run the other queue's job meanwhile: they are not stuck.
  REQUIRE(WaitUntil([&] { return marks->load() == 1; }, 2000ms));
  std::this_thread::sleep_for(300ms);
  CHECK(mailed_count() == 1);
  CHECK(LRange("queue:mailers").size() == 20);
  // Well below the heartbeat interval, which the pause used to wait for.
  CHECK(std::chrono::steady_clock::now() - returned < 3000ms);

  // Resume reaches them as fast: every job runs, long before a heartbeat.
  CommandResult resumed = RunCommand(
      {BuildPath("RELIABLEQ_BIN"), "queue", "resume", "mailers", "--redis", server().Url()});
  auto resumed_at = std::chrono::steady_clock::now();
  CHECK(resumed.out.rfind("queue mailers resumed: 2 live workers told at once;", 0) == 0);
  REQUIRE(WaitUntil([&] { return mailed_count() == 21; }, 3000ms));
  CHECK(std::chrono::steady_clock::now() - resumed_at < 3000ms);
}

TEST_CASE_FIXTURE(RedisFixture, "a pause reaches a busy worker at once: its running job finishes, "
                                "its fetched job not started goes back to the head of the queue") {
  auto admin = Admin::Open(options());
  REQUIRE(admin.ok());
  auto client = OpenClient(options());
  auto mu = std::make_shared<std::mutex>();
  auto ran = std::make_shared<std::vector<std::string>>();
  auto gate = std::make_shared<Gate>();
  HandlerRegistry registry;
  registry.Register("Slow", [gate](const JobView&) { gate->Wait(); });
  registry.Register("Run", [mu, ran](const JobView& job) {
    std::lock_guard<std::mutex> lock(*mu);
    ran->push_back(std::string(job.jid()));
  });
  auto ran_jids = [mu, ran] {
    std::lock_guard<std::mutex> lock(*mu);
    return *ran;
  };
  ServerOptions opts = SlowBeatOptions(options());
  opts.concurrency = 1;  // one thread: a second job fetched waits, not started
  opts.queues = {{"mailers", 0}};
  RunningServer server(opts, std::move(registry));
  Keys keys;
  std::string working = keys.Working(server.identity(), "mailers");
  PushJob(*client, "Slow", "[]", "mailers");
  REQUIRE(WaitUntil([&] { return gate->waiting.load() == 1; }));
  std::string fetched = PushJob(*client, "Run", "[]", "mailers");
  REQUIRE(WaitUntil([&] { return LRange(working).size() == 2; }));  // its prefetch
  CHECK_FALSE(Exists("queue:mailers"));

  Result<PauseChange> paused = (*admin)->PauseQueue("mailers", {});
  REQUIRE(paused.ok());
  CHECK(paused->workers_told == 1);
  std::string pushed = PushJob(*client, "Run", "[]", "mailers");
  // Handed back at once, to the head (the right end, taken next).
  REQUIRE(WaitUntil([&] { return LRange("queue:mailers").size() == 2; }, 3000ms));
  std::vector<std::string> queue = LRange("queue:mailers");
  CHECK(queue[1].find(fetched) != std::string::npos);
  CHECK(queue[0].find(pushed) != std::string::npos);
  CHECK(LRange(working).size() == 1);  // the running job's
  // The running job runs to the end and is acknowledged; nothing else starts.
  gate->Open();
  REQUIRE(WaitUntil([&] { return Get("stat:processed") == "1"; }));
  std::this_thread::sleep_for(300ms);
  CHECK(ran_jids().empty());
  CHECK(LRange(working).empty());

  // Resumed: in queue order, the handed-back job first.
  REQUIRE((*admin)->ResumeQueue("mailers").ok());
  REQUIRE(WaitUntil([&] { return ran_jids().size() == 2; }, 3000ms));
  CHECK(ran_jids() == std::vector<std::string>{fetched, pushed});
}

// How many connections carry the worker's client name.
int WorkerConnections(RedisFixture& fixture) {
  Result<redis::ReplyPtr> list = fixture.redis().Command({"CLIENT", "LIST"});
  REQUIRE(list.ok());
  std::string text((*list)->str, (*list)->len);
  int count = 0;
  for (size_t at = text.find(" name=reliableq"); at != std::string::npos;
       at = text.find(" name=reliableq", at + 1)) {
    ++count;
  }
  return count;
}

// How many connections of the worker have CLIENT TRACKING on with a
// redirect (CLIENT LIST: flag t, redir=<id>).
int TrackingConnections(RedisFixture& fixture) {
  Result<redis::ReplyPtr> list = fixture.redis().Command({"CLIENT", "LIST"});
  REQUIRE(list.ok());
  std::string text((*list)->str, (*list)->len);
  int count = 0;
  size_t from = 0;
  while (from < text.size()) {
    size_t end = text.find('\n', from);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(from, end - from);
    from = end + 1;
    size_t flags = line.find(" flags=");
    size_t redir = line.find(" redir=");
    if (line.find(" name=reliableq") == std::string::npos || flags == std::string::npos ||
        redir == std::string::npos) {
      continue;
    }
    std::string flag_text = line.substr(flags + 7, line.find(' ', flags + 1) - flags - 7);
    if (flag_text.find('t') != std::string::npos && line.compare(redir + 7, 2, "-1") != 0) {
      ++count;
    }
  }
  return count;
}

// A worker on `queues` whose idle poll would take a minute: a job it picks
// up within seconds came through a wake-up.
ServerOptions NoPollOptions(const RedisOptions& redis, std::vector<QueueSpec> queues) {
  ServerOptions opts = FastOptions(redis);
  opts.queues = std::move(queues);
  opts.idle_poll_interval = 60000ms;
  opts.heartbeat_interval = 30000ms;  // the safety poll with notifications on
  opts.heartbeat_ttl = 60000ms;
  return opts;
}

TEST_CASE_FIXTURE(RedisFixture, "an idle worker picks up a pushed job without polling") {
  auto started = std::make_shared<std::atomic<int>>(0);
  HandlerRegistry registry;
  registry.Register("Ping", [started](const JobView&) { ++*started; });
  RunningServer server(NoPollOptions(options(), {{"one", 0}, {"two", 0}}), std::move(registry));
  auto client = OpenClient(options());
  // Idle: subscribed to both queues' wake-up channels.
  REQUIRE(WaitUntil([&] {
    return Subscribers(*this, "reliableq:wake:queue:one") == 1 &&
           Subscribers(*this, "reliableq:wake:queue:two") == 1;
  }));
  for (const char* queue : {"two", "one"}) {
    int before = started->load();
    PushJob(*client, "Ping", "[]", queue);
    // Not a speed test (tools/bench measures that): the job must start well
    // before the one-minute poll, i.e. woken by the push.
    CHECK(WaitUntil([&] { return started->load() == before + 1; }, 5000ms));
  }
}

TEST_CASE_FIXTURE(RedisFixture, "a Sidekiq-format push wakes an idle worker through keyspace "
                                "notifications, or the idle poll finds it") {
  auto started = std::make_shared<std::atomic<int>>(0);
  HandlerRegistry registry;
  registry.Register("Ping", [started](const JobView&) { ++*started; });
  const std::string job = R"({"class":"Ping","args":[],"jid":"0123456789abcdef01234567",)"
                          R"("queue":"two","enqueued_at":1700000000.0})";
  SUBCASE("notifications on: the message wakes it") {
    Run({"CONFIG", "SET", "notify-keyspace-events", "Kl"});
    RunningServer server(NoPollOptions(options(), {{"one", 0}, {"two", 0}}),
                         std::move(registry));
    REQUIRE(WaitUntil([&] {
      return Subscribers(*this, "__keyspace@0__:queue:two") == 1;
    }));
    // What Ruby's client sends: no wake-up message of ours.
    Run({"SADD", "queues", "two"});
    Run({"LPUSH", "queue:two", job});
    CHECK(WaitUntil([&] { return started->load() == 1; }, 5000ms));
    Run({"CONFIG", "SET", "notify-keyspace-events", ""});
  }
  SUBCASE("notifications off: push tracking wakes it, with no poll for a minute") {
    Run({"CONFIG", "SET", "notify-keyspace-events", ""});
    RunningServer server(NoPollOptions(options(), {{"one", 0}, {"two", 0}}),
                         std::move(registry));
    REQUIRE(WaitUntil([&] { return TrackingConnections(*this) == 1; }));
    // Sidekiq's client: SADD and LPUSH in a MULTI, no message of its own.
    Run({"MULTI"});
    Run({"SADD", "queues", "two"});
    Run({"LPUSH", "queue:two", job});
    Run({"EXEC"});
    CHECK(WaitUntil([&] { return started->load() == 1; }, 5000ms));
  }
  SUBCASE("CLIENT TRACKING refused: the idle poll finds it") {
    Run({"CONFIG", "SET", "notify-keyspace-events", ""});
    Run({"ACL", "SETUSER", "default", "-client|tracking"});
    struct Restore {
      RedisFixture& fixture;
      ~Restore() { fixture.Run({"ACL", "SETUSER", "default", "+@all"}); }
    } restore{*this};
    ServerOptions opts = NoPollOptions(options(), {{"one", 0}, {"two", 0}});
    opts.idle_poll_interval = 200ms;
    RunningServer server(opts, std::move(registry));
    REQUIRE(WaitUntil([&] {
      return Subscribers(*this, "__keyspace@0__:queue:two") == 1;
    }));
    Run({"SADD", "queues", "two"});
    Run({"LPUSH", "queue:two", job});
    CHECK(WaitUntil([&] { return started->load() == 1; }, 5000ms));
    CHECK(TrackingConnections(*this) == 0);
  }
}

TEST_CASE_FIXTURE(RedisFixture, "push tracking is on while a worker is idle and off while busy, "
                                "and follows its connections") {
  auto gate = std::make_shared<std::atomic<bool>>(false);
  auto started = std::make_shared<std::atomic<int>>(0);
  HandlerRegistry registry;
  registry.Register("Hold", [gate, started](const JobView&) {
    ++*started;
    for (int i = 0; i < 1000 && !gate->load(); ++i) std::this_thread::sleep_for(10ms);
  });
  ServerOptions opts = NoPollOptions(options(), {{"one", 0}});
  opts.concurrency = 1;
  RunningServer server(opts, std::move(registry));
  REQUIRE(WaitUntil([&] { return TrackingConnections(*this) == 1; }));
  // Busy with a backlog (its fetches come back full): off within the
  // second the worker stays subscribed after work.
  for (int i = 0; i < 20; ++i) {
    Run({"LPUSH", "queue:one",
         R"({"class":"Hold","args":[],"jid":"0123456789abcdef0123)" + std::to_string(4000 + i) +
             R"(","queue":"one","enqueued_at":1700000000.0})"});
  }
  REQUIRE(WaitUntil([&] { return started->load() == 1; }, 5000ms));
  CHECK(WaitUntil([&] { return TrackingConnections(*this) == 0; }, 5000ms));
  gate->store(true);
  REQUIRE(WaitUntil([&] { return started->load() == 20; }, 10000ms));
  // Idle again: on again.
  CHECK(WaitUntil([&] { return TrackingConnections(*this) == 1; }, 5000ms));
  // Its connections dropped: tracking comes back on the new ones, and a
  // plain push still wakes it.
  Run({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
  Run({"CLIENT", "KILL", "TYPE", "pubsub"});
  REQUIRE(WaitUntil([&] { return TrackingConnections(*this) == 1; }, 10000ms));
  Run({"LPUSH", "queue:one",
       R"({"class":"Hold","args":[],"jid":"0123456789abcdef01234568","queue":"one",)"
       R"("enqueued_at":1700000000.0})"});
  CHECK(WaitUntil([&] { return started->load() == 21; }, 5000ms));
}

TEST_CASE_FIXTURE(RedisFixture, "a worker's connections do not grow with its queues") {
  auto started = std::make_shared<std::atomic<int>>(0);
  HandlerRegistry registry;
  registry.Register("Ping", [started](const JobView&) { ++*started; });
  std::vector<QueueSpec> queues;
  for (int i = 0; i < 200; ++i) queues.push_back({"q" + std::to_string(i), 0});
  RunningServer server(NoPollOptions(options(), queues), std::move(registry));
  auto client = OpenClient(options());
  REQUIRE(WaitUntil([&] { return Subscribers(*this, "reliableq:wake:queue:q199") == 1; }));
  // The command connection, the wake-up listener and the janitor's.
  CHECK(WorkerConnections(*this) <= 3);
  // And the last queue still gets its job at once.
  PushJob(*client, "Ping", "[]", "q199");
  CHECK(WaitUntil([&] { return started->load() == 1; }, 5000ms));
}

TEST_CASE_FIXTURE(RedisFixture, "a queue namespace serves every queue under it, new ones too, "
                                "and publishes each working list before it fetches") {
  auto ran = std::make_shared<std::mutex>();
  auto order = std::make_shared<std::vector<std::string>>();
  HandlerRegistry registry;
  registry.Register("Where", [ran, order](const JobView& job) {
    std::lock_guard<std::mutex> lock(*ran);
    order->push_back(std::string(job.queue()));
  });
  auto client = OpenClient(options());
  // One queue exists before the worker starts; "cronjobs" is not under
  // "cronjob:", and a plain name is never a namespace.
  PushJob(*client, "Where", "[]", "cronjob:a");
  PushJob(*client, "Where", "[]", "cronjobs");
  ServerOptions opts = FastOptions(options());
  opts.queues = {{"critical", 0}, {"cronjob:*", 0}};
  RunningServer server(opts, std::move(registry));
  auto ran_in = [&](const std::string& queue) {
    std::lock_guard<std::mutex> lock(*ran);
    return std::count(order->begin(), order->end(), queue);
  };
  REQUIRE(WaitUntil([&] { return ran_in("cronjob:a") == 1; }));
  // A queue that appears later is found by its first push.
  PushJob(*client, "Where", "[]", "cronjob:b");
  REQUIRE(WaitUntil([&] { return ran_in("cronjob:b") == 1; }));
  CHECK(ran_in("cronjobs") == 0);
  CHECK(LRange("queue:cronjobs").size() == 1);
  // Both working lists are in the registry entry, where a janitor looks.
  std::string identity = server.identity();
  std::string entry = HGet(Keys().Registry(), identity);
  CHECK(entry.find("\"cronjob:a\"") != std::string::npos);
  CHECK(entry.find("\"cronjob:b\"") != std::string::npos);
  CHECK(entry.find("\"cronjobs\"") == std::string::npos);
}

TEST_CASE_FIXTURE(RedisFixture, "bad payloads go to the dead set; failures are retried") {
  Run({"SADD", "queues", "default"});
  Run({"LPUSH", "queue:default", "{not json"});
  Run({"LPUSH", "queue:default", R"({"class":"X","args":"not an array","jid":"j1"})"});
  auto client = OpenClient(options());
  std::string unknown = PushJob(*client, "NobodyKnowsMe", "[1]");
  std::string thrower = PushJob(*client, "Thrower", "[2]");
  std::string good = PushJob(*client, "Good", "[3]");
  auto ran = std::make_shared<std::atomic<int>>(0);
  HandlerRegistry registry;
  registry.Register("Good", [ran](const JobView&) { ++*ran; });
  registry.Register("Thrower", [](const JobView&) { throw std::invalid_argument("bad card"); });
  double before = NowSeconds();
  RunningServer server(FastOptions(options()), std::move(registry));
  REQUIRE(WaitUntil([&] {
    return Integer({"ZCARD", "dead"}) == 2 && Integer({"ZCARD", "retry"}) == 2 && ran->load() == 1;
  }));
  std::vector<std::string> dead = ZRange("dead");
  // Unparsable payloads are kept byte for byte.
  CHECK(std::count(dead.begin(), dead.end(), "{not json") == 1);
  CHECK(std::count(dead.begin(), dead.end(),
                   R"({"class":"X","args":"not an array","jid":"j1"})") == 1);
  bool saw_unknown = false, saw_thrower = false;
  for (const auto& [entry, score] : ZRangeWithScores("retry")) {
    auto doc = Parse(entry);
    // First failure: retry_count 0, failed_at now, back in 15..24 s.
    CHECK(doc["retry_count"].GetInt() == 0);
    CHECK(doc["failed_at"].IsDouble());
    CHECK(score >= before + 15);
    CHECK(score <= NowSeconds() + 24);
    CHECK(std::string(doc["queue"].GetString()) == "default");
    if (entry.find(unknown) != std::string::npos) {
      saw_unknown = true;
      CHECK(std::string(doc["error_class"].GetString()) == "Reliableq::UnknownJobClass");
      CHECK(std::string(doc["error_message"].GetString()).find("NobodyKnowsMe") !=
            std::string::npos);
    }
    if (entry.find(thrower) != std::string::npos) {
      saw_thrower = true;
      CHECK(std::string(doc["error_class"].GetString()) == "std::invalid_argument");
      CHECK(std::string(doc["error_message"].GetString()) == "bad card");
    }
  }
  CHECK(saw_unknown);
  CHECK(saw_thrower);
  // Failures count as processed and failed; unparsable payloads count as
  // neither (Sidekiq's rule).
  REQUIRE(WaitUntil([&] { return Get("stat:processed") == "3"; }));
  CHECK(Get("stat:failed") == "2");
  CHECK(Integer({"LLEN", Keys().Working(server.identity(), "default")}) == 0);
}

TEST_CASE_FIXTURE(RedisFixture, "retries run again, then the job dies with its hooks called") {
  auto attempts = std::make_shared<std::atomic<int>>(0);
  auto exhausted = std::make_shared<std::atomic<int>>(0);
  auto deaths = std::make_shared<std::atomic<int>>(0);
  auto last_count = std::make_shared<std::atomic<int>>(-1);
  HandlerRegistry registry;
  JobClassOptions job_options;
  // A short schedule so the test sees every retry.
  job_options.retry_in = [](int, const JobError&) { return RetryIn::After(0.001); };
  job_options.on_retries_exhausted = [exhausted, last_count](const JobView& job,
                                                             const JobError& error) {
    CHECK(error.message == "always");
    last_count->store(job.retry_count().value_or(-1));
    ++*exhausted;
  };
  registry.Register("Flaky", [attempts](const JobView&) {
    ++*attempts;
    throw std::runtime_error("always");
  }, job_options);
  registry.Register("Once", [](const JobView&) { throw std::runtime_error("never again"); });
  ServerOptions opts = FastOptions(options());
  opts.scheduled_poll_interval = 100ms;
  opts.random_below = [](int) { return 0; };  // no jitter: retries are due at once
  opts.death_handlers.push_back([deaths](const JobView&, const JobError&) { ++*deaths; });
  RunningServer server(opts, std::move(registry));
  auto client = OpenClient(options());
  Job job;
  job.job_class = "Flaky";
  job.retry = Retry::Times(2);
  AcceptedJid(client->Push(job));
  Job no_retry;
  no_retry.job_class = "Once";
  no_retry.retry = Retry::Disabled();
  AcceptedJid(client->Push(no_retry));
  // retry: 2 means three runs.
  REQUIRE(WaitUntil([&] { return Integer({"ZCARD", "dead"}) == 1; }, 10s));
  CHECK(attempts->load() == 3);
  CHECK(exhausted->load() == 1);
  CHECK(last_count->load() == 2);
  REQUIRE(WaitUntil([&] { return deaths->load() == 2; }));  // Flaky's death and Once's drop
  auto dead = Parse(ZRange("dead")[0]);
  CHECK(std::string(dead["class"].GetString()) == "Flaky");
  CHECK(dead["retry_count"].GetInt() == 2);
  CHECK(dead["retried_at"].IsDouble());
  CHECK(Integer({"ZCARD", "retry"}) == 0);
}

TEST_CASE_FIXTURE(RedisFixture, "a JobFailure's backtrace is stored when the job asks for it") {
  HandlerRegistry registry;
  registry.Register("Traced", [](const JobView&) {
    throw JobFailure("card declined", {"charge.cc:12:in Charge", "payment.cc:40:in Run"});
  });
  RunningServer server(FastOptions(options()), std::move(registry));
  auto client = OpenClient(options());
  Job asks;
  asks.job_class = "Traced";
  asks.extra = R"({"backtrace":1})";
  AcceptedJid(client->Push(asks));
  Job silent;
  silent.job_class = "Traced";
  AcceptedJid(client->Push(silent));
  REQUIRE(WaitUntil([&] { return Integer({"ZCARD", "retry"}) == 2; }));
  int with_backtrace = 0;
  for (const std::string& entry : ZRange("retry")) {
    auto doc = Parse(entry);
    CHECK(std::string(doc["error_class"].GetString()) == "reliableq::JobFailure");
    if (!doc.HasMember("error_backtrace")) continue;
    ++with_backtrace;
    CHECK(doc["backtrace"].GetInt() == 1);
    // `backtrace: 1` keeps the innermost line only.
    CHECK(Inflate(Base64Decode(doc["error_backtrace"].GetString())) ==
          R"(["charge.cc:12:in Charge"])");
  }
  CHECK(with_backtrace == 1);
}

// Due is due by Redis's clock (TIME), which every worker shares: a server
// whose own clock runs an hour ahead does not start a job scheduled for a
// second from now early (reliableq-schema(7), CLOCKS).
TEST_CASE_FIXTURE(RedisFixture, "a scheduled job starts once Redis's clock reaches its time") {
  auto clock = std::make_shared<FakeClock>();
  clock->Advance(3600s);
  auto started = std::make_shared<std::atomic<int>>(0);
  auto enqueued_at = std::make_shared<std::atomic<double>>(0);
  HandlerRegistry registry;
  registry.Register("Later", [started, enqueued_at](const JobView& job) {
    // Promotion stamps enqueued_at as a float, keeping everything else.
    CHECK(job.payload()["enqueued_at"].IsDouble());
    CHECK(job.args()[0].GetDouble() == 1.5);
    enqueued_at->store(job.payload()["enqueued_at"].GetDouble());
    ++*started;
  });
  ServerOptions opts = FastOptions(options());
  opts.clock = clock;
  opts.scheduled_poll_interval = 50ms;
  RunningServer server(opts, std::move(registry));
  REQUIRE(WaitUntil([&] { return Integer({"SCARD", "processes"}) == 1; }));
  // The client's clock is right (this machine's, which Redis reads too).
  auto client = Client::Open(options());
  REQUIRE(client.ok());
  Job job;
  job.job_class = "Later";
  job.args = "[1.5]";
  double at = NowSeconds() + 1.5;
  AcceptedJid((*client)->PushAt(job, at));
  CHECK(ZRangeWithScores("schedule")[0].second == doctest::Approx(at).epsilon(1e-12));
  // The poller reads both sets' heads (two ZRANGEs a read) and finds
  // nothing due, though on the server's clock the job is an hour late.
  long long polls = InfoNumber(*this, "commandstats", "cmdstat_zrange:calls");
  REQUIRE(WaitUntil([&] {
    return InfoNumber(*this, "commandstats", "cmdstat_zrange:calls") >= polls + 4;
  }));
  CHECK(started->load() == 0);
  CHECK(Integer({"ZCARD", "schedule"}) == 1);
  REQUIRE(WaitUntil([&] { return started->load() == 1; }));
  // enqueued_at is Redis's time of the move, not the server's.
  CHECK(enqueued_at->load() >= at);
  CHECK(enqueued_at->load() < at + 1.5);
  CHECK(Integer({"ZCARD", "schedule"}) == 0);
}

TEST_CASE_FIXTURE(RedisFixture, "middleware wraps every job and sees its failure") {
  auto seen = std::make_shared<std::vector<std::string>>();
  auto mu = std::make_shared<std::mutex>();
  HandlerRegistry registry;
  registry.Register("Fine", [](const JobView&) {});
  registry.Register("Broken", [](const JobView&) { throw std::logic_error("broken"); });
  ServerOptions opts = FastOptions(options());
  opts.concurrency = 1;
  opts.middleware.push_back([seen, mu](const JobView& job, const std::function<void()>& next) {
    {
      std::lock_guard<std::mutex> lock(*mu);
      seen->push_back("outer " + std::string(job.job_class()));
    }
    try {
      next();
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(*mu);
      seen->push_back(std::string("saw ") + e.what());
      throw;
    }
  });
  opts.middleware.push_back([seen, mu](const JobView& job, const std::function<void()>& next) {
    {
      std::lock_guard<std::mutex> lock(*mu);
      seen->push_back("inner " + std::string(job.job_class()));
    }
    next();
  });
  RunningServer server(opts, std::move(registry));
  auto client = OpenClient(options());
  PushJob(*client, "Fine", "[]");
  REQUIRE(WaitUntil([&] { return Get("stat:processed") == "1"; }));
  PushJob(*client, "Broken", "[]");
  REQUIRE(WaitUntil([&] { return Integer({"ZCARD", "retry"}) == 1; }));
  std::lock_guard<std::mutex> lock(*mu);
  CHECK(*seen == std::vector<std::string>{"outer Fine", "inner Fine", "outer Broken",
                                          "inner Broken", "saw broken"});
}

TEST_CASE_FIXTURE(RedisFixture, "client middleware can change or stop a push") {
  ClientOptions client_options;
  client_options.middleware.push_back([](rapidjson::Document& job) {
    if (std::string(job["class"].GetString()) == "Blocked") return false;
    job["queue"].SetString("rerouted", job.GetAllocator());
    job.AddMember("tenant", "acme", job.GetAllocator());
    return true;
  });
  auto client = Client::Open(options(), client_options);
  REQUIRE(client.ok());
  Job job;
  job.job_class = "Any";
  CHECK(AcceptedJid((*client)->Push(job)).size() == 24);
  std::vector<std::string> queued = LRange("queue:rerouted");
  REQUIRE(queued.size() == 1);
  CHECK(queued[0].find("\"tenant\":\"acme\"") != std::string::npos);
  CHECK(SMembers("queues") == std::vector<std::string>{"rerouted"});
  Job blocked;
  blocked.job_class = "Blocked";
  auto stopped = (*client)->Push(blocked);
  REQUIRE(stopped.ok());
  CHECK(stopped->outcome == PushOutcome::kRefused);
  CHECK(stopped->reason.IsRefused());
  CHECK(Integer({"LLEN", "queue:default"}) == 0);
}

TEST_CASE_FIXTURE(RedisFixture, "the dead set is trimmed by count and by age") {
  // An entry older than the timeout, and a limit of 3 (Sidekiq's rank trim
  // keeps limit - 1).
  Run({"ZADD", "dead", FormatEpochForTest(NowSeconds() - 400 * 24 * 3600.0), "ancient"});
  HandlerRegistry registry;
  registry.Register("Die", [](const JobView&) { throw std::runtime_error("x"); });
  ServerOptions opts = FastOptions(options());
  opts.dead_set.max_jobs = 3;
  opts.dead_set.timeout = std::chrono::hours(24 * 180);
  RunningServer server(opts, std::move(registry));
  auto client = OpenClient(options());
  for (int i = 0; i < 5; ++i) {
    Job job;
    job.job_class = "Die";
    job.args = "[" + std::to_string(i) + "]";
    job.retry = Retry::Times(0);
    AcceptedJid(client->Push(job));
  }
  REQUIRE(WaitUntil([&] { return Get("stat:failed") == "5"; }));
  std::vector<std::string> dead = ZRange("dead");
  CHECK(dead.size() == 2);
  CHECK(std::find(dead.begin(), dead.end(), "ancient") == dead.end());
}

TEST_CASE_FIXTURE(RedisFixture, "heartbeat writes the records Sidekiq's API reads") {
  auto gate = std::make_shared<Gate>();
  HandlerRegistry registry;
  registry.Register("Hold", [gate](const JobView&) { gate->Wait(); });
  ServerOptions opts = FastOptions(options());
  opts.tag = "billing";
  opts.labels = {"blue"};
  opts.queues = {{"critical", 0}, {"default", 0}};
  RunningServer server(opts, std::move(registry));
  auto client = OpenClient(options());
  std::string jid = PushJob(*client, "Hold", "[\"x\"]", "critical");
  REQUIRE(WaitUntil([&] { return gate->waiting.load() == 1; }));
  const std::string id = server.identity();
  REQUIRE(WaitUntil([&] { return HGet(id, "busy") == "1"; }));

  CHECK(SMembers("processes") == std::vector<std::string>{id});
  auto info = Parse(HGet(id, "info"));
  CHECK(std::string(info["identity"].GetString()) == id);
  CHECK(std::string(info["tag"].GetString()) == "billing");
  CHECK(info["concurrency"].GetInt() == 4);
  CHECK(info["pid"].GetInt() == getpid());
  CHECK(info["started_at"].IsDouble());
  CHECK(info["queues"].Size() == 2);
  CHECK(std::string(info["queues"][0].GetString()) == "critical");
  CHECK(std::string(info["labels"][0].GetString()) == "blue");
  CHECK(HGet(id, "quiet") == "false");
  CHECK(HGet(id, "beat").find('.') != std::string::npos);
  CHECK(std::stoll(HGet(id, "rss")) > 0);
  CHECK(Integer({"TTL", id}) > 0);
  CHECK(Integer({"TTL", id}) <= 60);
  long long heartbeat_ttl = Integer({"PTTL", Keys().Heartbeat(id)});
  CHECK(heartbeat_ttl > 0);
  CHECK(heartbeat_ttl <= 1000);
  auto registry_entry = Parse(HGet(Keys().Registry(), id));
  CHECK(registry_entry["queues"].Size() == 2);
  CHECK(registry_entry["clients"].Size() >= 1);
  for (const std::string& work_key : {id + ":work", id + ":workers"}) {
    CAPTURE(work_key);
    REQUIRE(Integer({"HLEN", work_key}) == 1);
    CHECK(Integer({"TTL", work_key}) <= 60);
    auto all = redis().Command({"HGETALL", work_key});
    REQUIRE(all.ok());
    auto work = Parse(std::string((*all)->element[1]->str, (*all)->element[1]->len));
    CHECK(std::string(work["queue"].GetString()) == "critical");
    CHECK(work["run_at"].IsInt64());
    std::string payload = work["payload"].GetString();
    CHECK(payload.find(jid) != std::string::npos);
    // The payload is the exact fetched string.
    CHECK(LRange(Keys().Working(id, "critical")) == std::vector<std::string>{payload});
  }
  gate->Open();
  REQUIRE(WaitUntil([&] { return HGet(id, "busy") == "0"; }));
  CHECK(Integer({"HLEN", id + ":work"}) == 0);
}

TEST_CASE_FIXTURE(RedisFixture, "quiet stops fetching and gives back jobs not started") {
  auto gate = std::make_shared<Gate>();
  auto ran = std::make_shared<std::atomic<int>>(0);
  HandlerRegistry registry;
  registry.Register("Hold", [gate, ran](const JobView&) {
    gate->Wait();
    ++*ran;
  });
  ServerOptions opts = FastOptions(options());
  opts.concurrency = 1;
  RunningServer server(opts, std::move(registry));
  auto client = OpenClient(options());
  for (int i = 0; i < 5; ++i) PushJob(*client, "Hold", "[" + std::to_string(i) + "]");
  REQUIRE(WaitUntil([&] { return gate->waiting.load() == 1; }));
  const std::string working = Keys().Working(server.identity(), "default");
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", working}) == 2; }));  // 1 running + prefetch

  server.server().Quiet();
  // The prefetched job goes back to the head of its queue; the running one stays.
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", "queue:default"}) == 4; }));
  CHECK(Integer({"LLEN", working}) == 1);
  REQUIRE(WaitUntil([&] { return HGet(server.identity(), "quiet") == "true"; }));
  // The next job to be taken is the one handed back ("[1]").
  CHECK(LRange("queue:default").back().find("\"args\":[1]") != std::string::npos);
  gate->Open();
  REQUIRE(WaitUntil([&] { return ran->load() == 1 && Integer({"LLEN", working}) == 0; }));
  std::this_thread::sleep_for(300ms);
  CHECK(ran->load() == 1);  // nothing new fetched while quiet
  CHECK(Integer({"LLEN", "queue:default"}) == 4);
}

TEST_CASE_FIXTURE(RedisFixture, "stop hands running jobs back after the timeout") {
  auto gate = std::make_shared<Gate>();
  HandlerRegistry registry;
  registry.Register("Hold", [gate](const JobView&) { gate->Wait(); });
  ServerOptions opts = FastOptions(options());
  opts.concurrency = 2;
  // A minute on a clock only the test moves: the stop can end only when the
  // test says the time has come.
  auto clock = std::make_shared<FakeClock>();
  opts.clock = clock;
  opts.shutdown_timeout = 60s;
  auto client = OpenClient(options());
  std::string a = PushJob(*client, "Hold", "[\"a\"]");
  std::string b = PushJob(*client, "Hold", "[\"b\"]");
  {
    RunningServer server(opts, std::move(registry));
    REQUIRE(WaitUntil([&] { return gate->waiting.load() == 2; }));
    const std::string id = server.identity();
    server.server().Stop();
    REQUIRE(WaitUntil([&] { return HGet(id, "quiet") == "true"; }));
    CHECK_FALSE(server.done());
    CHECK(Integer({"LLEN", Keys().Working(id, "default")}) == 2);
    clock->Advance(60s);
    CHECK(server.Wait(5s));
    std::vector<std::string> queued = LRange("queue:default");
    REQUIRE(queued.size() == 2);
    for (const std::string& payload : queued) {
      auto doc = Parse(payload);
      CHECK(doc["interrupted_count"].GetInt() == 1);
    }
    // The jobs went back to the head: `a` was taken first, so it is next.
    CHECK(queued.back().find(a) != std::string::npos);
    CHECK(Integer({"LLEN", Keys().Working(id, "default")}) == 0);
    CHECK(SMembers("processes").empty());
    CHECK(HGet(Keys().Registry(), id).empty());
  }
  gate->Open();  // release the handler threads left behind
}

TEST_CASE_FIXTURE(RedisFixture, "a remote TSTP through the signals list quiets the process") {
  HandlerRegistry registry;
  registry.Register("Noop", [](const JobView&) {});
  RunningServer server(FastOptions(options()), std::move(registry));
  REQUIRE(WaitUntil([&] { return HGet(server.identity(), "quiet") == "false"; }));
  Run({"LPUSH", server.identity() + "-signals", "TSTP"});
  REQUIRE(WaitUntil([&] { return HGet(server.identity(), "quiet") == "true"; }, 3s));
  auto client = OpenClient(options());
  PushJob(*client, "Noop", "[]");
  std::this_thread::sleep_for(400ms);
  CHECK(Integer({"LLEN", "queue:default"}) == 1);
  // A remote TERM stops it.
  Run({"LPUSH", server.identity() + "-signals", "TERM"});
  CHECK(WaitUntil([&] { return server.done(); }, 5s));
}

TEST_CASE_FIXTURE(RedisFixture, "the janitor returns the jobs of a dead process") {
  // A process that registered, took two jobs and died: its heartbeat key is
  // gone, its working list remains.
  Keys keys;
  const std::string dead_id = "deadhost:4242:0123456789ab";
  Run({"HSET", keys.Registry(), dead_id,
       R"({"identity":"deadhost:4242:0123456789ab","hostname":"deadhost","pid":4242,)"
       R"("started_at":1700000000.5,"queues":["default"],"clients":[]})"});
  Run({"SADD", "processes", dead_id});
  const std::string j1 = R"({"class":"Noop","args":[1],"queue":"default","jid":"aaa"})";
  const std::string j2 = R"({"class":"Noop","args":[2],"queue":"default","jid":"bbb"})";
  Run({"LPUSH", keys.Working(dead_id, "default"), j1});
  Run({"LPUSH", keys.Working(dead_id, "default"), j2});
  auto ran = std::make_shared<std::multiset<std::string>>();
  auto mu = std::make_shared<std::mutex>();
  HandlerRegistry registry;
  registry.Register("Noop", [ran, mu](const JobView& job) {
    std::lock_guard<std::mutex> lock(*mu);
    ran->insert(std::string(job.jid()));
  });
  RunningServer server(FastOptions(options()), std::move(registry));
  REQUIRE(WaitUntil([&] {
    std::lock_guard<std::mutex> lock(*mu);
    return ran->size() == 2;
  }));
  {
    std::lock_guard<std::mutex> lock(*mu);
    CHECK(ran->count("aaa") == 1);
    CHECK(ran->count("bbb") == 1);
  }
  CHECK(Integer({"LLEN", keys.Working(dead_id, "default")}) == 0);
  REQUIRE(WaitUntil([&] { return HGet(keys.Registry(), dead_id).empty(); }));
  CHECK(SMembers("processes") == std::vector<std::string>{server.identity()});
}

TEST_CASE_FIXTURE(RedisFixture, "short jobs raise the prefetch; long ones keep it small") {
  // Short jobs first: many finish in each fetch's round trip, so the worker
  // fetches more at a time. Then long ones: it must come back to holding
  // concurrency + concurrency/4, leaving the rest for other workers.
  auto slow = std::make_shared<std::atomic<bool>>(false);
  auto done = std::make_shared<std::atomic<int>>(0);
  HandlerRegistry registry;
  registry.Register("Job", [slow, done](const JobView&) {
    if (slow->load()) std::this_thread::sleep_for(100ms);
    done->fetch_add(1);
  });
  ServerOptions opts = FastOptions(options());
  opts.concurrency = 8;  // prefetch from 2 up to 64
  RunningServer server(opts, std::move(registry));
  REQUIRE(WaitUntil([&] { return Exists(Keys().Heartbeat(server.identity())); }));
  auto client = OpenClient(options());
  std::vector<Job> jobs(20000);
  for (Job& job : jobs) job.job_class = "Job";
  AcceptedJids(client->PushBulk(jobs));
  // Held: taken from the queue and not finished (the working list also
  // keeps finished jobs until their ack arrives). Read the queue first: a
  // fetch between the two reads then lowers the estimate.
  auto held = [&](long long pushed) {
    long long queued = Integer({"LLEN", "queue:default"});
    return pushed - done->load() - queued;
  };
  long long most_held = 0;
  REQUIRE(WaitUntil([&] {
    most_held = std::max(most_held, held(20000));
    return done->load() == 20000;
  }, 30s));
  CHECK(most_held > 8 + 2);

  slow->store(true);
  jobs.resize(300);
  AcceptedJids(client->PushBulk(jobs));
  // The first fetch still uses the short jobs' prefetch (up to 64 jobs held
  // back, for 8 rounds of 100 ms); from then on it halves towards 2 with
  // each fetch, one per round.
  REQUIRE(WaitUntil([&] { return done->load() >= 20000 + 200; }, 10s));
  // What is held over 200 ms, exactly: a sample counts only if no job
  // finished while it was read (on a loaded machine, or under
  // ThreadSanitizer, the test thread can stall between the two reads for
  // longer than a job runs, and the estimate drops).
  std::vector<long long> samples;
  for (int i = 0; i < 20; ++i) {
    int finished = done->load();
    long long sample = held(20300);
    if (done->load() == finished) samples.push_back(sample);
    std::this_thread::sleep_for(10ms);
  }
  REQUIRE(samples.size() >= 5);
  std::sort(samples.begin(), samples.end());
  std::string listed;
  for (long long sample : samples) listed += std::to_string(sample) + " ";
  INFO("held: " << listed);
  // The least held: concurrency + concurrency/4 on a quiet machine; the
  // prefetch follows the rate times the fetch's round trip, which a loaded
  // machine (CI runs suites side by side) lengthens, so allow up to twice
  // the threads. The short jobs' prefetch would hold up to 72.
  CHECK(samples.front() <= 2 * 8);
  // Every thread busy, most of the time: when several jobs end together,
  // their threads wait for the refill's round trip (a sample can catch
  // that), and a round's fetch passes through for a moment.
  CHECK(samples[samples.size() / 2] >= 8);
  REQUIRE(WaitUntil([&] { return done->load() == 20300; }, 10s));
}

TEST_CASE_FIXTURE(RedisFixture, "acks Redis refused with an error reply are sent again") {
  // REPLICAOF makes Redis answer writes with READONLY while the connection
  // stays up (as after a failover): the acks of jobs that finish then must
  // go out once Redis takes writes again, without a reconnect or a stop.
  auto started = std::make_shared<std::atomic<int>>(0);
  HandlerRegistry registry;
  registry.Register("Slow", [started](const JobView&) {
    started->fetch_add(1);
    std::this_thread::sleep_for(300ms);
  });
  ServerOptions opts = FastOptions(options());
  opts.concurrency = 1;
  opts.heartbeat_ttl = 5000ms;  // the beats fail too while Redis refuses writes
  RunningServer server(opts, std::move(registry));
  const std::string working = Keys().Working(server.identity(), "default");
  REQUIRE(WaitUntil([&] { return Exists(Keys().Heartbeat(server.identity())); }));
  auto client = OpenClient(options());
  PushJob(*client, "Slow", "[1]");
  PushJob(*client, "Slow", "[2]");
  REQUIRE(WaitUntil([&] { return started->load() >= 1; }));
  struct Primary {  // Redis takes writes again however the test ends
    RedisFixture* fixture;
    ~Primary() { fixture->Run({"REPLICAOF", "NO", "ONE"}); }
  } primary{this};
  Run({"REPLICAOF", "127.0.0.1", "1"});  // nothing listens there: it stays a lone replica
  // The running job finishes while its ack is refused (the beats fail too,
  // so the prefetched one may wait for the next good beat).
  std::this_thread::sleep_for(700ms);
  CHECK(Get("stat:processed").empty());
  Run({"REPLICAOF", "NO", "ONE"});
  // The refused acks are sent again on a timer whose pause doubles while
  // Redis refuses them (200 ms, then up to 30 s), so a slow run may wait
  // seconds for the next try; 5 s of waiting once ran out under
  // ThreadSanitizer, and did not again in 7 runs of its own.
  REQUIRE(WaitUntil([&] { return Get("stat:processed") == "2"; }, 15s));
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", working}) == 0; }));
  // And later jobs are acknowledged as usual.
  PushJob(*client, "Slow", "[3]");
  CHECK(WaitUntil([&] { return Get("stat:processed") == "3"; }, 5s));
  CHECK(started->load() == 3);
}

// Calls of EVALSHA Redis has served since its stats were reset.
long long EvalshaCalls(RedisFixture& fixture) {
  return InfoNumber(fixture, "commandstats", "cmdstat_evalsha:calls");
}

TEST_CASE_FIXTURE(RedisFixture, "a broken queue is not fetched from in a tight loop") {
  // queue:b holds a string. Once every fetch of queues a and b was refused,
  // and sent again at once: thousands a second. Now b is skipped, a runs,
  // and nothing spins while the worker waits.
  auto ran = std::make_shared<std::atomic<int>>(0);
  HandlerRegistry registry;
  registry.Register("Count", [ran](const JobView&) { ran->fetch_add(1); });
  ServerOptions opts = FastOptions(options());
  opts.queues = {{"a", 0}, {"b", 0}};
  auto client = OpenClient(options());
  PushJob(*client, "Count", "[1]", "a");
  Run({"SET", "queue:b", "not a list"});
  Run({"CONFIG", "RESETSTAT"});
  RunningServer server(opts, std::move(registry));
  std::this_thread::sleep_for(1500ms);
  long long calls = EvalshaCalls(*this);
  CAPTURE(calls);
  CHECK(calls > 0);     // it did try
  CHECK(calls < 100);   // without pausing: thousands
  CHECK(ran->load() == 1);
  CHECK(Get("queue:b") == "not a list");
  Run({"DEL", "queue:b"});
  PushJob(*client, "Count", "[2]", "b");
  CHECK(WaitUntil([&] { return ran->load() == 2; }, 5s));
}

TEST_CASE_FIXTURE(RedisFixture, "jobs are acknowledged while Redis is out of memory") {
  // Out of memory (maxmemory reached, noeviction), Redis refuses commands
  // that may grow memory, as INCRBY, but runs LREM: the ack must still take
  // a finished job out of its working list, and its count follows later.
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto started = std::make_shared<std::atomic<int>>(0);
  HandlerRegistry registry;
  registry.Register("Held", [release, started](const JobView&) {
    started->fetch_add(1);
    auto limit = std::chrono::steady_clock::now() + 5s;
    while (!release->load() && std::chrono::steady_clock::now() < limit) {
      std::this_thread::sleep_for(5ms);
    }
  });
  ServerOptions opts = FastOptions(options());
  opts.concurrency = 1;
  opts.heartbeat_ttl = 5000ms;  // the beats are refused too while memory is out
  RunningServer server(opts, std::move(registry));
  const std::string working = Keys().Working(server.identity(), "default");
  REQUIRE(WaitUntil([&] { return Exists(Keys().Heartbeat(server.identity())); }));
  auto client = OpenClient(options());
  PushJob(*client, "Held", "[1]");
  REQUIRE(WaitUntil([&] { return started->load() == 1; }));
  struct Unlimited {  // the shared server gets its memory back however this ends
    RedisFixture* fixture;
    ~Unlimited() { fixture->Run({"CONFIG", "SET", "maxmemory", "0"}); }
  } unlimited{this};
  Run({"CONFIG", "SET", "maxmemory", "1"});
  release->store(true);
  CHECK(WaitUntil([&] { return Integer({"LLEN", working}) == 0; }, 3s));
  CHECK(Get("stat:processed").empty());
  Run({"CONFIG", "SET", "maxmemory", "0"});
  PushJob(*client, "Held", "[2]");
  CHECK(WaitUntil([&] { return Get("stat:processed") == "2"; }, 5s));
  CHECK(started->load() == 2);
}

TEST_CASE_FIXTURE(RedisFixture, "a process declared dead re-registers and loses nothing") {
  auto runs = std::make_shared<std::map<std::string, int>>();
  auto mu = std::make_shared<std::mutex>();
  HandlerRegistry registry;
  registry.Register("Slow", [runs, mu](const JobView& job) {
    std::this_thread::sleep_for(50ms);
    std::lock_guard<std::mutex> lock(*mu);
    ++(*runs)[std::string(job.jid())];
  });
  ServerOptions opts = FastOptions(options());
  opts.concurrency = 4;  // prefetch 1: one job waits in memory
  RunningServer server(opts, std::move(registry));
  const std::string id = server.identity();
  REQUIRE(WaitUntil([&] { return Exists(Keys().Heartbeat(id)); }));
  auto client = OpenClient(options());
  std::vector<Job> jobs(40);
  for (Job& job : jobs) job.job_class = "Slow";
  std::vector<std::string> jids = AcceptedJids(client->PushBulk(jobs));
  auto ran = [&] {
    std::lock_guard<std::mutex> lock(*mu);
    return runs->size();
  };
  REQUIRE(WaitUntil([&] { return ran() >= 4; }));
  // Its heartbeat vanishes, as when it expires: the next beat must notice,
  // re-register, and hand back the fetched job it had not started (no
  // janitor took it, so it must run exactly once, from the queue).
  Run({"DEL", Keys().Heartbeat(id)});
  REQUIRE(WaitUntil([&] { return Exists(Keys().Heartbeat(id)); }));
  REQUIRE(WaitUntil([&] { return ran() == 40; }, 15s));
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", Keys().Working(id, "default")}) == 0; }));
  CHECK_FALSE(HGet(Keys().Registry(), id).empty());
  std::lock_guard<std::mutex> lock(*mu);
  for (const std::string& jid : jids) CHECK((*runs)[jid] == 1);
}

TEST_CASE_FIXTURE(RedisFixture, "after a recovery behind its back a worker drops what it had not started") {
  auto gate = std::make_shared<Gate>();
  auto runs = std::make_shared<std::map<std::string, int>>();
  auto mu = std::make_shared<std::mutex>();
  HandlerRegistry registry;
  registry.Register("Held", [gate, runs, mu](const JobView& job) {
    {
      std::lock_guard<std::mutex> lock(*mu);
      ++(*runs)[std::string(job.args()[0].GetString())];
    }
    if (std::string(job.args()[0].GetString()) == "running") gate->Wait();
  });
  ServerOptions opts = FastOptions(options());
  opts.concurrency = 1;  // one running, one prefetched
  RunningServer server(opts, std::move(registry));
  const std::string id = server.identity();
  auto client = OpenClient(options());
  PushJob(*client, "Held", "[\"running\"]");
  PushJob(*client, "Held", "[\"prefetched\"]");
  REQUIRE(WaitUntil([&] { return gate->waiting.load() == 1; }));
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", Keys().Working(id, "default")}) == 2; }));
  // A janitor takes the process for dead (forced): both jobs go back to the
  // queue, its connections are closed and its registration removed.
  auto admin = Admin::Open(options());
  REQUIRE(admin.ok());
  RecoverOptions recover;
  recover.identity = id;
  recover.force = true;
  auto report = (*admin)->Recover(recover);
  REQUIRE_MESSAGE(report.ok(), report.status().ToString());
  CHECK(Integer({"LLEN", "queue:default"}) == 2);
  // The worker notices at its next beat, re-registers, and must drop the
  // prefetched job rather than run it from memory as well as from the queue.
  // Once it has, it has room for one more job and fetches it: only then is
  // the drop certain to have happened (the registry entry alone shows the
  // beat ran in Redis, not that its reply was handled).
  REQUIRE(WaitUntil([&] { return !HGet(Keys().Registry(), id).empty(); }));
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", Keys().Working(id, "default")}) == 1; }));
  gate->Open();
  REQUIRE(WaitUntil([&] {
    std::lock_guard<std::mutex> lock(*mu);
    return (*runs)["prefetched"] >= 1 && (*runs)["running"] >= 2;
  }));
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", "queue:default"}) == 0 &&
                                 Integer({"LLEN", Keys().Working(id, "default")}) == 0; }));
  std::this_thread::sleep_for(300ms);
  std::lock_guard<std::mutex> lock(*mu);
  CHECK((*runs)["prefetched"] == 1);  // I2: it was never running
  CHECK((*runs)["running"] == 2);     // I2b: its process was declared dead mid-run
}

TEST_CASE_FIXTURE(RedisFixture, "connections killed under load: every job runs exactly once") {
  // Nobody is declared dead (long ttl) and no handler fails, so I2 allows
  // no duplicate at all, however often the worker loses its connections.
  auto runs = std::make_shared<std::map<std::string, int>>();
  auto mu = std::make_shared<std::mutex>();
  HandlerRegistry registry;
  registry.Register("Work", [runs, mu](const JobView& job) {
    std::this_thread::sleep_for(std::chrono::milliseconds(job.args()[0].GetInt()));
    std::lock_guard<std::mutex> lock(*mu);
    ++(*runs)[std::string(job.jid())];
  });
  ServerOptions opts = FastOptions(options());
  opts.concurrency = 16;
  opts.heartbeat_ttl = 60000ms;
  opts.heartbeat_interval = 200ms;
  RunningServer server(opts, std::move(registry));
  auto client = OpenClient(options());
  std::vector<Job> jobs;
  for (int i = 0; i < 1500; ++i) {
    Job job;
    job.job_class = "Work";
    job.args = "[" + std::to_string(1 + i % 20) + "]";
    jobs.push_back(job);
  }
  std::vector<std::string> jids = AcceptedJids(client->PushBulk(jobs));
  const std::string name = "name=" + Keys().ClientName(server.identity());
  int kills = 0;
  auto done = [&] {
    std::lock_guard<std::mutex> lock(*mu);
    return runs->size() == jids.size();
  };
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(150ms);
    auto list = redis().Command({"CLIENT", "LIST"});
    REQUIRE(list.ok());
    std::istringstream lines(std::string((*list)->str, (*list)->len));
    std::string line;
    while (std::getline(lines, line)) {
      if (line.find(name + " ") == std::string::npos) continue;
      std::string id = line.substr(3, line.find(' ') - 3);
      if (redis().Command({"CLIENT", "KILL", "ID", id}).ok()) ++kills;
    }
  }
  REQUIRE(done());
  INFO("connections killed: " << kills);
  CHECK(kills >= 5);
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", Keys().Working(server.identity(), "default")}) == 0; }));
  std::lock_guard<std::mutex> lock(*mu);
  int twice = 0;
  for (const std::string& jid : jids) twice += (*runs)[jid] > 1;
  CHECK(twice == 0);
  CHECK(runs->size() == jids.size());
}

TEST_CASE("a stop that cannot hand its jobs back makes Run return the error") {
  // A Redis of its own, killed under the running worker: the hand-back can
  // never reach it, and after its patience (10 s on the worker's clock) Run
  // says so instead of reporting a clean stop.
  RedisServer lone;
  auto clock = std::make_shared<FakeClock>();
  HandlerRegistry registry;
  registry.Register("Noop", [](const JobView&) {});
  ServerOptions opts = FastOptions(lone.Options());
  opts.clock = clock;
  opts.redis.connect_timeout = 200ms;
  RunningServer server(opts, std::move(registry));
  auto admin = Admin::Open(lone.Options());
  REQUIRE(admin.ok());
  REQUIRE(WaitUntil([&] {
    Result<Stats> stats = (*admin)->GetStats();
    return stats.ok() && stats->processes == 1;
  }));
  kill(lone.pid(), SIGKILL);
  server.server().Stop();
  for (int i = 0; i < 300 && !server.done(); ++i) {
    clock->Advance(1s);
    std::this_thread::sleep_for(20ms);
  }
  CHECK_FALSE(server.Wait(5s));
}

TEST_CASE_FIXTURE(RedisFixture, "a broken queue is reported once and skipped; the others run") {
  // queue:b holds a string: fetch.lua cannot take from it, and neither can
  // BLMOVE. It once stopped every queue of the worker.
  auto ran = std::make_shared<std::atomic<int>>(0);
  auto log = std::make_shared<LogCapture>();
  auto count = [log](std::string_view what) { return log->Count(what); };
  HandlerRegistry registry;
  registry.Register("Ping", [ran](const JobView&) { ++*ran; });
  ServerOptions opts = FastOptions(options());
  opts.queues = {{"b", 0}, {"a", 0}};
  opts.log_level = LogLevel::kInfo;
  opts.log_sink = log->Sink();
  Run({"SET", "queue:b", "not a list"});
  RunningServer server(opts, std::move(registry));
  auto client = OpenClient(options());
  for (int i = 0; i < 20; ++i) PushJob(*client, "Ping", "[]", "a");
  REQUIRE(WaitUntil([&] { return ran->load() == 20; }));
  for (int i = 0; i < 20; ++i) PushJob(*client, "Ping", "[]", "a");
  REQUIRE(WaitUntil([&] { return ran->load() == 40; }));
  CHECK(count("queue b is broken and skipped (WRONGTYPE fetch: key queue:b holds a string") == 1);
  CHECK(Get("queue:b") == "not a list");
  Run({"DEL", "queue:b"});
  PushJob(*client, "Ping", "[]", "b");
  REQUIRE(WaitUntil([&] { return ran->load() == 41; }));
  CHECK(count("queue b works again") == 1);
}

TEST_CASE_FIXTURE(RedisFixture, "an outcome Redis keeps refusing is sent ever more slowly, logged once") {
  // `retry` holds a string: fail.lua refuses to move the failed job there,
  // every time, until someone fixes the key. It was sent again every 200 ms
  // with a log line each time.
  auto log = std::make_shared<LogCapture>();
  HandlerRegistry registry;
  registry.Register("Fails", [](const JobView&) { throw std::runtime_error("no"); });
  ServerOptions opts = FastOptions(options());
  opts.log_level = LogLevel::kInfo;
  opts.log_sink = log->Sink();
  Run({"SET", "retry", "not a zset"});
  RunningServer server(opts, std::move(registry));
  auto client = OpenClient(options());
  PushJob(*client, "Fails", "[]");
  REQUIRE(WaitUntil([&] { return log->Count("not confirmed") == 1; }));
  // Tries at 0, 0.2, 0.6, 1.4, 3.0 s: within 2.5 s, at most 4 more.
  long long before = InfoNumber(*this, "commandstats", "cmdstat_evalsha:failed_calls");
  std::this_thread::sleep_for(2500ms);
  long long refused = InfoNumber(*this, "commandstats", "cmdstat_evalsha:failed_calls") - before;
  CHECK(refused >= 2);
  CHECK(refused <= 5);
  CHECK(log->Count("not confirmed") == 1);
  // The job waited in the working list all along.
  CHECK(Integer({"LLEN", Keys().Working(server.identity(), "default")}) == 1);
  Run({"DEL", "retry"});
  REQUIRE(WaitUntil([&] { return Integer({"ZCARD", "retry"}) == 1; }, 10s));
  REQUIRE(WaitUntil([&] { return log->Count("outcomes are confirmed again") == 1; }));
  CHECK(Integer({"LLEN", Keys().Working(server.identity(), "default")}) == 0);
}

TEST_CASE("acks sent again after Redis paused count every job once") {
  // Redis stops answering (SIGSTOP) while ack rounds are on their way: the
  // worker times out, reconnects and sends the acks again, but Redis, once
  // it runs again, also runs the pipelines it had received. Counted on
  // both, 3,000 jobs once made stat:processed 3,002.
  RedisServer lone;
  std::atomic<int> ran{0};
  HandlerRegistry registry;
  registry.Register("Tick", [&ran](const JobView&) {
    std::this_thread::sleep_for(1ms);
    ++ran;
  });
  ServerOptions opts = FastOptions(lone.Options());
  opts.redis.command_timeout = 300ms;
  opts.heartbeat_ttl = 10s;  // the pause must not make it look dead
  opts.heartbeat_interval = 1s;
  RunningServer server(opts, std::move(registry));
  auto client = OpenClient(lone.Options());
  std::vector<Job> jobs(2000);
  for (Job& job : jobs) job.job_class = "Tick";
  AcceptedJids(client->PushBulk(jobs));
  REQUIRE(WaitUntil([&] { return ran.load() >= 300; }));
  kill(lone.pid(), SIGSTOP);
  std::this_thread::sleep_for(1000ms);
  kill(lone.pid(), SIGCONT);
  auto redis = redis::Connection::Open(lone.Options());
  REQUIRE(redis.ok());
  auto processed = [&] {
    auto reply = (*redis)->Command({"GET", "stat:processed"});
    return reply.ok() && (*reply)->type == REDIS_REPLY_STRING ? std::atoll((*reply)->str) : 0;
  };
  REQUIRE(WaitUntil([&] { return ran.load() >= 2000 && processed() >= 2000; }, 20s));
  CHECK(server.StopAndWait());
  CHECK(processed() == ran.load());
}
