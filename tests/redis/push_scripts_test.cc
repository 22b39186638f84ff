// push.lua, schedule.lua and push_once.lua run by Redis, and the wake-up
// signals they publish: a second connection subscribes to the channel and
// checks that
// each call publishes exactly when it should (a queue that was empty, a job
// that is due before every other) and never otherwise, and that a call
// Redis refuses writes and publishes nothing.

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "protocol/keys.h"
#include "lua_scripts.h"
#include "redis/connection.h"
#include "reliableq/client.h"
#include "protocol/script_calls.h"
#include "support/testutil.h"

namespace reliableq {

using namespace reliableq::protocol;
namespace {

using testing::AcceptedJid;
using testing::RedisFixture;
using testing::Subscription;
using Strings = std::vector<std::string>;

}  // namespace
}  // namespace reliableq

namespace doctest {
// Lists of strings in failure messages.
template <>
struct StringMaker<std::vector<std::string>> {
  static String convert(const std::vector<std::string>& list) {
    std::string out = "{";
    for (const std::string& s : list) out += (out.size() > 1 ? ", \"" : "\"") + s + "\"";
    return (out + "}").c_str();
  }
};
}  // namespace doctest

namespace reliableq {
namespace {

struct WakeFixture : RedisFixture {
  Keys keys{"rq{t}:"};
  Subscription listener{server().socket_path(), "rq{t}:wake:*",
                        Subscription::Kind::kPattern};
  int step = 0;

  // What the calls since the last Published() published.
  Strings Published() {
    std::string marker = "marker " + std::to_string(++step);
    Run({"PUBLISH", keys.WakeScheduled(), marker});
    Strings got;
    for (const Subscription::Message& m : listener.Until(marker)) {
      got.push_back(m.channel + " " + m.payload);
    }
    return got;
  }

  Result<redis::ReplyPtr> Push(const Strings& queue_keys, const Strings& args) {
    redis::Argv k{"queues"};
    for (const std::string& key : queue_keys) k.push_back(key);
    const std::string prefix = keys.WakeQueue("");
    redis::Argv a{prefix};
    for (const std::string& arg : args) a.push_back(arg);
    return redis().Eval(ScriptId::kPush, k, a);
  }

  Result<redis::ReplyPtr> Schedule(const std::string& at, const std::string& payload) {
    const std::string channel = keys.WakeScheduled();
    return redis().Eval(ScriptId::kSchedule, {"schedule"}, {at, payload, channel});
  }

};

int64_t IntegerOf(const Result<redis::ReplyPtr>& reply) {
  REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
  REQUIRE((*reply)->type == REDIS_REPLY_INTEGER);
  return (*reply)->integer;
}

void CheckWrongType(const Result<redis::ReplyPtr>& reply, const std::string& script,
                    const std::string& key, const std::string& actual, const std::string& want) {
  REQUIRE_FALSE(reply.ok());
  CHECK(reply.status().IsScript());
  CHECK(reply.status().message() == "WRONGTYPE " + script + ": key " + key + " holds a " +
                                        actual + ", not a " + want + "; nothing was written");
}

// ---------------------------------------------------------------- push.lua

TEST_CASE_FIXTURE(WakeFixture, "push.lua wakes a queue only when it was empty") {
  // A single push (one queue, one payload) to an empty queue.
  CHECK(IntegerOf(Push({"queue:a"}, {"a", "1", "j1"})) == 1);
  CHECK(Published() == Strings{"rq{t}:wake:queue:a a"});
  // The queue holds a job: no message.
  CHECK(IntegerOf(Push({"queue:a"}, {"a", "1", "j2"})) == 1);
  CHECK(Published().empty());
  CHECK(LRange("queue:a") == Strings{"j2", "j1"});
  CHECK(SMembers("queues") == Strings{"a"});

  // Several queues and payloads: only the queues that were empty, each once,
  // in KEYS order; more than one LPUSH (1,000 values each) still counts.
  Strings many;
  for (int i = 0; i < 2500; ++i) many.push_back("m" + std::to_string(i));
  Strings args = {"b", "2", "b1", "b2", "a", "1", "j3", "c", "2500"};
  args.insert(args.end(), many.begin(), many.end());
  CHECK(IntegerOf(Push({"queue:b", "queue:a", "queue:c"}, args)) == 2503);
  CHECK(Published() == Strings{"rq{t}:wake:queue:b b", "rq{t}:wake:queue:c c"});
  CHECK(LRange("queue:b") == Strings{"b2", "b1"});
  CHECK(LRange("queue:a") == Strings{"j3", "j2", "j1"});
  Strings c = LRange("queue:c");
  REQUIRE(c.size() == 2500);
  CHECK(c.front() == "m2499");
  CHECK(c.back() == "m0");
  CHECK(SMembers("queues") == Strings{"a", "b", "c"});

  // Emptied again (a worker took its jobs): the next push wakes it again.
  Run({"DEL", "queue:b"});
  CHECK(IntegerOf(Push({"queue:b"}, {"b", "1", "b3"})) == 1);
  CHECK(Published() == Strings{"rq{t}:wake:queue:b b"});
}

TEST_CASE_FIXTURE(WakeFixture, "a single push to a queue of the wrong type writes nothing") {
  Run({"SET", "queue:a", "not a list"});
  auto before = Snapshot();
  CheckWrongType(Push({"queue:a"}, {"a", "1", "j1"}), "push", "queue:a", "string", "list");
  CHECK(Snapshot() == before);
  CHECK(Published().empty());
}

TEST_CASE_FIXTURE(WakeFixture, "a single push refused for `queues` takes its job back") {
  // The single push writes first and checks through its writes: the LPUSH
  // it made is taken back when the SADD fails, on an empty queue (which then
  // does not exist) and on one holding jobs (which keeps exactly them).
  Run({"SET", "queues", "not a set"});
  Run({"RPUSH", "queue:full", "old1", "old2"});
  auto before = Snapshot();
  CheckWrongType(Push({"queue:a"}, {"a", "1", "j1"}), "push", "queues", "string", "set");
  CheckWrongType(Push({"queue:full"}, {"full", "1", "j2"}), "push", "queues", "string", "set");
  CHECK(Snapshot() == before);
  CHECK_FALSE(Exists("queue:a"));
  CHECK(LRange("queue:full") == Strings{"old1", "old2"});
  CHECK(Published().empty());
}

TEST_CASE_FIXTURE(WakeFixture, "a push of several jobs with a key of the wrong type writes nothing") {
  Run({"SET", "queue:b", "not a list"});
  auto before = Snapshot();
  CheckWrongType(Push({"queue:a", "queue:b"}, {"a", "1", "j1", "b", "1", "j2"}), "push",
                 "queue:b", "string", "list");
  // Several payloads for one queue go the checked way too.
  Run({"DEL", "queue:b"});
  Run({"SET", "queues", "not a set"});
  before = Snapshot();
  CheckWrongType(Push({"queue:a"}, {"a", "2", "j1", "j2"}), "push", "queues", "string", "set");
  CHECK(Snapshot() == before);
  CHECK(Published().empty());
}

TEST_CASE_FIXTURE(WakeFixture, "push.lua refuses ARGV that does not match KEYS") {
  auto before = Snapshot();
  auto invalid = [&](const Strings& queue_keys, const Strings& args) {
    Result<redis::ReplyPtr> reply = Push(queue_keys, args);
    REQUIRE_FALSE(reply.ok());
    CHECK(reply.status().IsInvalidArgument());
    return reply.status().message();
  };
  CHECK(invalid({"queue:a"}, {"a", "2", "j1"}).find("at queue 1") != std::string::npos);
  CHECK(invalid({"queue:a"}, {"a", "0"}).find("at queue 1") != std::string::npos);
  CHECK(invalid({"queue:a"}, {"a", "x", "j1"}).find("at queue 1") != std::string::npos);
  CHECK(invalid({"queue:a"}, {"a", "1", "j1", "extra"}).find("more than KEYS") !=
        std::string::npos);
  CHECK(invalid({"queue:a", "queue:b"}, {"a", "1", "j1"}).find("at queue 2") !=
        std::string::npos);
  CHECK(invalid({}, {}).find("at least one queue") != std::string::npos);
  // No wake-up prefix at all.
  Result<redis::ReplyPtr> bare = redis().Eval(ScriptId::kPush, {"queues", "queue:a"}, {});
  REQUIRE_FALSE(bare.ok());
  CHECK(bare.status().IsInvalidArgument());
  CHECK(Snapshot() == before);
  CHECK(Published().empty());
}

// ------------------------------------------------------------ schedule.lua

TEST_CASE_FIXTURE(WakeFixture, "schedule.lua wakes the pollers only for a new earliest job") {
  const std::string channel = keys.WakeScheduled();
  // The first job is the earliest.
  CHECK(IntegerOf(Schedule("1700000200.500000", "j1")) == 1);
  CHECK(Published() == Strings{channel + " 1700000200.500000"});
  // Later than the earliest: nothing changes for a sleeping poller.
  CHECK(IntegerOf(Schedule("1700000300.000000", "j2")) == 1);
  CHECK(Published().empty());
  // Due at the same time as the earliest: the pollers wake then anyway.
  CHECK(IntegerOf(Schedule("1700000200.500000", "j0")) == 1);
  CHECK(Published().empty());
  // Earlier than every other.
  CHECK(IntegerOf(Schedule("1700000100.250000", "j3")) == 1);
  CHECK(Published() == Strings{channel + " 1700000100.250000"});
  // The same payload again moves it: 0 added, and it is the earliest now.
  CHECK(IntegerOf(Schedule("1700000050.000000", "j2")) == 0);
  CHECK(Published() == Strings{channel + " 1700000050.000000"});
  auto scheduled = ZRangeWithScores("schedule");
  REQUIRE(scheduled.size() == 4);
  CHECK(scheduled[0].first == "j2");
  CHECK(scheduled[0].second == 1700000050.0);
  CHECK(ZRange("schedule") == Strings{"j2", "j3", "j0", "j1"});
}

TEST_CASE_FIXTURE(WakeFixture, "schedule.lua refuses bad input and a key of the wrong type") {
  Run({"SET", "schedule", "not a zset"});
  auto before = Snapshot();
  CheckWrongType(Schedule("1700000100.250000", "j1"), "schedule.lua", "schedule", "string",
                 "zset");
  for (const char* bad : {"soon", "", "nan"}) {
    CAPTURE(bad);
    Result<redis::ReplyPtr> reply = Schedule(bad, "j1");
    REQUIRE_FALSE(reply.ok());
    CHECK(reply.status().IsInvalidArgument());
  }
  Result<redis::ReplyPtr> short_argv =
      redis().Eval(ScriptId::kSchedule, {"schedule"}, {"1700000100.250000", "j1"});
  REQUIRE_FALSE(short_argv.ok());
  CHECK(short_argv.status().IsInvalidArgument());
  CHECK(Snapshot() == before);
  CHECK(Published().empty());
}

// ------------------------------------------------------ through the client

TEST_CASE_FIXTURE(WakeFixture, "promote.lua wakes a queue it finds empty, once per call") {
  const std::string job1 = R"({"class":"X","args":[],"jid":"a1","queue":"a"})";
  const std::string job2 = R"({"class":"X","args":[],"jid":"a2","queue":"a"})";
  const std::string job3 = R"({"class":"X","args":[],"jid":"b1","queue":"b"})";
  Run({"ZADD", "schedule", "1", job1, "2", job2, "3", job3});
  Run({"LPUSH", "queue:b", "already there"});
  auto promote = [&](const std::string& prefix) {
    return redis().Eval(ScriptId::kPromote, {"schedule", "queues", "dead", "queue:a", "queue:b"},
                        {"1700000000.5", "10000", "3600", prefix, "4", "a", job1, "4", "a",
                         job2, "5", "b", job3});
  };
  auto promoted = promote(keys.WakeQueue(""));
  REQUIRE(promoted.ok());
  // queue:a was empty: one message for its two jobs; queue:b was not.
  CHECK(Published() == Strings{"rq{t}:wake:queue:a a"});
  CHECK(LRange("queue:a").size() == 2);
  CHECK(LRange("queue:b").size() == 2);
  // No prefix, no message.
  Run({"DEL", "queue:a"});
  Run({"ZADD", "schedule", "1", job1});
  REQUIRE(promote("").ok());
  CHECK(Published().empty());
  CHECK(LRange("queue:a").size() == 1);
}

TEST_CASE_FIXTURE(WakeFixture, "the client's pushes publish under its own prefix") {
  ClientOptions client_options;
  client_options.prefix = "rq{t}:";
  auto opened = Client::Open(options(), std::move(client_options));
  REQUIRE(opened.ok());
  Client& client = **opened;
  Job job;
  job.job_class = "HardJob";
  job.queue = "mail";

  AcceptedJid(client.Push(job));
  CHECK(Published() == Strings{"rq{t}:wake:queue:mail mail"});
  AcceptedJid(client.Push(job));
  CHECK(Published().empty());

  // A job for later: its time, as stored in schedule.
  AcceptedJid(client.PushIn(job, 3600));
  auto scheduled = ZRangeWithScores("schedule");
  REQUIRE(scheduled.size() == 1);
  Strings published = Published();
  REQUIRE(published.size() == 1);
  std::string prefix = keys.WakeScheduled() + " ";
  REQUIRE(published[0].rfind(prefix, 0) == 0);
  CHECK(std::stod(published[0].substr(prefix.size())) == scheduled[0].second);
  AcceptedJid(client.PushIn(job, 7200));
  CHECK(Published().empty());

  // A time that has passed pushes now, to a queue: its channel, not the
  // scheduled one.
  job.queue = "late";
  AcceptedJid(client.PushAt(job, testing::NowSeconds() - 5));
  CHECK(Published() == Strings{"rq{t}:wake:queue:late late"});
  CHECK(ZRange("schedule").size() == 2);

  // A bulk push wakes each queue it finds empty once.
  std::vector<Job> jobs(3, job);
  jobs[0].queue = "bulk";
  jobs[2].queue = "bulk";
  REQUIRE(client.PushBulk(jobs).ok());
  CHECK(Published() == Strings{"rq{t}:wake:queue:bulk bulk"});
}

// ------------------------------------------------------------ push_once.lua

struct OnceFixture : WakeFixture {
  // A job to push now (`at` empty) or for later.
  struct OnceJob {
    std::string jid;
    std::string queue;
    std::optional<double> at;
    std::string payload;
  };
  Result<redis::ReplyPtr> Once(const std::vector<OnceJob>& jobs, int64_t window = 60) {
    std::vector<OncePush> pushes;
    for (const OnceJob& job : jobs) pushes.push_back({job.jid, job.queue, job.at, job.payload});
    return redis().Eval(PushOnceCall(keys, std::chrono::seconds(window), std::move(pushes)));
  }
};

TEST_CASE_FIXTURE(OnceFixture, "push_once.lua stores a jid once while its record lives") {
  CHECK(IntegerOf(Once({{"j1", "a", {}, "p1"}})) == 1);
  CHECK(Published() == Strings{"rq{t}:wake:queue:a a"});
  CHECK(Get("rq{t}:pushed:j1") == "1");
  long long ttl = Integer({"TTL", "rq{t}:pushed:j1"});
  CHECK(ttl > 0);
  CHECK(ttl <= 60);
  // The same jid again, whatever its payload: nothing written, no wake-up,
  // and no error: the push that stored it succeeded.
  auto before = Snapshot();
  CHECK(IntegerOf(Once({{"j1", "a", {}, "p1 again"}})) == 0);
  CHECK(Snapshot() == before);
  CHECK(Published().empty());
  CHECK(LRange("queue:a") == Strings{"p1"});
  CHECK(SMembers("queues") == Strings{"a"});

  // A scheduled job too: pushed once, even once it left schedule (a poller
  // moved it to its queue).
  CHECK(IntegerOf(Once({{"j2", "", 1700000200.5, "s1"}})) == 1);
  CHECK(Published() == Strings{keys.WakeScheduled() + " 1700000200.500000"});
  Run({"ZREM", "schedule", "s1"});
  CHECK(IntegerOf(Once({{"j2", "", 1700000200.5, "s1"}})) == 0);
  CHECK(ZRange("schedule").empty());
  CHECK(Published().empty());

  // The replay window: once the record is gone, the jid is stored again.
  Run({"DEL", "rq{t}:pushed:j1"});
  CHECK(IntegerOf(Once({{"j1", "a", {}, "p1"}})) == 1);
  CHECK(LRange("queue:a") == Strings{"p1", "p1"});
}

TEST_CASE_FIXTURE(OnceFixture, "push_once.lua pushes the jids of a batch it has not seen, in order") {
  CHECK(IntegerOf(Once({{"j2", "a", {}, "p2"}})) == 1);
  Published();
  // j2 is stored; the others go, each queue woken once when it was empty,
  // the first given taken first; j4 twice in one call is stored once.
  CHECK(IntegerOf(Once({{"j1", "a", {}, "p1"},
                        {"j2", "a", {}, "p2"},
                        {"j3", "b", {}, "p3"},
                        {"j4", "b", {}, "p4"},
                        {"j4", "b", {}, "p4"},
                        {"j5", "", 1700000300.0, "s5"},
                        {"j6", "a", {}, "p6"}})) == 5);
  CHECK(LRange("queue:a") == Strings{"p6", "p1", "p2"});
  CHECK(LRange("queue:b") == Strings{"p4", "p3"});
  CHECK(ZRange("schedule") == Strings{"s5"});
  CHECK(SMembers("queues") == Strings{"a", "b"});
  CHECK(Published() ==
        Strings{"rq{t}:wake:queue:b b", keys.WakeScheduled() + " 1700000300.000000"});
}

TEST_CASE_FIXTURE(OnceFixture, "push_once.lua writes nothing for bad input or a key of the wrong type") {
  // The first job's key is fine, the second's is not: nothing of either.
  Run({"SET", "queue:b", "not a list"});
  auto before = Snapshot();
  CheckWrongType(Once({{"j1", "a", {}, "p1"}, {"j2", "b", {}, "p2"}}), "push_once", "queue:b",
                 "string", "list");
  CHECK(Snapshot() == before);
  Run({"DEL", "queue:b"});
  Run({"RPUSH", "rq{t}:pushed:j2", "x"});
  before = Snapshot();
  CheckWrongType(Once({{"j1", "a", {}, "p1"}, {"j2", "b", {}, "p2"}}), "push_once",
                 "rq{t}:pushed:j2", "list", "string");
  CHECK(Snapshot() == before);
  // One job checks through its writes, and takes back the record and the
  // push it made when a later write is refused.
  CheckWrongType(Once({{"j2", "b", {}, "p2"}}), "push_once", "rq{t}:pushed:j2", "list",
                 "string");
  CHECK(Snapshot() == before);
  Run({"DEL", "rq{t}:pushed:j2"});
  Run({"SET", "queue:b", "not a list"});
  before = Snapshot();
  CheckWrongType(Once({{"j1", "b", {}, "p1"}}), "push_once", "queue:b", "string", "list");
  CHECK(Snapshot() == before);
  Run({"DEL", "queue:b"});
  Run({"SET", "schedule", "not a zset"});
  before = Snapshot();
  CheckWrongType(Once({{"j1", "", 1700000200.5, "s1"}}), "push_once", "schedule", "string",
                 "zset");
  CheckWrongType(Once({{"j1", "a", {}, "p1"}, {"j2", "a", {}, "p2"}}), "push_once", "schedule",
                 "string", "zset");
  CHECK(Snapshot() == before);
  Run({"DEL", "schedule"});
  Run({"SET", "queues", "not a set"});
  Run({"RPUSH", "queue:full", "old1"});
  before = Snapshot();
  CheckWrongType(Once({{"j1", "a", {}, "p1"}}), "push_once", "queues", "string", "set");
  CheckWrongType(Once({{"j1", "full", {}, "p1"}}), "push_once", "queues", "string", "set");
  CHECK(Snapshot() == before);
  CHECK(LRange("queue:full") == Strings{"old1"});
  Run({"DEL", "queues", "queue:full"});
  before = Snapshot();

  auto invalid = [&](const redis::Argv& k, const redis::Argv& a) {
    Result<redis::ReplyPtr> reply = redis().Eval(ScriptId::kPushOnce, k, a);
    REQUIRE_FALSE(reply.ok());
    CHECK(reply.status().IsInvalidArgument());
    return reply.status().message();
  };
  const std::string wake = keys.WakeQueue("");
  const std::string scheduled = keys.WakeScheduled();
  CHECK(invalid({"queues", "schedule"}, {"60", wake, scheduled}).find("want 2 keys") !=
        std::string::npos);
  CHECK(invalid({"queues", "schedule", "rq{t}:pushed:j1"}, {"60", wake, scheduled, "a", "p"})
            .find("want 2 keys") != std::string::npos);
  CHECK(invalid({"queues", "schedule", "rq{t}:pushed:j1", "queue:a"}, {"60", wake, scheduled, "a"})
            .find("want 2 keys") != std::string::npos);
  for (const char* ttl : {"0", "-5", "1.5", "x"}) {
    CHECK(invalid({"queues", "schedule", "rq{t}:pushed:j1", "queue:a"},
                  {ttl, wake, scheduled, "a", "p"})
              .find("lifetime must be an integer above 0") != std::string::npos);
  }
  CHECK(invalid({"queues", "schedule", "rq{t}:pushed:j1", "schedule"},
                {"60", wake, scheduled, "soon", "p"})
            .find("due time must be a number") != std::string::npos);
  CHECK(invalid({"queues", "schedule", "rq{t}:pushed:j1", "queue:a", "rq{t}:pushed:j2",
                 "schedule"},
                {"60", wake, scheduled, "a", "p", "nan", "p"})
            .find("due time must be a number") != std::string::npos);
  CHECK(Snapshot() == before);
  CHECK(Published().empty());
}

}  // namespace
}  // namespace reliableq
