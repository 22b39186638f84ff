// Admin's job-set and queue calls (Sidekiq's API verbs) and the two scripts
// behind them, retry_now.lua and kill.lua, against the private redis-server:
// where every entry ends up, byte for byte.

#include "reliableq/admin.h"

#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include <atomic>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "protocol/keys.h"
#include "lua_scripts.h"
#include "redis/connection.h"
#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::protocol;
using namespace reliableq::testing;

namespace {

constexpr const char* kNow = "1700000100.250000";

// A failed job as Sidekiq stores it in retry, with bytes a re-encoding would
// damage (17 significant digits, UTF-8, escapes, a big integer) and look-alikes
// of the edited fields inside args.
std::string Failed(const std::string& jid, int retry_count, const std::string& queue = "low") {
  return R"({"class":"HardJob","args":[{"retry_count":9,"enqueued_at":1},"caf\u00e9 ☃ \"q\""],)"
         R"("queue":")" +
         queue + R"(","retry":true,"jid":")" + jid +
         R"(","created_at":1700000000.1234567,"enqueued_at":1700000000.7654321,)"
         R"("big":12345678901234567890,"retry_count":)" +
         std::to_string(retry_count) +
         R"(,"error_message":"boom\nsecond line","error_class":"std::runtime_error",)"
         R"("failed_at":1700000001.5,"retried_at":1700000002.5})";
}

// A scheduled job: no enqueued_at, no retry_count.
std::string Scheduled(const std::string& jid) {
  return R"({"class":"LaterJob","args":[1,2.50],"queue":"default","retry":true,"jid":")" + jid +
         R"(","created_at":1700000000.5})";
}

rapidjson::Document Parse(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseFullPrecisionFlag>(json.data(), json.size());
  REQUIRE_MESSAGE(!doc.HasParseError(), json);
  return doc;
}

// `payload` with the raw value of top-level `field` replaced by `raw` (the
// field must appear once, as `"field":value,` or `"field":value}`).
std::string WithField(std::string payload, const std::string& field, const std::string& raw) {
  std::string key = "\"" + field + "\":";
  size_t at = payload.rfind(key);
  REQUIRE(at != std::string::npos);
  size_t start = at + key.size();
  size_t stop = payload.find_first_of(",}", start);
  return payload.replace(start, stop - start, raw);
}

// The enqueued_at of a pushed payload: the payload must be `before` with
// exactly that field appended, and its value a time in [t0, t1].
void CheckPushed(const std::string& pushed, const std::string& before, double t0, double t1) {
  std::string prefix = before.substr(0, before.size() - 1) + ",\"enqueued_at\":";
  // The top-level field is the last one of that name (args may hold
  // look-alikes).
  if (before.rfind("\"enqueued_at\":") != std::string::npos) {
    // Replaced in place: everything but the value is as it was.
    size_t at = before.rfind("\"enqueued_at\":") + 14;
    size_t stop = before.find_first_of(",}", at);
    REQUIRE(pushed.size() > at);
    CHECK(pushed.substr(0, at) == before.substr(0, at));
    size_t pushed_stop = pushed.find_first_of(",}", at);
    CHECK(pushed.substr(pushed_stop) == before.substr(stop));
    double value = std::stod(pushed.substr(at, pushed_stop - at));
    CHECK(value >= t0 - 1e-6);
    CHECK(value <= t1 + 1e-6);
    CHECK(pushed.substr(at, pushed_stop - at).find('.') != std::string::npos);
    return;
  }
  REQUIRE(pushed.size() > prefix.size());
  CHECK(pushed.substr(0, prefix.size()) == prefix);
  CHECK(pushed.back() == '}');
  std::string value = pushed.substr(prefix.size(), pushed.size() - prefix.size() - 1);
  CHECK(value.find('.') != std::string::npos);
  CHECK(std::stod(value) >= t0 - 1e-6);
  CHECK(std::stod(value) <= t1 + 1e-6);
}

class AdminFixture : public RedisFixture {
 public:
  AdminFixture() {
    auto admin = Admin::Open(options());
    REQUIRE_MESSAGE(admin.ok(), admin.status().ToString());
    admin_ = std::move(admin.value());
  }
  Admin& admin() { return *admin_; }

  redis::ReplyPtr Eval(ScriptId script, const redis::Argv& keys, const redis::Argv& args) {
    auto reply = redis().Eval(script, keys, args);
    REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
    return std::move(reply.value());
  }

 private:
  std::unique_ptr<Admin> admin_;
};

const std::string kJidA = "aaaaaaaaaaaaaaaaaaaaaaaa";
const std::string kJidB = "bbbbbbbbbbbbbbbbbbbbbbbb";
const std::string kJidC = "cccccccccccccccccccccccc";

}  // namespace

TEST_CASE("JobSetKey names Sidekiq's sets") {
  CHECK(JobSetKey(JobSet::kScheduled) == "schedule");
  CHECK(JobSetKey(JobSet::kRetry) == "retry");
  CHECK(JobSetKey(JobSet::kDead) == "dead");
}

TEST_CASE_FIXTURE(RedisFixture, "Admin errors name the key read, the group's in layout 2") {
  RedisOptions group = options();
  group.group = "g1";
  auto admin = Admin::Open(group);
  REQUIRE(admin.ok());
  Run({"HSET", "reliableq:{g1}:stat:processed", "a", "1"});
  Result<Stats> stats = (*admin)->GetStats();
  REQUIRE_FALSE(stats.ok());
  CHECK(stats.status().message().find("GET reliableq:{g1}:stat:processed: WRONGTYPE") !=
        std::string::npos);
  Run({"DEL", "reliableq:{g1}:stat:processed"});
  Run({"SET", "reliableq:{g1}:schedule", "x"});
  stats = (*admin)->GetStats();
  REQUIRE_FALSE(stats.ok());
  CHECK(stats.status().message().find("ZCARD reliableq:{g1}:schedule: WRONGTYPE") !=
        std::string::npos);
  // Layout 1 names its own keys.
  auto plain = Admin::Open(options());
  REQUIRE(plain.ok());
  Run({"SET", "schedule", "x"});
  stats = (*plain)->GetStats();
  REQUIRE_FALSE(stats.ok());
  CHECK(stats.status().message().find("ZCARD schedule: WRONGTYPE") != std::string::npos);
  CHECK((*admin)->SignalProcess("nobody", ProcessSignal::kQuiet).message() ==
        "no process nobody in reliableq:{g1}:processes");
  // The periodic jobs' keys too.
  Run({"SET", "reliableq:{g1}:periodic", "x"});
  Result<std::vector<PeriodicInfo>> periodic = (*admin)->ListPeriodic();
  REQUIRE_FALSE(periodic.ok());
  CHECK(periodic.status().message().find("SMEMBERS reliableq:{g1}:periodic: WRONGTYPE") !=
        std::string::npos);
  Run({"DEL", "reliableq:{g1}:periodic"});
  Run({"SADD", "reliableq:{g1}:periodic", "beat"});
  Run({"SET", "reliableq:{g1}:periodic:beat", "x"});
  periodic = (*admin)->ListPeriodic();
  REQUIRE_FALSE(periodic.ok());
  CHECK(periodic.status().message().find("HGETALL reliableq:{g1}:periodic:beat: WRONGTYPE") !=
        std::string::npos);
}

TEST_CASE_FIXTURE(AdminFixture, "List pages a set in Sidekiq's order with exact payloads") {
  Run({"ZADD", "retry", "1700000300.5", Failed(kJidC, 2)});
  Run({"ZADD", "retry", "1700000100.25", Failed(kJidA, 0)});
  Run({"ZADD", "retry", "1700000200", Failed(kJidB, 1)});
  Run({"ZADD", "retry", "1700000400", "not json at all"});
  Run({"ZADD", "dead", "1700000100", Failed(kJidA, 0)});
  Run({"ZADD", "dead", "1700000900", Failed(kJidB, 5)});

  Result<SetListing> all = admin().List(JobSet::kRetry, 0);
  REQUIRE(all.ok());
  CHECK(all->size == 4);
  REQUIRE(all->entries.size() == 4);
  // Next attempt first.
  CHECK(all->entries[0].jid == kJidA);
  CHECK(all->entries[1].jid == kJidB);
  CHECK(all->entries[2].jid == kJidC);
  const SetEntry& a = all->entries[0];
  CHECK(a.score == 1700000100.25);
  CHECK(a.payload == Failed(kJidA, 0));
  CHECK(a.valid);
  CHECK(a.job_class == "HardJob");
  CHECK(a.queue == "low");
  CHECK(a.retry_count == 0);
  CHECK(a.error_class == "std::runtime_error");
  CHECK(a.error_message == "boom\nsecond line");
  // Not a job: listed, byte for byte, with nothing read from it.
  const SetEntry& bad = all->entries[3];
  CHECK_FALSE(bad.valid);
  CHECK(bad.payload == "not json at all");
  CHECK(bad.jid.empty());
  CHECK(bad.job_class.empty());
  CHECK_FALSE(bad.retry_count.has_value());
  CHECK_FALSE(bad.error_class.has_value());

  Result<SetListing> two = admin().List(JobSet::kRetry, 2);
  REQUIRE(two.ok());
  CHECK(two->size == 4);
  REQUIRE(two->entries.size() == 2);
  CHECK(two->entries[1].jid == kJidB);

  // Dead: latest death first.
  Result<SetListing> dead = admin().List(JobSet::kDead, 25);
  REQUIRE(dead.ok());
  REQUIRE(dead->entries.size() == 2);
  CHECK(dead->entries[0].jid == kJidB);
  CHECK(dead->entries[0].retry_count == 5);
  CHECK(dead->entries[1].jid == kJidA);

  Result<SetListing> empty = admin().List(JobSet::kScheduled, 10);
  REQUIRE(empty.ok());
  CHECK(empty->size == 0);
  CHECK(empty->entries.empty());

  CHECK(admin().List(JobSet::kRetry, -1).status().IsInvalidArgument());

  // A member nested far too deep is listed as not a job; nothing recurses
  // down it.
  std::string deep = R"({"class":"A","args":)" + std::string(200000, '[') +
                     std::string(200000, ']') + R"(,"jid":"deep"})";
  Run({"ZADD", "retry", "1700000500", deep});
  Result<SetListing> with_deep = admin().List(JobSet::kRetry, 0);
  REQUIRE(with_deep.ok());
  REQUIRE(with_deep->entries.size() == 5);
  CHECK_FALSE(with_deep->entries[4].valid);
  CHECK(with_deep->entries[4].payload == deep);
  CHECK(admin().RetryNow(JobSet::kRetry, "deep").status().IsCorruption());
}

TEST_CASE_FIXTURE(AdminFixture, "Find matches the jid field, not text elsewhere") {
  // The jid appears inside args of another member and as a prefix of a
  // longer jid: neither is a match.
  std::string decoy = R"({"class":"X","args":[")" + kJidA + R"("],"jid":"other"})";
  std::string longer = Failed(kJidA + "ff", 0);
  Run({"ZADD", "retry", "1700000100", decoy});
  Run({"ZADD", "retry", "1700000100", longer});
  CHECK(admin().Find(JobSet::kRetry, kJidA).status().IsNotFound());
  CHECK(admin().Find(JobSet::kDead, kJidA).status().IsNotFound());
  CHECK(admin().Find(JobSet::kRetry, "").status().IsInvalidArgument());

  Run({"ZADD", "retry", "1700000500", Failed(kJidA, 3)});
  Run({"ZADD", "retry", "1700000400", Failed(kJidA, 2)});
  Result<SetEntry> found = admin().Find(JobSet::kRetry, kJidA);
  REQUIRE(found.ok());
  // Two members carry the jid: the lowest score is meant.
  CHECK(found->payload == Failed(kJidA, 2));
  CHECK(found->score == 1700000400);
  Result<SetEntry> other = admin().Find(JobSet::kRetry, "other");
  REQUIRE(other.ok());
  CHECK(other->payload == decoy);
  CHECK(other->valid);
}

TEST_CASE_FIXTURE(AdminFixture, "Find handles jids with glob and JSON special characters") {
  // A jid given to a client may be any printable ASCII: it is escaped in the
  // payload (\" and \\) and in the ZSCAN pattern (* ? [ ] \).
  const std::string jid = R"(a*b?[c]\d"e/f)";
  std::string payload =
      R"({"class":"A","args":[],"queue":"q","jid":"a*b?[c]\\d\"e/f","retry_count":1})";
  REQUIRE(Parse(payload)["jid"].GetString() == jid);
  Run({"ZADD", "retry", "1700000000.5", payload});
  Run({"ZADD", "retry", "1700000000.5", R"({"class":"A","args":[],"jid":"axb?[c]\\d\"e/f"})"});
  Result<SetEntry> found = admin().Find(JobSet::kRetry, jid);
  REQUIRE_MESSAGE(found.ok(), found.status().ToString());
  CHECK(found->payload == payload);
  CHECK(admin().Find(JobSet::kRetry, "a*").status().IsNotFound());
}

TEST_CASE_FIXTURE(AdminFixture, "Find searches large sets") {
  // Far above Redis's listpack limit the set is a skiplist, which ZSCAN
  // walks in several rounds.
  std::vector<std::string> command = {"ZADD", "dead"};
  for (int i = 0; i < 3000; ++i) {
    char jid[32];
    std::snprintf(jid, sizeof jid, "%024d", i);
    command.push_back(std::to_string(1700000000 + i) + ".5");
    command.push_back(Failed(jid, 0));
  }
  redis::Argv argv(command.begin(), command.end());
  Run(argv);
  auto encoding = redis().Command({"OBJECT", "ENCODING", "dead"});
  REQUIRE(encoding.ok());
  CHECK(redis::View(encoding->get()) == "skiplist");
  for (int i : {0, 1234, 2999}) {
    char jid[32];
    std::snprintf(jid, sizeof jid, "%024d", i);
    Result<SetEntry> found = admin().Find(JobSet::kDead, jid);
    REQUIRE_MESSAGE(found.ok(), found.status().ToString());
    CHECK(found->payload == Failed(jid, 0));
    CHECK(found->score == 1700000000 + i + 0.5);
  }
  CHECK(admin().Find(JobSet::kDead, "000000000000000000003000").status().IsNotFound());
}

TEST_CASE_FIXTURE(AdminFixture,
                  "RetryNow pushes the exact entry with Sidekiq's retry bookkeeping") {
  std::string entry = Failed(kJidA, 2);
  Run({"ZADD", "retry", "1700000100.25", entry});
  Run({"ZADD", "retry", "1700000200.25", Failed(kJidB, 0, "default")});
  double t0 = NowSeconds();
  Result<SetEntry> moved = admin().RetryNow(JobSet::kRetry, kJidA);
  double t1 = NowSeconds();
  REQUIRE_MESSAGE(moved.ok(), moved.status().ToString());
  CHECK(moved->payload == entry);
  CHECK(moved->score == 1700000100.25);

  // Gone from the set, the other member untouched.
  CHECK(ZRange("retry") == std::vector<std::string>{Failed(kJidB, 0, "default")});
  CHECK(SMembers("queues") == std::vector<std::string>{"low"});
  std::vector<std::string> queue = LRange("queue:low");
  REQUIRE(queue.size() == 1);
  // retry_count - 1 and enqueued_at = now, edited in place; every other
  // byte (the args look-alikes included) as it was.
  CheckPushed(queue[0], WithField(entry, "retry_count", "1"), t0, t1);
  rapidjson::Document job = Parse(queue[0]);
  CHECK(job["retry_count"].GetInt() == 1);
  CHECK(job["args"][0]["retry_count"].GetInt() == 9);
  CHECK(job["args"][0]["enqueued_at"].GetInt() == 1);

  // retry_count 0 becomes -1, as Sidekiq's `retry_count -= 1`.
  REQUIRE(admin().RetryNow(JobSet::kRetry, kJidB).ok());
  std::vector<std::string> defaults = LRange("queue:default");
  REQUIRE(defaults.size() == 1);
  CHECK(Parse(defaults[0])["retry_count"].GetInt() == -1);
  CHECK(!Exists("retry"));
  CHECK(SMembers("queues") == std::vector<std::string>{"default", "low"});

  // Now it is not there any more.
  Result<SetEntry> again = admin().RetryNow(JobSet::kRetry, kJidA);
  CHECK(again.status().IsNotFound());
  CHECK(again.status().message().find(kJidA) != std::string::npos);
  CHECK(LRange("queue:low").size() == 1);
}

TEST_CASE_FIXTURE(AdminFixture,
                  "RetryNow from dead lowers retry_count; from schedule it does not") {
  Run({"ZADD", "dead", "1700000100", Failed(kJidA, 25)});
  REQUIRE(admin().RetryNow(JobSet::kDead, kJidA).ok());
  std::vector<std::string> low = LRange("queue:low");
  REQUIRE(low.size() == 1);
  CHECK(Parse(low[0])["retry_count"].GetInt() == 24);
  CHECK(!Exists("dead"));

  // A scheduled job without enqueued_at or retry_count: enqueued_at is added
  // at the end, nothing else changes (Sidekiq's add_to_queue).
  Run({"ZADD", "schedule", "1800000000", Scheduled(kJidB)});
  double t0 = NowSeconds();
  REQUIRE(admin().RetryNow(JobSet::kScheduled, kJidB).ok());
  double t1 = NowSeconds();
  std::vector<std::string> defaults = LRange("queue:default");
  REQUIRE(defaults.size() == 1);
  CheckPushed(defaults[0], Scheduled(kJidB), t0, t1);
  CHECK(defaults[0].find("retry_count") == std::string::npos);

  // A scheduled entry that carries a retry_count keeps it.
  Run({"ZADD", "schedule", "1800000000", Failed(kJidC, 4)});
  REQUIRE(admin().RetryNow(JobSet::kScheduled, kJidC).ok());
  low = LRange("queue:low");
  REQUIRE(low.size() == 2);
  CHECK(Parse(low[0])["retry_count"].GetInt() == 4);
}

TEST_CASE_FIXTURE(AdminFixture, "RetryNow: queue defaults and retry_counts that are not integers") {
  // No queue field: to "default", and the payload gains no queue field.
  std::string no_queue = R"({"class":"A","args":[],"jid":")" + kJidA + R"(","retry_count":3})";
  // retry_count as a float, a string and null: left as they are.
  std::string float_count = R"({"class":"A","args":[],"queue":"q","jid":")" + kJidB +
                            R"(","retry_count":2.5,"enqueued_at":1700000000.5})";
  std::string null_count =
      R"({"class":"A","args":[],"queue":"q","jid":")" + kJidC + R"(","retry_count":null})";
  Run({"ZADD", "retry", "1", no_queue});
  Run({"ZADD", "retry", "2", float_count});
  Run({"ZADD", "retry", "3", null_count});
  double t0 = NowSeconds();
  REQUIRE(admin().RetryNow(JobSet::kRetry, kJidA).ok());
  REQUIRE(admin().RetryNow(JobSet::kRetry, kJidB).ok());
  REQUIRE(admin().RetryNow(JobSet::kRetry, kJidC).ok());
  double t1 = NowSeconds();
  std::vector<std::string> defaults = LRange("queue:default");
  REQUIRE(defaults.size() == 1);
  CheckPushed(defaults[0], WithField(no_queue, "retry_count", "2"), t0, t1);
  std::vector<std::string> q = LRange("queue:q");
  REQUIRE(q.size() == 2);
  CheckPushed(q[1], float_count, t0, t1);
  CheckPushed(q[0], null_count, t0, t1);
  CHECK(SMembers("queues") == std::vector<std::string>{"default", "q"});
}

TEST_CASE_FIXTURE(AdminFixture, "a name given twice in an entry reads as Sidekiq reads it: the last") {
  std::string twice = R"({"class":"A","args":[],"queue":"first","class":"B","jid":")" + kJidA +
                      R"(","queue":"last"})";
  Run({"ZADD", "retry", "1", twice});
  Result<SetEntry> found = admin().Find(JobSet::kRetry, kJidA);
  REQUIRE(found.ok());
  CHECK(found->job_class == "B");
  CHECK(found->queue == "last");
  REQUIRE(admin().RetryNow(JobSet::kRetry, kJidA).ok());
  CHECK(LRange("queue:first").empty());
  CHECK(LRange("queue:last").size() == 1);
}

TEST_CASE_FIXTURE(AdminFixture, "RetryNow refuses an entry that is not a job and leaves it") {
  std::string no_args = R"({"class":"A","jid":")" + kJidA + R"("})";
  Run({"ZADD", "retry", "5", no_args});
  Result<SetEntry> refused = admin().RetryNow(JobSet::kRetry, kJidA);
  CHECK(refused.status().IsCorruption());
  CHECK(ZRange("retry") == std::vector<std::string>{no_args});
  CHECK(!Exists("queue:default"));
  CHECK(!Exists("queues"));
}

TEST_CASE_FIXTURE(AdminFixture, "retry_now.lua moves only members still in the set") {
  std::string here = Failed(kJidA, 1);
  std::string gone = Failed(kJidB, 1);  // never added: somebody moved it
  Run({"ZADD", "retry", "10", here});
  auto reply =
      Eval(ScriptId::kRetryNow, {"retry", "queues", "queue:low"}, {kNow, "1", "3", "low", gone});
  REQUIRE(reply->type == REDIS_REPLY_ARRAY);
  CHECK(reply->element[0]->integer == 0);
  CHECK(reply->element[1]->integer == 1);
  // Nothing pushed, nothing added to queues.
  CHECK(!Exists("queue:low"));
  CHECK(!Exists("queues"));
  CHECK(ZRange("retry") == std::vector<std::string>{here});

  // One present and one gone in the same call: only the present one moves.
  reply = Eval(ScriptId::kRetryNow, {"retry", "queues", "queue:low"},
               {kNow, "1", "3", "low", gone, "3", "low", here});
  CHECK(reply->element[0]->integer == 1);
  CHECK(reply->element[1]->integer == 1);
  std::vector<std::string> low = LRange("queue:low");
  REQUIRE(low.size() == 1);
  CHECK(low[0] == WithField(WithField(here, "retry_count", "0"), "enqueued_at", kNow));
  CHECK(!Exists("retry"));
}

TEST_CASE_FIXTURE(AdminFixture, "retry_now.lua refuses bad arguments and writes nothing") {
  std::string entry = Failed(kJidA, 1);
  Run({"ZADD", "retry", "10", entry});
  const std::vector<std::vector<std::string>> bad = {
      {"1700000100", "1", "3", "low", entry},               // now without a fraction
      {kNow, "2", "3", "low", entry},                       // flag not 0/1
      {kNow, "1", "2", "low", entry},                       // index below 3
      {kNow, "1", "4", "low", entry},                       // index past KEYS
      {kNow, "1", "3", "low"},                              // not a triple
      {kNow, "1"},                                          // nothing to move
      {kNow, "1", "3", "low", entry, "3", "low", "[1,2]"},  // an entry not an object
  };
  for (const auto& args : bad) {
    redis::Argv argv(args.begin(), args.end());
    auto reply = redis().Eval(ScriptId::kRetryNow, {"retry", "queues", "queue:low"}, argv);
    CHECK(reply.status().IsInvalidArgument());
  }
  CHECK(ZRange("retry") == std::vector<std::string>{entry});
  CHECK(!Exists("queue:low"));
  CHECK(!Exists("queues"));
}

TEST_CASE_FIXTURE(AdminFixture, "a racing RetryNow and Delete leave the job in exactly one place") {
  auto second = Admin::Open(options());
  REQUIRE(second.ok());
  Admin& other = **second;
  int retried = 0, deleted = 0;
  for (int round = 0; round < 40; ++round) {
    Run({"DEL", "retry", "queue:low", "queues"});
    std::string entry = Failed(kJidA, 1);
    Run({"ZADD", "retry", "10", entry});
    Status retry_status, delete_status;
    std::thread racer([&] { delete_status = other.Delete(JobSet::kRetry, kJidA).status(); });
    retry_status = admin().RetryNow(JobSet::kRetry, kJidA).status();
    racer.join();
    CAPTURE(round);
    // Exactly one of them acted; the other found nothing.
    CHECK(retry_status.ok() != delete_status.ok());
    if (!retry_status.ok()) CHECK(retry_status.IsNotFound());
    if (!delete_status.ok()) CHECK(delete_status.IsNotFound());
    CHECK(!Exists("retry"));
    CHECK(LRange("queue:low").size() == (retry_status.ok() ? 1u : 0u));
    retried += retry_status.ok();
    deleted += delete_status.ok();
  }
  CHECK(retried + deleted == 40);
}

TEST_CASE_FIXTURE(AdminFixture,
                  "RetryAll walks the set in batches and skips entries that are not jobs") {
  std::vector<std::string> command = {"ZADD", "retry"};
  for (int i = 0; i < 250; ++i) {
    char jid[32];
    std::snprintf(jid, sizeof jid, "%024d", i);
    command.push_back(std::to_string(1000 + i));
    command.push_back(Failed(jid, 1, i % 2 == 0 ? "even" : "odd"));
  }
  // Not jobs, spread over the batches.
  for (int score : {1000, 1120, 1249}) {
    command.push_back(std::to_string(score));
    command.push_back("not a job " + std::to_string(score));
  }
  redis::Argv argv(command.begin(), command.end());
  Run(argv);

  Result<BulkResult> done = admin().RetryAll(JobSet::kRetry);
  REQUIRE_MESSAGE(done.ok(), done.status().ToString());
  CHECK(done->moved == 250);
  CHECK(done->skipped == 3);
  CHECK(ZRange("retry") ==
        std::vector<std::string>{"not a job 1000", "not a job 1120", "not a job 1249"});
  std::vector<std::string> even = LRange("queue:even");
  std::vector<std::string> odd = LRange("queue:odd");
  CHECK(even.size() == 125);
  CHECK(odd.size() == 125);
  // The earliest entry was pushed first, so it is taken first (index -1).
  CHECK(Parse(even.back())["jid"].GetString() == std::string(24, '0'));
  CHECK(Parse(even.front())["jid"].GetString() == std::string("000000000000000000000248"));
  CHECK(Parse(odd.back())["retry_count"].GetInt() == 0);
  CHECK(SMembers("queues") == std::vector<std::string>{"even", "odd"});

  // Nothing left to do: nothing moves, the leftovers are skipped again.
  done = admin().RetryAll(JobSet::kRetry);
  REQUIRE(done.ok());
  CHECK(done->moved == 0);
  CHECK(done->skipped == 3);
  done = admin().RetryAll(JobSet::kScheduled);
  REQUIRE(done.ok());
  CHECK(done->moved == 0);
}

TEST_CASE_FIXTURE(AdminFixture, "Delete removes the exact member; DeleteAll the whole set") {
  std::string a = Failed(kJidA, 0);
  // The same job written with a space: another member, not touched.
  std::string spaced = R"({"class":"HardJob", "args":[],"jid":")" + kJidB + R"("})";
  std::string b = R"({"class":"HardJob","args":[],"jid":")" + kJidB + R"("})";
  Run({"ZADD", "dead", "1", a});
  Run({"ZADD", "dead", "2", spaced});
  Run({"ZADD", "dead", "3", b});
  Result<SetEntry> deleted = admin().Delete(JobSet::kDead, kJidB);
  REQUIRE(deleted.ok());
  // Both carry the jid; the lower score is the one meant.
  CHECK(deleted->payload == spaced);
  CHECK(ZRange("dead") == std::vector<std::string>{a, b});
  CHECK(admin().Delete(JobSet::kDead, kJidC).status().IsNotFound());
  CHECK(admin().Delete(JobSet::kRetry, kJidA).status().IsNotFound());
  CHECK(ZRange("dead").size() == 2);

  Result<int64_t> cleared = admin().DeleteAll(JobSet::kDead);
  REQUIRE(cleared.ok());
  CHECK(*cleared == 2);
  CHECK(!Exists("dead"));
  cleared = admin().DeleteAll(JobSet::kDead);
  REQUIRE(cleared.ok());
  CHECK(*cleared == 0);
}

TEST_CASE_FIXTURE(AdminFixture, "Kill moves a retry entry unchanged into dead with the trims") {
  std::string entry = Failed(kJidA, 3);
  Run({"ZADD", "retry", "1800000000", entry});
  Run({"ZADD", "retry", "1800000001", Failed(kJidB, 0)});
  double t0 = NowSeconds();
  Result<SetEntry> killed = admin().Kill(kJidA, DeadSetLimits());
  double t1 = NowSeconds();
  REQUIRE_MESSAGE(killed.ok(), killed.status().ToString());
  CHECK(killed->payload == entry);
  CHECK(ZRange("retry") == std::vector<std::string>{Failed(kJidB, 0)});
  auto dead = ZRangeWithScores("dead");
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].first == entry);
  CHECK(dead[0].second >= t0 - 1e-3);
  CHECK(dead[0].second <= t1 + 1e-3);
  CHECK(admin().Kill(kJidA, DeadSetLimits()).status().IsNotFound());
  CHECK(admin().Kill(kJidC, DeadSetLimits()).status().IsNotFound());

  // The trims: older than the timeout goes, then at most max_jobs - 1 stay.
  Run({"ZADD", "dead", "1000.5", "ancient"});
  Run({"ZADD", "dead", std::to_string(t0 - 100), "recent 1"});
  Run({"ZADD", "dead", std::to_string(t0 - 50), "recent 2"});
  DeadSetLimits limits;
  limits.max_jobs = 3;
  limits.timeout = std::chrono::seconds(3600);
  REQUIRE(admin().Kill(kJidB, limits).ok());
  CHECK(ZRange("dead") == std::vector<std::string>{entry, Failed(kJidB, 0)});
  CHECK(!Exists("retry"));

  limits.max_jobs = 0;
  CHECK(admin().Kill(kJidA, limits).status().IsInvalidArgument());
  limits.max_jobs = 5;
  limits.timeout = std::chrono::seconds(-1);
  CHECK(admin().KillAll(limits).status().IsInvalidArgument());
}

TEST_CASE_FIXTURE(AdminFixture, "kill.lua moves only members still in retry") {
  Run({"ZADD", "retry", "10", "present"});
  auto reply =
      Eval(ScriptId::kKill, {"retry", "dead"}, {kNow, "10000", "15552000", "", "", "", "absent"});
  CHECK(reply->element[0]->integer == 0);
  CHECK(reply->element[1]->integer == 1);
  CHECK(!Exists("dead"));
  reply = Eval(ScriptId::kKill, {"retry", "dead"},
               {kNow, "10000", "15552000", "", "", "", "absent", "present"});
  CHECK(reply->element[0]->integer == 1);
  CHECK(reply->element[1]->integer == 1);
  auto dead = ZRangeWithScores("dead");
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].first == "present");
  CHECK(dead[0].second == 1700000100.25);
  CHECK(!Exists("retry"));
  // Bad limits: nothing written.
  Run({"ZADD", "retry", "10", "again"});
  CHECK(redis()
            .Eval(ScriptId::kKill, {"retry", "dead"}, {kNow, "0", "15552000", "", "", "", "again"})
            .status()
            .IsInvalidArgument());
  CHECK(redis()
            .Eval(ScriptId::kKill, {"retry", "dead"}, {"now", "1", "1", "", "", "", "again"})
            .status()
            .IsInvalidArgument());
  CHECK(ZRange("retry") == std::vector<std::string>{"again"});
}

TEST_CASE_FIXTURE(AdminFixture, "KillAll empties retry into dead in batches") {
  std::vector<std::string> command = {"ZADD", "retry"};
  for (int i = 0; i < 150; ++i) {
    command.push_back(std::to_string(i));
    command.push_back("job " + std::to_string(i));
  }
  redis::Argv argv(command.begin(), command.end());
  Run(argv);
  Result<BulkResult> done = admin().KillAll(DeadSetLimits());
  REQUIRE(done.ok());
  CHECK(done->moved == 150);
  CHECK(done->skipped == 0);
  CHECK(!Exists("retry"));
  CHECK(Integer({"ZCARD", "dead"}) == 150);
}

TEST_CASE_FIXTURE(AdminFixture, "PauseQueue and ResumeQueue keep the paused set that lists show") {
  Run({"SADD", "queues", "mail", "default"});
  Run({"LPUSH", "queue:mail", R"({"class":"A","args":[]})"});
  Result<PauseChange> paused = admin().PauseQueue("mail", {});
  REQUIRE(paused.ok());
  CHECK(paused->changed);
  paused = admin().PauseQueue("mail", {});
  REQUIRE(paused.ok());
  CHECK_FALSE(paused->changed);
  // A queue with no job yet may be paused ahead of it, when that is meant.
  REQUIRE(admin().PauseQueue("later", {.allow_unknown = true}).ok());
  CHECK(SMembers(Keys().Paused()) == std::vector<std::string>{"later", "mail"});
  // Pausing never touches the jobs or the queues set.
  CHECK(LRange("queue:mail").size() == 1);
  CHECK(SMembers("queues") == std::vector<std::string>{"default", "mail"});

  Result<std::vector<QueueStats>> queues = admin().ListQueues();
  REQUIRE(queues.ok());
  REQUIRE(queues->size() == 3);
  CHECK((*queues)[0].name == "default");
  CHECK_FALSE((*queues)[0].paused);
  CHECK((*queues)[1].name == "later");
  CHECK((*queues)[1].paused);
  CHECK((*queues)[1].size == 0);
  CHECK((*queues)[2].name == "mail");
  CHECK((*queues)[2].paused);
  CHECK((*queues)[2].size == 1);
  Result<Stats> stats = admin().GetStats();
  REQUIRE(stats.ok());
  REQUIRE(stats->queues.size() == 3);
  CHECK(stats->queues[2].paused);
  CHECK(stats->enqueued == 1);
  Result<QueuePage> page = admin().ListQueue("mail", 0, 10);
  REQUIRE(page.ok());
  CHECK(page->stats.paused);

  Result<PauseChange> resumed = admin().ResumeQueue("mail");
  REQUIRE(resumed.ok());
  CHECK(resumed->changed);
  resumed = admin().ResumeQueue("mail");
  REQUIRE(resumed.ok());
  CHECK_FALSE(resumed->changed);
  CHECK(SMembers(Keys().Paused()) == std::vector<std::string>{"later"});
  page = admin().ListQueue("mail", 0, 10);
  REQUIRE(page.ok());
  CHECK_FALSE(page->stats.paused);

  CHECK(admin().PauseQueue("", {}).status().IsInvalidArgument());
  CHECK(admin().ResumeQueue("").status().IsInvalidArgument());
  // The set's key holding another type is an error naming it, not a pause.
  Run({"DEL", Keys().Paused()});
  Run({"SET", Keys().Paused(), "x"});
  Result<PauseChange> broken = admin().PauseQueue("mail", {.allow_unknown = true});
  REQUIRE_FALSE(broken.ok());
  CHECK(broken.status().message().find("WRONGTYPE") != std::string::npos);
  CHECK_FALSE(admin().ListQueues().ok());
}

TEST_CASE_FIXTURE(AdminFixture, "PauseQueue refuses a queue it does not know, naming close ones") {
  Run({"SADD", "queues", "critical", "mailers", "reports"});
  Run({"LPUSH", "queue:imports", R"({"class":"A","args":[]})"});  // a job, not in queues
  Run({"SADD", Keys().Paused(), "nightly"});                          // paused ahead

  // A typo: refused, nothing written, nothing published.
  Result<PauseChange> typo = admin().PauseQueue("critcal", {});
  REQUIRE(typo.status().IsNotFound());
  CHECK(typo.status().message() == "no queue named 'critcal' (did you mean 'critical'?)");
  CHECK(SMembers(Keys().Paused()) == std::vector<std::string>{"nightly"});
  // Case and swapped letters count as typos; several close names, nearest
  // first; none close, none named.
  CHECK(admin().PauseQueue("Mailres", {}).status().message() ==
        "no queue named 'Mailres' (did you mean 'mailers'?)");
  Run({"SADD", "queues", "report", "reports2"});
  CHECK(admin().PauseQueue("reportz", {}).status().message() ==
        "no queue named 'reportz' (did you mean 'report', 'reports' or 'reports2'?)");
  CHECK(admin().PauseQueue("zzz", {}).status().message() == "no queue named 'zzz'");
  CHECK(admin().PauseQueue("nightlx", {}).status().message() ==
        "no queue named 'nightlx' (did you mean 'nightly'?)");

  // Known, as ClearQueue knows a queue (named in queues, or holding a
  // job), or paused already.
  CHECK(admin().PauseQueue("critical", {})->changed);
  CHECK(admin().PauseQueue("imports", {})->changed);
  CHECK_FALSE(admin().PauseQueue("nightly", {})->changed);
  // Meant: paused ahead of its first job.
  CHECK(admin().PauseQueue("critcal", {.allow_unknown = true})->changed);
  CHECK(SMembers(Keys().Paused()) ==
        std::vector<std::string>{"critcal", "critical", "imports", "nightly"});
  // Resume takes any name (one not paused changes nothing).
  CHECK_FALSE(admin().ResumeQueue("nosuch")->changed);
}

TEST_CASE_FIXTURE(AdminFixture, "PauseQueue and ResumeQueue tell the workers' wake-up channel") {
  Run({"SADD", "queues", "mail"});
  // A subscriber as a worker's wake-up connection is: it counts, and it
  // receives the change (QueuePauses reads "pause <q>" and "resume <q>").
  Subscription worker(server().socket_path(), Keys().WakePaused(), Subscription::Kind::kChannel);
  Result<PauseChange> paused = admin().PauseQueue("mail", {});
  REQUIRE(paused.ok());
  CHECK(paused->workers_told == 1);
  CHECK(admin().ResumeQueue("mail")->workers_told == 1);
  // Refused: nothing published.
  CHECK(admin().PauseQueue("mial", {}).status().IsNotFound());
  Run({"PUBLISH", Keys().WakePaused(), "marker"});
  std::vector<Subscription::Message> heard = worker.Until("marker");
  REQUIRE(heard.size() == 2);
  CHECK(heard[0].payload == "pause mail");
  CHECK(heard[1].payload == "resume mail");
}

TEST_CASE_FIXTURE(AdminFixture, "ListQueues and ClearQueue are Sidekiq's Queue.all and clear") {
  double now = NowSeconds();
  char old_job[128];
  std::snprintf(old_job, sizeof old_job, R"({"class":"A","args":[],"enqueued_at":%.6f})", now - 30);
  Run({"SADD", "queues", "mail", "default", "empty"});
  Run({"LPUSH", "queue:mail", old_job, R"({"class":"A","args":[]})"});
  Run({"LPUSH", "queue:default", R"({"class":"A","args":[]})"});
  // A working list of the queue: not the queue, never touched by clear.
  const std::string working = Keys().Working("host:1:abcdefabcdef", "mail");
  Run({"LPUSH", working, R"({"class":"B","args":[]})"});

  Result<std::vector<QueueStats>> queues = admin().ListQueues();
  REQUIRE(queues.ok());
  REQUIRE(queues->size() == 3);
  CHECK((*queues)[0].name == "default");
  CHECK((*queues)[0].size == 1);
  CHECK((*queues)[1].name == "empty");
  CHECK((*queues)[1].size == 0);
  CHECK((*queues)[1].latency == 0);
  CHECK((*queues)[2].name == "mail");
  CHECK((*queues)[2].size == 2);
  CHECK((*queues)[2].latency >= 29);
  CHECK((*queues)[2].latency < 60);

  Result<int64_t> cleared = admin().ClearQueue("mail");
  REQUIRE(cleared.ok());
  CHECK(*cleared == 2);
  CHECK(!Exists("queue:mail"));
  CHECK(SMembers("queues") == std::vector<std::string>{"default", "empty"});
  CHECK(LRange(working).size() == 1);
  // A name in `queues` without jobs is cleared too.
  cleared = admin().ClearQueue("empty");
  REQUIRE(cleared.ok());
  CHECK(*cleared == 0);
  CHECK(SMembers("queues") == std::vector<std::string>{"default"});
  // A queue with jobs but missing from `queues` (written by hand).
  Run({"LPUSH", "queue:stray", "x"});
  cleared = admin().ClearQueue("stray");
  REQUIRE(cleared.ok());
  CHECK(*cleared == 1);
  CHECK(!Exists("queue:stray"));

  CHECK(admin().ClearQueue("mail").status().IsNotFound());
  CHECK(admin().ClearQueue("").status().IsInvalidArgument());
  CHECK(LRange("queue:default").size() == 1);
}

TEST_CASE_FIXTURE(AdminFixture, "a clear refused for a key of the wrong type deletes nothing") {
  // In a MULTI, Redis runs the UNLINK although the read before it fails:
  // the clear was reported as failed and the key was gone all the same.
  Run({"SET", "dead", "not a zset"});
  Result<int64_t> cleared = admin().DeleteAll(JobSet::kDead);
  REQUIRE_FALSE(cleared.ok());
  CHECK(cleared.status().message().find("key dead holds a string, not a zset") != std::string::npos);
  CHECK(Get("dead") == "not a zset");

  Run({"LPUSH", "queue:mail", "{}"});
  Run({"SET", "queues", "not a set"});
  cleared = admin().ClearQueue("mail");
  REQUIRE_FALSE(cleared.ok());
  CHECK(cleared.status().message().find("key queues holds a string, not a set") != std::string::npos);
  CHECK(LRange("queue:mail").size() == 1);
  CHECK(Get("queues") == "not a set");
}
