// The operator's side of sequences against a real Redis: Admin's listing
// (ListSequences, the figures of GetStats) and the two scripts an operator
// runs, sequence_release.lua (the key goes on as a finish gives it) and
// sequence_skip.lua (the oldest waiting job goes to dead). The dashboard's
// audit of both is in web_api_test.cc.

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "protocol/keys.h"
#include "protocol/script_calls.h"
#include "redis/connection.h"
#include "reliableq/admin.h"
#include "support/fake_clock.h"
#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::protocol;
using namespace reliableq::testing;

namespace {

using Strings = std::vector<std::string>;

const std::string kWork = "reliableq:working:h:1:abc:default";

// A job of sequence `key` with jid "j<n>".
std::string Keyed(int n, const std::string& key) {
  return R"({"class":"Pay","args":[)" + std::to_string(n) + R"(],"queue":"default","jid":"j)" +
         std::to_string(n) + R"(","sequence":")" + key + "\"}";
}

struct SequenceAdminFixture : RedisFixture {
  Keys keys;
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  std::unique_ptr<Admin> admin;

  SequenceAdminFixture() {
    auto opened = Admin::Open(options(), {.prefix = "reliableq:", .clock = clock});
    REQUIRE_MESSAGE(opened.ok(), opened.status().ToString());
    admin = std::move(opened.value());
  }

  // Pushed in this order (the first is taken first), then one fetch as the
  // worker sends it: the first job of each key runs, the others wait.
  Strings PushAndFetch(const Strings& jobs) {
    for (const std::string& job : jobs) Run({"LPUSH", "queue:default", job});
    Result<redis::ReplyPtr> reply =
        redis().Eval(FetchCall({{keys.Queue("default"), kWork}}, 10, &keys));
    REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
    Result<FetchReply> read = ReadFetchReply(reply->get());
    REQUIRE(read.ok());
    Strings out;
    for (auto& job : read->jobs) out.push_back(job.payload);
    return out;
  }

  // finish.lua "done" for `payload`, as the worker sends it.
  void Done(const std::string& payload) {
    FinishedRun run;
    run.working_key = kWork;
    run.original = payload;
    run.updated = payload;
    run.mode = FinishMode::kDone;
    Result<redis::ReplyPtr> reply = redis().Eval(FinishCall(keys, run, 1700000100.25, {}));
    REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
  }

  std::string Holder(const std::string& key) { return HGet(keys.Sequences(), key); }
  Strings Waiting(const std::string& key) { return LRange(keys.SequenceWaiting(key)); }
};

}  // namespace

TEST_CASE_FIXTURE(SequenceAdminFixture, "sequence_admin: the listing is oldest hold first") {
  Run({"HSET", keys.Sequences(), "a", "j1", "b", "j2", "c", "j3"});
  Run({"ZADD", keys.SequencesSince(), "300", "a", "100", "b", "200", "c"});
  Run({"RPUSH", keys.SequenceWaiting("b"), Keyed(4, "b"), Keyed(5, "b")});

  Result<SequenceListing> all = admin->ListSequences(100);
  REQUIRE_MESSAGE(all.ok(), all.status().ToString());
  CHECK(all->held == 3);
  REQUIRE(all->sequences.size() == 3);
  CHECK(all->sequences[0].key == "b");
  CHECK(all->sequences[0].holder == "j2");
  CHECK(all->sequences[0].held_since == 100);
  CHECK(all->sequences[0].waiting == 2);
  CHECK(all->sequences[1].key == "c");
  CHECK(all->sequences[1].waiting == 0);
  CHECK(all->sequences[2].key == "a");
  CHECK(all->sequences[2].holder == "j1");

  Result<SequenceListing> one = admin->ListSequences(1);
  REQUIRE(one.ok());
  CHECK(one->held == 3);
  REQUIRE(one->sequences.size() == 1);
  CHECK(one->sequences[0].key == "b");

  CHECK(admin->ListSequences(0).status().IsInvalidArgument());
  Run({"DEL", keys.Sequences(), keys.SequencesSince(), keys.SequenceWaiting("b")});
  Result<SequenceListing> none = admin->ListSequences(100);
  REQUIRE(none.ok());
  CHECK(none->held == 0);
  CHECK(none->sequences.empty());
}

TEST_CASE_FIXTURE(SequenceAdminFixture, "sequence_admin: stats count the holds and the oldest") {
  Result<Stats> empty = admin->GetStats();
  REQUIRE(empty.ok());
  CHECK(empty->sequences_held == 0);
  CHECK(empty->oldest_sequence_hold == 0);

  Run({"HSET", keys.Sequences(), "a", "j1", "b", "j2"});
  const double now = clock->Now();
  Run({"ZADD", keys.SequencesSince(), std::to_string(now - 400), "a", std::to_string(now - 5),
       "b"});
  Result<Stats> stats = admin->GetStats();
  REQUIRE(stats.ok());
  CHECK(stats->sequences_held == 2);
  CHECK(stats->oldest_sequence_hold == doctest::Approx(400).epsilon(0.01));
}

TEST_CASE_FIXTURE(SequenceAdminFixture, "sequence_admin: release hands the key on as a finish") {
  Strings ran = PushAndFetch({Keyed(1, "a"), Keyed(2, "a"), Keyed(3, "a")});
  REQUIRE(ran == Strings{Keyed(1, "a")});
  REQUIRE(Waiting("a") == Strings{Keyed(2, "a"), Keyed(3, "a")});
  Run({"ZADD", keys.SequencesSince(), "1000", "a"});  // an old hold

  Result<SequenceRelease> released = admin->ReleaseSequence("a");
  REQUIRE_MESSAGE(released.ok(), released.status().ToString());
  CHECK(released->holder == "j1");
  CHECK(released->next == "j2");
  CHECK(Holder("a") == "j2");
  CHECK(Waiting("a") == Strings{Keyed(3, "a")});
  // At the right end of its queue: taken next.
  CHECK(LRange("queue:default") == Strings{Keyed(2, "a")});
  std::vector<std::pair<std::string, double>> since = ZRangeWithScores(keys.SequencesSince());
  REQUIRE(since.size() == 1);
  CHECK(since[0].second > 1000);

  // The old holder's end releases nothing: it no longer holds the key.
  Done(Keyed(1, "a"));
  CHECK(Holder("a") == "j2");
  CHECK(Waiting("a") == Strings{Keyed(3, "a")});

  // Run again (a retry), it waits at the end behind the jobs of the key.
  Strings again = PushAndFetch({Keyed(1, "a")});
  CHECK(again == Strings{Keyed(2, "a")});
  CHECK(Waiting("a") == Strings{Keyed(3, "a"), Keyed(1, "a")});
}

TEST_CASE_FIXTURE(SequenceAdminFixture, "sequence_admin: release with none waiting frees it") {
  REQUIRE(PushAndFetch({Keyed(1, "a")}) == Strings{Keyed(1, "a")});
  Result<SequenceRelease> released = admin->ReleaseSequence("a");
  REQUIRE_MESSAGE(released.ok(), released.status().ToString());
  CHECK(released->holder == "j1");
  CHECK(released->next.empty());
  CHECK_FALSE(Exists(keys.Sequences()));
  CHECK_FALSE(Exists(keys.SequencesSince()));
  CHECK_FALSE(Exists(keys.SequenceWaiting("a")));
}

TEST_CASE_FIXTURE(SequenceAdminFixture, "sequence_admin: a free key is refused, nothing changes") {
  REQUIRE(PushAndFetch({Keyed(1, "a"), Keyed(2, "a")}) == Strings{Keyed(1, "a")});
  auto before = Snapshot();
  Result<SequenceRelease> free_key = admin->ReleaseSequence("b");
  CHECK(free_key.status().IsNotFound());
  CHECK(free_key.status().ToString().find("'b' is not held") != std::string::npos);
  Result<SequenceSkip> nothing_waits = admin->SkipSequenceHead("b", DeadSetLimits());
  CHECK(nothing_waits.status().IsNotFound());
  CHECK(admin->ReleaseSequence("").status().IsInvalidArgument());
  CHECK(admin->SkipSequenceHead("a", {.max_jobs = 0}).status().IsInvalidArgument());
  CHECK(Snapshot() == before);
}

TEST_CASE_FIXTURE(SequenceAdminFixture,
                  "sequence_admin: skip moves the oldest waiting job to dead") {
  REQUIRE(PushAndFetch({Keyed(1, "a"), Keyed(2, "a"), Keyed(3, "a")}) == Strings{Keyed(1, "a")});
  Result<SequenceSkip> skipped = admin->SkipSequenceHead("a", DeadSetLimits());
  REQUIRE_MESSAGE(skipped.ok(), skipped.status().ToString());
  CHECK(skipped->jid == "j2");
  CHECK(skipped->next.empty());
  std::vector<std::pair<std::string, double>> dead = ZRangeWithScores("dead");
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].first == Keyed(2, "a"));  // byte for byte
  CHECK(dead[0].second == doctest::Approx(clock->Now()));
  CHECK(Holder("a") == "j1");
  CHECK(Waiting("a") == Strings{Keyed(3, "a")});

  // The last one waiting: the list goes, the holder stays.
  REQUIRE(admin->SkipSequenceHead("a", DeadSetLimits()).ok());
  CHECK_FALSE(Exists(keys.SequenceWaiting("a")));
  CHECK(Holder("a") == "j1");
  auto before = Snapshot();
  CHECK(admin->SkipSequenceHead("a", DeadSetLimits()).status().IsNotFound());
  CHECK(Snapshot() == before);
  // The holder's end frees the key.
  Done(Keyed(1, "a"));
  CHECK_FALSE(Exists(keys.Sequences()));
}

TEST_CASE_FIXTURE(SequenceAdminFixture, "sequence_admin: skip of a stuck head hands the key on") {
  // An entry that is not a job stops the hand-on: the key stays held (for
  // no job) with the entry left at the head, so the jobs behind it keep
  // their place and the hold shows (lib/sequence.lua).
  REQUIRE(PushAndFetch({Keyed(1, "a"), Keyed(2, "a")}) == Strings{Keyed(1, "a")});
  Run({"LPUSH", keys.SequenceWaiting("a"), "not json"});
  Done(Keyed(1, "a"));
  REQUIRE(Holder("a") == "(not a job)");
  REQUIRE(Waiting("a") == Strings{"not json", Keyed(2, "a")});

  Result<SequenceSkip> skipped = admin->SkipSequenceHead("a", DeadSetLimits());
  REQUIRE_MESSAGE(skipped.ok(), skipped.status().ToString());
  CHECK(skipped->jid.empty());
  CHECK(skipped->next == "j2");
  CHECK(ZRange("dead") == Strings{"not json"});
  CHECK(Holder("a") == "j2");
  CHECK_FALSE(Exists(keys.SequenceWaiting("a")));
  CHECK(LRange("queue:default") == Strings{Keyed(2, "a")});
}

TEST_CASE_FIXTURE(SequenceAdminFixture, "sequence_admin: a key of another type writes nothing") {
  REQUIRE(PushAndFetch({Keyed(1, "a"), Keyed(2, "a")}) == Strings{Keyed(1, "a")});
  Run({"DEL", "queue:default"});
  Run({"SET", "queue:default", "x"});
  auto before = Snapshot();
  Result<SequenceRelease> released = admin->ReleaseSequence("a");
  CHECK_FALSE(released.ok());
  CHECK(released.status().ToString().find("WRONGTYPE") != std::string::npos);
  Run({"SET", "dead", "x"});
  before = Snapshot();
  CHECK_FALSE(admin->SkipSequenceHead("a", DeadSetLimits()).ok());
  CHECK(Snapshot() == before);
}
