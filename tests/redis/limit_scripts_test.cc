// The limit scripts (limit_acquire.lua, limit_release.lua, limit_reap.lua)
// on a real Redis: a job is always in exactly one place (a working list, a
// limiter's waiting list, schedule or a queue), slots are taken and given
// back exactly, and a key of the wrong type writes nothing.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "protocol/keys.h"
#include "redis/connection.h"
#include "protocol/script_calls.h"
#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::protocol;
using namespace reliableq::testing;

namespace {

constexpr double kNow = 1700000100.25;
const std::string kWorking = "reliableq:working:me:1:x:default";

std::string Job(int n, const std::string& queue = "default") {
  return R"({"class":"Mailer","args":[)" + std::to_string(n) + R"(],"queue":")" + queue +
         R"(","jid":"j)" + std::to_string(n) + R"("})";
}

struct LimitFixture : RedisFixture {
  Keys keys;
  LimitTerms terms{"mail", 2, 0, 0};

  // The answer of limit_acquire.lua for job n (fetched into kWorking first).
  std::vector<std::string> Acquire(int n, const std::string& holder, double now = kNow) {
    Run({"LPUSH", kWorking, Job(n)});
    return Answer(LimitAcquireCall(keys, terms, kWorking, Job(n), holder, now, 0));
  }
  std::vector<std::string> Answer(const ScriptCall& call) {
    auto reply = redis().Eval(call);
    REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
    std::vector<std::string> out;
    const redisReply* r = reply->get();
    for (size_t i = 0; i < r->elements; ++i) {
      const redisReply* e = r->element[i];
      out.push_back(e->type == REDIS_REPLY_INTEGER ? std::to_string(e->integer)
                                                   : std::string(e->str, e->len));
    }
    return out;
  }
  // Where each of jobs 1..n is: exactly one place each.
  void CheckEachOnce(int n) {
    std::vector<std::string> all;
    for (const std::string& key : {kWorking, Keys().Queue("default"), keys.LimitWaiting("mail")}) {
      for (std::string& p : LRange(key)) all.push_back(std::move(p));
    }
    for (std::string& p : ZRange(std::string(Keys().Schedule()))) all.push_back(std::move(p));
    for (std::string& p : ZRange(std::string(Keys().Dead()))) all.push_back(std::move(p));
    for (int i = 1; i <= n; ++i) {
      CAPTURE(i);
      CHECK(std::count(all.begin(), all.end(), Job(i)) == 1);
    }
    CHECK(all.size() == static_cast<size_t>(n));
  }
};

}  // namespace

TEST_CASE_FIXTURE(LimitFixture, "acquire takes slots up to N, then parks in the waiting list") {
  CHECK(Acquire(1, "1@me") == std::vector<std::string>{"start"});
  CHECK(Acquire(2, "2@me") == std::vector<std::string>{"start"});
  CHECK(Acquire(3, "3@me") == std::vector<std::string>{"waiting", "2"});
  CHECK(Integer({"HLEN", keys.Limit("mail")}) == 2);
  CHECK(HGet(keys.Limit("mail"), "1@me") == "1700000100.250000");
  CHECK(LRange(keys.LimitWaiting("mail")) == std::vector<std::string>{Job(3)});
  CHECK(LRange(kWorking) == std::vector<std::string>{Job(2), Job(1)});
  CheckEachOnce(3);
}

TEST_CASE_FIXTURE(LimitFixture, "release frees slots and moves waiting jobs to the queue's front") {
  Acquire(1, "1@me");
  Acquire(2, "2@me");
  Acquire(3, "3@me");
  Acquire(4, "4@me");
  Run({"LPUSH", Keys().Queue("default"), Job(5)});
  Run({"LREM", kWorking, "0", Job(1)});  // job 1 acked
  CHECK(Answer(LimitReleaseCall(keys, terms, {"1@me"}, kNow)) ==
        std::vector<std::string>{"1", "1"});
  // Job 3 (parked first) is taken next: at the RIGHT end, before job 5.
  CHECK(LRange(Keys().Queue("default")) == std::vector<std::string>{Job(5), Job(3)});
  CHECK(LRange(keys.LimitWaiting("mail")) == std::vector<std::string>{Job(4)});
  CHECK(SMembers(std::string(Keys().Queues())) == std::vector<std::string>{"default"});
  // Given back twice: frees nothing and moves nothing more.
  CHECK(Answer(LimitReleaseCall(keys, terms, {"1@me"}, kNow)) ==
        std::vector<std::string>{"0", "0"});
  CHECK(Integer({"HLEN", keys.Limit("mail")}) == 1);
  Run({"LPUSH", Keys().Queue("default"), Job(1)});  // keeps the count of places exact
  Run({"LPOP", Keys().Queue("default")});
  CHECK(LRange(keys.LimitWaiting("mail")).size() == 1);
}

TEST_CASE_FIXTURE(LimitFixture, "a release wakes an idle worker on an empty queue") {
  Subscription wake(server().socket_path(), keys.WakeQueue("default"),
                    Subscription::Kind::kChannel);
  Acquire(1, "1@me");
  Acquire(2, "2@me");
  Acquire(3, "3@me");
  Answer(LimitReleaseCall(keys, terms, {"2@me"}, kNow));
  Run({"PUBLISH", keys.WakeQueue("default"), "marker"});
  std::vector<Subscription::Message> heard = wake.Until("marker");
  REQUIRE(heard.size() == 1);
  CHECK(heard[0].payload == "default");
}

TEST_CASE_FIXTURE(LimitFixture, "a full rate window schedules the job when the window frees") {
  terms = LimitTerms{"mail", 0, 2, 10.0};
  CHECK(Acquire(1, "1@me", kNow) == std::vector<std::string>{"start"});
  CHECK(Acquire(2, "2@me", kNow + 1) == std::vector<std::string>{"start"});
  std::vector<std::string> parked = Acquire(3, "3@me", kNow + 2);
  REQUIRE(parked.size() == 2);
  CHECK(parked[0] == "scheduled");
  CHECK(parked[1] == "1700000110.250000");  // the oldest start + the period
  CHECK(ZRangeWithScores(std::string(Keys().Schedule())) ==
        std::vector<std::pair<std::string, double>>{{Job(3), kNow + 10}});
  CHECK(Integer({"ZCARD", keys.LimitStarts("mail")}) == 2);
  CHECK(Integer({"PTTL", keys.LimitStarts("mail")}) > 0);
  CheckEachOnce(3);
  // Once the first start left the window, one more may start.
  CHECK(Acquire(4, "4@me", kNow + 10.5) == std::vector<std::string>{"start"});
  CHECK(Integer({"ZCARD", keys.LimitStarts("mail")}) == 2);
}

TEST_CASE_FIXTURE(LimitFixture, "acquire of a job no longer in the working list writes nothing") {
  auto before = Snapshot();
  CHECK(Answer(LimitAcquireCall(keys, terms, kWorking, Job(1), "1@me", kNow, 0)) ==
        std::vector<std::string>{"gone"});
  CHECK(Snapshot() == before);
}

TEST_CASE_FIXTURE(LimitFixture, "reap frees the slots of processes without a heartbeat") {
  Run({"SET", keys.Heartbeat("alive"), "1"});
  Run({"HSET", keys.Limit("mail"), "1@alive", "1", "2@dead", "1", "3@dead", "1"});
  Run({"RPUSH", keys.LimitWaiting("mail"), Job(1), Job(2), Job(3, "other")});
  CHECK(Answer(LimitReapCall(keys, terms, {"alive", "dead"}, kNow)) ==
        std::vector<std::string>{"2", "1"});
  CHECK(Integer({"HLEN", keys.Limit("mail")}) == 1);
  CHECK(HGet(keys.Limit("mail"), "1@alive") == "1");
  CHECK(LRange(Keys().Queue("default")) == std::vector<std::string>{Job(1)});
  // A holder of a process not listed is left alone.
  Run({"HSET", keys.Limit("mail"), "4@unlisted", "1"});
  CHECK(Answer(LimitReapCall(keys, terms, {"alive"}, kNow)) == std::vector<std::string>{"0", "0"});
  CHECK(LRange(keys.LimitWaiting("mail")).size() == 2);
}

TEST_CASE_FIXTURE(LimitFixture, "a parked payload without a plain queue goes dead, not lost") {
  Run({"RPUSH", keys.LimitWaiting("mail"), R"({"class":"Mailer"})"});
  Run({"SET", "queue:broken", "x"});
  Run({"RPUSH", keys.LimitWaiting("mail"), Job(1, "broken")});
  Run({"RPUSH", keys.LimitWaiting("mail"), Job(2)});
  CHECK(Answer(LimitReapCall(keys, terms, {}, kNow)) == std::vector<std::string>{"0", "1"});
  CHECK(ZRange(std::string(Keys().Dead())) ==
        std::vector<std::string>{Job(1, "broken"), R"({"class":"Mailer"})"});
  CHECK(LRange(Keys().Queue("default")) == std::vector<std::string>{Job(2)});
  CHECK(Get("queue:broken") == "x");
}

TEST_CASE_FIXTURE(LimitFixture, "a key of the wrong type makes each limit script write nothing") {
  Run({"LPUSH", kWorking, Job(1)});
  Run({"RPUSH", keys.LimitWaiting("mail"), Job(2)});
  for (const std::string& key : {keys.Limit("mail"), keys.LimitStarts("mail"),
                                 keys.LimitWaiting("mail"), std::string(Keys().Schedule())}) {
    CAPTURE(key);
    std::string saved = key + ":saved";
    redis().Command({"RENAME", key, saved});  // fails when absent
    Run({"SET", key, "x"});
    auto before = Snapshot();
    terms = LimitTerms{"mail", 1, 1, 1.0};
    auto acquire = redis().Eval(LimitAcquireCall(keys, terms, kWorking, Job(1), "1@me", kNow, 0));
    CHECK_FALSE(acquire.ok());
    CHECK(acquire.status().message().find("WRONGTYPE") == 0);
    CHECK(Snapshot() == before);
    // The keys release and reap write.
    if (key == keys.Limit("mail") || key == keys.LimitWaiting("mail")) {
      auto release = redis().Eval(LimitReleaseCall(keys, terms, {"1@me"}, kNow));
      CHECK(release.status().message().find("WRONGTYPE") == 0);
      auto reap = redis().Eval(LimitReapCall(keys, terms, {"me"}, kNow));
      CHECK(reap.status().message().find("WRONGTYPE") == 0);
      CHECK(Snapshot() == before);
    }
    Run({"DEL", key});
    if (Exists(saved)) Run({"RENAME", saved, key});
  }
}

// Workers' clocks may disagree: the worker leaves the time to Redis (TIME),
// so one that reads a clock 2 s ahead does not trim another's start as old.
TEST_CASE_FIXTURE(LimitFixture, "a worker's clock skew does not let a rate limit be exceeded") {
  terms = LimitTerms{"mail", 0, 1, 1.0};
  Run({"LPUSH", kWorking, Job(1)});
  CHECK(Answer(LimitAcquireCall(keys, terms, kWorking, Job(1), "1@a", std::nullopt, 0)) ==
        std::vector<std::string>{"start"});
  Run({"LPUSH", kWorking, Job(2)});
  std::vector<std::string> second =
      Answer(LimitAcquireCall(keys, terms, kWorking, Job(2), "1@b", std::nullopt, 0));
  CHECK(second.front() == "scheduled");
  // Its start time is Redis's, within a second of now.
  CHECK(std::abs(std::stod(HGet(keys.Limit("mail"), "1@a")) - NowSeconds()) < 5);
}
