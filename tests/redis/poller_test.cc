// The poller against a real redis-server on a real loop: due members of
// `schedule` and `retry` move at their own time (not at the next poll),
// an earlier member announced by a nudge moves at its time, one nobody
// announced is still found by the fallback read, a worker clock that is
// off or stepped moves nothing early or late (due is by Redis's TIME),
// nudges are coalesced, failures back off, and several pollers push each
// member once.
//
// The time bounds are behaviour, not speed: a job due in 200 ms with a
// fallback of several seconds must move within a second of its time, and
// never before it.

#include "server/poller.h"

#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "codec/job_codec.h"
#include "protocol/keys.h"
#include "base/log.h"
#include "redis/async_connection.h"
#include "support/fake_clock.h"
#include "support/testutil.h"
#include "uv/event_loop.h"

namespace reliableq::testing {

using namespace reliableq::codec;

using namespace reliableq::base;

using namespace reliableq::protocol;
using namespace reliableq::server;
namespace {

using std::chrono::milliseconds;
using Strings = std::vector<std::string>;

constexpr milliseconds kLongFallback{10000};  // 5 to 15 s with the spread
constexpr milliseconds kShortFallback{200};   // 100 to 300 ms

std::string Member(const std::string& jid) {
  return R"({"class":"A","args":[],"queue":"q","jid":")" + jid + R"("})";
}

// The enqueued_at promote.lua wrote into a pushed payload.
double EnqueuedAt(const std::string& payload) {
  rapidjson::Document doc;
  doc.Parse(payload.data(), payload.size());
  REQUIRE(doc.IsObject());
  REQUIRE(doc.HasMember("enqueued_at"));
  return doc["enqueued_at"].GetDouble();
}

std::string Jid(const std::string& payload) {
  rapidjson::Document doc;
  doc.Parse(payload.data(), payload.size());
  REQUIRE(doc.IsObject());
  return doc["jid"].GetString();
}

// A wall clock set off from the real one (SetOffset steps it), as on a
// machine whose clock is wrong: the monotonic clock stays the real one.
class SkewedClock final : public Clock {
 public:
  explicit SkewedClock(std::chrono::milliseconds offset) : offset_ms_(offset.count()) {}
  double Now() const override {
    return NowSeconds() + static_cast<double>(offset_ms_.load()) / 1000.0;
  }
  std::chrono::steady_clock::time_point Monotonic() const override {
    return std::chrono::steady_clock::now();
  }
  void SetOffset(std::chrono::milliseconds offset) { offset_ms_ = offset.count(); }

 private:
  std::atomic<int64_t> offset_ms_;
};

class PollerFixture : public RedisFixture {
 public:
  PollerFixture()
      : log_(LogLevel::kInfo, [this](LogLevel, std::string_view line) {
          std::lock_guard<std::mutex> lock(mu_);
          lines_.emplace_back(line);
        }) {
    Result<std::unique_ptr<uv::EventLoop>> loop = uv::EventLoop::Create();
    REQUIRE(loop.ok());
    loop_ = std::move(loop.value());
  }

  ~PollerFixture() {
    for (auto& poller : pollers_) poller->Stop();
    // Commands still on their way fail now, while their pollers exist.
    for (auto& connection : connections_) connection->Close();
    pollers_.clear();
    connections_.clear();
    CHECK(loop_->Close().ok());
  }

  redis::AsyncConnection& Connect() {
    connections_.push_back(std::make_unique<redis::AsyncConnection>(loop_->get(), options()));
    redis::AsyncConnection& connection = *connections_.back();
    std::optional<Status> ready;
    connection.Connect([&](const Status& s) { ready = s; });
    REQUIRE(RunUntil([&] { return ready.has_value(); }, milliseconds(5000)));
    REQUIRE(ready->ok());
    return connection;
  }

  Poller& MakePoller(milliseconds interval, const Clock& clock) {
    redis::AsyncConnection& connection = Connect();
    pollers_.push_back(std::make_unique<Poller>(
        *loop_, connection, interval, DeadSetLimits{10000, std::chrono::seconds(3600)},
        Keys(), clock, log_));
    return *pollers_.back();
  }
  Poller& MakePoller(milliseconds interval) { return MakePoller(interval, *system_clock_); }

  // Runs the loop until `done` or `limit`; whether `done` became true.
  bool RunUntil(const std::function<bool()>& done, milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (true) {
      uv_run(loop_->get(), UV_RUN_NOWAIT);
      if (done()) return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(milliseconds(1));
    }
  }
  void RunFor(milliseconds d) { RunUntil([] { return false; }, d); }

  // Runs until `jid` is in queue:q; its enqueued_at, or nullopt after `limit`.
  std::optional<double> WaitPromoted(const std::string& jid, milliseconds limit) {
    std::optional<double> at;
    RunUntil(
        [&] {
          for (const std::string& payload : LRange("queue:q")) {
            if (Jid(payload) == jid) at = EnqueuedAt(payload);
          }
          return at.has_value();
        },
        limit);
    return at;
  }

  void ZAdd(std::string_view set, double score, const std::string& member) {
    Run({"ZADD", set, FormatEpoch(score), member});
  }

  // calls=N of `command` in INFO commandstats since the last CONFIG RESETSTAT.
  long long Calls(const std::string& command) {
    auto info = redis().Command({"INFO", "commandstats"});
    REQUIRE(info.ok());
    std::string text((*info)->str, (*info)->len);
    std::string field = "cmdstat_" + command + ":calls=";
    size_t at = text.find(field);
    if (at == std::string::npos) return 0;
    return std::stoll(text.substr(at + field.size()));
  }

  // Starts `poller` and runs the loop until its first read of the heads is
  // over, so that what the test adds next is news to it.
  void StartAndSettle(Poller& poller) {
    Run({"CONFIG", "RESETSTAT"});
    poller.Start();
    REQUIRE(RunUntil([&] { return Calls("zrange") >= 2; }, milliseconds(5000)));
    RunFor(milliseconds(50));
  }

  Strings Lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  std::mutex mu_;
  Strings lines_;
  Logger log_;
  std::shared_ptr<const Clock> system_clock_ = SystemClock();
  std::unique_ptr<uv::EventLoop> loop_;
  std::vector<std::unique_ptr<redis::AsyncConnection>> connections_;
  std::vector<std::unique_ptr<Poller>> pollers_;
};

}  // namespace

TEST_CASE_FIXTURE(PollerFixture, "a member due in 200 ms moves at its time, not at the fallback") {
  for (std::string set : {"schedule", "retry"}) {
    CAPTURE(set);
    Run({"DEL", "queue:q"});
    double due = NowSeconds() + 0.2;
    std::string jid = "due-" + set;
    ZAdd(set, due, Member(jid));
    Poller& poller = MakePoller(kLongFallback);
    poller.Start();
    std::optional<double> at = WaitPromoted(jid, milliseconds(3000));
    REQUIRE(at.has_value());
    CHECK(*at >= due);        // never early
    CHECK(*at < due + 1.0);   // and not at the fallback, 5 s or more away
    CHECK(ZRange(set).empty());
    poller.Stop();
  }
}

TEST_CASE_FIXTURE(PollerFixture, "a member added before the head and nudged moves at its own time") {
  Poller& poller = MakePoller(kLongFallback);
  double late = NowSeconds() + 2.5;
  ZAdd(Keys().Schedule(), late, Member("late"));
  StartAndSettle(poller);  // it read the head and sleeps until `late`
  double early = NowSeconds() + 0.3;
  ZAdd(Keys().Retry(), early, Member("early"));

  SUBCASE("Nudge: it reads the heads again") { poller.Nudge(); }
  SUBCASE("NudgeAt: it wakes at the score given") { poller.NudgeAt(early); }

  std::optional<double> at = WaitPromoted("early", milliseconds(2000));
  REQUIRE(at.has_value());
  CHECK(*at >= early);
  CHECK(*at < early + 1.0);
  CHECK(ZRange("schedule") == Strings{Member("late")});
  // Then it reads the heads again and sleeps until the old one.
  at = WaitPromoted("late", milliseconds(4000));
  REQUIRE(at.has_value());
  CHECK(*at >= late);
  CHECK(*at < late + 1.0);
}

TEST_CASE_FIXTURE(PollerFixture, "a NudgeAt later than the planned wake-up changes nothing") {
  Poller& poller = MakePoller(kLongFallback);
  double first = NowSeconds() + 0.3;
  ZAdd(Keys().Schedule(), first, Member("first"));
  StartAndSettle(poller);
  poller.NudgeAt(first + 100);
  std::optional<double> at = WaitPromoted("first", milliseconds(2000));
  REQUIRE(at.has_value());
  CHECK(*at < first + 1.0);
}

TEST_CASE_FIXTURE(PollerFixture, "without a signal the fallback read finds a member before the head") {
  // A Ruby client's ZADD without keyspace notifications: nobody nudges.
  Poller& poller = MakePoller(kShortFallback);
  ZAdd(Keys().Schedule(), NowSeconds() + 60, Member("far"));
  StartAndSettle(poller);
  double due = NowSeconds() + 0.05;
  ZAdd(Keys().Schedule(), due, Member("unannounced"));
  // Sleeping until the head would take a minute; the fallback wait is at
  // most 300 ms.
  std::optional<double> at = WaitPromoted("unannounced", milliseconds(3000));
  REQUIRE(at.has_value());
  CHECK(*at >= due);
  CHECK(ZRange("schedule") == Strings{Member("far")});
}

// Due is due by Redis's clock (TIME; the test's redis-server shares this
// machine's): a worker whose wall clock is a minute ahead, a minute behind,
// or stepped by an hour while it sleeps moves a member at its time, never
// before it, and not a minute late.
TEST_CASE_FIXTURE(PollerFixture, "a worker clock off or stepped moves a member at Redis's time") {
  std::chrono::milliseconds offset{0};
  std::chrono::milliseconds step{0};
  SUBCASE("a minute ahead") { offset = std::chrono::seconds(60); }
  SUBCASE("a minute behind") { offset = -std::chrono::seconds(60); }
  SUBCASE("stepped an hour forward while it sleeps") { step = std::chrono::seconds(3600); }
  SUBCASE("stepped an hour back while it sleeps") { step = -std::chrono::seconds(3600); }
  SkewedClock clock(offset);
  Poller& poller = MakePoller(kShortFallback, clock);
  const double due = NowSeconds() + 0.8;
  ZAdd(Keys().Schedule(), due, Member("due"));
  ZAdd(Keys().Retry(), due, Member("retry"));
  poller.Start();
  RunFor(milliseconds(100));
  clock.SetOffset(offset + step);
  // Several fallback reads (100 to 300 ms each) and timers pass before it.
  RunUntil([&] { return !LRange("queue:q").empty() || NowSeconds() >= due - 0.1; },
           milliseconds(2000));
  CHECK(LRange("queue:q").empty());
  std::optional<double> at = WaitPromoted("due", milliseconds(2000));
  REQUIRE(at.has_value());
  // enqueued_at is Redis's time of the move, at or after the due time.
  CHECK(*at >= due);
  CHECK(NowSeconds() < due + 1.0);
  CHECK(WaitPromoted("retry", milliseconds(1000)).has_value());
}

TEST_CASE_FIXTURE(PollerFixture, "a burst of nudges costs one head read and one more after it") {
  Poller& poller = MakePoller(kLongFallback);
  StartAndSettle(poller);  // the first read is over: it sleeps
  Run({"CONFIG", "RESETSTAT"});
  for (int i = 0; i < 50; ++i) poller.Nudge();
  RunFor(milliseconds(300));
  // Two reads of both heads; without coalescing, 50.
  CHECK(Calls("zrange") == 4);
  // A nudge after that reads again.
  poller.Nudge();
  RunFor(milliseconds(100));
  CHECK(Calls("zrange") == 6);
}

TEST_CASE_FIXTURE(PollerFixture, "a failing promote backs off to the fallback instead of retrying") {
  Run({"SET", "queue:q", "not a list"});  // promote.lua refuses: WRONGTYPE
  ZAdd(Keys().Schedule(), NowSeconds() - 1, Member("stuck"));
  Poller& poller = MakePoller(kLongFallback);
  Run({"CONFIG", "RESETSTAT"});
  poller.Start();
  REQUIRE(RunUntil([&] { return Calls("evalsha") >= 1; }, milliseconds(5000)));
  RunFor(milliseconds(300));
  poller.Nudge();  // ignored while backing off
  poller.NudgeAt(NowSeconds());
  RunFor(milliseconds(300));
  CHECK(Calls("evalsha") == 1);
  CHECK(ZRange("schedule") == Strings{Member("stuck")});
  bool warned = false;
  for (const std::string& line : Lines()) {
    if (line.find("moving due jobs of schedule failed") != std::string::npos) warned = true;
  }
  CHECK(warned);
}

TEST_CASE_FIXTURE(PollerFixture, "a backlog moves batch after batch, each member pushed once by two pollers") {
  double now = NowSeconds();
  Strings jids;
  for (int i = 0; i < 250; ++i) {
    jids.push_back("r" + std::to_string(i));
    ZAdd(Keys().Retry(), now - 1 + i * 1e-3, Member(jids.back()));
  }
  for (int i = 0; i < 120; ++i) {
    jids.push_back("s" + std::to_string(i));
    ZAdd(Keys().Schedule(), now - 1 + i * 1e-3, Member(jids.back()));
  }
  // And a herd: both wake at the time of one more, due shortly.
  double due = NowSeconds() + 0.3;
  jids.push_back("herd");
  ZAdd(Keys().Schedule(), due, Member("herd"));
  Poller& a = MakePoller(kLongFallback);
  Poller& b = MakePoller(kLongFallback);
  a.Start();
  b.Start();
  REQUIRE(RunUntil([&] { return LRange("queue:q").size() >= jids.size(); }, milliseconds(5000)));
  RunFor(milliseconds(200));
  Strings pushed = LRange("queue:q");
  CHECK(pushed.size() == jids.size());
  std::set<std::string> got;
  for (const std::string& payload : pushed) got.insert(Jid(payload));
  CHECK(got == std::set<std::string>(jids.begin(), jids.end()));
  CHECK_FALSE(Exists("schedule"));
  CHECK_FALSE(Exists("retry"));
}

}  // namespace reliableq::testing
