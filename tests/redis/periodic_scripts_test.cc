// periodic.lua and periodic_declare.lua on a real Redis: one push per tick
// whoever submits it, the conflict, too-late and catch-up refusals, and
// nothing written when a key has the wrong type.

#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "protocol/keys.h"
#include "redis/connection.h"
#include "protocol/script_calls.h"
#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::protocol;
using namespace reliableq::testing;

namespace {

constexpr int64_t kTick = 1700000000;

struct PeriodicFixture : RedisFixture {
  Keys keys;

  std::vector<std::string> Reply(redis::Connection& c, const ScriptCall& call) {
    Result<redis::ReplyPtr> reply = c.Eval(call);
    REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
    std::vector<std::string> out;
    const redisReply* r = reply->get();
    REQUIRE(r->type == REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < r->elements; ++i) {
      out.emplace_back(r->element[i]->str, r->element[i]->len);
    }
    return out;
  }

  std::vector<std::string> Declare(const std::string& digest, const std::string& who,
                                   redis::Connection* c = nullptr) {
    return Reply(c ? *c : redis(),
                 PeriodicDeclareCall(keys, "rep", digest, who, 1700000000.5,
                                     {{"cron", "* * * * * *"}, {"class", "Report"}}));
  }

  ScriptCall Tick(int64_t tick, const std::string& digest = "d1", bool catch_up = false) {
    std::string payload =
        "{\"class\":\"Report\",\"args\":[],\"periodic_tick\":" + std::to_string(tick) + "}";
    return PeriodicTickCall(
        keys, PeriodicTick{"rep", digest, tick, catch_up, "default", payload,
                           "jid" + std::to_string(tick), static_cast<double>(tick) + 0.25});
  }

  std::string Outcome(int64_t tick, const std::string& digest = "d1", bool catch_up = false) {
    std::vector<std::string> reply = Reply(redis(), Tick(tick, digest, catch_up));
    REQUIRE_FALSE(reply.empty());
    return reply[0];
  }
};

TEST_CASE_FIXTURE(PeriodicFixture, "periodic_declare: records, and names whose it replaced") {
  CHECK(Declare("d1", "w1") == std::vector<std::string>{"", ""});
  CHECK(SMembers("reliableq:periodic") == std::vector<std::string>{"rep"});
  CHECK(HGet("reliableq:periodic:rep", "digest") == "d1");
  CHECK(HGet("reliableq:periodic:rep", "declared_by") == "w1");
  CHECK(HGet("reliableq:periodic:rep", "cron") == "* * * * * *");
  CHECK(HGet("reliableq:periodic:rep", "declared_at") == "1700000000.500000");
  CHECK(Declare("d2", "w2") == std::vector<std::string>{"d1", "w1"});
  CHECK(HGet("reliableq:periodic:rep", "declared_by") == "w2");
}

TEST_CASE_FIXTURE(PeriodicFixture, "periodic: one push per tick, the record with it") {
  CHECK(Outcome(kTick) == "undeclared");
  CHECK(LRange("queue:default").empty());
  Declare("d1", "w1");
  CHECK(Outcome(kTick) == "pushed");
  CHECK(Outcome(kTick) == "duplicate");
  CHECK(LRange("queue:default").size() == 1);
  CHECK(SMembers("queues") == std::vector<std::string>{"default"});
  CHECK(ZRange("reliableq:periodic:rep:ticks") == std::vector<std::string>{std::to_string(kTick)});
  CHECK(HGet("reliableq:periodic:rep", "last_tick") == std::to_string(kTick));
  CHECK(HGet("reliableq:periodic:rep", "last_jid") == "jid" + std::to_string(kTick));
  // An earlier tick, late (Redis was down): still pushed, last_tick stays.
  CHECK(Outcome(kTick - 5) == "pushed");
  CHECK(HGet("reliableq:periodic:rep", "last_tick") == std::to_string(kTick));
  CHECK(LRange("queue:default").size() == 2);
}

TEST_CASE_FIXTURE(PeriodicFixture, "periodic: a tick later than Redis's clock is early") {
  Declare("d1", "w1");
  auto time = redis().Command({"TIME"});
  REQUIRE(time.ok());
  const int64_t redis_now = std::stoll((*time)->element[0]->str);
  auto submit = [&](int64_t tick, std::optional<double> now) {
    std::string payload = "{\"class\":\"Report\",\"args\":[]}";
    return Reply(redis(), PeriodicTickCall(keys, PeriodicTick{"rep", "d1", tick, false, "default",
                                                               payload, "j", now}));
  };
  // No now: TIME judges, so a worker a minute ahead cannot push the next
  // minute's tick now; the reply says Redis's time for it to wait by.
  std::vector<std::string> early = submit(redis_now + 60, std::nullopt);
  REQUIRE(early.size() == 2);
  CHECK(early[0] == "early");
  CHECK(std::stod(early[1]) >= static_cast<double>(redis_now));
  CHECK(std::stod(early[1]) < static_cast<double>(redis_now + 5));
  CHECK_FALSE(Exists("reliableq:periodic:rep:ticks"));
  CHECK(LRange("queue:default").empty());
  // The current second's tick goes, recorded at Redis's time.
  CHECK(submit(redis_now, std::nullopt) == std::vector<std::string>{"pushed"});
  CHECK(std::stod(HGet("reliableq:periodic:rep", "last_pushed_at")) >= static_cast<double>(redis_now));
  // A given now judges the same way.
  CHECK(submit(kTick + 10, kTick + 9.5)[0] == "early");
  CHECK(submit(kTick + 10, kTick + 10.0)[0] == "pushed");
}

TEST_CASE_FIXTURE(PeriodicFixture, "periodic: two callers at once push each tick once") {
  Declare("d1", "w1");
  auto second = redis::Connection::Open(options());
  REQUIRE(second.ok());
  constexpr int kTicks = 300;
  auto submit = [this](redis::Connection& c, int* pushed) {
    for (int i = 0; i < kTicks; ++i) {
      Result<redis::ReplyPtr> r = c.Eval(Tick(kTick + i));
      if (r.ok() && (*r)->elements > 0 && std::string((*r)->element[0]->str) == "pushed") {
        ++*pushed;
      }
    }
  };
  int pushed_a = 0;
  int pushed_b = 0;
  std::thread other([&] { submit(**second, &pushed_b); });
  submit(redis(), &pushed_a);
  other.join();
  CHECK(pushed_a + pushed_b == kTicks);
  CHECK(LRange("queue:default").size() == static_cast<size_t>(kTicks));
  CHECK(ZRange("reliableq:periodic:rep:ticks").size() == static_cast<size_t>(kTicks));
}

TEST_CASE_FIXTURE(PeriodicFixture, "periodic: a declaration that lost pushes nothing") {
  Declare("d1", "w1");
  Declare("d2", "w2");
  std::vector<std::string> reply = Reply(redis(), Tick(kTick, "d1"));
  CHECK(reply == std::vector<std::string>{"conflict", "w2"});
  CHECK(LRange("queue:default").empty());
  CHECK_FALSE(Exists("reliableq:periodic:rep:ticks"));
  CHECK(Outcome(kTick, "d2") == "pushed");
}

TEST_CASE_FIXTURE(PeriodicFixture, "periodic: a tick older than the kept record is too late") {
  Declare("d1", "w1");
  for (int64_t i = 0; i < kPeriodicTicksKept + 10; ++i) {
    REQUIRE(Outcome(kTick + i) == "pushed");
  }
  CHECK(Integer({"ZCARD", "reliableq:periodic:rep:ticks"}) == kPeriodicTicksKept);
  // Ticks 0..9 were trimmed: one of them could have been pushed.
  CHECK(Outcome(kTick + 5) == "too_late");
  CHECK(Outcome(kTick - 1) == "too_late");
  CHECK(Integer({"LLEN", "queue:default"}) == kPeriodicTicksKept + 10);
  CHECK(Outcome(kTick + 10) == "duplicate");
}

TEST_CASE_FIXTURE(PeriodicFixture, "periodic: a catch-up tick is pushed only after every other") {
  Declare("d1", "w1");
  CHECK(Outcome(kTick - 60, "d1", true) == "pushed");  // nothing recorded yet
  CHECK(Outcome(kTick - 60, "d1", true) == "duplicate");
  CHECK(Outcome(kTick, "d1") == "pushed");
  std::vector<std::string> reply = Reply(redis(), Tick(kTick - 30, "d1", true));
  CHECK(reply[0] == "superseded");
  CHECK(Integer({"LLEN", "queue:default"}) == 2);
  CHECK(Outcome(kTick + 60, "d1", true) == "pushed");
}

TEST_CASE_FIXTURE(PeriodicFixture, "periodic: a key of the wrong type: nothing written") {
  Declare("d1", "w1");
  Run({"SET", "queue:default", "x"});
  auto before = Snapshot();
  Result<redis::ReplyPtr> r = redis().Eval(Tick(kTick));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("WRONGTYPE periodic: key queue:default") == 0);
  CHECK(Snapshot() == before);
  Run({"DEL", "queue:default"});
  Run({"SET", "queues", "x"});
  before = Snapshot();
  CHECK_FALSE(redis().Eval(Tick(kTick)).ok());
  CHECK(Snapshot() == before);
  Run({"DEL", "queues"});
  Run({"SET", "reliableq:periodic:rep:ticks", "x"});
  before = Snapshot();
  CHECK_FALSE(redis().Eval(Tick(kTick)).ok());
  CHECK(Snapshot() == before);
  Run({"SET", "reliableq:periodic", "x"});
  before = Snapshot();
  CHECK_FALSE(redis().Eval(PeriodicDeclareCall(keys, "rep", "d3", "w3", 1.0, {})).ok());
  CHECK(Snapshot() == before);
}

}  // namespace
