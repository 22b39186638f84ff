#include "reliableq/client.h"

#include <signal.h>
#include <sys/types.h>

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "codec/job_codec.h"
#include "support/testutil.h"

namespace reliableq {

using namespace reliableq::codec;
namespace {

using testing::AcceptedJid;
using testing::AcceptedJids;
using testing::NowSeconds;
using testing::RedisFixture;

std::unique_ptr<Client> OpenClient(const RedisOptions& options, ClientOptions client_options = {}) {
  auto client = Client::Open(options, std::move(client_options));
  REQUIRE_MESSAGE(client.ok(), client.status().ToString());
  return std::move(client.value());
}

Job MakeJob(std::string job_class = "HardJob", std::string args = "[]",
            std::string queue = "default") {
  Job job;
  job.job_class = std::move(job_class);
  job.args = std::move(args);
  job.queue = std::move(queue);
  return job;
}

rapidjson::Document Parse(const std::string& json) {
  auto decoded = DecodeJob(json);
  REQUIRE_MESSAGE(decoded.ok(), json);
  // A copy: the decoded document lives in its DecodedJob's pool.
  rapidjson::Document document;
  document.CopyFrom(decoded->document, document.GetAllocator());
  return document;
}

// The text of a top-level number field, as stored.
std::string NumberText(const std::string& json, const std::string& field) {
  std::string key = "\"" + field + "\":";
  size_t start = json.find(key);
  REQUIRE_MESSAGE(start != std::string::npos, field);
  start += key.size();
  return json.substr(start, json.find_first_of(",}", start) - start);
}

// How often Redis ran `command` since the last CONFIG RESETSTAT.
long long Calls(RedisFixture& fixture, const std::string& command) {
  auto reply = fixture.redis().Command({"INFO", "commandstats"});
  REQUIRE(reply.ok());
  std::string info((*reply)->str, (*reply)->len);
  std::string key = "cmdstat_" + command + ":calls=";
  size_t at = info.find(key);
  if (at == std::string::npos) return 0;
  return std::atoll(info.c_str() + at + key.size());
}

TEST_CASE_FIXTURE(RedisFixture, "Push writes Sidekiq's job JSON into its queue") {
  auto client = OpenClient(options());
  double before = NowSeconds();
  auto pushed = client->Push(MakeJob("HardJob", R"([1, "bob"])"));
  double after = NowSeconds();
  REQUIRE(pushed.ok());
  CHECK(pushed->outcome == PushOutcome::kAccepted);
  CHECK(pushed->stored());
  CHECK(pushed->reason.ok());
  CHECK(pushed->replicas == 0);
  const std::string& jid = pushed->jid;
  CHECK(jid.size() == 24);

  CHECK(SMembers("queues") == std::vector<std::string>{"default"});
  std::vector<std::string> list = LRange("queue:default");
  REQUIRE(list.size() == 1);
  const std::string& json = list[0];
  std::string created = NumberText(json, "created_at");
  CHECK(json == R"({"class":"HardJob","args":[1,"bob"],"queue":"default","retry":true,"jid":")" +
                    jid + R"(","created_at":)" + created + R"(,"enqueued_at":)" + created + "}");
  CHECK(created.find('.') != std::string::npos);
  double t = std::strtod(created.c_str(), nullptr);
  CHECK(t >= before - 1e-6);
  CHECK(t <= after + 1e-6);
  CHECK(Integer({"DBSIZE"}) == 2);
}

TEST_CASE_FIXTURE(RedisFixture, "Push keeps a given jid, the retry setting and extra fields") {
  auto client = OpenClient(options());
  Job job = MakeJob("Mailer", R"([{"to":"a@b.c"}])", "mail");
  job.jid = "my-own-jid";
  job.retry = Retry::Times(2);
  job.extra = R"({"backtrace":true,"tags":["x"]})";
  CHECK(AcceptedJid(client->Push(job)) == "my-own-jid");
  std::vector<std::string> list = LRange("queue:mail");
  REQUIRE(list.size() == 1);
  std::string created = NumberText(list[0], "created_at");
  CHECK(list[0] == R"({"class":"Mailer","args":[{"to":"a@b.c"}],"queue":"mail","retry":2,)"
                   R"("jid":"my-own-jid","created_at":)" +
                       created + R"(,"enqueued_at":)" + created +
                       R"(,"backtrace":true,"tags":["x"]})");
  CHECK(SMembers("queues") == std::vector<std::string>{"mail"});
}

TEST_CASE_FIXTURE(RedisFixture, "pushes go on the left: the first pushed is taken first") {
  auto client = OpenClient(options());
  std::string first = AcceptedJid(client->Push(MakeJob("A")));
  std::string second = AcceptedJid(client->Push(MakeJob("B")));
  AcceptedJid(client->Push(MakeJob("C", "[]", "low")));
  std::vector<std::string> list = LRange("queue:default");
  REQUIRE(list.size() == 2);
  CHECK(std::string(Parse(list[1])["jid"].GetString()) == first);  // index -1
  CHECK(std::string(Parse(list[0])["jid"].GetString()) == second);
  CHECK(SMembers("queues") == std::vector<std::string>{"default", "low"});
}

TEST_CASE_FIXTURE(RedisFixture, "PushBulk of 2,500 jobs sends three script calls") {
  auto client = OpenClient(options());
  std::vector<Job> jobs;
  for (int i = 0; i < 2500; ++i) jobs.push_back(MakeJob("Bulk", "[" + std::to_string(i) + "]"));
  Run({"CONFIG", "RESETSTAT"});
  auto results = client->PushBulk(jobs);
  REQUIRE(results.ok());
  CHECK(Calls(*this, "exec") == 0);
  CHECK(Calls(*this, "lpush") == 3);
  CHECK(Calls(*this, "sadd") == 3);
  // One accepted result per job, in input order.
  REQUIRE(results->size() == 2500);
  std::vector<std::string> jids = AcceptedJids(results);
  for (const PushResult& result : *results) CHECK(result.reason.ok());
  CHECK(std::set<std::string>(jids.begin(), jids.end()).size() == 2500);

  std::vector<std::string> list = LRange("queue:default");
  REQUIRE(list.size() == 2500);
  // Input order from the right: job i is at index -1 - i.
  for (int i : {0, 1, 999, 1000, 1001, 2499}) {
    rapidjson::Document doc = Parse(list[2499 - i]);
    CHECK(doc["args"][0].GetInt() == i);
    CHECK(std::string(doc["jid"].GetString()) == jids[i]);
    CHECK(doc["enqueued_at"].IsDouble());
  }
  CHECK(SMembers("queues") == std::vector<std::string>{"default"});
}

TEST_CASE_FIXTURE(RedisFixture, "PushBulk groups each batch by queue and keeps input order") {
  auto client = OpenClient(options());
  std::vector<Job> jobs = {MakeJob("A", "[0]", "a"), MakeJob("B", "[1]", "b"),
                           MakeJob("A", "[2]", "a"), MakeJob("B", "[3]", "b"),
                           MakeJob("C", "[4]", "c")};
  Run({"CONFIG", "RESETSTAT"});
  CHECK(AcceptedJids(client->PushBulk(jobs)).size() == 5);
  CHECK(Calls(*this, "sadd") == 1);
  CHECK(Calls(*this, "lpush") == 3);
  CHECK(SMembers("queues") == std::vector<std::string>{"a", "b", "c"});
  auto args_of = [&](const std::string& key) {
    std::vector<int> out;
    for (const std::string& json : LRange(key)) out.push_back(Parse(json)["args"][0].GetInt());
    return out;
  };
  CHECK(args_of("queue:a") == std::vector<int>{2, 0});
  CHECK(args_of("queue:b") == std::vector<int>{3, 1});
  CHECK(args_of("queue:c") == std::vector<int>{4});
  // An empty batch writes nothing and succeeds.
  auto none = client->PushBulk({});
  REQUIRE(none.ok());
  CHECK(none->empty());
}

TEST_CASE_FIXTURE(RedisFixture, "PushAt in the future adds the job to the schedule") {
  auto client = OpenClient(options());
  double at = NowSeconds() + 3600.25;
  std::string jid = AcceptedJid(client->PushAt(MakeJob("Later", "[7]"), at));
  auto scheduled = ZRangeWithScores("schedule");
  REQUIRE(scheduled.size() == 1);
  CHECK(std::fabs(scheduled[0].second - at) < 1e-5);
  const std::string& json = scheduled[0].first;
  std::string created = NumberText(json, "created_at");
  CHECK(json == R"({"class":"Later","args":[7],"queue":"default","retry":true,"jid":")" + jid +
                    R"(","created_at":)" + created + "}");
  // Nothing is enqueued or listed yet.
  CHECK(Integer({"DBSIZE"}) == 1);
}

TEST_CASE_FIXTURE(RedisFixture, "PushAt a time that has passed pushes now") {
  auto client = OpenClient(options());
  std::string jid = AcceptedJid(client->PushAt(MakeJob(), NowSeconds() - 10));
  CHECK(!Exists("schedule"));
  std::vector<std::string> list = LRange("queue:default");
  REQUIRE(list.size() == 1);
  CHECK(std::string(Parse(list[0])["jid"].GetString()) == jid);
  CHECK(Parse(list[0]).HasMember("enqueued_at"));
}

TEST_CASE_FIXTURE(RedisFixture, "PushIn schedules relative to now, or pushes now") {
  auto client = OpenClient(options());
  double before = NowSeconds();
  AcceptedJid(client->PushIn(MakeJob("Later"), 90));
  double after = NowSeconds();
  auto scheduled = ZRangeWithScores("schedule");
  REQUIRE(scheduled.size() == 1);
  CHECK(scheduled[0].second >= before + 90 - 1e-5);
  CHECK(scheduled[0].second <= after + 90 + 1e-5);
  CHECK(!Parse(scheduled[0].first).HasMember("enqueued_at"));

  AcceptedJid(client->PushIn(MakeJob("Now"), 0));
  CHECK(LRange("queue:default").size() == 1);
  CHECK(ZRange("schedule").size() == 1);
}

TEST_CASE_FIXTURE(RedisFixture, "invalid input is refused and writes nothing") {
  auto client = OpenClient(options());
  CHECK(client->Push(MakeJob("A", "[1,")).status().IsInvalidArgument());
  CHECK(client->Push(MakeJob("", "[]")).status().IsInvalidArgument());
  CHECK(client->Push(MakeJob("A", "[]", "")).status().IsInvalidArgument());
  Job reserved = MakeJob();
  reserved.extra = R"({"enqueued_at":1})";
  CHECK(client->Push(reserved).status().IsInvalidArgument());
  CHECK(client->PushAt(MakeJob("A", "{}"), NowSeconds() + 60).status().IsInvalidArgument());
  CHECK(client->PushAt(MakeJob(), std::nan("")).status().IsInvalidArgument());
  CHECK(client->PushIn(MakeJob(), INFINITY).status().IsInvalidArgument());

  // One bad job among many: none of them is written.
  std::vector<Job> jobs(1500, MakeJob("Bulk", "[1]"));
  jobs[1400].args = "not json";
  auto bulk = client->PushBulk(jobs);
  CHECK(bulk.status().IsInvalidArgument());
  CHECK(bulk.status().message().find("job 1400") != std::string::npos);
  CHECK(Integer({"DBSIZE"}) == 0);
}

TEST_CASE_FIXTURE(RedisFixture, "a push to a queue key of the wrong type writes nothing") {
  auto client = OpenClient(options());
  Run({"SET", "queue:default", "not a list"});
  auto pushed = client->Push(MakeJob());
  REQUIRE(pushed.ok());
  CHECK(pushed->outcome == PushOutcome::kRefused);
  CHECK_FALSE(pushed->stored());
  CHECK(pushed->jid.size() == 24);
  CHECK(pushed->reason.IsScript());
  CHECK(pushed->reason.message().find("WRONGTYPE push: key queue:default holds a string") !=
        std::string::npos);
  CHECK(Get("queue:default") == "not a list");
  CHECK_FALSE(Exists("queues"));

  // A scheduled push Redis refuses is refused too.
  Run({"SET", "schedule", "not a zset"});
  auto scheduled = client->PushIn(MakeJob(), 60);
  REQUIRE(scheduled.ok());
  CHECK(scheduled->outcome == PushOutcome::kRefused);
  CHECK(scheduled->reason.IsScript());
  CHECK(scheduled->reason.message().find("WRONGTYPE") != std::string::npos);
  CHECK(Get("schedule") == "not a zset");
}

TEST_CASE_FIXTURE(RedisFixture, "a push refused because of `queues` enqueues nothing") {
  // In a MULTI, Redis runs the LPUSH although the SADD before it fails: the
  // push was reported as failed, a worker ran the job, and a caller who
  // retried ran it twice.
  auto client = OpenClient(options());
  Run({"SET", "queues", "not a set"});
  Job job = MakeJob();
  job.jid = "refused-jid";
  auto pushed = client->Push(job);
  REQUIRE(pushed.ok());
  CHECK(pushed->outcome == PushOutcome::kRefused);
  CHECK(pushed->jid == "refused-jid");
  CHECK(pushed->reason.IsScript());
  CHECK(pushed->reason.message().find("key queues holds a string, not a set") != std::string::npos);
  CHECK_FALSE(Exists("queue:default"));
  std::vector<Job> jobs = {MakeJob("A", "[]", "a"), MakeJob("B", "[]", "b")};
  auto results = client->PushBulk(jobs);
  REQUIRE(results.ok());
  REQUIRE(results->size() == 2);
  for (const PushResult& result : *results) {
    CHECK(result.outcome == PushOutcome::kRefused);
    CHECK(result.reason.IsScript());
    CHECK(result.reason.message().find("key queues holds a string") != std::string::npos);
  }
  CHECK_FALSE(Exists("queue:a"));
  CHECK_FALSE(Exists("queue:b"));
  CHECK(Get("queues") == "not a set");
}

TEST_CASE_FIXTURE(RedisFixture,
                  "after a refused batch, PushBulk sends no further batch and says why") {
  auto client = OpenClient(options());
  Run({"SET", "queue:broken", "not a list"});
  // Batch 1: 1,000 jobs to `fine`; batch 2: 1,000 to `broken`, which Redis
  // refuses; batch 3: 500 to `fine` again, never sent.
  std::vector<Job> jobs;
  for (int i = 0; i < 1000; ++i) jobs.push_back(MakeJob("A", "[1]", "fine"));
  for (int i = 0; i < 1000; ++i) jobs.push_back(MakeJob("A", "[2]", "broken"));
  for (int i = 0; i < 500; ++i) jobs.push_back(MakeJob("A", "[3]", "fine"));
  Run({"CONFIG", "RESETSTAT"});
  auto results = client->PushBulk(jobs);
  REQUIRE(results.ok());
  REQUIRE(results->size() == 2500);
  for (size_t i = 0; i < 1000; ++i) {
    CHECK((*results)[i].outcome == PushOutcome::kAccepted);
  }
  for (size_t i = 1000; i < 2000; ++i) {
    const PushResult& result = (*results)[i];
    CHECK(result.outcome == PushOutcome::kRefused);
    CHECK(result.reason.IsScript());
    CHECK(result.reason.message().find("WRONGTYPE push: key queue:broken holds a string") !=
          std::string::npos);
    CHECK(result.reason.message().find("not sent") == std::string::npos);
  }
  for (size_t i = 2000; i < 2500; ++i) {
    const PushResult& result = (*results)[i];
    CHECK(result.outcome == PushOutcome::kRefused);
    CHECK(result.reason.IsScript());  // the earlier batch's code
    CHECK(result.reason.message().rfind("not sent: an earlier batch was refused: ", 0) == 0);
    CHECK(result.reason.message().find("queue:broken holds a string") != std::string::npos);
  }
  // Every result carries its own job's jid, the refused ones' too.
  std::set<std::string> jids;
  for (const PushResult& result : *results) jids.insert(result.jid);
  CHECK(jids.size() == 2500);
  CHECK(jids.count("") == 0);

  // Only batch 1 wrote: batch 2 wrote nothing, batch 3 was never sent.
  CHECK(Calls(*this, "sadd") == 1);
  CHECK(Calls(*this, "lpush") == 1);
  std::vector<std::string> fine = LRange("queue:fine");
  REQUIRE(fine.size() == 1000);
  for (const std::string& json : fine) CHECK(Parse(json)["args"][0].GetInt() == 1);
  CHECK(Get("queue:broken") == "not a list");
}

TEST_CASE_FIXTURE(RedisFixture, "one client pushes from many threads at once") {
  auto client = OpenClient(options());
  constexpr int kThreads = 8, kPerThread = 500;
  std::vector<std::vector<std::string>> jids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        auto pushed = client->Push(MakeJob("T", "[" + std::to_string(t) + "]"));
        if (pushed.ok() && pushed->outcome == PushOutcome::kAccepted) {
          jids[t].push_back(pushed->jid);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::set<std::string> returned;
  for (const auto& list : jids) {
    CHECK(list.size() == kPerThread);
    returned.insert(list.begin(), list.end());
  }
  CHECK(returned.size() == kThreads * kPerThread);
  std::vector<std::string> stored = LRange("queue:default");
  REQUIRE(stored.size() == kThreads * kPerThread);
  std::set<std::string> stored_jids;
  for (const std::string& json : stored) stored_jids.insert(Parse(json)["jid"].GetString());
  CHECK(stored_jids == returned);
}

// A field of INFO `section`, as a number.
long long InfoField(redis::Connection& connection, const std::string& section,
                    const std::string& field) {
  auto reply = connection.Command({"INFO", section});
  REQUIRE(reply.ok());
  std::string info((*reply)->str, (*reply)->len);
  size_t at = info.find("\r\n" + field + ":");
  REQUIRE_MESSAGE(at != std::string::npos, field);
  return std::atoll(info.c_str() + at + field.size() + 3);
}

TEST_CASE("pushes made while a round trip is under way share the next one") {
  // Redis stops (SIGSTOP) with one push written; the pushes of seven more
  // threads queue up behind it meanwhile. Once Redis runs again, they all go
  // in one write: Redis reads the client's socket twice (the first push,
  // then the seven), where one round trip per push would read it eight times.
  testing::RedisServer server;
  auto client = OpenClient(server.Options());
  AcceptedJid(client->Push(MakeJob("Warm", "[]", "warm")));  // loads push.lua
  auto probe = redis::Connection::Open(server.Options());
  REQUIRE(probe.ok());
  long long reads_before = InfoField(**probe, "stats", "total_reads_processed");

  struct Resume {
    pid_t pid;
    ~Resume() { kill(pid, SIGCONT); }
  } resume{server.pid()};
  REQUIRE(kill(server.pid(), SIGSTOP) == 0);
  constexpr int kThreads = 8;
  std::vector<Result<PushResult>> results(kThreads, Status::Timeout("not run"));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      results[t] = client->Push(MakeJob("T", "[" + std::to_string(t) + "]"));
    });
  }
  // Every thread has queued its push long before this (the command timeout
  // is 5 s, far longer).
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  REQUIRE(kill(server.pid(), SIGCONT) == 0);
  for (std::thread& thread : threads) thread.join();

  std::set<std::string> jids;
  for (const auto& result : results) jids.insert(AcceptedJid(result));
  CHECK(jids.size() == kThreads);
  // Reads: the first push, the other seven, and the probe's INFO.
  long long reads = InfoField(**probe, "stats", "total_reads_processed") - reads_before;
  CHECK(reads <= 3);
  auto stored = (*probe)->Command({"LLEN", "queue:default"});
  REQUIRE(stored.ok());
  CHECK((*stored)->integer == kThreads);
}

TEST_CASE("a round trip cut short: pushes written whole are not confirmed, the rest refused") {
  // Redis stops (SIGSTOP). W's push is written and gets no reply; while it
  // waits, A (small) and B (32 MB) queue up. When W's wait times out, the
  // next round trip writes A whole on a new connection, and cannot finish
  // writing B. Once Redis runs again it runs what it read whole: W and A.
  testing::RedisServer server;
  RedisOptions redis_options = server.Options();
  redis_options.command_timeout = std::chrono::milliseconds(2000);
  auto client = OpenClient(redis_options);
  AcceptedJid(client->Push(MakeJob("Warm", "[]", "warm")));
  struct Resume {
    pid_t pid;
    ~Resume() { kill(pid, SIGCONT); }
  } resume{server.pid()};
  REQUIRE(kill(server.pid(), SIGSTOP) == 0);
  Result<PushResult> w = Status::Timeout("not run"), a = w, b = w;
  std::thread tw([&] { w = client->Push(MakeJob("W")); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::thread ta([&] { a = client->Push(MakeJob("A")); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::thread tb([&] { b = client->Push(MakeJob("B", "[\"" + std::string(32 << 20, 'x') + "\"]")); });
  tw.join();
  ta.join();
  tb.join();
  REQUIRE(kill(server.pid(), SIGCONT) == 0);
  REQUIRE(w.ok());
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(w->outcome == PushOutcome::kNotConfirmed);
  CHECK(a->outcome == PushOutcome::kNotConfirmed);
  CHECK(b->outcome == PushOutcome::kRefused);
  CHECK(w->reason.IsTimeout());
  CHECK(a->reason.IsTimeout());
  CHECK(b->reason.IsTimeout());

  auto reader = redis::Connection::Open(server.Options());
  REQUIRE(reader.ok());
  auto classes = [&] {
    auto reply = (*reader)->Command({"LRANGE", "queue:default", "0", "-1"});
    REQUIRE(reply.ok());
    std::set<std::string> out;
    for (size_t i = 0; i < (*reply)->elements; ++i) {
      const redisReply* element = (*reply)->element[i];
      out.insert(Parse(std::string(element->str, element->len))["class"].GetString());
    }
    return out;
  };
  CHECK(testing::WaitUntil([&] { return classes().size() == 2; }));
  CHECK(classes() == std::set<std::string>{"A", "W"});
}

TEST_CASE_FIXTURE(RedisFixture, "pushes that meet a flushed script cache load it and run once") {
  auto client = OpenClient(options());
  AcceptedJid(client->Push(MakeJob()));
  AcceptedJid(client->PushIn(MakeJob(), 60));
  Run({"SCRIPT", "FLUSH"});
  constexpr int kThreads = 6, kPerThread = 50;
  std::vector<std::thread> threads;
  std::vector<int> accepted(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        auto pushed = t % 2 == 0 ? client->Push(MakeJob()) : client->PushIn(MakeJob(), 60);
        if (pushed.ok() && pushed->outcome == PushOutcome::kAccepted) ++accepted[t];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) CHECK(accepted[t] == kPerThread);
  CHECK(LRange("queue:default").size() == 1 + kThreads / 2 * kPerThread);
  CHECK(ZRange("schedule").size() == 1 + kThreads / 2 * kPerThread);
}

TEST_CASE("a push whose write could not finish is refused: Redis never read it whole") {
  testing::RedisServer server;
  RedisOptions redis_options = server.Options();
  redis_options.command_timeout = std::chrono::milliseconds(300);
  auto client = OpenClient(redis_options);
  AcceptedJid(client->Push(MakeJob("Warm", "[]", "warm")));
  struct Resume {
    pid_t pid;
    ~Resume() { kill(pid, SIGCONT); }
  } resume{server.pid()};
  REQUIRE(kill(server.pid(), SIGSTOP) == 0);
  // 64 MB of args: more than the socket buffers hold while Redis is stopped.
  auto pushed = client->Push(MakeJob("Big", "[\"" + std::string(64 << 20, 'x') + "\"]"));
  REQUIRE(kill(server.pid(), SIGCONT) == 0);
  REQUIRE(pushed.ok());
  CHECK(pushed->outcome == PushOutcome::kRefused);
  CHECK(pushed->reason.IsTimeout());
  // The next push reconnects; the cut-short one was never run.
  AcceptedJid(client->Push(MakeJob("After")));
  auto reader = redis::Connection::Open(server.Options());
  REQUIRE(reader.ok());
  auto length = (*reader)->Command({"LLEN", "queue:default"});
  REQUIRE(length.ok());
  CHECK((*length)->integer == 1);
}

TEST_CASE_FIXTURE(RedisFixture, "a push a client middleware stops is refused with kRefused") {
  ClientOptions client_options;
  client_options.middleware.push_back([](rapidjson::Document& job) {
    if (std::string(job["class"].GetString()) == "Renamed") {
      job["jid"].SetString("renamed-jid", job.GetAllocator());
    }
    return true;
  });
  client_options.middleware.push_back([](rapidjson::Document& job) {
    std::string job_class = job["class"].GetString();
    return job_class != "Stopped" && job_class != "Renamed";
  });
  auto client = OpenClient(options(), std::move(client_options));

  auto check_stopped = [](const Result<PushResult>& pushed) {
    REQUIRE(pushed.ok());
    CHECK(pushed->outcome == PushOutcome::kRefused);
    CHECK_FALSE(pushed->stored());
    CHECK(pushed->reason.IsRefused());
    CHECK(pushed->reason.message() == "stopped by client middleware");
    return pushed->jid;
  };
  // The jid the job would have had: made up, given, or as a middleware left it.
  CHECK(check_stopped(client->Push(MakeJob("Stopped"))).size() == 24);
  Job given = MakeJob("Stopped");
  given.jid = "given-jid";
  CHECK(check_stopped(client->PushIn(given, 60)) == "given-jid");
  CHECK(check_stopped(client->PushAt(MakeJob("Renamed"), NowSeconds() - 1)) == "renamed-jid");
  CHECK(Integer({"DBSIZE"}) == 0);

  // In a bulk push, only the stopped job is refused.
  std::vector<Job> jobs = {MakeJob("A", "[0]"), MakeJob("Stopped", "[1]"), MakeJob("B", "[2]")};
  auto results = client->PushBulk(jobs);
  REQUIRE(results.ok());
  REQUIRE(results->size() == 3);
  CHECK((*results)[0].outcome == PushOutcome::kAccepted);
  CHECK((*results)[1].outcome == PushOutcome::kRefused);
  CHECK((*results)[1].reason.IsRefused());
  CHECK((*results)[1].jid.size() == 24);
  CHECK((*results)[2].outcome == PushOutcome::kAccepted);
  std::vector<std::string> list = LRange("queue:default");
  REQUIRE(list.size() == 2);
  CHECK(std::string(Parse(list[1])["jid"].GetString()) == (*results)[0].jid);
  CHECK(std::string(Parse(list[0])["jid"].GetString()) == (*results)[2].jid);
}

TEST_CASE("a push when Redis cannot be reached is refused with kIoError") {
  auto server = std::make_unique<testing::RedisServer>();
  const std::string socket = server->socket_path();
  auto client = OpenClient(server->Options());
  AcceptedJid(client->Push(MakeJob()));
  server.reset();  // stopped; its socket is gone

  // The first push meets the connection the server closed: its write fails
  // before Redis could read the command, but the client cannot yet tell a
  // failed write from a lost reply, so it may say "not confirmed" (the safe
  // side). Either way it is not stored.
  auto first = client->Push(MakeJob());
  REQUIRE(first.ok());
  CHECK_FALSE(first->stored());
  CHECK(first->outcome != PushOutcome::kAccepted);

  // The next push cannot connect, before anything is sent: refused.
  auto start = std::chrono::steady_clock::now();
  Job job = MakeJob();
  job.jid = "unreachable-jid";
  auto pushed = client->Push(job);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
  REQUIRE(pushed.ok());
  CHECK(pushed->outcome == PushOutcome::kRefused);
  CHECK(pushed->jid == "unreachable-jid");
  CHECK(pushed->reason.IsIoError());
  CHECK(pushed->reason.message().find(socket) != std::string::npos);

  auto scheduled = client->PushIn(MakeJob(), 60);
  REQUIRE(scheduled.ok());
  CHECK(scheduled->outcome == PushOutcome::kRefused);
  CHECK(scheduled->reason.IsIoError());

  // A bulk push: the first batch is refused, the second not sent.
  std::vector<Job> jobs(1500, MakeJob());
  auto results = client->PushBulk(jobs);
  REQUIRE(results.ok());
  REQUIRE(results->size() == 1500);
  CHECK((*results)[0].outcome == PushOutcome::kRefused);
  CHECK((*results)[0].reason.IsIoError());
  CHECK((*results)[999].reason.message() == (*results)[0].reason.message());
  CHECK((*results)[1000].outcome == PushOutcome::kRefused);
  CHECK((*results)[1000].reason.IsIoError());
  CHECK((*results)[1499].reason.message() ==
        "not sent: an earlier batch was refused: " + (*results)[0].reason.message());
}

TEST_CASE("a push whose reply is lost is not confirmed, though it may be stored") {
  testing::RedisServer server;
  RedisOptions redis_options = server.Options();
  redis_options.command_timeout = std::chrono::milliseconds(300);
  auto client = OpenClient(redis_options);
  // Loads push.lua, so that the push below is a single EVALSHA that Redis
  // can run once it reads it.
  AcceptedJid(client->Push(MakeJob("Warm", "[]", "warm")));
  auto reader = redis::Connection::Open(server.Options());
  REQUIRE(reader.ok());
  auto queued = [&]() {
    auto reply = (*reader)->Command({"LRANGE", "queue:default", "0", "-1"});
    REQUIRE(reply.ok());
    std::vector<std::string> jids;
    for (size_t i = 0; i < (*reply)->elements; ++i) {
      const redisReply* element = (*reply)->element[i];
      jids.push_back(Parse(std::string(element->str, element->len))["jid"].GetString());
    }
    return jids;
  };

  // Redis stops answering (SIGSTOP): the push is written to its socket, and
  // no reply comes within the command timeout.
  struct Resume {
    pid_t pid;
    ~Resume() { kill(pid, SIGCONT); }
  } resume{server.pid()};
  REQUIRE(kill(server.pid(), SIGSTOP) == 0);
  auto pushed = client->Push(MakeJob("Lost", "[1]"));
  REQUIRE(kill(server.pid(), SIGCONT) == 0);
  REQUIRE(pushed.ok());
  CHECK(pushed->outcome == PushOutcome::kNotConfirmed);
  CHECK_FALSE(pushed->stored());
  CHECK(pushed->reason.IsTimeout());
  REQUIRE(pushed->jid.size() == 24);

  // Redis reads the push once it runs again: the job is stored although the
  // outcome could not say so. That is the case the outcome exists for.
  CHECK(testing::WaitUntil([&] { return queued().size() == 1; }));
  CHECK(queued() == std::vector<std::string>{pushed->jid});

  // Pushing it again under the same jid: at worst the same job twice, never
  // two different jobs.
  Job again = MakeJob("Lost", "[1]");
  again.jid = pushed->jid;
  CHECK(AcceptedJid(client->Push(again)) == pushed->jid);
  CHECK(queued() == std::vector<std::string>{pushed->jid, pushed->jid});
}

TEST_CASE("PushOutcomeName names every outcome, and stored() says which are stored") {
  CHECK(std::string(PushOutcomeName(PushOutcome::kAccepted)) == "accepted");
  CHECK(std::string(PushOutcomeName(PushOutcome::kReplicated)) == "replicated");
  CHECK(std::string(PushOutcomeName(PushOutcome::kNotConfirmed)) == "not confirmed");
  CHECK(std::string(PushOutcomeName(PushOutcome::kSpooled)) == "spooled");
  CHECK(std::string(PushOutcomeName(PushOutcome::kRefused)) == "refused");

  PushResult result;
  CHECK(result.outcome == PushOutcome::kRefused);
  CHECK_FALSE(result.stored());
  for (PushOutcome stored :
       {PushOutcome::kAccepted, PushOutcome::kReplicated, PushOutcome::kSpooled}) {
    result.outcome = stored;
    CHECK(result.stored());
  }
  result.outcome = PushOutcome::kNotConfirmed;
  CHECK_FALSE(result.stored());

  Status refused = Status::Refused("stopped by client middleware");
  CHECK(refused.IsRefused());
  CHECK(refused.code() == Status::Code::kRefused);
  CHECK_FALSE(refused.IsRetryable());
  CHECK(refused.ToString() == "Refused: stopped by client middleware");
}

TEST_CASE("Open fails quickly, naming the place, when Redis is not there") {
  RedisOptions options;
  options.unix_path = "/nonexistent/reliableq-test.sock";
  auto start = std::chrono::steady_clock::now();
  auto client = Client::Open(options);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
  REQUIRE(!client.ok());
  CHECK(client.status().IsIoError());
  CHECK(client.status().message().find("/nonexistent/reliableq-test.sock") != std::string::npos);
}

TEST_CASE_FIXTURE(RedisFixture, "Open ignores SIGPIPE only when it has its default action") {
  struct sigaction saved;
  sigaction(SIGPIPE, nullptr, &saved);

  signal(SIGPIPE, SIG_DFL);
  OpenClient(options());
  struct sigaction now;
  sigaction(SIGPIPE, nullptr, &now);
  CHECK((now.sa_handler == SIG_IGN));

  static void (*const kOwnHandler)(int) = [](int) {};
  signal(SIGPIPE, kOwnHandler);
  OpenClient(options());
  sigaction(SIGPIPE, nullptr, &now);
  CHECK((now.sa_handler == kOwnHandler));

  sigaction(SIGPIPE, &saved, nullptr);
}

}  // namespace
}  // namespace reliableq
