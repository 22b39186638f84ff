// Every script in lua/ run by Redis (Lua 5.1) with exact keys and payload
// bytes: these are the atomic moves that keep every job in exactly one
// place, so each test checks where every byte ended up.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
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
constexpr double kNowValue = 1700000100.25;
constexpr const char* kDeadMax = "10000";
constexpr const char* kDeadTimeout = "15552000";

// A Sidekiq payload with everything that a re-encoding would damage: more
// digits than cjson keeps, UTF-8, escapes, a NUL byte, and a nested field
// named like the counter the scripts edit.
std::string Job(int n) {
  return std::string(R"({"class":"HardJob","args":[{"interrupted_count":9},)") +
         R"("caf\u00e9 ☃ \"q\" \\",)" + std::to_string(n) +
         R"(],"retry":true,"queue":"default","jid":"0123456789abcdef0123456)" +
         std::to_string(n % 10) +
         R"(","created_at":1700000000.1234567,"enqueued_at":1700000000.7654321,)" +
         R"("big":12345678901234567890,"nul":")" + std::string("\0", 1) + R"("})";
}

// `payload` (with no top-level interrupted_count) after n interruptions.
std::string Interrupted(const std::string& payload, int n) {
  return payload.substr(0, payload.size() - 1) + ",\"interrupted_count\":" + std::to_string(n) +
         "}";
}

// A reply flattened to strings: integers in decimal, nil as "(nil)",
// nested arrays inlined.
void Flatten(const redisReply* reply, std::vector<std::string>* out) {
  switch (reply->type) {
    case REDIS_REPLY_ARRAY:
      for (size_t i = 0; i < reply->elements; ++i) Flatten(reply->element[i], out);
      break;
    case REDIS_REPLY_INTEGER:
      out->push_back(std::to_string(reply->integer));
      break;
    case REDIS_REPLY_NIL:
      out->push_back("(nil)");
      break;
    default:
      out->emplace_back(reply->str, reply->len);
  }
}

using Strings = std::vector<std::string>;

// Checks that `status` is the error a script returns, before writing
// anything, for a key it would write that holds another type.
void CheckWrongType(const Status& status, const std::string& script, const std::string& key,
                    const std::string& actual, const std::string& want) {
  CHECK(status.IsScript());
  CHECK(status.message() == "WRONGTYPE " + script + ": key " + key + " holds a " + actual +
                                ", not a " + want + "; nothing was written");
}

struct ScriptFixture : RedisFixture {
  Keys keys;

  // Runs a script that must succeed; returns its reply flattened.
  Strings Eval(ScriptId id, const redis::Argv& k, const redis::Argv& a) {
    Result<redis::ReplyPtr> reply = redis().Eval(id, k, a);
    REQUIRE_MESSAGE(reply.ok(), GetScript(id).name << ": " << reply.status().ToString());
    Strings out;
    Flatten(reply->get(), &out);
    return out;
  }

  // Runs a script that must fail; returns its Status.
  Status EvalError(ScriptId id, const redis::Argv& k, const redis::Argv& a) {
    Result<redis::ReplyPtr> reply = redis().Eval(id, k, a);
    REQUIRE_FALSE(reply.ok());
    return reply.status();
  }

  void Push(const std::string& key, const Strings& values) {  // LPUSH one by one
    for (const std::string& v : values) Run({"LPUSH", key, v});
  }


  long long Ttl(const std::string& key) { return Integer({"TTL", key}); }
};

const std::string kWorkA = "reliableq:working:h:1:abc:a";
const std::string kWorkB = "reliableq:working:h:1:abc:b";

}  // namespace

// ---------------------------------------------------------------- fetch.lua

TEST_CASE_FIXTURE(ScriptFixture, "fetch exhausts pairs in order, oldest first") {
  Push("queue:a", {Job(1), Job(2), Job(3)});  // Job(1) is the oldest, at the right
  Push("queue:b", {Job(4), Job(5)});
  Strings got = Eval(ScriptId::kFetch, {"queue:a", kWorkA, "queue:b", kWorkB}, {"4"});
  CHECK(got == Strings{"1", Job(1), "1", Job(2), "1", Job(3), "2", Job(4)});
  // The working list's left end is the newest fetched, its right the oldest.
  CHECK(LRange(kWorkA) == Strings{Job(3), Job(2), Job(1)});
  CHECK(LRange(kWorkB) == Strings{Job(4)});
  CHECK(LRange("queue:b") == Strings{Job(5)});
  CHECK_FALSE(Exists("queue:a"));
}

TEST_CASE_FIXTURE(ScriptFixture, "fetch skips empty queues and stops when all are empty") {
  Push("queue:b", {Job(1), Job(2)});
  Strings got = Eval(ScriptId::kFetch, {"queue:a", kWorkA, "queue:b", kWorkB}, {"10"});
  CHECK(got == Strings{"2", Job(1), "2", Job(2)});
  CHECK_FALSE(Exists(kWorkA));
  CHECK(Eval(ScriptId::kFetch, {"queue:a", kWorkA, "queue:b", kWorkB}, {"10"}).empty());
}

TEST_CASE_FIXTURE(ScriptFixture, "fetch moves batches larger than one LPUSH, in order") {
  // 2,500 jobs: fetch.lua moves at most 1,000 per LRANGE/LPUSH round.
  Strings jobs;
  for (int i = 1; i <= 2600; ++i) jobs.push_back(Job(i));
  redis::Argv push = {"LPUSH", "queue:a"};
  push.insert(push.end(), jobs.begin(), jobs.end());
  Run(push);
  Strings got = Eval(ScriptId::kFetch, {"queue:a", kWorkA}, {"2500"});
  REQUIRE(got.size() == 5000);
  Strings working;
  for (int i = 1; i <= 2500; ++i) {
    CHECK(got[2 * (i - 1)] == "1");
    CHECK(got[2 * (i - 1) + 1] == Job(i));
    working.insert(working.begin(), Job(i));
  }
  CHECK(LRange(kWorkA) == working);
  CHECK(Integer({"LLEN", "queue:a"}) == 100);
  CHECK(LRange("queue:a").back() == Job(2501));
}

TEST_CASE_FIXTURE(ScriptFixture, "fetch of 0 jobs moves nothing") {
  Push("queue:a", {Job(1)});
  CHECK(Eval(ScriptId::kFetch, {"queue:a", kWorkA}, {"0"}).empty());
  CHECK(LRange("queue:a") == Strings{Job(1)});
}

TEST_CASE_FIXTURE(ScriptFixture, "fetch refuses bad arguments and moves nothing") {
  Push("queue:a", {Job(1)});
  CHECK(EvalError(ScriptId::kFetch, {"queue:a", kWorkA, "queue:b"}, {"1"}).IsInvalidArgument());
  CHECK(EvalError(ScriptId::kFetch, {"queue:a", kWorkA}, {"-1"}).IsInvalidArgument());
  CHECK(EvalError(ScriptId::kFetch, {"queue:a", kWorkA}, {"1.5"}).IsInvalidArgument());
  CHECK(EvalError(ScriptId::kFetch, {"queue:a", kWorkA}, {}).IsInvalidArgument());
  CHECK(LRange("queue:a") == Strings{Job(1)});
}

TEST_CASE_FIXTURE(ScriptFixture, "fetch skips a pair with a wrong-typed key and reports it") {
  // Unchecked, LTRIM would take the jobs off the queue and the LPUSH into
  // a working list of another type would fail after it: the jobs gone. And
  // one broken queue must not stop the others.
  Push("queue:a", {Job(1), Job(2)});
  Push("queue:c", {Job(5)});
  const redis::Argv keys = {"queue:a", kWorkA, "queue:b", kWorkB, "queue:c", "w:c"};
  std::string bad_key, type;
  SUBCASE("a queue is a string") {
    bad_key = "queue:b";
    type = "string";
    Run({"SET", bad_key, "x"});
  }
  SUBCASE("a working list is a set, with a job waiting in its queue") {
    bad_key = kWorkB;
    type = "set";
    Push("queue:b", {Job(3)});
    Run({"SADD", bad_key, "m"});
  }
  Strings got = Eval(ScriptId::kFetch, keys, {"10"});
  REQUIRE(got.size() == 8);
  CHECK(got[0] == "-2");
  CHECK(got[1] == "WRONGTYPE fetch: key " + bad_key + " holds a " + type + ", not a list");
  CHECK(Strings(got.begin() + 2, got.end()) ==
        Strings{"1", Job(1), "1", Job(2), "3", Job(5)});
  // The broken pair is as it was; the others moved.
  if (type == "string") CHECK(Get("queue:b") == "x");
  if (type == "set") {
    CHECK(SMembers(kWorkB) == Strings{"m"});
    CHECK(LRange("queue:b") == Strings{Job(3)});
  }
  CHECK(LRange(kWorkA) == Strings{Job(2), Job(1)});
  CHECK(LRange("w:c") == Strings{Job(5)});
}

// --------------------------------------------------------------- finish.lua

namespace {

const Strings kFailKeys = {kWorkA,           "retry",
                           "stat:processed", "stat:processed:2023-11-14",
                           "stat:failed",    "stat:failed:2023-11-14",
                           "rq:stat:expired"};

redis::Argv FailKeys(std::string_view target) {
  return {kFailKeys[0], target,       kFailKeys[2], kFailKeys[3],
          kFailKeys[4], kFailKeys[5], kFailKeys[6]};
}

}  // namespace

TEST_CASE_FIXTURE(ScriptFixture, "finish retry moves the new payload to retry and counts") {
  Push(kWorkA, {Job(1), Job(2)});
  std::string updated = Interrupted(Job(1), 0) + "x";  // any new bytes, stored verbatim
  Strings got = Eval(ScriptId::kFinish, FailKeys("retry"),
                     {Job(1), updated, "1700000200.5", "retry", kNow, kDeadMax, kDeadTimeout, "1"});
  CHECK(got == Strings{"1"});
  CHECK(LRange(kWorkA) == Strings{Job(2)});
  auto retry = ZRangeWithScores("retry");
  REQUIRE(retry.size() == 1);
  CHECK(retry[0].first == updated);
  CHECK(retry[0].second == 1700000200.5);
  for (const char* key : {"stat:processed", "stat:processed:2023-11-14", "stat:failed",
                          "stat:failed:2023-11-14"}) {
    CAPTURE(key);
    CHECK(Get(key) == "1");
  }
  CHECK(Ttl("stat:processed:2023-11-14") > 157680000 - 60);
  CHECK(Ttl("stat:failed:2023-11-14") > 157680000 - 60);
  CHECK(Ttl("stat:failed") == -1);
}

TEST_CASE_FIXTURE(ScriptFixture, "finish dead adds at now and trims the dead set") {
  Push(kWorkA, {Job(1)});
  Run({"ZADD", "dead", "1600000000.5", "too old"});
  Run({"ZADD", "dead", "1700000000.5", "recent 1"});
  Run({"ZADD", "dead", "1700000001.5", "recent 2"});
  Strings got = Eval(ScriptId::kFinish, FailKeys("dead"),
                     {Job(1), "new", "0", "dead", kNow, "3", kDeadTimeout, "1"});
  CHECK(got == Strings{"1"});
  // By age "too old" goes; by count (max 3 keeps at most 2) "recent 1" goes.
  auto dead = ZRangeWithScores("dead");
  REQUIRE(dead.size() == 2);
  CHECK(dead[0].first == "recent 2");
  CHECK(dead[1].first == "new");
  CHECK(dead[1].second == kNowValue);
  CHECK_FALSE(Exists("retry"));
}

TEST_CASE_FIXTURE(ScriptFixture, "finish discard only removes the job") {
  Push(kWorkA, {Job(1)});
  CHECK(Eval(ScriptId::kFinish, FailKeys("retry"),
             {Job(1), "new", "0", "discard", kNow, kDeadMax, kDeadTimeout, "1"}) == Strings{"1"});
  CHECK_FALSE(Exists(kWorkA));
  CHECK_FALSE(Exists("retry"));
  CHECK(Get("stat:failed") == "1");
}

TEST_CASE_FIXTURE(ScriptFixture, "finish of a job a janitor gave back writes no target") {
  Push(kWorkA, {Job(2)});
  for (const char* mode : {"retry", "dead"}) {
    CAPTURE(mode);
    Strings got = Eval(ScriptId::kFinish, FailKeys(mode == std::string("retry") ? "retry" : "dead"),
                       {Job(1), "new", "1700000200.5", mode, kNow, kDeadMax, kDeadTimeout, "1"});
    CHECK(got == Strings{"0"});
  }
  CHECK_FALSE(Exists("retry"));
  CHECK_FALSE(Exists("dead"));
  CHECK(LRange(kWorkA) == Strings{Job(2)});
  // It did run, twice: both runs count.
  CHECK(Get("stat:processed") == "2");
  CHECK(Get("stat:failed:2023-11-14") == "2");
}

TEST_CASE_FIXTURE(ScriptFixture, "finish writes a record only where the job's life ends") {
  // ARGV[10] the record, ARGV[11] its retention, KEYS[8] its key.
  auto keys = [](std::string_view target) {
    redis::Argv with = FailKeys(target);
    with.push_back("rq:job:j");
    return with;
  };
  // (Argv holds views: the strings they show must outlive the call.)
  auto args = [](std::string_view payload, std::string_view mode, std::string_view flag) {
    return redis::Argv{payload, "new", "1700000200.5",  mode, kNow, kDeadMax, kDeadTimeout,
                       flag,    "",    "{\"state\":1}", "60"};
  };
  // A success counted by the worker (flag 0) takes the full path with it.
  Push(kWorkA, {Job(1), Job(2), Job(3)});
  CHECK(Eval(ScriptId::kFinish, keys("dead"), args(Job(1), "done", "0")) == Strings{"1"});
  CHECK(Get("rq:job:j") == "{\"state\":1}");
  CHECK(Ttl("rq:job:j") > 50);
  CHECK_FALSE(Exists("stat:processed"));
  Run({"DEL", "rq:job:j"});
  // A retry's life goes on: no record.
  CHECK(Eval(ScriptId::kFinish, keys("retry"), args(Job(2), "retry", "1")) == Strings{"1"});
  CHECK_FALSE(Exists("rq:job:j"));
  // Gone from the working list already (a janitor gave it back): no record.
  CHECK(Eval(ScriptId::kFinish, keys("dead"), args(Job(9), "dead", "1")) == Strings{"0"});
  CHECK_FALSE(Exists("rq:job:j"));
  CHECK(Eval(ScriptId::kFinish, keys("dead"), args(Job(3), "dead", "1")) == Strings{"1"});
  CHECK(Get("rq:job:j") == "{\"state\":1}");
  // A record without its key or a retention is refused, before any write.
  Push(kWorkA, {Job(4)});
  auto before = Snapshot();
  std::string fourth = Job(4);
  redis::Argv no_ttl = args(fourth, "done", "1");
  no_ttl.back() = "0";
  CHECK(EvalError(ScriptId::kFinish, keys("dead"), no_ttl).IsInvalidArgument());
  CHECK(EvalError(ScriptId::kFinish, FailKeys("dead"), args(fourth, "done", "1"))
            .IsInvalidArgument());
  CHECK(Snapshot() == before);
}

TEST_CASE_FIXTURE(ScriptFixture, "finish with the count flag 0 counts nothing") {
  Push(kWorkA, {"not json"});
  CHECK(Eval(ScriptId::kFinish, FailKeys("dead"),
             {"not json", "not json", "0", "dead", kNow, kDeadMax, kDeadTimeout, "0"}) ==
        Strings{"1"});
  CHECK(ZRange("dead") == Strings{"not json"});
  for (const std::string& key : kFailKeys) {
    if (key != kWorkA && key != "retry") CHECK_FALSE(Exists(key));
  }
}

TEST_CASE_FIXTURE(ScriptFixture, "finish refuses bad arguments before writing") {
  Push(kWorkA, {Job(1)});
  auto before = Snapshot();
  CHECK(EvalError(ScriptId::kFinish, FailKeys("retry"),
                  {Job(1), "n", "1.5", "bury", kNow, kDeadMax, kDeadTimeout, "1"})
            .IsInvalidArgument());
  CHECK(EvalError(ScriptId::kFinish, FailKeys("retry"),
                  {Job(1), "n", "soon", "retry", kNow, kDeadMax, kDeadTimeout, "1"})
            .IsInvalidArgument());
  CHECK(EvalError(ScriptId::kFinish, FailKeys("dead"),
                  {Job(1), "n", "0", "dead", "1700000100", kDeadMax, kDeadTimeout, "1"})
            .IsInvalidArgument());
  CHECK(EvalError(ScriptId::kFinish, FailKeys("dead"),
                  {Job(1), "n", "0", "dead", kNow, "0", kDeadTimeout, "1"})
            .IsInvalidArgument());
  CHECK(EvalError(ScriptId::kFinish, FailKeys("retry"),
                  {Job(1), "n", "1.5", "retry", kNow, kDeadMax, kDeadTimeout, "yes"})
            .IsInvalidArgument());
  CHECK(Snapshot() == before);
}

TEST_CASE_FIXTURE(ScriptFixture, "finish refuses a wrong-typed target and keeps the job") {
  // Unchecked, LREM would remove the job and the insert would then fail.
  Push(kWorkA, {Job(1), Job(2)});
  SUBCASE("retry is a string") {
    Run({"SET", "retry", "x"});
    auto before = Snapshot();
    CheckWrongType(
        EvalError(ScriptId::kFinish, FailKeys("retry"),
                  {Job(1), "new", "1700000200.5", "retry", kNow, kDeadMax, kDeadTimeout, "1"}),
        "finish", "retry", "string", "zset");
    CHECK(Snapshot() == before);
    CHECK(LRange(kWorkA) == Strings{Job(2), Job(1)});
    CHECK(Get("retry") == "x");
  }
  SUBCASE("dead is a hash") {
    Run({"HSET", "dead", "f", "v"});
    auto before = Snapshot();
    CheckWrongType(EvalError(ScriptId::kFinish, FailKeys("dead"),
                             {Job(1), "new", "0", "dead", kNow, kDeadMax, kDeadTimeout, "1"}),
                   "finish", "dead", "hash", "zset");
    CHECK(Snapshot() == before);
    CHECK(LRange(kWorkA) == Strings{Job(2), Job(1)});
    CHECK(HGet("dead", "f") == "v");
    // Mode discard writes no target, so the target's type does not stop it.
    CHECK(Eval(ScriptId::kFinish, FailKeys("dead"),
               {Job(1), "new", "0", "discard", kNow, kDeadMax, kDeadTimeout, "1"}) == Strings{"1"});
    CHECK(LRange(kWorkA) == Strings{Job(2)});
    CHECK(HGet("dead", "f") == "v");
  }
}

TEST_CASE_FIXTURE(ScriptFixture, "finish refuses a wrong-typed counter before moving the job") {
  // Unchecked, the job would move to retry and the script fail after it,
  // on every later try as well.
  Push(kWorkA, {Job(1)});
  Run({"LPUSH", "stat:failed:2023-11-14", "x"});
  auto before = Snapshot();
  CheckWrongType(
      EvalError(ScriptId::kFinish, FailKeys("retry"),
                {Job(1), "new", "1700000200.5", "retry", kNow, kDeadMax, kDeadTimeout, "1"}),
      "finish", "stat:failed:2023-11-14", "list", "string");
  CHECK(Snapshot() == before);
  CHECK(LRange(kWorkA) == Strings{Job(1)});
  CHECK_FALSE(Exists("retry"));
  // With the count flag 0 no counter is written, so none is checked.
  CHECK(Eval(ScriptId::kFinish, FailKeys("dead"),
             {Job(1), Job(1), "0", "dead", kNow, kDeadMax, kDeadTimeout, "0"}) == Strings{"1"});
  CHECK(ZRange("dead") == Strings{Job(1)});
  CHECK(LRange("stat:failed:2023-11-14") == Strings{"x"});
}

TEST_CASE_FIXTURE(ScriptFixture,
                  "finish retry publishes the score when the job becomes retry's earliest") {
  const std::string channel = keys.WakeScheduled();
  Subscription subscriber(server().socket_path(), channel, Subscription::Kind::kChannel);
  Push(kWorkA, {Job(1), Job(2), Job(3), Job(4), Job(5), Job(6)});
  int step = 0;
  // One finish.lua call with ARGV[9] = `wake` (nullptr: no ARGV[9]); what it
  // published on the channel.
  auto fail = [&](int n, const std::string& score, const std::string& mode,
                  const char* wake) -> Strings {
    std::string original = Job(n), updated = "failed " + std::to_string(n);
    redis::Argv args = {original, updated, score, mode, kNow, kDeadMax, kDeadTimeout, "1"};
    if (wake != nullptr) args.push_back(wake);
    Result<redis::ReplyPtr> reply =
        redis().Eval(ScriptId::kFinish, FailKeys(mode == "dead" ? "dead" : "retry"), args);
    REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
    std::string marker = "marker " + std::to_string(++step);
    Run({"PUBLISH", channel, marker});
    Strings payloads;
    for (const Subscription::Message& m : subscriber.Until(marker)) payloads.push_back(m.payload);
    return payloads;
  };

  // The first retry is the earliest.
  CHECK(fail(1, "1700000200.5", "retry", channel.c_str()) == Strings{"1700000200.5"});
  // A later one changes no worker's wake-up.
  CHECK(fail(2, "1700000300.5", "retry", channel.c_str()).empty());
  // An earlier one does.
  CHECK(fail(3, "1700000100.5", "retry", channel.c_str()) == Strings{"1700000100.5"});
  // No channel (an empty or a missing ARGV[9]): no message.
  CHECK(fail(4, "1700000050.5", "retry", "").empty());
  CHECK(fail(5, "1700000040.5", "retry", nullptr).empty());
  // Dead adds nothing to retry.
  CHECK(fail(6, "1600000000.5", "dead", channel.c_str()).empty());
  // A job a janitor gave back is not added, so it wakes nobody.
  CHECK(fail(1, "1600000000.5", "retry", channel.c_str()).empty());
  CHECK(ZRange("retry") == Strings{"failed 5", "failed 4", "failed 3", "failed 1", "failed 2"});
}

// ------------------------------------------------------------ heartbeat.lua

namespace {

const std::string kId = "host:123:abcdef012345";

// The seven heartbeat.lua keys of kId.
struct BeatKeyNames {
  Keys keys;
  std::string heartbeat = keys.Heartbeat(kId);
  std::string registry = keys.Registry();
  std::string process = Keys().Process(kId);
  std::string work = Keys().Work(kId);
  std::string workers = Keys().Workers(kId);
  std::string signals = Keys().Signals(kId);
  redis::Argv Argv() const {
    return {heartbeat, registry, Keys().Processes(), process, work, workers, signals};
  }
};
const BeatKeyNames kBeat;

}  // namespace

TEST_CASE_FIXTURE(ScriptFixture, "heartbeat writes every key and field with its TTL") {
  const std::string entry = R"({"identity":"host:123:abcdef012345","queues":["a"]})";
  const std::string info = R"({"hostname":"host","pid":123})";
  const std::string w1 = R"({"queue":"a","payload":"{\"class\":\"A\"}","run_at":1700000000})";
  const std::string w2 = R"({"queue":"b","payload":"{}","run_at":1700000001})";
  Run({"HSET", Keys().Work(kId), "stale", "x"});

  Strings got = Eval(ScriptId::kHeartbeat, kBeat.Argv(),
                     {kId, "30000", entry, info, "2", "1700000100.5", "false", "1024", "250",
                      "t1", w1, "t2", w2});
  CHECK(got == Strings{"0", "(nil)"});
  CHECK(Get(keys.Heartbeat(kId)) == "1");
  long long pttl = Integer({"PTTL", keys.Heartbeat(kId)});
  CHECK(pttl > 29000);
  CHECK(pttl <= 30000);
  CHECK(HGet(keys.Registry(), kId) == entry);
  CHECK(SMembers("processes") == Strings{kId});
  CHECK(HGet(kId, "info") == info);
  CHECK(HGet(kId, "busy") == "2");
  CHECK(HGet(kId, "beat") == "1700000100.5");
  CHECK(HGet(kId, "quiet") == "false");
  CHECK(HGet(kId, "rss") == "1024");
  CHECK(HGet(kId, "rtt_us") == "250");
  CHECK(Integer({"HLEN", kId}) == 6);
  CHECK(Ttl(kId) >= 59);
  CHECK(Ttl(kId) <= 60);
  for (const std::string& key : {Keys().Work(kId), Keys().Workers(kId)}) {
    CAPTURE(key);
    CHECK(Integer({"HLEN", key}) == 2);  // "stale" is gone
    CHECK(HGet(key, "t1") == w1);
    CHECK(HGet(key, "t2") == w2);
    CHECK(Ttl(key) >= 59);
    CHECK(Ttl(key) <= 60);
  }
}

TEST_CASE_FIXTURE(ScriptFixture, "heartbeat reports an existing key and pops one signal") {
  redis::Argv args = {kId, "30000", "{}", "{}", "0", "1700000100.5", "true", "0", "1"};
  Eval(ScriptId::kHeartbeat, kBeat.Argv(), args);
  Run({"LPUSH", Keys().Signals(kId), "TSTP"});
  Run({"LPUSH", Keys().Signals(kId), "TERM"});
  Run({"HSET", Keys().Workers(kId), "old", "x"});
  CHECK(Eval(ScriptId::kHeartbeat, kBeat.Argv(), args) == Strings{"1", "TSTP"});
  CHECK(LRange(Keys().Signals(kId)) == Strings{"TERM"});
  CHECK(HGet(kId, "quiet") == "true");
  // No running jobs: both work hashes are gone.
  CHECK_FALSE(Exists(Keys().Work(kId)));
  CHECK_FALSE(Exists(Keys().Workers(kId)));
  CHECK(Eval(ScriptId::kHeartbeat, kBeat.Argv(), args) == Strings{"1", "TERM"});
  // A janitor removed the heartbeat and the registry entry: the beat says
  // so and registers again.
  Run({"DEL", keys.Heartbeat(kId), keys.Registry()});
  CHECK(Eval(ScriptId::kHeartbeat, kBeat.Argv(), args) == Strings{"0", "(nil)"});
  CHECK(HGet(keys.Registry(), kId) == "{}");
}

TEST_CASE_FIXTURE(ScriptFixture, "heartbeat refuses bad arguments before writing") {
  CHECK(EvalError(ScriptId::kHeartbeat, kBeat.Argv(),
                  {kId, "0", "{}", "{}", "0", "1.5", "false", "0", "1"})
            .IsInvalidArgument());
  CHECK(EvalError(ScriptId::kHeartbeat, kBeat.Argv(),
                  {kId, "100", "{}", "{}", "0", "1.5", "no", "0", "1"})
            .IsInvalidArgument());
  CHECK(EvalError(ScriptId::kHeartbeat, kBeat.Argv(),
                  {kId, "100", "{}", "{}", "0", "1.5", "false", "0", "1", "t1"})
            .IsInvalidArgument());
  CHECK(Snapshot().empty());
}

// -------------------------------------------------------------- recover.lua

namespace {

struct RecoverArgs {
  std::string max_interruptions = "3";
  std::string now = kNow;
  std::string limit = "1000";
  std::string force = "0";
  std::string dry_run = "0";
  std::string dead_max = kDeadMax;
  std::string dead_timeout = kDeadTimeout;
  std::string queue = "a";
  std::string offset = "0";
  redis::Argv Argv() const {
    return {max_interruptions, now, limit, force, dry_run, dead_max, dead_timeout, queue, offset};
  }
};

}  // namespace

struct RecoverFixture : ScriptFixture {
  std::string heartbeat = keys.Heartbeat("h:1:abc");
  redis::Argv Keys5() { return {heartbeat, kWorkA, "queue:a", "dead", "queues"}; }
  Strings Recover(const RecoverArgs& args) {
    return Eval(ScriptId::kRecover, Keys5(), args.Argv());
  }
  // Fetches jobs 1..n from queue:a into the working list, 1 first.
  void Fetched(int n) {
    for (int i = 1; i <= n; ++i) Run({"LPUSH", kWorkA, Job(i)});
  }
};

TEST_CASE_FIXTURE(RecoverFixture, "recover leaves a live process alone") {
  Fetched(3);
  Run({"SET", heartbeat, "1", "PX", "30000"});
  auto before = Snapshot();
  CHECK(Recover({}) == Strings{"alive", "0", "0", "3"});
  RecoverArgs dry;
  dry.dry_run = "1";
  CHECK(Recover(dry) == Strings{"alive", "0", "0", "3"});
  CHECK(Snapshot() == before);
}

TEST_CASE_FIXTURE(RecoverFixture, "recover puts jobs back oldest rightmost, counted") {
  Fetched(3);
  Run({"LPUSH", "queue:a", "waiting"});
  CHECK(Recover({}) == Strings{"ok", "3", "0", "0"});
  CHECK(LRange("queue:a") ==
        Strings{"waiting", Interrupted(Job(3), 1), Interrupted(Job(2), 1), Interrupted(Job(1), 1)});
  CHECK_FALSE(Exists(kWorkA));
  CHECK(SMembers("queues") == Strings{"a"});
  // The next fetch takes the oldest again.
  CHECK(Eval(ScriptId::kFetch, {"queue:a", kWorkA}, {"1"}) ==
        Strings{"1", Interrupted(Job(1), 1)});
}

TEST_CASE_FIXTURE(RecoverFixture, "recover with a limit loops to the same order") {
  Fetched(5);
  RecoverArgs args;
  args.limit = "2";
  CHECK(Recover(args) == Strings{"ok", "2", "0", "3"});
  CHECK(Recover(args) == Strings{"ok", "2", "0", "1"});
  CHECK(Recover(args) == Strings{"ok", "1", "0", "0"});
  CHECK(Recover(args) == Strings{"ok", "0", "0", "0"});
  Strings expected;
  for (int i = 5; i >= 1; --i) expected.push_back(Interrupted(Job(i), 1));
  CHECK(LRange("queue:a") == expected);
}

TEST_CASE_FIXTURE(RecoverFixture, "recover with force takes a live process's jobs") {
  Fetched(2);
  Run({"SET", heartbeat, "1", "PX", "30000"});
  RecoverArgs args;
  args.force = "1";
  CHECK(Recover(args) == Strings{"ok", "2", "0", "0"});
  CHECK(LRange("queue:a") == Strings{Interrupted(Job(2), 1), Interrupted(Job(1), 1)});
  CHECK(Exists(heartbeat));  // forget.lua, not recover.lua, removes it
}

TEST_CASE_FIXTURE(RecoverFixture, "recover sends jobs over max_interruptions dead") {
  const std::string at_limit = Interrupted(Job(1), 3);
  const std::string below = Interrupted(Job(2), 2);
  const std::string failed_before =
      R"({"class":"A","args":[],"failed_at":1690000000.5,"error_class":"Boom",)"
      R"("interrupted_count":3})";
  Run({"LPUSH", kWorkA, at_limit});
  Run({"LPUSH", kWorkA, below});
  Run({"LPUSH", kWorkA, failed_before});
  Run({"LPUSH", kWorkA, "not json"});
  CHECK(Recover({}) == Strings{"ok", "1", "3", "0"});
  CHECK(LRange("queue:a") == Strings{Interrupted(Job(2), 3)});
  const std::string message =
      R"("error_message":"interrupted 4 times: its worker process stopped while running it )"
      R"j((max_interruptions 3)")j";
  auto dead = ZRangeWithScores("dead");
  REQUIRE(dead.size() == 3);
  for (const auto& [member, score] : dead) CHECK(score == kNowValue);
  Strings members = ZRange("dead");
  std::sort(members.begin(), members.end());
  Strings expected = {
      Job(1).substr(0, Job(1).size() - 1) +
          R"(,"interrupted_count":4,"error_class":"Reliableq::Interrupted",)" + message +
          R"(,"failed_at":1700000100.250000})",
      R"({"class":"A","args":[],"failed_at":1690000000.5,"error_class":"Reliableq::Interrupted",)"
      R"("interrupted_count":4,)" +
          message + "}",
      "not json"};
  std::sort(expected.begin(), expected.end());
  CHECK(members == expected);
  CHECK(SMembers("queues") == Strings{"a"});
}

TEST_CASE_FIXTURE(RecoverFixture, "recover with no limit on interruptions, and all dead") {
  Run({"LPUSH", kWorkA, Interrupted(Job(1), 50)});
  RecoverArgs none;
  none.max_interruptions = "-1";
  CHECK(Recover(none) == Strings{"ok", "1", "0", "0"});
  CHECK(LRange("queue:a") == Strings{Interrupted(Job(1), 51)});

  Run({"DEL", "queue:a", "queues"});
  Fetched(2);
  RecoverArgs zero;
  zero.max_interruptions = "0";
  CHECK(Recover(zero) == Strings{"ok", "0", "2", "0"});
  CHECK_FALSE(Exists("queue:a"));
  CHECK_FALSE(Exists("queues"));  // nothing was requeued
}

TEST_CASE_FIXTURE(RecoverFixture, "recover trims the dead set by count and by age") {
  Run({"ZADD", "dead", std::to_string(kNowValue - 15552000 - 1), "too old"});
  Run({"ZADD", "dead", std::to_string(kNowValue - 15552000 + 100), "old but kept"});
  for (int i = 0; i < 5; ++i) {
    Run({"ZADD", "dead", std::to_string(kNowValue - 50 + i), "recent " + std::to_string(i)});
  }
  Fetched(2);
  RecoverArgs args;
  args.max_interruptions = "0";
  args.dead_max = "5";  // Sidekiq's trim: at most 4 stay
  CHECK(Recover(args) == Strings{"ok", "0", "2", "0"});
  Strings dead = ZRange("dead");
  REQUIRE(dead.size() == 4);
  CHECK(dead[0] == "recent 3");
  CHECK(dead[1] == "recent 4");
  // Both jobs died at the same `now`; ZSET ties order by member bytes.
  CHECK(ZRangeWithScores("dead")[2].second == kNowValue);
  CHECK(ZRangeWithScores("dead")[3].second == kNowValue);

  Run({"DEL", "dead"});
  Run({"ZADD", "dead", std::to_string(kNowValue - 15552000 - 1), "too old"});
  Run({"ZADD", "dead", std::to_string(kNowValue - 15552000 + 100), "old but kept"});
  Fetched(1);
  CHECK(Recover(args) == Strings{"ok", "0", "1", "0"});
  Strings by_age = ZRange("dead");
  REQUIRE(by_age.size() == 2);
  CHECK(by_age[0] == "old but kept");
}

TEST_CASE_FIXTURE(RecoverFixture, "recover dry run counts by pages and changes nothing") {
  Fetched(5);
  Run({"LPUSH", kWorkA, Interrupted(Job(6), 3)});  // the newest; would go dead
  Run({"LPUSH", "queue:a", "waiting"});
  Run({"SADD", "queues", "other"});
  Run({"ZADD", "dead", "1700000000.5", "old dead"});
  auto before = Snapshot();
  RecoverArgs args;
  args.dry_run = "1";
  args.limit = "2";
  CHECK(Recover(args) == Strings{"ok", "1", "1", "4"});
  args.offset = "2";
  CHECK(Recover(args) == Strings{"ok", "2", "0", "2"});
  args.offset = "4";
  CHECK(Recover(args) == Strings{"ok", "2", "0", "0"});
  args.offset = "6";
  CHECK(Recover(args) == Strings{"ok", "0", "0", "0"});
  args.offset = "0";
  args.limit = "1000";
  CHECK(Recover(args) == Strings{"ok", "5", "1", "0"});
  CHECK(Snapshot() == before);
}

TEST_CASE_FIXTURE(RecoverFixture, "recover refuses bad arguments before writing") {
  Fetched(2);
  auto before = Snapshot();
  std::vector<RecoverArgs> bad(8);
  bad[0].now = "1700000100";  // no fractional part
  bad[1].limit = "0";
  bad[2].max_interruptions = "three";
  bad[3].force = "yes";
  bad[4].dead_max = "0";
  bad[5].queue = "";
  bad[6].dry_run = "1";
  bad[6].offset = "-1";
  bad[7].dead_timeout = "-5";
  for (const RecoverArgs& args : bad) {
    CHECK(EvalError(ScriptId::kRecover, Keys5(), args.Argv()).IsInvalidArgument());
  }
  CHECK(Snapshot() == before);
}

TEST_CASE_FIXTURE(RecoverFixture, "recover refuses wrong-typed keys and moves nothing") {
  // Unchecked, each job would leave the working list before its write
  // failed. With `elsewhere`, both jobs go where the bad key is not needed.
  Fetched(2);
  RecoverArgs args, elsewhere;
  elsewhere.max_interruptions = "0";  // both go dead
  std::string bad_key, actual, want;
  SUBCASE("the queue is a string") {
    bad_key = "queue:a";
    actual = "string";
    want = "list";
    Run({"SET", bad_key, "x"});
  }
  SUBCASE("dead is a list, and both jobs would go dead") {
    bad_key = "dead";
    actual = "list";
    want = "zset";
    args.max_interruptions = "0";
    elsewhere.max_interruptions = "3";  // both go back
    Run({"LPUSH", bad_key, "x"});
  }
  SUBCASE("queues is a hash") {
    bad_key = "queues";
    actual = "hash";
    want = "set";
    Run({"HSET", bad_key, "f", "v"});
  }
  auto before = Snapshot();
  CheckWrongType(EvalError(ScriptId::kRecover, Keys5(), args.Argv()), "recover", bad_key, actual,
                 want);
  CHECK(Snapshot() == before);
  CHECK(LRange(kWorkA) == Strings{Job(2), Job(1)});
  // A dry run says so too: it foretells the real run.
  RecoverArgs dry = args;
  dry.dry_run = "1";
  CheckWrongType(EvalError(ScriptId::kRecover, Keys5(), dry.Argv()), "recover", bad_key, actual,
                 want);
  // A key the call does not write is not checked.
  CHECK(Recover(elsewhere) == (elsewhere.max_interruptions == "0" ? Strings{"ok", "0", "2", "0"}
                                                                  : Strings{"ok", "2", "0", "0"}));
  CHECK_FALSE(Exists(kWorkA));
  CHECK(Snapshot()[bad_key] == before[bad_key]);
}

// -------------------------------------------------------------- requeue.lua

namespace {

// requeue.lua's ARGV. The strings live in `storage`, which must outlive the
// returned views.
redis::Argv RequeueArgs(Strings* storage, const char* mode, const Strings& payloads,
                        const char* max = "3") {
  // ARGV[7..9]: the sequence context (lib/sequence.lua).
  *storage = {mode,         max,          kNow,
              kDeadMax,     kDeadTimeout, "a",
              "reliableq:", "queue:",     "reliableq:wake:queue:"};
  storage->insert(storage->end(), payloads.begin(), payloads.end());
  return redis::Argv(storage->begin(), storage->end());
}

const redis::Argv kRequeueKeys = {kWorkA, "queue:a", "dead", "queues"};

}  // namespace

TEST_CASE_FIXTURE(ScriptFixture, "requeue keep gives back what is not listed, oldest rightmost") {
  Strings args;
  for (int i = 1; i <= 4; ++i) Run({"LPUSH", kWorkA, Job(i)});  // [4,3,2,1]
  Run({"LPUSH", "queue:a", "waiting"});
  CHECK(Eval(ScriptId::kRequeue, kRequeueKeys, RequeueArgs(&args, "keep", {Job(1), Job(3)})) ==
        Strings{"2", "0", "2"});
  CHECK(LRange(kWorkA) == Strings{Job(3), Job(1)});
  CHECK(LRange("queue:a") == Strings{"waiting", Job(4), Job(2)});  // untouched bytes
  CHECK(SMembers("queues") == Strings{"a"});
}

TEST_CASE_FIXTURE(ScriptFixture, "requeue keep with duplicate payloads keeps as many as listed") {
  Strings args;
  const std::string d = Job(7);
  for (const std::string& p : {d, d, Job(1), d}) Run({"LPUSH", kWorkA, p});  // [d,x,d,d]
  CHECK(Eval(ScriptId::kRequeue, kRequeueKeys, RequeueArgs(&args, "keep", {d, d, Job(9)})) ==
        Strings{"2", "0", "2"});
  CHECK(LRange(kWorkA) == Strings{d, d});
  CHECK(LRange("queue:a") == Strings{Job(1), d});
}

TEST_CASE_FIXTURE(ScriptFixture, "requeue keep of every job changes nothing") {
  Strings args;
  for (int i = 1; i <= 2; ++i) Run({"LPUSH", kWorkA, Job(i)});
  auto before = Snapshot();
  CHECK(Eval(ScriptId::kRequeue, kRequeueKeys, RequeueArgs(&args, "keep", {Job(2), Job(1)})) ==
        Strings{"0", "0", "2"});
  CHECK(Snapshot() == before);
}

TEST_CASE_FIXTURE(ScriptFixture, "requeue interrupt counts the listed jobs only") {
  Strings args;
  const std::string r1 = Job(1), r2 = Interrupted(Job(2), 3);
  const std::string n1 = Job(3), n3 = Job(4);
  for (const std::string& p : {r1, n1, r2, n3}) Run({"LPUSH", kWorkA, p});  // [n3,r2,n1,r1]
  CHECK(Eval(ScriptId::kRequeue, kRequeueKeys, RequeueArgs(&args, "interrupt", {r1, r2})) ==
        Strings{"3", "1", "0"});
  CHECK_FALSE(Exists(kWorkA));
  CHECK(LRange("queue:a") == Strings{n3, n1, Interrupted(r1, 1)});
  Strings dead = ZRange("dead");
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].find(R"("interrupted_count":4,"error_class":"Reliableq::Interrupted")") !=
        std::string::npos);
  CHECK(SMembers("queues") == Strings{"a"});
}

TEST_CASE_FIXTURE(ScriptFixture, "requeue interrupt with duplicates counts each listed copy") {
  Strings args;
  const std::string d = Job(5);
  for (int i = 0; i < 3; ++i) Run({"LPUSH", kWorkA, d});
  CHECK(Eval(ScriptId::kRequeue, kRequeueKeys, RequeueArgs(&args, "interrupt", {d, d, Job(8)})) ==
        Strings{"3", "0", "0"});
  CHECK(LRange("queue:a") == Strings{Interrupted(d, 1), Interrupted(d, 1), d});
}

TEST_CASE_FIXTURE(ScriptFixture, "requeue refuses bad arguments before writing") {
  Strings args;
  Run({"LPUSH", kWorkA, Job(1)});
  auto before = Snapshot();
  CHECK(EvalError(ScriptId::kRequeue, kRequeueKeys, RequeueArgs(&args, "all", {}))
            .IsInvalidArgument());
  CHECK(EvalError(ScriptId::kRequeue, kRequeueKeys, RequeueArgs(&args, "interrupt", {}, "x"))
            .IsInvalidArgument());
  CHECK(Snapshot() == before);
}

TEST_CASE_FIXTURE(ScriptFixture, "requeue refuses wrong-typed keys and leaves the working list") {
  Strings args;
  // Interrupted once more, it goes dead (max 3); Job(2) was not started.
  const std::string running = Interrupted(Job(1), 3);
  SUBCASE("the queue is a string") {
    Run({"LPUSH", kWorkA, Job(2)});
    Run({"LPUSH", kWorkA, running});
    Run({"SET", "queue:a", "x"});
    auto before = Snapshot();
    CheckWrongType(
        EvalError(ScriptId::kRequeue, kRequeueKeys, RequeueArgs(&args, "interrupt", {running})),
        "requeue", "queue:a", "string", "list");
    CHECK(Snapshot() == before);
    CHECK(LRange(kWorkA) == Strings{running, Job(2)});
  }
  SUBCASE("dead is a set") {
    // Unchecked, Job(2) would be pushed to its queue before the insert of
    // `running` failed: Job(2) in the queue and in the working list.
    Run({"LPUSH", kWorkA, running});
    Run({"LPUSH", kWorkA, Job(2)});
    Run({"SADD", "dead", "m"});
    auto before = Snapshot();
    CheckWrongType(
        EvalError(ScriptId::kRequeue, kRequeueKeys, RequeueArgs(&args, "interrupt", {running})),
        "requeue", "dead", "set", "zset");
    CHECK(Snapshot() == before);
    CHECK(LRange(kWorkA) == Strings{Job(2), running});
    // Mode keep never writes dead, so its type does not stop a reconcile.
    CHECK(Eval(ScriptId::kRequeue, kRequeueKeys, RequeueArgs(&args, "keep", {running})) ==
          Strings{"1", "0", "1"});
    CHECK(LRange(kWorkA) == Strings{running});
    CHECK(LRange("queue:a") == Strings{Job(2)});
    CHECK(SMembers("dead") == Strings{"m"});
  }
  SUBCASE("queues is a string") {
    // Unchecked, Job(2) would move and the SADD fail after it.
    Run({"LPUSH", kWorkA, running});
    Run({"LPUSH", kWorkA, Job(2)});
    Run({"SET", "queues", "x"});
    auto before = Snapshot();
    CheckWrongType(
        EvalError(ScriptId::kRequeue, kRequeueKeys, RequeueArgs(&args, "keep", {running})),
        "requeue", "queues", "string", "set");
    CHECK(Snapshot() == before);
    CHECK(LRange(kWorkA) == Strings{Job(2), running});
    // A reconcile that gives nothing back does not write queues, so its type
    // does not stop it.
    CHECK(Eval(ScriptId::kRequeue, kRequeueKeys,
               RequeueArgs(&args, "keep", {running, Job(2)})) == Strings{"0", "0", "2"});
    CHECK(Snapshot() == before);
  }
}

// --------------------------------------------------------------- forget.lua

namespace {

struct ForgetSetup {
  Keys keys;
  std::string heartbeat = keys.Heartbeat(kId);
  std::string registry = keys.Registry();
  std::string process = Keys().Process(kId);
  std::string work = Keys().Work(kId);
  std::string workers = Keys().Workers(kId);
  std::string working_a = keys.Working(kId, "a");
  std::string working_b = keys.Working(kId, "b");
  redis::Argv Keys8() const {
    return {heartbeat, registry, Keys().Processes(), process, work, workers, working_a, working_b};
  }
};

}  // namespace

TEST_CASE_FIXTURE(ScriptFixture, "forget unregisters a dead process with empty lists") {
  ForgetSetup f;
  Run({"HSET", f.registry, kId, "{}", "other:1:000000000000", "{}"});
  Run({"SADD", "processes", kId, "other:1:000000000000"});
  Run({"HSET", f.process, "busy", "0"});
  Run({"HSET", f.work, "t", "{}"});
  Run({"HSET", f.workers, "t", "{}"});
  CHECK(Eval(ScriptId::kForget, f.Keys8(), {kId, "0"}) == Strings{"1"});
  CHECK(HGet(f.registry, "other:1:000000000000") == "{}");
  CHECK(Integer({"HLEN", f.registry}) == 1);
  CHECK(SMembers("processes") == Strings{"other:1:000000000000"});
  for (const std::string& key : {f.process, f.work, f.workers}) CHECK_FALSE(Exists(key));
}

TEST_CASE_FIXTURE(ScriptFixture, "forget refuses a live heartbeat or a non-empty list") {
  ForgetSetup f;
  Run({"HSET", f.registry, kId, "{}"});
  Run({"SADD", "processes", kId});
  Run({"SET", f.heartbeat, "1", "PX", "30000"});
  auto before = Snapshot();
  CHECK(Eval(ScriptId::kForget, f.Keys8(), {kId, "0"}) == Strings{"0"});
  CHECK(Snapshot() == before);

  Run({"DEL", f.heartbeat});
  Run({"LPUSH", f.working_b, Job(1)});
  before = Snapshot();
  CHECK(Eval(ScriptId::kForget, f.Keys8(), {kId, "0"}) == Strings{"0"});
  CHECK(Eval(ScriptId::kForget, f.Keys8(), {kId, "1"}) == Strings{"0"});
  CHECK(Snapshot() == before);
}

TEST_CASE_FIXTURE(ScriptFixture, "forget with force removes a live process's heartbeat") {
  ForgetSetup f;
  Run({"HSET", f.registry, kId, "{}"});
  Run({"SET", f.heartbeat, "1", "PX", "30000"});
  CHECK(Eval(ScriptId::kForget, f.Keys8(), {kId, "1"}) == Strings{"1"});
  CHECK_FALSE(Exists(f.heartbeat));
  CHECK_FALSE(Exists(f.registry));
}

// -------------------------------------------------------------- promote.lua

namespace {

const redis::Argv kPromoteKeys = {"schedule", "queues", "dead", "queue:a"};

}  // namespace

TEST_CASE_FIXTURE(ScriptFixture, "promote moves only what is due by Redis's clock, or by now") {
  // Read from the server the script runs on, as the script reads it.
  auto time = redis().Command({"TIME"});
  REQUIRE(time.ok());
  const double redis_now = std::stod((*time)->element[0]->str);
  auto seconds = [](double at) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.6f", at);
    return std::string(text);
  };
  Run({"ZADD", "schedule", seconds(redis_now - 10), Job(1)});
  Run({"ZADD", "schedule", seconds(redis_now + 60), Job(2)});
  const Strings both = {"4", "a", Job(1), "4", "a", Job(2)};
  auto call = [&](const std::string& now) {
    Strings storage = {now, kDeadMax, kDeadTimeout, ""};
    storage.insert(storage.end(), both.begin(), both.end());
    return Eval(ScriptId::kPromote, kPromoteKeys, redis::Argv(storage.begin(), storage.end()));
  };
  SUBCASE("no now: TIME, whatever clock the caller read the members by") {
    // A caller a minute ahead found both due; the later one stays.
    CHECK(call("") == Strings{"1", "0", "0", "1"});
    CHECK(ZRange("schedule") == Strings{Job(2)});
    REQUIRE(LRange("queue:a").size() == 1);
    // Job() is no JSON a parser takes (a raw NUL): the field is read as text.
    const std::string moved = LRange("queue:a")[0];
    const std::string field = "\"enqueued_at\":";
    REQUIRE(moved.find(field) != std::string::npos);
    double enqueued_at = std::stod(moved.substr(moved.find(field) + field.size()));
    CHECK(enqueued_at >= redis_now);
    CHECK(enqueued_at < redis_now + 5);
  }
  SUBCASE("a given now, as tests and tools give it") {
    CHECK(call(seconds(redis_now + 30)) == Strings{"1", "0", "0", "1"});
    CHECK(call(seconds(redis_now + 61)) == Strings{"1", "0", "1", "0"});
    CHECK_FALSE(Exists("schedule"));
  }
}

TEST_CASE_FIXTURE(ScriptFixture, "promote refuses wrong-typed keys and keeps the due members") {
  // Job(1) goes to queue:a, "not a job" (index 0) to dead. Unchecked, each
  // would be removed from schedule before its write failed.
  Run({"ZADD", "schedule", "1700000000.5", Job(1)});
  Run({"ZADD", "schedule", "1700000001.5", "not a job"});
  const Strings storage = {kNow, kDeadMax, kDeadTimeout, "", "4", "a", Job(1), "0", "", "not a job"};
  const redis::Argv args(storage.begin(), storage.end());
  std::string bad_key, actual, want;
  SUBCASE("the queue is a string") {
    bad_key = "queue:a";
    actual = "string";
    want = "list";
    Run({"SET", bad_key, "x"});
  }
  SUBCASE("queues is a list") {
    bad_key = "queues";
    actual = "list";
    want = "set";
    Run({"LPUSH", bad_key, "x"});
  }
  SUBCASE("dead is a hash") {
    bad_key = "dead";
    actual = "hash";
    want = "zset";
    Run({"HSET", bad_key, "f", "v"});
  }
  auto before = Snapshot();
  CheckWrongType(EvalError(ScriptId::kPromote, kPromoteKeys, args), "promote", bad_key, actual,
                 want);
  CHECK(Snapshot() == before);
  CHECK(ZRange("schedule") == Strings{Job(1), "not a job"});
  // The same call moves both once the key is gone.
  Run({"DEL", bad_key});
  CHECK(Eval(ScriptId::kPromote, kPromoteKeys, args) == Strings{"1", "1", "0", "0"});
  CHECK_FALSE(Exists("schedule"));
  CHECK(LRange("queue:a").size() == 1);
  CHECK(ZRange("dead") == Strings{"not a job"});
}

// ------------------------------------------------------------ retry_now.lua

TEST_CASE_FIXTURE(ScriptFixture, "retry_now refuses wrong-typed keys and keeps the entry") {
  // Unchecked, ZREM would remove the entry before its LPUSH or SADD failed.
  Run({"ZADD", "retry", "1700000200.5", Job(1)});
  const redis::Argv keys = {"retry", "queues", "queue:a"};
  const Strings storage = {kNow, "1", "3", "a", Job(1)};
  const redis::Argv args(storage.begin(), storage.end());
  std::string bad_key, actual, want;
  SUBCASE("the queue is a hash") {
    bad_key = "queue:a";
    actual = "hash";
    want = "list";
    Run({"HSET", bad_key, "f", "v"});
  }
  SUBCASE("queues is a string") {
    bad_key = "queues";
    actual = "string";
    want = "set";
    Run({"SET", bad_key, "x"});
  }
  auto before = Snapshot();
  CheckWrongType(EvalError(ScriptId::kRetryNow, keys, args), "retry_now", bad_key, actual, want);
  CHECK(Snapshot() == before);
  CHECK(ZRange("retry") == Strings{Job(1)});
  Run({"DEL", bad_key});
  CHECK(Eval(ScriptId::kRetryNow, keys, args) == Strings{"1", "0"});
  CHECK_FALSE(Exists("retry"));
  CHECK(LRange("queue:a").size() == 1);
}

// ----------------------------------------------------------------- kill.lua

TEST_CASE_FIXTURE(ScriptFixture, "kill refuses a wrong-typed dead set and keeps the entry") {
  // Unchecked, ZREM would remove the entry and the ZADD into the list fail.
  Run({"ZADD", "retry", "1700000200.5", Job(1)});
  Run({"LPUSH", "dead", "x"});
  auto before = Snapshot();
  CheckWrongType(EvalError(ScriptId::kKill, {"retry", "dead"},
                           {kNow, kDeadMax, kDeadTimeout, "", "", "", Job(1)}),
                 "kill", "dead", "list", "zset");
  CHECK(Snapshot() == before);
  CHECK(ZRange("retry") == Strings{Job(1)});
  CHECK(LRange("dead") == Strings{"x"});
  Run({"DEL", "dead"});
  CHECK(Eval(ScriptId::kKill, {"retry", "dead"},
             {kNow, kDeadMax, kDeadTimeout, "", "", "", Job(1)}) == Strings{"1", "0"});
  CHECK(ZRange("dead") == Strings{Job(1)});
}

// ----------------------------------------------------------- script cache

TEST_CASE_FIXTURE(ScriptFixture, "Eval still works after SCRIPT FLUSH") {
  REQUIRE(redis().LoadScripts().ok());
  Run({"SCRIPT", "FLUSH"});
  Push("queue:a", {Job(1)});
  CHECK(Eval(ScriptId::kFetch, {"queue:a", kWorkA}, {"1"}) == Strings{"1", Job(1)});
  // The EVAL fallback put the script back: the next call is an EVALSHA hit.
  auto cached = redis().Command({"SCRIPT", "EXISTS", GetScript(ScriptId::kFetch).sha1});
  REQUIRE(cached.ok());
  CHECK((*cached)->element[0]->integer == 1);
}
