// Unique jobs and expiry against a real Redis: push_unique.lua, the release
// of a job's unique key by every script that ends its life (compare-and-
// delete), discard.lua, and the client's kDuplicate.

#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "client/job_flow.h"
#include "protocol/keys.h"
#include "lua_scripts.h"
#include "redis/connection.h"
#include "reliableq/client.h"
#include "protocol/script_calls.h"
#include "server/unique_starts.h"
#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::protocol;
using namespace reliableq::testing;
using namespace reliableq::client;
using namespace reliableq::server;

namespace {

constexpr const char* kNow = "1700000100.250000";
const std::string kKey = "reliableq:unique:Charge:o-17";
const std::string kWork = "reliableq:working:h:1:abc:default";
const std::string kUnique = Keys().Unique("");

// A job holding kKey, with a nested "unique_key" and "jid" in its args that
// the scripts must not take for the top-level ones.
std::string UniqueJob(const std::string& jid, const std::string& until = "success") {
  return R"({"class":"Charge","args":[{"unique_key":"x","jid":"y"}],"queue":"default",)"
         R"("retry":true,"jid":")" +
         jid + R"(","created_at":1700000000.5,"unique_key":")" + kKey + R"(","unique_until":")" +
         until + R"("})";
}

struct UniqueFixture : RedisFixture {
  redis::ReplyPtr Eval(const ScriptCall& call) {
    Result<redis::ReplyPtr> reply = redis().Eval(call);
    REQUIRE_MESSAGE(reply.ok(), GetScript(call.script).name << ": " << reply.status().ToString());
    return std::move(reply.value());
  }
  Status EvalError(const ScriptCall& call) {
    Result<redis::ReplyPtr> reply = redis().Eval(call);
    REQUIRE_FALSE(reply.ok());
    return reply.status();
  }
  // The job in the working list, as a fetch leaves it.
  void Fetched(const std::string& payload) { Run({"LPUSH", kWork, payload}); }
  DeadSetLimits limits;
  Keys keys;
};

}  // namespace

TEST_CASE_FIXTURE(UniqueFixture, "push_unique takes the key and pushes, then refuses") {
  redis::ReplyPtr first = Eval(PushUniqueCall(keys, kKey, "j1", 0, "default", {}, UniqueJob("j1")));
  CHECK(first->integer == 1);
  CHECK(Get(kKey) == "j1");
  CHECK(Integer({"TTL", kKey}) == -1);
  CHECK(LRange("queue:default") == std::vector<std::string>{UniqueJob("j1")});
  CHECK(SMembers("queues") == std::vector<std::string>{"default"});
  redis::ReplyPtr second =
      Eval(PushUniqueCall(keys, kKey, "j2", 0, "default", {}, UniqueJob("j2")));
  REQUIRE(second->type == REDIS_REPLY_STRING);
  CHECK(std::string(second->str, second->len) == "j1");
  CHECK(Integer({"LLEN", "queue:default"}) == 1);
  // Scheduled, with a ttl: refused as well while j1 holds it.
  redis::ReplyPtr at =
      Eval(PushUniqueCall(keys, kKey, "j3", 5000, "default", 1700000200.0, UniqueJob("j3")));
  CHECK(std::string(at->str, at->len) == "j1");
  CHECK(Integer({"ZCARD", "schedule"}) == 0);
}

TEST_CASE_FIXTURE(UniqueFixture, "push_unique schedules with a ttl") {
  redis::ReplyPtr r =
      Eval(PushUniqueCall(keys, kKey, "j1", 60000, "default", 1700000200.0, UniqueJob("j1")));
  CHECK(r->integer == 1);
  CHECK(ZRange("schedule") == std::vector<std::string>{UniqueJob("j1")});
  long long pttl = Integer({"PTTL", kKey});
  CHECK(pttl > 50000);
  CHECK(pttl <= 60000);
  CHECK(Integer({"LLEN", "queue:default"}) == 0);
}

TEST_CASE_FIXTURE(UniqueFixture, "push_unique on a wrong-typed key writes nothing") {
  Run({"LPUSH", kKey, "x"});
  Status s = EvalError(PushUniqueCall(keys, kKey, "j1", 0, "default", {}, UniqueJob("j1")));
  CHECK(s.message().find("WRONGTYPE push_unique: key " + kKey) == 0);
  Run({"DEL", kKey});
  Run({"SET", "queue:default", "x"});
  s = EvalError(PushUniqueCall(keys, kKey, "j1", 0, "default", {}, UniqueJob("j1")));
  CHECK(s.message().find("WRONGTYPE") == 0);
  CHECK_FALSE(Exists(kKey));
  CHECK_FALSE(Exists("queues"));
}

namespace {

// finish.lua for `payload` in kWork, as the worker sends it.
ScriptCall Finish(const Keys& keys, FinishMode mode, std::string_view payload,
                  bool resent = false) {
  FinishedRun run;
  run.working_key = kWork;
  run.original = payload;
  run.updated = payload;
  run.mode = mode;
  run.score = 1700000200.0;
  run.resent_unconfirmed = resent;
  return FinishCall(keys, run, 1700000100.25, DeadSetLimits{});
}

}  // namespace

TEST_CASE_FIXTURE(UniqueFixture, "a success ack releases the key, compare-and-delete") {
  Run({"SET", kKey, "j1"});
  Fetched(UniqueJob("j1"));
  CHECK(Eval(Finish(keys, FinishMode::kDone, UniqueJob("j1")))->integer == 1);
  CHECK_FALSE(Exists(kKey));
  CHECK(Integer({"LLEN", kWork}) == 0);

  // Another jid holds it now (a push after a start release): kept.
  Run({"SET", kKey, "j2"});
  Fetched(UniqueJob("j1"));
  CHECK(Eval(Finish(keys, FinishMode::kDone, UniqueJob("j1")))->integer == 1);
  CHECK(Get(kKey) == "j2");

  // Not in the working list any more (a janitor gave it back): kept.
  Run({"SET", kKey, "j1"});
  CHECK(Eval(Finish(keys, FinishMode::kDone, UniqueJob("j1")))->integer == 0);
  CHECK(Get(kKey) == "j1");

  // A key of another type is left alone, and the ack still goes through.
  Run({"DEL", kKey});
  Run({"LPUSH", kKey, "j1"});
  Fetched(UniqueJob("j1"));
  CHECK(Eval(Finish(keys, FinishMode::kDone, UniqueJob("j1")))->integer == 1);
  CHECK(Integer({"LLEN", kKey}) == 1);
}

TEST_CASE_FIXTURE(UniqueFixture,
                  "finish releases on done, dead, discard and expire, keeps on retry and snooze") {
  auto finish = [&](FinishMode mode) {
    std::string payload = UniqueJob("j1");
    Fetched(payload);
    Eval(Finish(keys, mode, payload));
  };
  Run({"SET", kKey, "j1"});
  finish(FinishMode::kRetry);
  CHECK(Get(kKey) == "j1");
  finish(FinishMode::kSnooze);
  CHECK(Get(kKey) == "j1");
  for (FinishMode mode :
       {FinishMode::kDone, FinishMode::kDead, FinishMode::kDiscard, FinishMode::kExpire}) {
    Run({"SET", kKey, "j1"});
    finish(mode);
    CHECK_FALSE(Exists(kKey));
  }
  Run({"SET", kKey, "other"});
  finish(FinishMode::kDead);
  CHECK(Get(kKey) == "other");
}

TEST_CASE_FIXTURE(UniqueFixture, "an expired job is removed, counted and releases its key") {
  Run({"SET", kKey, "j1"});
  Fetched(UniqueJob("j1"));
  CHECK(Eval(Finish(keys, FinishMode::kExpire, UniqueJob("j1")))->integer == 1);
  CHECK_FALSE(Exists(kKey));
  CHECK(Get(keys.StatExpired()) == "1");
  // An expired job never ran: neither processed nor failed.
  CHECK_FALSE(Exists(keys.Processed()));
  CHECK_FALSE(Exists(keys.Failed()));
  // Sent again after a lost reply: it is gone, so it is not counted again.
  CHECK(Eval(Finish(keys, FinishMode::kExpire, UniqueJob("j1"), true))->integer == 0);
  CHECK(Get(keys.StatExpired()) == "1");
  Run({"DEL", keys.StatExpired()});
  Run({"LPUSH", keys.StatExpired(), "x"});
  Status s = EvalError(Finish(keys, FinishMode::kExpire, UniqueJob("j1")));
  CHECK(s.message().find("WRONGTYPE finish") == 0);
}

TEST_CASE("UniqueUntilStart finds the key and jid of a job unique until it starts, only") {
  auto found = UniqueUntilStart(UniqueJob("j1", "start"), kUnique);
  REQUIRE(found.has_value());
  CHECK(found->first == kKey);
  CHECK(found->second == "j1");
  CHECK_FALSE(UniqueUntilStart(UniqueJob("j1"), kUnique).has_value());
  // The marker inside args is not the top-level field.
  CHECK_FALSE(
      UniqueUntilStart(
          R"({"class":"A","args":[{"unique_until":"start"}],"jid":"j","unique_key":"k"})", kUnique)
          .has_value());
  CHECK_FALSE(UniqueUntilStart(R"({"unique_until":"start","jid":"j"})", kUnique).has_value());
  CHECK_FALSE(UniqueUntilStart(R"({"unique_until":"start","unique_key":"k","jid":""})", kUnique)
                  .has_value());
  CHECK_FALSE(UniqueUntilStart(R"(not json "unique_until":"start")", kUnique).has_value());
  CHECK_FALSE(UniqueUntilStart(R"({"class":"A","args":[],"jid":"j"})", kUnique).has_value());
  // A key outside the unique keys is never taken for one.
  CHECK_FALSE(UniqueUntilStart(
                  R"({"unique_until":"start","unique_key":"app:session:alice","jid":"j"})", kUnique)
                  .has_value());
}

TEST_CASE_FIXTURE(UniqueFixture, "fetch leaves keys alone; release_unique is compare-and-delete") {
  Run({"SET", kKey, "j1"});
  Run({"LPUSH", "queue:default", UniqueJob("j1", "start")});
  Eval(FetchCall({{"queue:default", kWork}}, 10));
  CHECK(Get(kKey) == "j1");
  CHECK(LRange(kWork) == std::vector<std::string>{UniqueJob("j1", "start")});
  // Another jid holds it: kept.
  CHECK(Eval(ReleaseUniqueCall(kKey, "j0"))->integer == 0);
  CHECK(Get(kKey) == "j1");
  CHECK(Eval(ReleaseUniqueCall(kKey, "j1"))->integer == 1);
  CHECK_FALSE(Exists(kKey));
  // Gone already, or of another type: nothing happens.
  CHECK(Eval(ReleaseUniqueCall(kKey, "j1"))->integer == 0);
  Run({"LPUSH", kKey, "x"});
  CHECK(Eval(ReleaseUniqueCall(kKey, "j1"))->integer == 0);
  CHECK(LRange(kKey) == std::vector<std::string>{"x"});
  CHECK(EvalError(ReleaseUniqueCall(kKey, "")).IsInvalidArgument());
}

TEST_CASE_FIXTURE(UniqueFixture, "kill releases; recover keeps on requeue and releases on dead") {
  Run({"SET", kKey, "j1"});
  Run({"ZADD", "retry", "1", UniqueJob("j1")});
  Eval(KillCall(Keys(), 1700000100.25, limits, {UniqueJob("j1")}));
  CHECK_FALSE(Exists(kKey));

  const std::string work = keys.Working("h:1:abc", "default");
  Run({"SET", kKey, "j1"});
  Run({"LPUSH", work, UniqueJob("j1")});
  RecoverBatch batch;
  batch.max_interruptions = 1;
  Eval(RecoverCall(keys, "h:1:abc", "default", batch, 1700000100.25, limits));
  CHECK(Get(kKey) == "j1");  // back in its queue: kept
  std::vector<std::string> queued = LRange("queue:default");
  REQUIRE(queued.size() == 1);
  Run({"DEL", "queue:default"});
  Run({"LPUSH", work, queued[0]});  // a second interruption: to dead
  Eval(RecoverCall(keys, "h:1:abc", "default", batch, 1700000100.25, limits));
  CHECK(Integer({"ZCARD", "dead"}) == 2);  // the killed one, and this one
  CHECK_FALSE(Exists(kKey));

  Run({"SET", kKey, "j1"});
  Run({"LPUSH", work, UniqueJob("j1")});
  Eval(RequeueCall(Keys(), work, "default", RequeueMode::kInterrupt, 0, 1700000100.25, limits,
                   {UniqueJob("j1")}));
  CHECK_FALSE(Exists(kKey));
}

// ------------------------------------------------------------ the client

TEST_CASE_FIXTURE(UniqueFixture, "client: a second unique push is a duplicate of the first") {
  auto client = Client::Open(options(), {});
  REQUIRE(client.ok());
  Job job;
  job.job_class = "Charge";
  job.args = R"(["o-17", 2])";
  job.unique = Uniqueness{};
  Result<PushResult> first = (*client)->Push(job);
  REQUIRE(first.ok());
  CHECK(first->outcome == PushOutcome::kAccepted);
  // The default key: class and the SHA-256 of the compact args.
  std::string key = *UniqueRedisKey(keys, job);
  CHECK(key.rfind("reliableq:unique:Charge:", 0) == 0);
  CHECK(key.size() == std::string("reliableq:unique:Charge:").size() + 64);
  CHECK(Get(key) == first->jid);
  job.args = R"([ "o-17",2 ])";  // the same args, spaced otherwise
  CHECK(*UniqueRedisKey(keys, job) == key);
  Result<PushResult> second = (*client)->Push(job);
  REQUIRE(second.ok());
  CHECK(second->outcome == PushOutcome::kDuplicate);
  CHECK_FALSE(second->stored());
  CHECK(second->duplicate_of == first->jid);
  CHECK(std::string(PushOutcomeName(second->outcome)) == "duplicate");
  CHECK(Integer({"LLEN", "queue:default"}) == 1);
  std::string payload = LRange("queue:default")[0];
  CHECK(payload.find(R"("unique_key":")" + key + R"(","unique_until":"success")") !=
        std::string::npos);
  // Other args, another key.
  job.args = R"(["o-18"])";
  CHECK((*client)->Push(job)->outcome == PushOutcome::kAccepted);
  // A scheduled push of the same job is refused too.
  job.args = R"(["o-17",2])";
  Result<PushResult> later = (*client)->PushIn(job, 60);
  CHECK(later->outcome == PushOutcome::kDuplicate);
  // In bulk: refused as input.
  CHECK((*client)->PushBulk({job}).status().code() == Status::Code::kInvalidArgument);
}

TEST_CASE_FIXTURE(UniqueFixture, "client: given key, start lifetime, ttl and expiry fields") {
  auto client = Client::Open(options(), {});
  REQUIRE(client.ok());
  Job job;
  job.job_class = "SendOtp";
  job.unique = Uniqueness{"otp-42", UniqueUntil::kStart, std::chrono::milliseconds(30000)};
  job.expires_in = 60;
  Result<PushResult> pushed = (*client)->Push(job);
  REQUIRE(pushed.ok());
  CHECK(pushed->outcome == PushOutcome::kAccepted);
  CHECK(Get("reliableq:unique:otp-42") == pushed->jid);
  long long pttl = Integer({"PTTL", "reliableq:unique:otp-42"});
  CHECK(pttl > 20000);
  CHECK(pttl <= 30000);
  std::string payload = LRange("queue:default")[0];
  CHECK(payload.find(R"("unique_key":"reliableq:unique:otp-42","unique_until":"start")") !=
        std::string::npos);
  size_t at = payload.find("\"expires_at\":");
  REQUIRE(at != std::string::npos);
  size_t created = payload.find("\"created_at\":");
  double expires = std::stod(payload.substr(at + 13));
  double created_at = std::stod(payload.substr(created + 13));
  CHECK(expires == doctest::Approx(created_at + 60).epsilon(1e-9));

  // Only a unique push writes the fields the worker releases a key by.
  Job plain;
  plain.job_class = "SendOtp";
  plain.extra = R"({"unique_key":"app:session:alice"})";
  CHECK((*client)->Push(plain).status().code() == Status::Code::kInvalidArgument);
  plain.extra = R"({"x":1,"unique_until":"start"})";
  CHECK((*client)->Push(plain).status().code() == Status::Code::kInvalidArgument);
  plain.extra = R"({"note":"unique_key in a value is fine"})";
  CHECK((*client)->Push(plain).ok());
  Job bad = job;
  bad.unique->key = "a\"b";
  CHECK((*client)->Push(bad).status().code() == Status::Code::kInvalidArgument);
  bad = job;
  bad.expires_at = 1.0;
  CHECK((*client)->Push(bad).status().code() == Status::Code::kInvalidArgument);
  bad = job;
  bad.expires_in = -1;
  CHECK((*client)->Push(bad).status().code() == Status::Code::kInvalidArgument);
  bad = job;
  bad.extra = R"({"expires_at":1})";
  CHECK((*client)->Push(bad).status().code() == Status::Code::kInvalidArgument);
}

// Review of issue 20: lib/unique.lua deletes whatever key the payload's
// unique_key names, so a job pushed with a hand-made unique_key (a plain
// push's --extra, another client) deletes any STRING key of the database
// whose value equals its jid, outside the unique: keys (fails today).
TEST_CASE_FIXTURE(UniqueFixture, "a success ack never deletes a key outside the unique keys") {
  const std::string foreign = "app:session:alice";
  Run({"SET", foreign, "j1"});
  std::string payload = R"({"class":"Charge","args":[],"queue":"default","jid":"j1",)"
                        R"("unique_key":")" +
                        foreign + R"("})";
  Fetched(payload);
  CHECK(Eval(Finish(keys, FinishMode::kDone, payload))->integer == 1);
  CHECK(Get(foreign) == "j1");
}
