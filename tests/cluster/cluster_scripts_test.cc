// The scripts on a slot that migrates (reliableq-schema(7), "Scripts while
// a slot migrates"). While a slot is MIGRATING, Redis checks each command a
// script sends: a key the node does not have counts as moved to the target,
// and the command fails after the script's earlier writes were made. A key
// the script itself emptied is such a key, and so is a unique lock that
// migrated ahead of the job's keys.
//
// Each case writes the keys of one queue group on the primary that owns its
// slot (every key the script declares exists there, so Redis lets the
// script run there), marks the slot MIGRATING to another primary (no key
// moves unless the case says so), runs the script through a plain
// connection to the owner in the way that empties a key, and checks that
// it answered and that every job is in exactly one place. The slot is made
// stable again at the end of each case.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "support/cluster_servers.h"
#include "protocol/keys.h"
#include "redis/connection.h"
#include "redis/key_slot.h"
#include "redis/reply.h"
#include "reliableq/admin.h"
#include "protocol/script_calls.h"
#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::protocol;
using namespace reliableq::testing;

namespace {

constexpr double kNow = 1700000000.5;

std::string Job(const std::string& jid, const std::string& extra = "") {
  return R"({"class":"J","args":[],"queue":"default","jid":")" + jid +
         R"(","created_at":1700000000.1,"enqueued_at":1700000000.1)" + extra + "}";
}

std::string UniqueJob(const std::string& jid, const std::string& lock) {
  return Job(jid, R"(,"unique_key":")" + lock + R"(","unique_until":"success")");
}

std::vector<std::string> Strings(const redisReply* reply) {
  std::vector<std::string> out;
  REQUIRE(reply->type == REDIS_REPLY_ARRAY);
  for (size_t i = 0; i < reply->elements; ++i) {
    out.emplace_back(reply->element[i]->str, reply->element[i]->len);
  }
  return out;
}

class MigratingSlot {
 public:
  MigratingSlot() : cluster_(RedisCluster::Shared()) {
    std::vector<int> primaries = cluster_.PrimaryPorts();
    REQUIRE(primaries.size() >= 2);
    from_ = primaries[0];
    to_ = primaries[1];
    group_ = cluster_.GroupOn(from_);
    slot_ = redis::KeySlot("{" + group_ + "}");
    keys_ = Keys("reliableq:", group_);
    auto owner = redis::Connection::Open(RedisCluster::Direct(from_));
    REQUIRE_MESSAGE(owner.ok(), owner.status().ToString());
    owner_ = std::move(*owner);
    REQUIRE(owner_->LoadScripts().ok());
  }
  ~MigratingSlot() {
    // Stable again on both nodes, and the group's keys gone.
    for (int port : {to_, from_}) {
      auto direct = redis::Connection::Open(RedisCluster::Direct(port));
      if (!direct.ok()) continue;
      (void)(*direct)->Command({"CLUSTER", "SETSLOT", std::to_string(slot_), "STABLE"});
      auto names = (*direct)->Command({"CLUSTER", "GETKEYSINSLOT", std::to_string(slot_), "10000"});
      if (!names.ok()) continue;
      for (const std::string& key : Strings(names->get())) {
        (void)(*direct)->Command({"DEL", key});
      }
    }
  }

  const Keys& keys() const { return keys_; }

  // Redis command on the owner, which must succeed.
  redis::ReplyPtr Run(const redis::Argv& argv) {
    auto reply = owner_->Command(argv);
    REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
    return std::move(*reply);
  }
  std::vector<std::string> List(const std::string& key) {
    return Strings(Run({"LRANGE", key, "0", "-1"}).get());
  }
  std::vector<std::string> Members(const std::string& key) {
    return Strings(Run({"ZRANGE", key, "0", "-1"}).get());
  }

  int to() const { return to_; }
  void Begin() { cluster_.BeginMigration(slot_, to_); }
  // The slot stable again where it was, before a case reads keys a script
  // may have emptied (on a migrating slot, a read of a missing key is
  // answered ASK).
  void End() {
    for (int port : {to_, from_}) {
      auto direct = redis::Connection::Open(RedisCluster::Direct(port));
      REQUIRE(direct.ok());
      REQUIRE((*direct)->Command({"CLUSTER", "SETSLOT", std::to_string(slot_), "STABLE"}).ok());
    }
  }
  // MIGRATE of one key to the target, as a resharding does key by key.
  void MoveKey(const std::string& key) {
    auto moved = owner_->Command({"MIGRATE", "127.0.0.1", std::to_string(to_), key, "0", "5000"});
    REQUIRE_MESSAGE(moved.ok(), moved.status().ToString());
  }
  // The rest of the slot's keys, and the slot itself, to the target.
  void Finish() {
    while (cluster_.MigrateKeys(slot_, to_, 100) > 0) {
    }
    cluster_.FinishMigration(slot_, to_);
  }

  // The script run on the owner, as a worker's or a verb's call reaches it.
  Result<redis::ReplyPtr> Eval(const ScriptCall& call) { return owner_->Eval(call); }
  redis::ReplyPtr EvalOk(const ScriptCall& call) {
    auto reply = Eval(call);
    REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
    return std::move(*reply);
  }

  // A connection of the group that follows the slot wherever it is.
  std::unique_ptr<redis::Connection> Group() {
    auto group = redis::Connection::Open(cluster_.Options(group_));
    REQUIRE_MESSAGE(group.ok(), group.status().ToString());
    return std::move(*group);
  }

 private:
  RedisCluster& cluster_;
  int from_ = 0, to_ = 0, slot_ = 0;
  std::string group_;
  Keys keys_;
  std::unique_ptr<redis::Connection> owner_;
};

std::vector<std::string> Integers(const redis::ReplyPtr& reply) {
  std::vector<std::string> out;
  REQUIRE(reply->type == REDIS_REPLY_ARRAY);
  for (size_t i = 0; i < reply->elements; ++i) {
    const redisReply* e = reply->element[i];
    out.push_back(e->type == REDIS_REPLY_INTEGER ? std::to_string(e->integer)
                                                 : std::string(e->str, e->len));
  }
  return out;
}

}  // namespace

TEST_CASE_FIXTURE(MigratingSlot, "migrating slot: a quiet worker keeps its running job") {
  // The running job stays in the working list, the prefetched one goes back:
  // the list loses one job and is not emptied on the way.
  const std::string working = keys().Working("h:1:abc", "default");
  Run({"RPUSH", working, Job("running"), Job("prefetched")});
  Run({"RPUSH", keys().Queue("default"), Job("queued")});
  Run({"ZADD", keys().Dead(), "1", "old"});
  Run({"SADD", keys().Queues(), "default"});
  Begin();
  auto reply = EvalOk(
      RequeueCall(keys(), working, "default", RequeueMode::kKeep, 3, kNow, {}, {Job("running")}));
  CHECK(Integers(reply) == std::vector<std::string>{"1", "0", "1"});
  CHECK(List(working) == std::vector<std::string>{Job("running")});
  CHECK(List(keys().Queue("default")) ==
        std::vector<std::string>{Job("queued"), Job("prefetched")});
}

TEST_CASE_FIXTURE(MigratingSlot, "migrating slot: a hard stop hands every job back") {
  const std::string working = keys().Working("h:1:abc", "default");
  Run({"RPUSH", working, Job("a"), Job("b", R"(,"interrupted_count":3)")});
  Run({"RPUSH", keys().Queue("default"), Job("queued")});
  Run({"ZADD", keys().Dead(), "1", "old"});
  Run({"SADD", keys().Queues(), "default"});
  Begin();
  // b goes dead (interrupted a 4th time), with a dead set kept to one less
  // than one member: the dead set is emptied too.
  DeadSetLimits one{.max_jobs = 1, .timeout = std::chrono::seconds(3600)};
  auto reply = EvalOk(RequeueCall(keys(), working, "default", RequeueMode::kInterrupt, 3, kNow, one,
                                  {Job("a"), Job("b", R"(,"interrupted_count":3)")}));
  CHECK(Integers(reply) == std::vector<std::string>{"1", "1", "0"});
  End();
  CHECK(List(working).empty());
  CHECK(List(keys().Queue("default")).size() == 2);
  CHECK(Members(keys().Dead()).empty());
}

TEST_CASE_FIXTURE(MigratingSlot, "migrating slot: a fetch that empties a queue of 1000 jobs") {
  const std::string queue = keys().Queue("default");
  const std::string working = keys().Working("h:1:abc", "default");
  redis::Argv push = {"RPUSH", queue};
  std::vector<std::string> jobs;
  for (int i = 0; i < 1000; ++i) jobs.push_back(Job("j" + std::to_string(i)));
  for (const std::string& job : jobs) push.push_back(job);
  Run(push);
  Run({"RPUSH", working, Job("earlier")});
  Begin();
  auto reply = EvalOk(FetchCall({{queue, working}}, 1001));
  CHECK(reply->elements == 2000);
  CHECK(List(working).size() == 1001);
}

TEST_CASE_FIXTURE(MigratingSlot, "migrating slot: a forced recovery empties the working list") {
  const std::string identity = "h:1:abc";
  const std::string working = keys().Working(identity, "default");
  Run({"SET", keys().Heartbeat(identity), "1"});
  Run({"RPUSH", working, Job("a"), Job("b")});
  Run({"RPUSH", keys().Queue("default"), Job("queued")});
  Run({"ZADD", keys().Dead(), "1", "old"});
  Run({"SADD", keys().Queues(), "default"});
  Begin();
  RecoverBatch batch;
  batch.force = true;
  auto reply = EvalOk(RecoverCall(keys(), identity, "default", batch, kNow, {}));
  CHECK(Integers(reply) == std::vector<std::string>{"ok", "2", "0", "0"});
  CHECK(List(keys().Queue("default")).size() == 3);
}

TEST_CASE_FIXTURE(MigratingSlot, "migrating slot: promote, retry now and kill empty their set") {
  Run({"ZADD", keys().Schedule(), "1", Job("s1"), "2", Job("s2"), "3", "not a job"});
  Run({"ZADD", keys().Retry(), "1", Job("r1"), "2", Job("r2")});
  Run({"ZADD", keys().Dead(), std::to_string(kNow - 2), Job("d1"), std::to_string(kNow - 1),
       Job("d2")});
  Run({"RPUSH", keys().Queue("default"), Job("queued")});
  Run({"SADD", keys().Queues(), "default"});
  Begin();
  auto promoted =
      EvalOk(PromoteCall(keys(), keys().Schedule(), kNow, {}, "",
                         {{"default", Job("s1")}, {"default", Job("s2")}, {"", "not a job"}}));
  CHECK(Integers(promoted) == std::vector<std::string>{"2", "1", "0", "0"});
  auto retried =
      EvalOk(RetryNowCall(keys(), keys().Retry(), kNow, false, {{"default", Job("r1")}}));
  CHECK(Integers(retried) == std::vector<std::string>{"1", "0"});
  // r2 is the last member: kill empties retry (and a member given twice
  // is killed once).
  auto killed = EvalOk(KillCall(keys(), kNow, {}, {Job("r2"), Job("r2")}));
  CHECK(Integers(killed) == std::vector<std::string>{"1", "1"});
  End();
  CHECK(Members(keys().Schedule()).empty());
  CHECK(Members(keys().Retry()).empty());
  CHECK(Members(keys().Dead()).size() == 4);
  CHECK(List(keys().Queue("default")).size() == 4);
}

TEST_CASE_FIXTURE(MigratingSlot, "migrating slot: a limiter's release empties its holders") {
  LimitTerms terms{.name = "mail", .concurrency = 2, .rate = 0, .period_seconds = 0};
  const std::string identity = "h:1:abc";
  Run({"HSET", keys().Limit("mail"), LimitHolder(1, identity), "1", LimitHolder(2, identity), "1"});
  Run({"RPUSH", keys().LimitWaiting("mail"), Job("parked")});
  Run({"RPUSH", keys().Queue("default"), Job("queued")});
  Run({"SADD", keys().Queues(), "default"});
  Run({"ZADD", keys().Dead(), "1", "old"});
  Begin();
  // Both holders go (the hash is emptied), the parked job goes back (the
  // waiting list is emptied).
  auto released = EvalOk(
      LimitReleaseCall(keys(), terms, {LimitHolder(1, identity), LimitHolder(2, identity)}, kNow));
  CHECK(Integers(released) == std::vector<std::string>{"2", "1"});
  End();
  CHECK(List(keys().Queue("default")) == std::vector<std::string>{Job("queued"), Job("parked")});
  CHECK(List(keys().LimitWaiting("mail")).empty());
}

TEST_CASE_FIXTURE(MigratingSlot, "migrating slot: an acquire in a rate window that emptied") {
  // The window's only start has left it: the acquire takes a slot.
  LimitTerms rate{.name = "api", .concurrency = 0, .rate = 1, .period_seconds = 10};
  const std::string identity = "h:1:abc";
  const std::string working = keys().Working(identity, "default");
  Run({"RPUSH", working, Job("started")});
  Run({"HSET", keys().Limit("api"), "x", "1"});
  Run({"ZADD", keys().LimitStarts("api"), std::to_string(kNow - 60), "old@" + identity});
  Run({"RPUSH", keys().LimitWaiting("api"), Job("other")});
  Run({"ZADD", keys().Schedule(), "1", "s"});
  Begin();
  auto acquired = EvalOk(
      LimitAcquireCall(keys(), rate, working, Job("started"), LimitHolder(3, identity), kNow, 0));
  CHECK(Integers(acquired) == std::vector<std::string>{"start"});
  CHECK(Members(keys().LimitStarts("api")) == std::vector<std::string>{LimitHolder(3, identity)});
}

TEST_CASE_FIXTURE(MigratingSlot, "migrating slot: a parked job whose queue moved stays parked") {
  // The queue key of the parked job migrated ahead: the job cannot go back
  // yet, and must not be lost.
  // One of two holders goes: the limiter has room for the parked job.
  LimitTerms terms{.name = "mail", .concurrency = 2, .rate = 0, .period_seconds = 0};
  Run({"HSET", keys().Limit("mail"), LimitHolder(1, "h:1:abc"), "1", "other", "1"});
  Run({"RPUSH", keys().LimitWaiting("mail"), Job("parked")});
  Run({"RPUSH", keys().Queue("default"), Job("queued")});
  Run({"SADD", keys().Queues(), "default"});
  Run({"ZADD", keys().Dead(), "1", "old"});
  Begin();
  MoveKey(keys().Queue("default"));
  auto released = EvalOk(LimitReleaseCall(keys(), terms, {LimitHolder(1, "h:1:abc")}, kNow));
  CHECK(Integers(released) == std::vector<std::string>{"1", "0"});
  CHECK(List(keys().LimitWaiting("mail")) == std::vector<std::string>{Job("parked")});
}

TEST_CASE_FIXTURE(MigratingSlot, "migrating slot: a beat rewrites the work hashes") {
  const std::string identity = "h:1:abc";
  Run({"SET", keys().Heartbeat(identity), "1"});
  Run({"HSET", keys().Registry(), identity, "{}"});
  Run({"SADD", keys().Processes(), identity});
  Run({"HSET", keys().Process(identity), "busy", "1"});
  Run({"HSET", keys().Work(identity), "t1", "{}"});
  Run({"HSET", keys().Workers(identity), "t1", "{}"});
  Run({"RPUSH", keys().Signals(identity), "TSTP"});
  Begin();
  BeatFields beat{.ttl_millis = 30000,
                  .registry_entry = "{}",
                  .info = "{}",
                  .busy = 1,
                  .now = kNow,
                  .quiet = false,
                  .rss_kb = 1,
                  .rtt_us = 1,
                  .work = {{"t2", R"({"queue":"default"})"}}};
  auto reply = EvalOk(HeartbeatCall(keys(), identity, beat));
  CHECK(Integers(reply) == std::vector<std::string>{"1", "TSTP"});
  CHECK(Strings(Run({"HKEYS", keys().Work(identity)}).get()) == std::vector<std::string>{"t2"});
}

TEST_CASE_FIXTURE(MigratingSlot, "migrating slot: a unique lock that moved ahead is not lost") {
  const std::string working = keys().Working("h:1:abc", "default");
  const std::string lock = keys().Unique("order-7");
  const std::string job = UniqueJob("u1", lock);
  Run({"RPUSH", working, job, Job("other")});
  Run({"SET", lock, "u1"});
  Begin();
  MoveKey(lock);
  // The ack is refused whole: the job stays in the working list (its
  // outcome is sent again), rather than acked with its lock left held.
  auto finish = [&](FinishMode mode) {
    FinishedRun run{.working_key = working, .original = job, .updated = job, .mode = mode};
    return FinishCall(keys(), run, kNow, {});
  };
  auto refused = Eval(finish(FinishMode::kDone));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("TRYAGAIN") != std::string::npos);
  CHECK(List(working) == std::vector<std::string>{job, Job("other")});
  // The dead path too.
  CHECK_FALSE(Eval(finish(FinishMode::kDead)).ok());
  CHECK(List(working).size() == 2);

  // Once the slot has moved, the ack goes through and frees the lock.
  Finish();
  auto group = Group();
  auto acked = group->Eval(finish(FinishMode::kDone));
  REQUIRE_MESSAGE(acked.ok(), acked.status().ToString());
  CHECK((*acked)->integer == 1);
  auto held = group->Command({"EXISTS", lock});
  REQUIRE(held.ok());
  CHECK((*held)->integer == 0);
}

TEST_CASE_FIXTURE(MigratingSlot, "migrating slot: a kill on the target with the lock behind") {
  // The sets moved, the lock did not: the kill runs on the target (ASK),
  // where the lock is not. It is refused rather than leaving the lock.
  const std::string lock = keys().Unique("order-8");
  const std::string job = UniqueJob("u2", lock);
  Run({"ZADD", keys().Retry(), "1", job});
  Run({"ZADD", keys().Dead(), "1", "old"});
  Run({"SET", lock, "u2"});
  Begin();
  MoveKey(keys().Retry());
  MoveKey(keys().Dead());
  auto target = redis::Connection::Open(RedisCluster::Direct(to()));
  REQUIRE(target.ok());
  REQUIRE((*target)->LoadScripts().ok());
  ScriptCall kill = KillCall(keys(), kNow, {}, {job});
  std::string numkeys = std::to_string(kill.keys.size());
  redis::Argv keys_argv(kill.keys.begin(), kill.keys.end());
  redis::Argv args_argv(kill.args.begin(), kill.args.end());
  redis::Argv eval =
      redis::ScriptArgv("EVAL", GetScript(kill.script).source, numkeys, keys_argv, args_argv);
  auto replies = (*target)->Pipeline({{"ASKING"}, eval});
  REQUIRE(replies.ok());
  REQUIRE((*replies)[1]->type == REDIS_REPLY_ERROR);
  CHECK(std::string((*replies)[1]->str).rfind("TRYAGAIN", 0) == 0);
  // Nothing moved: the job is still in retry, on the target.
  auto retry = (*target)->Pipeline({{"ASKING"}, {"ZCARD", keys().Retry()}});
  REQUIRE(retry.ok());
  CHECK((*retry)[1]->integer == 1);
}
