// Sequences in the scripts, run by Redis with the calls the worker sends
// (protocol/script_calls.h): fetch.lua takes a free key or parks a job
// behind its holder in one step, and every end of a job's life (finish,
// recover, requeue) hands the key on to the oldest waiting job, which goes
// to the end of its queue that is taken next.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "lua_scripts.h"
#include "protocol/keys.h"
#include "protocol/script_calls.h"
#include "redis/connection.h"
#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::protocol;
using namespace reliableq::testing;

namespace {

using Strings = std::vector<std::string>;

const std::string kWork = "reliableq:working:h:1:abc:default";

// A job of sequence `key` (empty: none) with jid "j<n>".
std::string Keyed(int n, const std::string& key, const std::string& extra = "") {
  std::string job = R"({"class":"Pay","args":[)" + std::to_string(n) +
                    R"(],"queue":"default","jid":"j)" + std::to_string(n) + "\"";
  if (!key.empty()) job += R"(,"sequence":")" + key + "\"";
  return job + extra + "}";
}

// `payload` after one interruption (recover.lua's edit).
std::string Interrupted(const std::string& payload) {
  return payload.substr(0, payload.size() - 1) + ",\"interrupted_count\":1}";
}

struct SequenceFixture : RedisFixture {
  Keys keys;

  // LPUSH in push order: the first given is taken first.
  void PushAll(const Strings& jobs) {
    for (const std::string& job : jobs) Run({"LPUSH", "queue:default", job});
  }

  // One fetch as the worker sends it; returns the payloads it gave to run
  // and sets *waiting to the count it parked.
  Strings Fetch(size_t max, size_t* waiting = nullptr) {
    std::string queue = keys.Queue("default");
    Result<redis::ReplyPtr> reply = redis().Eval(FetchCall({{queue, kWork}}, max, &keys));
    REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
    Result<FetchReply> read = ReadFetchReply(reply->get());
    REQUIRE(read.ok());
    if (waiting != nullptr) *waiting = read->waiting;
    Strings out;
    for (auto& job : read->jobs) out.push_back(job.payload);
    return out;
  }

  // finish.lua as the worker sends it for `mode`; true when it moved.
  bool Finish(const std::string& payload, FinishMode mode) {
    FinishedRun run;
    run.working_key = kWork;
    run.original = payload;
    run.updated = payload;
    run.mode = mode;
    run.score = 1700000500;
    run.counted = mode != FinishMode::kDone;
    Result<redis::ReplyPtr> reply =
        redis().Eval(FinishCall(keys, run, 1700000100.25, DeadSetLimits{}));
    REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
    Result<bool> moved = ReadFinishReply(reply->get());
    REQUIRE(moved.ok());
    return *moved;
  }

  std::string Holder(const std::string& key) { return HGet(keys.Sequences(), key); }
  Strings Waiting(const std::string& key) { return LRange(keys.SequenceWaiting(key)); }
};

}  // namespace

TEST_CASE_FIXTURE(SequenceFixture, "fetch runs one job per key and parks the rest in order") {
  PushAll({Keyed(1, "a"), Keyed(2, "b"), Keyed(3, "a"), Keyed(4, ""), Keyed(5, "a")});
  size_t waiting = 0;
  Strings got = Fetch(10, &waiting);
  CHECK(got == Strings{Keyed(1, "a"), Keyed(2, "b"), Keyed(4, "")});
  CHECK(waiting == 2);
  CHECK(LRange(kWork) == Strings{Keyed(4, ""), Keyed(2, "b"), Keyed(1, "a")});
  CHECK(Holder("a") == "j1");
  CHECK(Holder("b") == "j2");
  // Oldest at the left: released first.
  CHECK(Waiting("a") == Strings{Keyed(3, "a"), Keyed(5, "a")});
  CHECK_FALSE(Exists(keys.SequenceWaiting("b")));
  CHECK(Integer({"ZCARD", keys.SequencesSince()}) == 2);
  CHECK_FALSE(Exists("queue:default"));
}

TEST_CASE_FIXTURE(SequenceFixture, "parked jobs count against the fetch's max") {
  PushAll({Keyed(1, "a"), Keyed(2, "a"), Keyed(3, "a"), Keyed(4, "")});
  size_t waiting = 0;
  CHECK(Fetch(2, &waiting) == Strings{Keyed(1, "a")});
  CHECK(waiting == 1);
  CHECK(LRange("queue:default") == Strings{Keyed(4, ""), Keyed(3, "a")});
}

TEST_CASE_FIXTURE(SequenceFixture,
                  "a success hands the key to the oldest waiting job, at the end taken next") {
  PushAll({Keyed(1, "a"), Keyed(2, "a"), Keyed(3, "a")});
  Fetch(10);
  PushAll({Keyed(9, "")});  // pushed while the sequence waits
  Subscription wake(server().socket_path(), keys.WakeQueue("default"),
                    Subscription::Kind::kChannel);
  CHECK(Finish(Keyed(1, "a"), FinishMode::kDone));
  CHECK(Holder("a") == "j2");
  // The released job is at the right end: a fetch takes it before job 9.
  CHECK(LRange("queue:default") == Strings{Keyed(9, ""), Keyed(2, "a")});
  CHECK(Waiting("a") == Strings{Keyed(3, "a")});
  // The queue had a job: no wake-up was needed.
  CHECK(Fetch(10) == Strings{Keyed(2, "a"), Keyed(9, "")});
  CHECK(Finish(Keyed(2, "a"), FinishMode::kDone));
  CHECK(Holder("a") == "j3");
  // Only the queue that was empty woke its idle workers.
  Run({"PUBLISH", keys.WakeQueue("default"), "marker"});
  std::vector<Subscription::Message> heard = wake.Until("marker");
  REQUIRE(heard.size() == 1);
  CHECK(heard[0].payload == "default");
  CHECK(Fetch(10) == Strings{Keyed(3, "a")});
  CHECK(Finish(Keyed(3, "a"), FinishMode::kDone));
  // Nothing waits: every key of the sequence is gone.
  CHECK_FALSE(Exists(keys.Sequences()));
  CHECK_FALSE(Exists(keys.SequencesSince()));
  CHECK_FALSE(Exists(keys.SequenceWaiting("a")));
}

TEST_CASE_FIXTURE(SequenceFixture,
                  "a retry keeps the key and the retried job runs before the next; "
                  "release_on_retry lets it go") {
  PushAll({Keyed(1, "a"), Keyed(2, "a")});
  Fetch(10);
  CHECK(Finish(Keyed(1, "a"), FinishMode::kRetry));
  CHECK(Holder("a") == "j1");
  CHECK(Waiting("a") == Strings{Keyed(2, "a")});
  // Back from the retry set (promote.lua puts it in its queue), it runs.
  PushAll({Keyed(1, "a")});
  CHECK(Fetch(10) == Strings{Keyed(1, "a")});
  CHECK(Finish(Keyed(1, "a"), FinishMode::kSnooze));  // a snooze keeps it too
  CHECK(Holder("a") == "j1");

  const std::string loose = R"(,"sequence_release_on_retry":true)";
  PushAll({Keyed(5, "b", loose), Keyed(6, "b")});
  Fetch(10);
  CHECK(Finish(Keyed(5, "b", loose), FinishMode::kRetry));
  CHECK(Holder("b") == "j6");
  CHECK(LRange("queue:default") == Strings{Keyed(6, "b")});
  // When it is due again, it waits behind job 6.
  PushAll({Keyed(5, "b", loose)});
  size_t waiting = 0;
  CHECK(Fetch(10, &waiting) == Strings{Keyed(6, "b")});
  CHECK(waiting == 1);
  CHECK(Waiting("b") == Strings{Keyed(5, "b", loose)});
}

TEST_CASE_FIXTURE(SequenceFixture,
                  "ack.lua ends a batch of successes: each holder hands its key on, with the "
                  "key the worker read; a job given back moves nothing") {
  PushAll({Keyed(1, "a"), Keyed(2, "b"), Keyed(3, "a"), Keyed(4, "b"), Keyed(5, "c")});
  Fetch(10);
  Run({"LREM", kWork, "0", Keyed(5, "c")});  // given back by a janitor
  const std::string one = Keyed(1, "a"), two = Keyed(2, "b"), five = Keyed(5, "c");
  const std::string record_key = keys.JobRecord("j1");
  std::vector<AckedRun> runs = {{one, "j1", "a", record_key, R"({"state":"done"})", 60},
                                {two, "j2", "b", "", "", 0},
                                {five, "j5", "c", "", "", 0}};
  Result<redis::ReplyPtr> reply = redis().Eval(AckCall(keys, kWork, runs));
  REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
  Result<std::vector<bool>> moved = ReadAckReply(reply->get(), runs.size());
  REQUIRE(moved.ok());
  CHECK(*moved == std::vector<bool>{true, true, false});
  CHECK(Holder("a") == "j3");
  CHECK(Holder("b") == "j4");
  // Job 5 still holds its key: it runs again from its queue.
  CHECK(Holder("c") == "j5");
  CHECK(LRange("queue:default") == Strings{Keyed(3, "a"), Keyed(4, "b")});
  CHECK(Get(record_key) == R"({"state":"done"})");
  CHECK(Integer({"TTL", record_key}) > 0);
  CHECK_FALSE(Exists(kWork));
}

TEST_CASE_FIXTURE(SequenceFixture,
                  "a key handed on in one ack.lua call is not handed on again by a second copy "
                  "of its new holder in the same call") {
  PushAll({Keyed(1, "a"), Keyed(2, "a"), Keyed(3, "a")});
  Fetch(10);
  // A copy of job 2 (pushed twice under one jid) ran and ends beside job 1.
  const std::string one = Keyed(1, "a"), two = Keyed(2, "a");
  Run({"LPUSH", kWork, two});
  std::vector<AckedRun> runs = {{one, "j1", "a", "", "", 0}, {two, "j2", "a", "", "", 0}};
  Result<redis::ReplyPtr> reply = redis().Eval(AckCall(keys, kWork, runs));
  REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
  // Job 2 holds the key and waits in its queue to run; job 3 still waits.
  CHECK(Holder("a") == "j2");
  CHECK(LRange("queue:default") == Strings{Keyed(2, "a")});
  CHECK(Waiting("a") == Strings{Keyed(3, "a")});
}

TEST_CASE_FIXTURE(SequenceFixture,
                  "ack.lua reads the key itself when the worker found none in a payload that "
                  "names one; keys beyond 2^53 are not read") {
  const std::string number =
      R"({"class":"Pay","args":[],"queue":"default","jid":"x1","sequence":42})";
  const std::string next =
      R"({"class":"Pay","args":[],"queue":"default","jid":"x2","sequence":42})";
  const std::string huge =
      R"({"class":"Pay","args":[],"queue":"default","jid":"x3","sequence":9007199254740993})";
  PushAll({number, next, huge});
  size_t waiting = 0;
  CHECK(Fetch(10, &waiting) == Strings{number, huge});
  CHECK(waiting == 1);
  CHECK_FALSE(Exists(keys.SequenceWaiting("9007199254740992")));
  std::vector<AckedRun> runs = {{number, "x1", "", "", "", 0}};
  REQUIRE(redis().Eval(AckCall(keys, kWork, runs)).ok());
  CHECK(Holder("42") == "x2");
}

TEST_CASE_FIXTURE(SequenceFixture, "dead, discard and expire end the life and hand the key on") {
  for (FinishMode mode : {FinishMode::kDead, FinishMode::kDiscard, FinishMode::kExpire}) {
    CAPTURE(static_cast<int>(mode));
    Run({"FLUSHALL"});
    PushAll({Keyed(1, "a"), Keyed(2, "a")});
    Fetch(10);
    CHECK(Finish(Keyed(1, "a"), mode));
    CHECK(Holder("a") == "j2");
    CHECK(LRange("queue:default") == Strings{Keyed(2, "a")});
  }
}

TEST_CASE_FIXTURE(SequenceFixture,
                  "a janitor puts the holder back with its key: it runs before the next") {
  PushAll({Keyed(1, "a"), Keyed(2, "a")});
  Fetch(10);
  // The process died: recover.lua gives the job back to its queue.
  RecoverBatch batch;
  batch.force = true;
  Result<redis::ReplyPtr> reply =
      redis().Eval(RecoverCall(keys, "h:1:abc", "default", batch, 1700000100.25, DeadSetLimits{}));
  REQUIRE(reply.ok());
  CHECK(Holder("a") == "j1");
  std::string back = Interrupted(Keyed(1, "a"));
  CHECK(LRange("queue:default") == Strings{back});
  CHECK(Fetch(10) == Strings{back});
  CHECK(Waiting("a") == Strings{Keyed(2, "a")});
}

TEST_CASE_FIXTURE(SequenceFixture,
                  "a job the janitor sends to dead hands its key on in the same step") {
  PushAll({Keyed(1, "a", R"(,"interrupted_count":3)"), Keyed(2, "a")});
  Fetch(10);
  RecoverBatch batch;
  batch.force = true;
  batch.max_interruptions = 3;
  REQUIRE(redis()
              .Eval(RecoverCall(keys, "h:1:abc", "default", batch, 1700000100.25, DeadSetLimits{}))
              .ok());
  CHECK(Integer({"ZCARD", "dead"}) == 1);
  CHECK(Holder("a") == "j2");
  CHECK(LRange("queue:default") == Strings{Keyed(2, "a")});

  // requeue.lua (a live process past its deadline) does the same.
  Run({"FLUSHALL"});
  PushAll({Keyed(1, "a", R"(,"interrupted_count":3)"), Keyed(2, "a")});
  Strings fetched = Fetch(10);
  REQUIRE(fetched.size() == 1);
  REQUIRE(redis()
              .Eval(RequeueCall(keys, kWork, "default", RequeueMode::kInterrupt, 3, 1700000100.25,
                                DeadSetLimits{}, {fetched[0]}))
              .ok());
  CHECK(Integer({"ZCARD", "dead"}) == 1);
  CHECK(Holder("a") == "j2");
}

TEST_CASE_FIXTURE(SequenceFixture, "killing a retrying holder hands its key on") {
  PushAll({Keyed(1, "a"), Keyed(2, "a")});
  Fetch(10);
  CHECK(Finish(Keyed(1, "a"), FinishMode::kRetry));
  REQUIRE(Holder("a") == "j1");
  Result<redis::ReplyPtr> reply =
      redis().Eval(KillCall(keys, 1700000100.25, DeadSetLimits{}, {Keyed(1, "a")}));
  REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
  CHECK(ZRange("dead") == Strings{Keyed(1, "a")});
  CHECK(Holder("a") == "j2");
  CHECK(LRange("queue:default") == Strings{Keyed(2, "a")});
}

TEST_CASE_FIXTURE(SequenceFixture,
                  "a finish that finds the job given back, or not the holder, releases nothing") {
  PushAll({Keyed(1, "a"), Keyed(2, "a")});
  Fetch(10);
  Run({"DEL", kWork});  // a janitor gave it back
  CHECK_FALSE(Finish(Keyed(1, "a"), FinishMode::kDone));
  CHECK(Holder("a") == "j1");
  // An operator let the key go to job 2; job 1's end does not take it back.
  Run({"HSET", keys.Sequences(), "a", "j2"});
  Run({"LPUSH", kWork, Keyed(1, "a")});
  CHECK(Finish(Keyed(1, "a"), FinishMode::kDone));
  CHECK(Holder("a") == "j2");
  CHECK(Waiting("a") == Strings{Keyed(2, "a")});
}

TEST_CASE_FIXTURE(SequenceFixture,
                  "jobs not gated: another queue named, no usable key; integer keys count") {
  // Its queue field names another queue: its release could not send it
  // back where it came from, so it runs ungated.
  std::string elsewhere = R"({"class":"Pay","args":[],"queue":"other","jid":"x1","sequence":"a"})";
  std::string empty_key = R"({"class":"Pay","args":[],"queue":"default","jid":"x2","sequence":""})";
  std::string nested = R"({"class":"Pay","args":[{"sequence":"a"}],"queue":"default","jid":"x3"})";
  std::string number = R"({"class":"Pay","args":[],"queue":"default","jid":"x4","sequence":42})";
  std::string number2 = R"({"class":"Pay","args":[],"queue":"default","jid":"x5","sequence":42})";
  PushAll({Keyed(1, "a"), elsewhere, empty_key, nested, number, number2});
  size_t waiting = 0;
  CHECK(Fetch(10, &waiting) == Strings{Keyed(1, "a"), elsewhere, empty_key, nested, number});
  CHECK(waiting == 1);
  CHECK(Holder("42") == "x4");
  CHECK(Waiting("42") == Strings{number2});
}

TEST_CASE_FIXTURE(SequenceFixture,
                  "a sequence key of another type stops the fetch before anything moves") {
  // Job 2 would wait in a list that is not one.
  Run({"SET", keys.SequenceWaiting("a"), "x"});
  PushAll({Keyed(1, "a"), Keyed(2, "a"), Keyed(3, "")});
  std::string queue = keys.Queue("default");
  Result<redis::ReplyPtr> reply = redis().Eval(FetchCall({{queue, kWork}}, 10, &keys));
  REQUIRE_FALSE(reply.ok());
  CHECK(reply.status().message().find("WRONGTYPE fetch: key " + keys.SequenceWaiting("a")) == 0);
  CHECK(Integer({"LLEN", "queue:default"}) == 3);
  CHECK_FALSE(Exists(kWork));
  CHECK_FALSE(Exists(keys.Sequences()));
  // The holders' hash of another type stops it too.
  Run({"FLUSHALL"});
  Run({"SET", keys.Sequences(), "x"});
  PushAll({Keyed(1, "a"), Keyed(2, "")});
  reply = redis().Eval(FetchCall({{queue, kWork}}, 10, &keys));
  REQUIRE_FALSE(reply.ok());
  CHECK(reply.status().message().find("WRONGTYPE fetch: key " + keys.Sequences()) == 0);
  CHECK(Integer({"LLEN", "queue:default"}) == 2);

  // The same for a finish that would hand the key on: the job stays.
  Run({"FLUSHALL"});
  PushAll({Keyed(1, "b"), Keyed(2, "b")});
  Fetch(10);
  Run({"SET", "queue:default", "x"});
  const std::string holder = Keyed(1, "b");
  FinishedRun run;
  run.working_key = kWork;
  run.original = holder;
  run.counted = false;
  reply = redis().Eval(FinishCall(keys, run, 1700000100.25, DeadSetLimits{}));
  REQUIRE_FALSE(reply.ok());
  CHECK(LRange(kWork) == Strings{Keyed(1, "b")});
  CHECK(Holder("b") == "j1");
}

TEST_CASE_FIXTURE(SequenceFixture, "a fetch without sequence arguments gates nothing") {
  PushAll({Keyed(1, "a"), Keyed(2, "a")});
  std::string queue = keys.Queue("default");
  REQUIRE(redis().Eval(FetchCall({{queue, kWork}}, 10)).ok());
  CHECK(Integer({"LLEN", kWork}) == 2);
  CHECK_FALSE(Exists(keys.Sequences()));
}
