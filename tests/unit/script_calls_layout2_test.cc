// In layout 2 every key of every script call carries the group's hash tag,
// so that each script stays in one slot of a Redis Cluster. Pure: the calls
// are built, never sent.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "protocol/keys.h"
#include "protocol/script_calls.h"

using namespace reliableq;
using namespace reliableq::protocol;

namespace {

// Every ScriptCall builder of script_calls.h, with keys of `keys`.
std::vector<ScriptCall> EveryCall(const Keys& keys) {
  const DeadSetLimits limits{10000, std::chrono::seconds(3600)};
  const std::string working = keys.Working("h:1:x", "q");
  const std::string unique = keys.Unique("k");
  const LimitTerms limit{"api", 2, 5, 1.0};
  std::vector<ScriptCall> calls;
  std::vector<QueuePush> pushes;
  pushes.push_back({"q", {"{}"}});
  pushes.push_back({"r", {"{}", "{}"}});
  calls.push_back(PushCall(keys, std::move(pushes)));
  calls.push_back(ScheduleCall(keys, 1.0, "{}"));
  std::vector<OncePush> once;
  once.push_back({"j1", "q", std::nullopt, "{}"});
  once.push_back({"j2", "", 5.0, "{}"});
  calls.push_back(PushOnceCall(keys, std::chrono::seconds(60), std::move(once)));
  calls.push_back(PushUniqueCall(keys, unique, "j", 0, "q", std::nullopt, "{}"));
  calls.push_back(PushUniqueCall(keys, unique, "j", 0, "q", 5.0, "{}"));
  calls.push_back(ReleaseUniqueCall(unique, "j"));
  const std::string queue = keys.Queue("q");
  calls.push_back(FetchCall({{queue, working}}, 5));
  calls.push_back(HeartbeatCall(keys, "h:1:x", BeatFields{}));
  calls.push_back(ForgetCall(keys, "h:1:x", {"q", "r"}, false));
  calls.push_back(DropHeartbeatCall(keys, "h:1:x", 7, "{}", "run"));
  for (FinishMode mode : {FinishMode::kDone, FinishMode::kSnooze, FinishMode::kRetry,
                          FinishMode::kDead, FinishMode::kDiscard, FinishMode::kExpire}) {
    FinishedRun run{.working_key = working, .original = "{}", .updated = "{}", .mode = mode};
    calls.push_back(FinishCall(keys, run, 1700000000.0, limits, keys.WakeScheduled()));
  }
  calls.push_back(RequeueCall(keys, working, "q", RequeueMode::kKeep, 3, 1.0, limits, {"{}"}));
  calls.push_back(RecoverCall(keys, "h:1:x", "q", RecoverBatch{}, 1.0, limits));
  calls.push_back(
      PromoteCall(keys, keys.Retry(), 1.0, limits, keys.WakeQueue(""), {{"q", "{}"}, {"", "x"}}));
  calls.push_back(RetryNowCall(keys, keys.Dead(), 1.0, true, {{"q", "{}"}, {"r", "{}"}}));
  calls.push_back(ClearCall(keys, keys.Dead(), ""));
  calls.push_back(ClearCall(keys, queue, "q"));
  calls.push_back(KillCall(keys, 1.0, limits, {"{}"}));
  calls.push_back(KillCall(keys, 1.0, limits, {"{}"}, keys.Schedule()));
  calls.push_back(SequenceReleaseCall(keys, "acct"));
  calls.push_back(SequenceSkipCall(keys, "acct", 1.0, limits));
  calls.push_back(LimitAcquireCall(keys, limit, working, "{}", "1@h:1:x", std::nullopt, 0));
  calls.push_back(LimitReleaseCall(keys, limit, {"1@h:1:x"}, 1.0));
  calls.push_back(LimitReapCall(keys, limit, {"h:1:x", "h:2:y"}, 1.0));
  calls.push_back(PeriodicTickCall(
      keys, PeriodicTick{.name = "beat", .queue = "q", .payload = "{}", .jid = "j"}));
  calls.push_back(PeriodicDeclareCall(keys, "beat", "d", "h:1:x", 1.0, {{"cron", "* * * * *"}}));
  return calls;
}

}  // namespace

TEST_CASE("layout 2: every KEYS entry of every script call carries the group's hash tag") {
  const Keys keys("rq:", "eu-1");
  std::vector<ScriptCall> calls = EveryCall(keys);
  CHECK(calls.size() == 31);  // every builder, some in two to six modes
  for (const ScriptCall& call : calls) {
    CAPTURE(static_cast<int>(call.script));
    REQUIRE_FALSE(call.keys.empty());
    for (const std::string& key : call.keys) {
      CAPTURE(key);
      CHECK(key.starts_with("rq:{eu-1}:"));
    }
  }
}

TEST_CASE("layout 1: the same calls name Sidekiq's keys without the prefix, as before") {
  const Keys keys("rq:");
  std::vector<ScriptCall> calls = EveryCall(keys);
  bool sidekiq_seen = false;
  for (const ScriptCall& call : calls) {
    for (const std::string& key : call.keys) {
      CHECK(key.find('{') == std::string::npos);
      sidekiq_seen = sidekiq_seen || key == "queues" || key == "dead" || key == "retry";
    }
  }
  CHECK(sidekiq_seen);
}
