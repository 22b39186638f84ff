#include "reliableq/client.h"

#include <signal.h>

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "job_codec.h"
#include "testutil.h"

namespace reliableq {
namespace {

using testing::NowSeconds;
using testing::RedisFixture;

std::unique_ptr<Client> OpenClient(const RedisOptions& options) {
  auto client = Client::Open(options);
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
  auto jid = client->Push(MakeJob("HardJob", R"([1, "bob"])"));
  double after = NowSeconds();
  REQUIRE(jid.ok());
  CHECK(jid->size() == 24);

  CHECK(SMembers("queues") == std::vector<std::string>{"default"});
  std::vector<std::string> list = LRange("queue:default");
  REQUIRE(list.size() == 1);
  const std::string& json = list[0];
  std::string created = NumberText(json, "created_at");
  CHECK(json == R"({"class":"HardJob","args":[1,"bob"],"queue":"default","retry":true,"jid":")" +
                    *jid + R"(","created_at":)" + created + R"(,"enqueued_at":)" + created + "}");
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
  auto jid = client->Push(job);
  REQUIRE(jid.ok());
  CHECK(*jid == "my-own-jid");
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
  auto first = client->Push(MakeJob("A"));
  auto second = client->Push(MakeJob("B"));
  auto other = client->Push(MakeJob("C", "[]", "low"));
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  REQUIRE(other.ok());
  std::vector<std::string> list = LRange("queue:default");
  REQUIRE(list.size() == 2);
  CHECK(std::string(Parse(list[1])["jid"].GetString()) == *first);  // index -1
  CHECK(std::string(Parse(list[0])["jid"].GetString()) == *second);
  CHECK(SMembers("queues") == std::vector<std::string>{"default", "low"});
}

TEST_CASE_FIXTURE(RedisFixture, "PushBulk of 2,500 jobs sends three script calls") {
  auto client = OpenClient(options());
  std::vector<Job> jobs;
  for (int i = 0; i < 2500; ++i) jobs.push_back(MakeJob("Bulk", "[" + std::to_string(i) + "]"));
  Run({"CONFIG", "RESETSTAT"});
  auto jids = client->PushBulk(jobs);
  REQUIRE(jids.ok());
  CHECK(Calls(*this, "exec") == 0);
  CHECK(Calls(*this, "lpush") == 3);
  CHECK(Calls(*this, "sadd") == 3);
  REQUIRE(jids->size() == 2500);
  CHECK(std::set<std::string>(jids->begin(), jids->end()).size() == 2500);

  std::vector<std::string> list = LRange("queue:default");
  REQUIRE(list.size() == 2500);
  // Input order from the right: job i is at index -1 - i.
  for (int i : {0, 1, 999, 1000, 1001, 2499}) {
    rapidjson::Document doc = Parse(list[2499 - i]);
    CHECK(doc["args"][0].GetInt() == i);
    CHECK(std::string(doc["jid"].GetString()) == (*jids)[i]);
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
  auto jids = client->PushBulk(jobs);
  REQUIRE(jids.ok());
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
  auto jid = client->PushAt(MakeJob("Later", "[7]"), at);
  REQUIRE(jid.ok());
  auto scheduled = ZRangeWithScores("schedule");
  REQUIRE(scheduled.size() == 1);
  CHECK(std::fabs(scheduled[0].second - at) < 1e-5);
  const std::string& json = scheduled[0].first;
  std::string created = NumberText(json, "created_at");
  CHECK(json == R"({"class":"Later","args":[7],"queue":"default","retry":true,"jid":")" + *jid +
                    R"(","created_at":)" + created + "}");
  // Nothing is enqueued or listed yet.
  CHECK(Integer({"DBSIZE"}) == 1);
}

TEST_CASE_FIXTURE(RedisFixture, "PushAt a time that has passed pushes now") {
  auto client = OpenClient(options());
  auto jid = client->PushAt(MakeJob(), NowSeconds() - 10);
  REQUIRE(jid.ok());
  CHECK(!Exists("schedule"));
  std::vector<std::string> list = LRange("queue:default");
  REQUIRE(list.size() == 1);
  CHECK(std::string(Parse(list[0])["jid"].GetString()) == *jid);
  CHECK(Parse(list[0]).HasMember("enqueued_at"));
}

TEST_CASE_FIXTURE(RedisFixture, "PushIn schedules relative to now, or pushes now") {
  auto client = OpenClient(options());
  double before = NowSeconds();
  auto later = client->PushIn(MakeJob("Later"), 90);
  double after = NowSeconds();
  REQUIRE(later.ok());
  auto scheduled = ZRangeWithScores("schedule");
  REQUIRE(scheduled.size() == 1);
  CHECK(scheduled[0].second >= before + 90 - 1e-5);
  CHECK(scheduled[0].second <= after + 90 + 1e-5);
  CHECK(!Parse(scheduled[0].first).HasMember("enqueued_at"));

  auto now = client->PushIn(MakeJob("Now"), 0);
  REQUIRE(now.ok());
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
  auto jid = client->Push(MakeJob());
  CHECK(jid.status().IsScript());
  CHECK(jid.status().message().find("WRONGTYPE push: key queue:default holds a string") !=
        std::string::npos);
  CHECK(Get("queue:default") == "not a list");
  CHECK_FALSE(Exists("queues"));
}

TEST_CASE_FIXTURE(RedisFixture, "a push refused because of `queues` enqueues nothing") {
  // In a MULTI, Redis runs the LPUSH although the SADD before it fails: the
  // push was reported as failed, a worker ran the job, and a caller who
  // retried ran it twice.
  auto client = OpenClient(options());
  Run({"SET", "queues", "not a set"});
  auto jid = client->Push(MakeJob());
  REQUIRE_FALSE(jid.ok());
  CHECK(jid.status().message().find("key queues holds a string, not a set") != std::string::npos);
  CHECK_FALSE(Exists("queue:default"));
  std::vector<Job> jobs = {MakeJob("A", "[]", "a"), MakeJob("B", "[]", "b")};
  auto jids = client->PushBulk(jobs);
  REQUIRE_FALSE(jids.ok());
  CHECK_FALSE(Exists("queue:a"));
  CHECK_FALSE(Exists("queue:b"));
  CHECK(Get("queues") == "not a set");
}

TEST_CASE_FIXTURE(RedisFixture,
                  "a bulk push that fails in a later batch says how many were pushed") {
  auto client = OpenClient(options());
  Run({"SET", "queue:broken", "not a list"});
  std::vector<Job> jobs;
  for (int i = 0; i < 1000; ++i) jobs.push_back(MakeJob("A", "[]", "fine"));
  for (int i = 0; i < 500; ++i) jobs.push_back(MakeJob("A", "[]", "broken"));
  auto jids = client->PushBulk(jobs);
  REQUIRE(!jids.ok());
  CHECK(jids.status().message().find("after 1000 of 1500 jobs") != std::string::npos);
  CHECK(LRange("queue:fine").size() == 1000);
}

TEST_CASE_FIXTURE(RedisFixture, "one client pushes from many threads at once") {
  auto client = OpenClient(options());
  constexpr int kThreads = 8, kPerThread = 500;
  std::vector<std::vector<std::string>> jids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        auto jid = client->Push(MakeJob("T", "[" + std::to_string(t) + "]"));
        if (jid.ok()) jids[t].push_back(*jid);
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
