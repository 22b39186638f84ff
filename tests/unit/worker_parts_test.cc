// The worker's pure parts: the queue set and its fetch order, the prefetch
// controller, the option checks and their limits (with the processor
// pool's start when threads run out), and the KEYS/ARGV of every script call,
// each checked against the header of its lua/*.lua script.

#include <doctest/doctest.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "protocol/keys.h"
#include "protocol/script_calls.h"
#include "server/job_expiry.h"
#include "server/options_check.h"
#include "server/poller.h"
#include "server/prefetch.h"
#include "server/processor_pool.h"
#include "server/queue_set.h"

using namespace reliableq;
using namespace reliableq::base;
using namespace reliableq::protocol;
using namespace reliableq::server;
using Strings = std::vector<std::string>;

// --- QueueSet ---

TEST_CASE("QueueSet builds each queue's Sidekiq key and this process's working list") {
  Keys keys("app1:");
  QueueSet set({{"critical", 0}, {"default", 0}, {"low", 0}}, keys, "host:42:abc");
  REQUIRE(set.size() == 3);
  CHECK(set.names() == Strings{"critical", "default", "low"});
  CHECK_FALSE(set.weighted());
  CHECK(set[0].name == "critical");
  CHECK(set[0].queue_key == "queue:critical");
  CHECK(set[0].working_key == "app1:working:host:42:abc:critical");
  CHECK(set[1].queue_key == "queue:default");
  CHECK(set[1].working_key == "app1:working:host:42:abc:default");
  CHECK(set[2].queue_key == "queue:low");
  CHECK(set[2].working_key == "app1:working:host:42:abc:low");
}

TEST_CASE("QueueSet: a namespace's queues are fetched only once published, at its place") {
  QueueSet set({{"critical", 0}, {"cron:*", 0}, {"low", 0}}, Keys(), "h:1:x");
  std::mt19937_64 random(1);
  REQUIRE(set.size() == 2);
  CHECK(set.Matches("cron:b"));
  CHECK_FALSE(set.Matches("cronb"));
  CHECK_FALSE(set.Matches("low"));
  uint32_t b = set.Add("cron:b");
  uint32_t a = set.Add("cron:a");
  CHECK_FALSE(set.Matches("cron:a"));
  // Not listed in the registry yet: not fetched from.
  CHECK(set.FetchOrder(random) == std::vector<uint32_t>{0, 1});
  set.Publish(3);
  CHECK(set.FetchOrder(random) == std::vector<uint32_t>{0, b, 1});
  set.Publish(4);
  CHECK(set.FetchOrder(random) == std::vector<uint32_t>{0, a, b, 1});
  CHECK(set[a].working_key == Keys().Working("h:1:x", "cron:a"));
  CHECK(set[a].queue_key == "queue:cron:a");
}

TEST_CASE("QueueSet: a paused queue is left out of every fetch order until resumed") {
  QueueSet set({{"a", 0}, {"b", 0}, {"ns:*", 0}}, Keys(), "h:1:x");
  std::mt19937_64 random(3);
  CHECK(set.SetPaused({"b", "ns:late", "other"}) == std::vector<uint32_t>{1});
  CHECK(set.paused(1));
  CHECK_FALSE(set.paused(0));
  CHECK(set.FetchOrder(random) == std::vector<uint32_t>{0});
  // A namespace's queue found later is paused as soon as it is added.
  uint32_t late = set.Add("ns:late");
  uint32_t other = set.Add("ns:other");
  set.Publish(4);
  CHECK(set.paused(late));
  CHECK(set.FetchOrder(random) == std::vector<uint32_t>{0, other});
  // Applying the same set again changes nothing; resuming reports the index.
  CHECK(set.SetPaused({"b", "ns:late", "other"}).empty());
  CHECK(set.SetPaused({"ns:late"}) == std::vector<uint32_t>{1});
  CHECK(set.FetchOrder(random) == std::vector<uint32_t>{0, 1, other});
  // Every queue paused: nothing to fetch from.
  set.SetPaused({"a", "b", "ns:late", "ns:other"});
  CHECK(set.FetchOrder(random).empty());
  // Weighted sets leave paused queues out too.
  QueueSet weighted({{"x", 3}, {"y", 1}}, Keys(), "h:1:x");
  weighted.SetPaused({"x"});
  for (int draw = 0; draw < 20; ++draw) {
    CHECK(weighted.FetchOrder(random) == std::vector<uint32_t>{1});
  }
}

TEST_CASE("a strict QueueSet always fetches in the order given") {
  QueueSet set({{"c", 0}, {"a", 0}, {"b", 0}}, Keys(), "h:1:x");
  std::mt19937_64 random(7);
  for (int draw = 0; draw < 100; ++draw) {
    CHECK(set.FetchOrder(random) == std::vector<uint32_t>{0, 1, 2});
  }
}

TEST_CASE("a weighted QueueSet puts each queue first about its weight's share of the time") {
  QueueSet set({{"a", 5}, {"b", 3}, {"c", 2}}, Keys(), "h:1:x");
  REQUIRE(set.weighted());
  std::mt19937_64 random(12345);
  constexpr int kDraws = 10000;
  int first[3] = {0, 0, 0};
  for (int draw = 0; draw < kDraws; ++draw) {
    std::vector<uint32_t> order = set.FetchOrder(random);
    // Every queue exactly once.
    std::vector<uint32_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    REQUIRE(sorted == std::vector<uint32_t>{0, 1, 2});
    ++first[order[0]];
  }
  // Expected shares 0.5, 0.3 and 0.2; the standard deviation of a share
  // over 10,000 draws is at most 0.005, so 0.03 is six of them, and still
  // far from the uniform 1/3 (or the strict 1, 0, 0).
  CHECK(std::abs(first[0] / double(kDraws) - 0.5) < 0.03);
  CHECK(std::abs(first[1] / double(kDraws) - 0.3) < 0.03);
  CHECK(std::abs(first[2] / double(kDraws) - 0.2) < 0.03);
}

TEST_CASE("a weight-0 queue in a weighted set is still fetched from") {
  QueueSet set({{"busy", 4}, {"rare", 0}}, Keys(), "h:1:x");
  REQUIRE(set.weighted());
  std::mt19937_64 random(99);
  int rare_first = 0;
  for (int draw = 0; draw < 1000; ++draw) {
    std::vector<uint32_t> order = set.FetchOrder(random);
    REQUIRE(order.size() == 2);
    CHECK(std::find(order.begin(), order.end(), 1u) != order.end());
    if (order[0] == 1) ++rare_first;
  }
  // Sidekiq counts a weight below 1 as 1, so "rare" leads now and then
  // (1 in 5 here) but "busy" leads most of the time.
  CHECK(rare_first > 0);
  CHECK(rare_first < 500);
}

// --- Prefetch ---

namespace {

using TimePoint = Prefetch::TimePoint;

// Times in whole milliseconds, so that rates and round trips are exact.
TimePoint At(int64_t millis) {
  return TimePoint(std::chrono::seconds(1000) + std::chrono::milliseconds(millis));
}

// Replies every 100 ms from `start`, each after a 10 ms round trip, with
// `per_interval` jobs finished in each interval; returns the prefetch after
// each reply.
std::vector<int> SteadyStream(Prefetch* prefetch, int64_t start, uint64_t* finished,
                              uint64_t per_interval, int replies) {
  std::vector<int> values;
  for (int i = 0; i < replies; ++i) {
    int64_t now = start + 100 * i;
    prefetch->OnReply(At(now - 10), At(now), *finished);
    values.push_back(prefetch->value());
    *finished += per_interval;
  }
  return values;
}

}  // namespace

TEST_CASE("the prefetch starts at a quarter of the threads, at least 1") {
  CHECK(Prefetch(10).value() == 2);
  CHECK(Prefetch(10).min() == 2);
  CHECK(Prefetch(10).max() == 80);
  CHECK(Prefetch(40).value() == 10);
  CHECK(Prefetch(3).value() == 1);
  CHECK(Prefetch(3).max() == 24);
  CHECK(Prefetch(1).value() == 1);
  CHECK(Prefetch(1).min() == 1);
  CHECK(Prefetch(1).max() == 8);
}

TEST_CASE("Wanted is threads plus prefetch less what is held, never below 0") {
  Prefetch prefetch(10);  // prefetch 2: 12 in memory at most
  CHECK(prefetch.Wanted(0) == 12);
  CHECK(prefetch.Wanted(5) == 7);
  CHECK(prefetch.Wanted(11) == 1);
  CHECK(prefetch.Wanted(12) == 0);
  CHECK(prefetch.Wanted(13) == 0);
  CHECK(prefetch.Wanted(1000) == 0);
}

TEST_CASE("a steady stream moves the prefetch halfway to 4 x rate x round trip at each reply") {
  Prefetch prefetch(10);
  uint64_t finished = 0;
  // 100 jobs per 100 ms is 1000 jobs/s; 4 x 1000 x 0.01 s = 40. From 2:
  // (2 + 40) / 2 = 21, then 30 (30.5), 35, 37 (37.5), 38 (38.5), 39, and it
  // stays at 39 (the halves are truncated).
  std::vector<int> values = SteadyStream(&prefetch, 0, &finished, 100, 9);
  CHECK(values == std::vector<int>{2, 21, 30, 35, 37, 38, 39, 39, 39});
  CHECK(prefetch.Wanted(0) == 49);
  CHECK(prefetch.Wanted(45) == 4);

  // The stream stops: the target falls to the least (2), halfway each time.
  // The first reply of this run is 9.2 s after the last one, with 100
  // jobs finished: about 11 jobs/s, target 4 x 11 x 0.01 = 0.43, so 2.
  values = SteadyStream(&prefetch, 10000, &finished, 0, 8);
  CHECK(values == std::vector<int>{20, 11, 6, 4, 3, 2, 2, 2});
}

TEST_CASE("the prefetch target is clamped to at most 8 x threads") {
  Prefetch prefetch(10);
  uint64_t finished = 0;
  // 100,000 jobs/s: 4 x 100000 x 0.01 = 4000, clamped to 80.
  std::vector<int> values = SteadyStream(&prefetch, 0, &finished, 10000, 10);
  CHECK(values == std::vector<int>{2, 41, 60, 70, 75, 77, 78, 79, 79, 79});
  for (int v : values) CHECK(v <= prefetch.max());
}

TEST_CASE("a slow round trip raises the prefetch as much as a fast stream") {
  Prefetch prefetch(10);
  // 50 jobs/s and a 200 ms round trip: 4 x 50 x 0.2 = 40, as in the steady
  // stream test above.
  prefetch.OnReply(At(-200), At(0), 0);
  prefetch.OnReply(At(800), At(1000), 50);
  CHECK(prefetch.value() == 21);
}

TEST_CASE("long jobs that end together after a long gap do not raise the prefetch") {
  Prefetch prefetch(10);
  prefetch.OnReply(At(-10), At(0), 0);
  CHECK(prefetch.value() == 2);
  // Ten 60-second jobs end at once and the next fetch comes back within
  // 10 ms: over the whole 60 s that is 1/6 job/s (target 4 x 1/6 x 0.01,
  // clamped to 2), not 10 jobs in 10 ms (1000 jobs/s, target 40).
  prefetch.OnReply(At(59990), At(60000), 10);
  CHECK(prefetch.value() == 2);
  prefetch.OnReply(At(119990), At(120000), 20);
  CHECK(prefetch.value() == 2);
}

TEST_CASE("the first reply only sets the baseline") {
  Prefetch prefetch(10);
  // Had the time since an unset last reply counted, these 1,000,000 jobs
  // would be a stream.
  prefetch.OnReply(At(-1000), At(0), 1000000);
  CHECK(prefetch.value() == 2);
  // Measured from the baseline: 100 jobs in 0.1 s, round trip 10 ms.
  prefetch.OnReply(At(90), At(100), 1000100);
  CHECK(prefetch.value() == 21);
}

// --- CheckServerOptions ---

namespace {

// The rejection of `options`, which must name `option`.
void CheckRejected(const ServerOptions& options, const std::string& option) {
  Status status = CheckServerOptions(options);
  INFO("expected a rejection naming '", option, "', got: ", status.ToString());
  CHECK(status.IsInvalidArgument());
  CHECK(status.message().find(option) != std::string::npos);
}

}  // namespace

TEST_CASE("the default ServerOptions pass the checks") {
  CHECK(CheckServerOptions(ServerOptions()).ok());
}

TEST_CASE("values on the edge of each check pass") {
  ServerOptions options;
  options.queues = {{"a", 0}, {"b", 3}};
  options.concurrency = 1;
  options.heartbeat_interval = std::chrono::milliseconds(1000);
  options.heartbeat_ttl = std::chrono::milliseconds(2000);  // exactly twice
  options.janitor_interval = std::chrono::milliseconds(1);
  options.shutdown_timeout = std::chrono::milliseconds(0);
  options.idle_poll_interval = std::chrono::milliseconds(10);
  CHECK(CheckServerOptions(options).ok());
}

TEST_CASE("each bad option is rejected with a message naming it") {
  ServerOptions options;
  SUBCASE("no queues") {
    options.queues.clear();
    CheckRejected(options, "queues");
  }
  SUBCASE("a record retention past a year, a negative one, a record size out of bounds") {
    options.records.retention = std::chrono::hours(24 * 365) + std::chrono::seconds(1);
    CheckRejected(options, "record retention");
    options.records.retention = std::chrono::seconds(3600);
    options.records.class_retention["PaymentJob"] = std::chrono::seconds(-1);
    CheckRejected(options, "class 'PaymentJob'");
    options.records.class_retention["PaymentJob"] = std::chrono::seconds(0);
    CHECK(CheckServerOptions(options).ok());
    options.records.max_bytes = 255;
    CheckRejected(options, "bytes of a record");
  }
  SUBCASE("an empty queue name") {
    options.queues = {{"default", 0}, {"", 0}};
    CheckRejected(options, "queue name");
  }
  SUBCASE("a negative weight") {
    options.queues = {{"default", 1}, {"low", -1}};
    CheckRejected(options, "weight");
  }
  SUBCASE("a queue given twice") {
    options.queues = {{"default", 0}, {"mail", 0}, {"default", 0}};
    CheckRejected(options, "'default'");
    CheckRejected(options, "twice");
  }
  SUBCASE("concurrency 0") {
    options.concurrency = 0;
    CheckRejected(options, "concurrency");
  }
  SUBCASE("a ttl below twice the interval") {
    options.heartbeat_interval = std::chrono::milliseconds(5000);
    options.heartbeat_ttl = std::chrono::milliseconds(9999);
    CheckRejected(options, "heartbeat ttl");
    CheckRejected(options, "heartbeat interval");
  }
  SUBCASE("a heartbeat interval of 0") {
    options.heartbeat_interval = std::chrono::milliseconds(0);
    CheckRejected(options, "heartbeat interval");
  }
  SUBCASE("a janitor interval of 0") {
    options.janitor_interval = std::chrono::milliseconds(0);
    CheckRejected(options, "janitor interval");
  }
  SUBCASE("a negative shutdown timeout") {
    options.shutdown_timeout = std::chrono::milliseconds(-1);
    CheckRejected(options, "shutdown timeout");
  }
  SUBCASE("an idle poll interval under 10 ms") {
    options.idle_poll_interval = std::chrono::milliseconds(9);
    CheckRejected(options, "idle poll interval");
  }
}

TEST_CASE("each resource limit is checked, its edge passes and one past it fails") {
  using std::chrono::milliseconds;
  ServerOptions options;
  SUBCASE("concurrency") {
    options.concurrency = kMaxConcurrency;
    CHECK(CheckServerOptions(options).ok());
    options.concurrency = 40000;
    CheckRejected(options, "concurrency must be from 1 to 1000, not 40000");
  }
  SUBCASE("queue weights") {
    options.queues = {{"a", kMaxQueueWeight}, {"b", 0}};
    CHECK(CheckServerOptions(options).ok());
    options.queues = {{"a", 1}, {"b", 1000000000}};
    CheckRejected(options, "queue weights must be from 0 to 1000, not 1000000000 (queue 'b')");
  }
  SUBCASE("the number of queues") {
    options.queues.clear();
    for (size_t i = 0; i < kMaxQueues; ++i) options.queues.push_back({std::to_string(i), 0});
    CHECK(CheckServerOptions(options).ok());
    options.queues.push_back({"one-too-many", 0});
    CheckRejected(options, "at most 1000 queues, not 1001");
  }
  SUBCASE("a queue name's length") {
    options.queues = {{std::string(kMaxQueueNameBytes, 'q'), 0}};
    CHECK(CheckServerOptions(options).ok());
    options.queues = {{std::string(kMaxQueueNameBytes + 1, 'q'), 0}};
    CheckRejected(options, "the queue name is longer than 1000 bytes");
  }
  SUBCASE("every duration") {
    options.shutdown_timeout = kMaxDuration;
    options.heartbeat_ttl = kMaxDuration;
    options.heartbeat_interval = kMaxDuration / 2;
    options.janitor_interval = kMaxDuration;
    options.scheduled_poll_interval = kMaxDuration;
    options.idle_poll_interval = kMaxDuration;
    options.redis.connect_timeout = kMaxDuration;
    options.redis.command_timeout = kMaxDuration;
    CHECK(CheckServerOptions(options).ok());
    const milliseconds huge = milliseconds::max();
    const milliseconds over = kMaxDuration + milliseconds(1);
    const struct {
      milliseconds* field;
      milliseconds bad;
      const char* message;
    } cases[] = {
        {&options.shutdown_timeout, huge, "shutdown timeout must be from 0 to 86400 s"},
        {&options.heartbeat_ttl, over, "heartbeat ttl must be above 0 and at most 86400 s"},
        {&options.heartbeat_interval, huge, "heartbeat interval must be above 0"},
        {&options.janitor_interval, over, "janitor interval"},
        {&options.scheduled_poll_interval, milliseconds(0), "scheduled poll interval"},
        {&options.idle_poll_interval, huge, "idle poll interval must be from 0.01 s to 86400 s"},
        {&options.redis.connect_timeout, milliseconds(0), "Redis connect timeout"},
        {&options.redis.command_timeout, over, "Redis command timeout"},
    };
    for (const auto& c : cases) {
      milliseconds good = *c.field;
      *c.field = c.bad;
      CheckRejected(options, c.message);
      *c.field = good;
    }
    CHECK(CheckServerOptions(options).ok());
  }
  SUBCASE("counts that cannot be negative") {
    options.max_retries = -1;
    CheckRejected(options, "max retries");
    options.max_retries = 0;
    options.max_interruptions = -1;
    CheckRejected(options, "max interruptions");
    options.max_interruptions = 0;
    options.dead_set.max_jobs = -1;
    CheckRejected(options, "dead max jobs");
    options.dead_set.max_jobs = 0;
    options.dead_set.timeout = std::chrono::seconds(-1);
    CheckRejected(options, "dead timeout");
    options.dead_set.timeout = kMaxDeadTimeout;
    CHECK(CheckServerOptions(options).ok());
    options.dead_set.timeout = std::chrono::seconds::max();
    CheckRejected(options, "dead timeout");
  }
  SUBCASE("the prefix") {
    options.prefix = std::string(kMaxPrefixBytes, 'p');
    CHECK(CheckServerOptions(options).ok());
    options.prefix = "";
    CHECK(CheckServerOptions(options).ok());
    options.prefix = std::string(kMaxPrefixBytes + 1, 'p');
    CheckRejected(options, "prefix");
    options.prefix = "rq\n:";
    CheckRejected(options, "printable ASCII");
    options.prefix = "caf\xC3\xA9:";
    CheckRejected(options, "printable ASCII");
  }
  SUBCASE("the tag and the labels") {
    options.tag = std::string(kMaxTagBytes, 't');
    options.labels = std::vector<std::string>(kMaxLabels, std::string(kMaxTagBytes, 'l'));
    CHECK(CheckServerOptions(options).ok());
    options.tag += "t";
    CheckRejected(options, "the tag must be at most 256 bytes");
    options.tag = "t";
    options.labels.push_back("one-too-many");
    CheckRejected(options, "at most 100 labels, not 101");
    options.labels.pop_back();
    options.labels[3] += "l";
    CheckRejected(options, "a label must be at most 256 bytes");
  }
}

// --- ProcessorPool::Start when the system refuses a thread ---

namespace {

// The address space in use now (VmSize), in bytes.
rlim_t AddressSpaceInUse() {
  std::FILE* status = std::fopen("/proc/self/status", "re");
  REQUIRE(status != nullptr);
  char line[256];
  unsigned long long kib = 0;
  while (std::fgets(line, sizeof line, status) != nullptr) {
    if (std::sscanf(line, "VmSize: %llu kB", &kib) == 1) break;
  }
  std::fclose(status);
  REQUIRE(kib > 0);
  return static_cast<rlim_t>(kib) * 1024;
}

}  // namespace

TEST_CASE("a pool whose threads cannot all start returns an error and runs nothing") {
  ProcessorConfig config;
  config.threads = 200;
  config.queue_names = {"default"};
  config.log = std::make_shared<Logger>(LogLevel::kError, [](LogLevel, std::string_view) {});
  config.clock = SystemClock();
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // A sanitizer's runtime dies when its own mappings fail, before
  // pthread_create can report anything: only the successful start is
  // checked here.
  config.threads = 2;
  ProcessorPool pool(config, [] {});
  CHECK(pool.Start().ok());
#else
  // 200 thread stacks do not fit in 64 MiB more address space: the system
  // refuses a thread, as it does past ulimit -u or a cgroup's pids limit
  // (which do not bind root, who runs CI).
  ProcessorPool pool(config, [] {});
  rlimit saved;
  REQUIRE(getrlimit(RLIMIT_AS, &saved) == 0);
  rlimit tight = saved;
  tight.rlim_cur = AddressSpaceInUse() + (rlim_t{64} << 20);
  REQUIRE(setrlimit(RLIMIT_AS, &tight) == 0);
  Status started = pool.Start();
  REQUIRE(setrlimit(RLIMIT_AS, &saved) == 0);
  INFO(started.ToString());
  CHECK(started.IsIoError());
  CHECK(started.message().rfind("cannot start processor thread ", 0) == 0);
  CHECK(started.message().find(" of 200: ") != std::string::npos);
  // Nothing runs: a job submitted now stays where it was put.
  pool.SetLease(std::chrono::steady_clock::time_point::max());
  std::vector<FetchedJob> jobs(1);
  jobs[0].payload = R"({"class":"X","args":[],"jid":"j"})";
  pool.Submit(&jobs);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(pool.running() == 0);
  CHECK(pool.finished_total() == 0);
#endif
}

// --- Script calls: KEYS and ARGV in the order of each lua/*.lua header ---

namespace {

// 2023-11-14T23:59:59.75Z: the dated stat keys take the UTC date.
constexpr double kNow = 1700006399.75;
constexpr const char* kNowText = "1700006399.750000";
const DeadSetLimits kLimits{500, std::chrono::seconds(3600)};

}  // namespace

TEST_CASE("FetchCall: KEYS are (queue, working) pairs in order, ARGV[1] the max") {
  ScriptCall call = FetchCall({{"queue:a", "w:a"}, {"queue:b", "w:b"}}, 7);
  CHECK(call.script == ScriptId::kFetch);
  CHECK(call.keys == Strings{"queue:a", "w:a", "queue:b", "w:b"});
  CHECK(call.args == Strings{"7"});
  // With the keys of a keyspace, ARGV[2..3] gate sequences.
  Keys keys("rq:", "g");
  call = FetchCall({{"rq:{g}:queue:a", "w:a"}}, 7, &keys);
  CHECK(call.args == Strings{"7", "rq:{g}:", "rq:{g}:queue:"});
}

TEST_CASE("HeartbeatCall follows heartbeat.lua") {
  Keys keys("rq:");
  BeatFields fields;
  fields.ttl_millis = 30000;
  fields.registry_entry = R"({"identity":"h:1:x"})";
  fields.info = R"({"hostname":"h"})";
  fields.busy = 2;
  fields.now = kNow;
  fields.quiet = true;
  fields.rss_kb = 2048;
  fields.rtt_us = 350;
  fields.work = {{"t1", R"({"w":1})"}, {"t2", R"({"w":2})"}};
  ScriptCall call = HeartbeatCall(keys, "h:1:x", fields);
  CHECK(call.script == ScriptId::kHeartbeat);
  CHECK(call.keys == Strings{"rq:heartbeat:h:1:x", "rq:registry", "processes", "h:1:x",
                             "h:1:x:work", "h:1:x:workers", "h:1:x-signals"});
  CHECK(call.args == Strings{"h:1:x", "30000", R"({"identity":"h:1:x"})", R"({"hostname":"h"})",
                             "2", kNowText, "true", "2048", "350", "t1", R"({"w":1})", "t2",
                             R"({"w":2})"});

  fields.quiet = false;
  fields.work.clear();
  call = HeartbeatCall(keys, "h:1:x", fields);
  REQUIRE(call.args.size() == 9);
  CHECK(call.args[6] == "false");
}

TEST_CASE("ForgetCall lists one working list per queue after the six fixed KEYS") {
  Keys keys("rq:");
  ScriptCall call = ForgetCall(keys, "h:1:x", {"critical", "default"}, true);
  CHECK(call.script == ScriptId::kForget);
  CHECK(call.keys == Strings{"rq:heartbeat:h:1:x", "rq:registry", "processes", "h:1:x",
                             "h:1:x:work", "h:1:x:workers", "rq:working:h:1:x:critical",
                             "rq:working:h:1:x:default"});
  CHECK(call.args == Strings{"h:1:x", "1"});

  call = ForgetCall(keys, "h:1:x", {}, false);
  CHECK(call.keys.size() == 6);
  CHECK(call.args == Strings{"h:1:x", "0"});
}

TEST_CASE("FinishCall follows finish.lua for every mode, with dated stat keys") {
  const Strings stat_keys = {"stat:processed", "stat:processed:2023-11-14", "stat:failed",
                             "stat:failed:2023-11-14", "rq:stat:expired"};
  REQUIRE(UtcDate(kNow) == "2023-11-14");
  FinishedRun run;
  run.working_key = "rq:working:h:1:x:default";
  run.original = R"({"class":"A"})";
  run.updated = R"({"class":"A","retry_count":0})";
  auto keys_with = [&](const char* target) {
    Strings keys = {"rq:working:h:1:x:default", target};
    keys.insert(keys.end(), stat_keys.begin(), stat_keys.end());
    return keys;
  };

  SUBCASE("retry and snooze: ZADD retry or schedule at the score") {
    for (auto [mode, name, target] : {std::tuple{FinishMode::kRetry, "retry", "retry"},
                                      std::tuple{FinishMode::kSnooze, "snooze", "schedule"}}) {
      run.mode = mode;
      run.score = kNow + 16;
      ScriptCall call = FinishCall(Keys("rq:"), run, kNow, kLimits, Keys("rq:").WakeScheduled());
      CHECK(call.script == ScriptId::kFinish);
      CHECK(call.keys == keys_with(target));
      // ARGV[9]: the channel, not a key (PUBLISH only).
      CHECK(call.args == Strings{R"({"class":"A"})", R"({"class":"A","retry_count":0})",
                                 "1700006415.750000", name, kNowText, "500", "3600", "1",
                                 "rq:wake:scheduled", "", "", "rq:", "queue:", "rq:wake:queue:"});
      // No channel: ARGV[9] is "", and finish.lua publishes nothing.
      call = FinishCall(Keys("rq:"), run, kNow, kLimits);
      REQUIRE(call.args.size() == 14);
      CHECK(call.args[8] == "");
    }
  }
  SUBCASE("dead: the dead set, scored now") {
    run.mode = FinishMode::kDead;
    ScriptCall call = FinishCall(Keys("rq:"), run, kNow, kLimits);
    CHECK(call.keys == keys_with("dead"));
    REQUIRE(call.args.size() == 14);
    call.args[2] = "(unused)";  // the score is read in modes retry and snooze only
    // ARGV[12..14]: the sequence keys' prefix, the queues' and their
    // wake-up channels'.
    CHECK(call.args == Strings{R"({"class":"A"})", R"({"class":"A","retry_count":0})", "(unused)",
                               "dead", kNowText, "500", "3600", "1", "", "", "",
                               "rq:", "queue:", "rq:wake:queue:"});
  }
  SUBCASE("a record: its key last, its JSON and retention after the channel") {
    run.mode = FinishMode::kDone;
    run.counted = false;
    run.record_key = "rq:job:j1";
    run.record = R"({"state":"done"})";
    run.record_ttl_seconds = 86400;
    ScriptCall call = FinishCall(Keys("rq:"), run, kNow, kLimits);
    // A worker-counted success with a record takes the full form.
    Strings keys = keys_with("dead");
    keys.push_back("rq:job:j1");
    CHECK(call.keys == keys);
    REQUIRE(call.args.size() == 14);
    CHECK(call.args[7] == "0");
    CHECK(call.args[9] == R"({"state":"done"})");
    CHECK(call.args[10] == "86400");
  }
  SUBCASE("done, discard and expire name the dead set only as a key of their slot") {
    for (auto [mode, name] :
         {std::pair{FinishMode::kDone, "done"}, std::pair{FinishMode::kDiscard, "discard"},
          std::pair{FinishMode::kExpire, "expire"}}) {
      run.mode = mode;
      ScriptCall call = FinishCall(Keys("rq:"), run, kNow, kLimits);
      CHECK(call.keys == keys_with("dead"));
      REQUIRE(call.args.size() == 14);
      CHECK(call.args[3] == name);
    }
  }
  SUBCASE("uncounted: a payload that is not a job; resent: counted only if it moves") {
    run.mode = FinishMode::kDead;
    run.counted = false;
    CHECK(FinishCall(Keys("rq:"), run, kNow, kLimits).args[7] == "0");
    run.counted = true;
    run.resent_unconfirmed = true;
    CHECK(FinishCall(Keys("rq:"), run, kNow, kLimits).args[7] == "2");
  }
}

TEST_CASE("FinishCall dates the stat keys by UTC day, across midnight") {
  FinishedRun run;
  run.working_key = "w";
  run.original = "o";
  run.updated = "u";
  ScriptCall before = FinishCall(Keys("rq:"), run, 1700006399.999, kLimits);  // 23:59:59.999
  ScriptCall after = FinishCall(Keys("rq:"), run, 1700006400.0, kLimits);     // 00:00:00
  CHECK(before.keys[3] == "stat:processed:2023-11-14");
  CHECK(before.keys[5] == "stat:failed:2023-11-14");
  CHECK(after.keys[3] == "stat:processed:2023-11-15");
  CHECK(after.keys[5] == "stat:failed:2023-11-15");
}

TEST_CASE("RequeueCall follows requeue.lua in keep and interrupt modes") {
  Strings keys = {"rq:working:h:1:x:mail", "queue:mail", "dead", "queues"};
  // The listed payloads are a multiset: a duplicate stays.
  ScriptCall keep = RequeueCall(Keys("rq:"), "rq:working:h:1:x:mail", "mail", RequeueMode::kKeep, 3, kNow,
                                kLimits, {"p1", "p2", "p1"});
  CHECK(keep.script == ScriptId::kRequeue);
  CHECK(keep.keys == keys);
  CHECK(keep.args == Strings{"keep", "3", kNowText, "500", "3600", "mail",
                             "rq:", "queue:", "rq:wake:queue:", "p1", "p2", "p1"});

  ScriptCall interrupt = RequeueCall(Keys("rq:"), "rq:working:h:1:x:mail", "mail", RequeueMode::kInterrupt,
                                     -1, kNow, kLimits, {});
  CHECK(interrupt.keys == keys);
  CHECK(interrupt.args == Strings{"interrupt", "-1", kNowText, "500", "3600", "mail",
                                  "rq:", "queue:", "rq:wake:queue:"});
}

TEST_CASE("RecoverCall follows recover.lua") {
  Keys keys("rq:");
  RecoverBatch batch;
  batch.max_interruptions = 2;
  batch.limit = 100;
  batch.force = true;
  batch.dry_run = true;
  batch.offset = 300;
  ScriptCall call = RecoverCall(keys, "h:1:x", "mail", batch, kNow, kLimits);
  CHECK(call.script == ScriptId::kRecover);
  CHECK(call.keys == Strings{"rq:heartbeat:h:1:x", "rq:working:h:1:x:mail", "queue:mail", "dead",
                             "queues"});
  CHECK(call.args == Strings{"2", kNowText, "100", "1", "1", "500", "3600", "mail", "300",
                             "rq:", "queue:", "rq:wake:queue:"});

  call = RecoverCall(keys, "h:1:x", "mail", RecoverBatch(), kNow, kLimits);
  CHECK(call.args == Strings{"3", kNowText, "1000", "0", "0", "500", "3600", "mail", "0",
                             "rq:", "queue:", "rq:wake:queue:"});
}

TEST_CASE("PromoteCall gives each distinct queue one KEYS index, and 0 to a non-job") {
  ScriptCall call = PromoteCall(Keys("rq:"), "retry", kNow, kLimits, "rq:wake:queue:",
                                {{"a", "m1"}, {"b", "m2"}, {"a", "m3"}, {"", "not a job"}});
  CHECK(call.script == ScriptId::kPromote);
  // KEYS[4..]: the queues, each once, in first-use order.
  CHECK(call.keys == Strings{"retry", "queues", "dead", "queue:a", "queue:b"});
  CHECK(call.args == Strings{kNowText, "500", "3600",  // ARGV[1..3]
                             "rq:wake:queue:",         // ARGV[4]
                             "4", "a", "m1",           // ARGV[3j+2..3j+4]
                             "5", "b", "m2",           //
                             "4", "a", "m3",           //
                             "0", "", "not a job"});

  call = PromoteCall(Keys("rq:"), "schedule", kNow, kLimits, "", {});
  CHECK(call.keys == Strings{"schedule", "queues", "dead"});
  CHECK(call.args == Strings{kNowText, "500", "3600", ""});
}

TEST_CASE("a due member goes to the queue Sidekiq reads in it, or to dead when it is no job") {
  CHECK(DueJobQueue(R"({"class":"A","args":[],"queue":"mail"})") == "mail");
  CHECK(DueJobQueue(R"({"class":"A","args":[]})") == "default");
  CHECK(DueJobQueue(R"({"class":"A","args":[],"queue":""})") == "default");
  // A name given twice: its last value, as Ruby reads it.
  CHECK(DueJobQueue(R"({"class":"A","args":[],"queue":"a","queue":"b"})") == "b");
  // Not a job a worker could run: "" (the dead set).
  CHECK(DueJobQueue(std::string(R"({"class":"A","args":[]})") + '\0' + "junk") == "");
  CHECK(DueJobQueue(R"({"class":"A","args":[]} xyz)") == "");
  CHECK(DueJobQueue(R"({"queue":"mail"})") == "");
  CHECK(DueJobQueue("not json") == "");
  // Nested far deeper than a recursive parser's stack allows.
  CHECK(DueJobQueue(R"({"class":"A","args":)" + std::string(1000000, '[') +
                    std::string(1000000, ']') + "}") == "");
}

TEST_CASE("RetryNowCall gives each distinct queue one KEYS index, and 0 to a non-job") {
  ScriptCall call = RetryNowCall(Keys("rq:"), "dead", kNow, true,
                                 {{"a", "e1"}, {"b", "e2"}, {"", "junk"}, {"b", "e3"}});
  CHECK(call.script == ScriptId::kRetryNow);
  // KEYS[3..]: the queues, each once, in first-use order.
  CHECK(call.keys == Strings{"dead", "queues", "queue:a", "queue:b"});
  CHECK(call.args == Strings{kNowText, "1",  // ARGV[1..2]
                             "3", "a", "e1",  // ARGV[3j..3j+2]
                             "4", "b", "e2",  //
                             "0", "", "junk",  //
                             "4", "b", "e3"});

  call = RetryNowCall(Keys("rq:"), "schedule", kNow, false, {{"q", "e"}});
  CHECK(call.keys == Strings{"schedule", "queues", "queue:q"});
  CHECK(call.args == Strings{kNowText, "0", "3", "q", "e"});
}

TEST_CASE("KillCall follows kill.lua") {
  ScriptCall call = KillCall(Keys("rq:"), kNow, kLimits, {"e1", "e2"});
  CHECK(call.script == ScriptId::kKill);
  CHECK(call.keys == Strings{"retry", "dead"});
  CHECK(call.args ==
        Strings{kNowText, "500", "3600", "rq:", "queue:", "rq:wake:queue:", "e1", "e2"});
}

TEST_CASE("ReadJobFlow reads a sequence key and the jid as the scripts do") {
  auto flow = [](const char* json) {
    rapidjson::Document doc;
    doc.Parse(json);
    REQUIRE(doc.IsObject());
    return reliableq::server::ReadJobFlow(doc);
  };
  auto plain = flow(R"({"class":"A","jid":"j1"})");
  CHECK_FALSE(plain.sequence);
  CHECK(plain.sequence_key.empty());
  auto keyed = flow(R"({"class":"A","jid":"j1","sequence":"cus_42"})");
  CHECK(keyed.sequence);
  CHECK(keyed.sequence_key == "cus_42");
  CHECK(keyed.jid == "j1");
  CHECK(flow(R"({"jid":"j","sequence":42})").sequence_key == "42");
  CHECK(flow(R"({"jid":"j","sequence":42.0})").sequence_key == "42");
  CHECK(flow(R"({"jid":"j","sequence":-7})").sequence_key == "-7");
  // Beyond 2^53 Lua's doubles round: such a key is read by neither side.
  CHECK(flow(R"({"jid":"j","sequence":9007199254740993})").sequence_key.empty());
  CHECK(flow(R"({"jid":"j","sequence":9007199254740992})").sequence_key.empty());
  CHECK(flow(R"({"jid":"j","sequence":9007199254740991})").sequence_key == "9007199254740991");
  CHECK(flow(R"({"jid":"j","sequence":1.5})").sequence_key.empty());
  CHECK(flow(R"({"jid":"j","sequence":true})").sequence_key.empty());
  // Duplicate members: the last one, as cjson keeps it.
  auto twice = flow(R"({"jid":"first","sequence":"a","jid":"last","sequence":"b"})");
  CHECK(twice.jid == "last");
  CHECK(twice.sequence_key == "b");
}
