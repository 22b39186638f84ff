// Periodic jobs on real worker processes: one job declared by 4 workers
// that are SIGKILLed and restarted while it ticks every second; each tick is
// pushed exactly once, and none is missing while a worker was up.
//
// The form here runs about 8 ticks. The long form of issue 20's check runs
// 300 or more (5 minutes):
//   RELIABLEQ_PERIODIC_TICKS=300 tests/worker_tests -tc='periodic: 4 workers*'
// (with the environment of tests/worker/meson.build).

#include <doctest/doctest.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/process.h"
#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::testing;

namespace {

using Clock = std::chrono::system_clock;

double WallNow() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

constexpr const char* kDeclaration =
    R"(beat={"cron":"* * * * * *","class":"Beat","queue":"periodic","args":[1]})";

struct PeriodicWorkers : RedisFixture {
  PeriodicWorkers() {
    char templ[] = "/tmp/rq_periodic_XXXXXX";
    dir_ = mkdtemp(templ);
  }
  ~PeriodicWorkers() {
    slots_.clear();  // SIGKILLs what still runs
    std::string cmd = "rm -rf '" + dir_ + "'";
    int ignored = std::system(cmd.c_str());
    (void)ignored;
  }

  // A worker that serves no queue the ticks go to, so the pushed jobs stay
  // in queue:periodic to be counted.
  // `env` adds to the environment (a clock offset through faketime).
  std::unique_ptr<ChildProcess> Launch(int slot, std::vector<std::string> env = {}) {
    std::vector<std::string> argv = {BuildPath("RELIABLEQ_BIN"),
                                     "worker",
                                     "--redis",
                                     server().Url(),
                                     "-r",
                                     BuildPath("RELIABLEQ_DEMO_PLUGIN"),
                                     "-q",
                                     "idle",
                                     "--heartbeat-ttl",
                                     "2",
                                     "--heartbeat-interval",
                                     "0.25",
                                     "--periodic",
                                     kDeclaration};
    std::string log =
        dir_ + "/worker" + std::to_string(slot) + "." + std::to_string(launches_++) + ".log";
    return std::make_unique<ChildProcess>(argv, std::move(env), log);
  }

  // Waits (bounded) until the worker of `pid` has registered: its
  // scheduler's cursor was set before then.
  bool Registered(pid_t pid) {
    return WaitUntil([&] {
      for (const std::string& id : SMembers("processes")) {
        if (id.find(":" + std::to_string(pid) + ":") != std::string::npos) return true;
      }
      return false;
    });
  }

  struct Slot {
    std::unique_ptr<ChildProcess> process;
    double up_since = 0;  // 0: down
  };
  std::string dir_;
  int launches_ = 0;
  std::vector<Slot> slots_;
};

TEST_CASE_FIXTURE(PeriodicWorkers,
                  "periodic: 4 workers, killed and restarted, push each tick once") {
  int ticks = 8;
  if (const char* text = std::getenv("RELIABLEQ_PERIODIC_TICKS")) ticks = std::atoi(text);
  REQUIRE(ticks >= 3);

  // Up-time intervals [from, to] in which at least the worker of that
  // interval had its scheduler running.
  std::vector<std::pair<double, double>> up;
  slots_.resize(4);
  for (int i = 0; i < 4; ++i) {
    slots_[i].process = Launch(i);
    REQUIRE(Registered(slots_[i].process->pid()));
    slots_[i].up_since = WallNow();
  }
  const double start = WallNow();
  std::mt19937 random(20);
  int kills = 0;
  // Every 0.3 to 1.5 s one worker is SIGKILLed, or one that is down is
  // started again; at least one stays up throughout.
  while (WallNow() < start + ticks) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + random() % 1200));
    int slot = static_cast<int>(random() % 4);
    Slot& s = slots_[slot];
    int running = 0;
    for (const Slot& other : slots_) running += other.up_since > 0 ? 1 : 0;
    if (s.up_since > 0 && running > 1) {
      double killed_at = WallNow();
      s.process->Signal(SIGKILL);
      s.process->Wait(std::chrono::seconds(5));
      up.emplace_back(s.up_since, killed_at);
      s.up_since = 0;
      ++kills;
    } else if (s.up_since == 0) {
      s.process = Launch(slot);
      REQUIRE(Registered(s.process->pid()));
      s.up_since = WallNow();
    }
  }
  // One more second for the last tick's replies, then everything stops.
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  double end = WallNow() - 1.2;
  for (Slot& s : slots_) {
    if (s.up_since > 0) up.emplace_back(s.up_since, end);
    s.process->Signal(SIGKILL);
    s.process->Wait(std::chrono::seconds(5));
  }
  CHECK(kills >= 1);

  // Every pushed job, by its tick.
  std::map<int64_t, int> pushed;
  for (const std::string& payload : LRange("queue:periodic")) {
    rapidjson::Document job;
    REQUIRE_FALSE(job.Parse(payload.c_str()).HasParseError());
    REQUIRE(job.HasMember("periodic_tick"));
    CHECK(std::string(job["periodic"].GetString()) == "beat");
    CHECK(std::string(job["class"].GetString()) == "Beat");
    ++pushed[static_cast<int64_t>(job["periodic_tick"].GetDouble())];
  }
  std::set<int64_t> recorded;
  for (const std::string& tick : ZRange("reliableq:periodic:beat:ticks")) {
    recorded.insert(std::stoll(tick));
  }
  int twice = 0;
  for (const auto& [tick, count] : pushed) {
    if (count != 1) ++twice;
    CHECK_MESSAGE(recorded.count(tick) == 1, "tick " << tick << " pushed, not recorded");
  }
  CHECK(recorded.size() == pushed.size());
  CHECK(twice == 0);
  // A tick is covered when a worker was up from before it to at least a
  // second after it (the turn that submits it runs within milliseconds).
  int covered = 0;
  int missing = 0;
  for (auto tick = static_cast<int64_t>(start) + 1; tick <= static_cast<int64_t>(end) - 1; ++tick) {
    bool up_then = false;
    for (const auto& [from, to] : up) {
      up_then =
          up_then || (from < static_cast<double>(tick) && static_cast<double>(tick) + 1 <= to);
    }
    if (!up_then) continue;
    ++covered;
    if (pushed.count(tick) == 0) {
      ++missing;
      MESSAGE("tick " << tick << " missing");
    }
  }
  MESSAGE(ticks << " s: " << covered << " ticks covered, " << pushed.size() << " pushed, " << kills
                << " workers killed");
  // Covered needs one worker up across the whole tick; with a kill or a
  // start about every second, some ticks have none (though one was always
  // up): the check is that most were measured.
  CHECK(covered >= ticks / 2);
  CHECK(missing == 0);
}

// Redis's clock (TIME), epoch seconds.
double RedisNow(redis::Connection& redis) {
  auto reply = redis.Command({"TIME"});
  REQUIRE(reply.ok());
  const redisReply* r = reply->get();
  REQUIRE(r->type == REDIS_REPLY_ARRAY);
  REQUIRE(r->elements == 2);
  return std::stod(std::string(r->element[0]->str, r->element[0]->len)) +
         std::stod(std::string(r->element[1]->str, r->element[1]->len)) / 1e6;
}

// The path of Debian's libfaketime, in /usr/lib/<multiarch triplet>/;
// "" when it is not installed.
std::string FaketimeLibrary() {
  std::error_code error;
  for (const auto& dir : std::filesystem::directory_iterator("/usr/lib", error)) {
    std::filesystem::path library = dir.path() / "faketime" / "libfaketime.so.1";
    if (access(library.c_str(), R_OK) == 0) return library.string();
  }
  return "";
}

// The environment that runs a worker with its wall clock `offset` off
// (faketime's form, "+60s"); its monotonic clock, which libuv's timers
// run on, stays the real one.
std::vector<std::string> SkewedBy(const std::string& offset) {
  return {"LD_PRELOAD=" + FaketimeLibrary(), "FAKETIME=" + offset,
          "FAKETIME_DONT_FAKE_MONOTONIC=1"};
}

TEST_CASE_FIXTURE(PeriodicWorkers,
                  "periodic: workers a minute ahead and behind push each tick once, on time") {
  REQUIRE_MESSAGE(!FaketimeLibrary().empty(), "faketime is not installed (tools/setup)");
  slots_.resize(2);
  const double start = RedisNow(redis());
  slots_[0].process = Launch(0, SkewedBy("+60s"));
  slots_[1].process = Launch(1, SkewedBy("-60s"));
  for (Slot& s : slots_) REQUIRE(Registered(s.process->pid()));
  std::this_thread::sleep_for(std::chrono::milliseconds(4500));
  for (Slot& s : slots_) s.process->Signal(SIGKILL);
  for (Slot& s : slots_) s.process->Wait(std::chrono::seconds(5));
  const double end = RedisNow(redis());

  std::map<int64_t, int> pushed;
  for (const std::string& payload : LRange("queue:periodic")) {
    rapidjson::Document job;
    REQUIRE_FALSE(job.Parse(payload.c_str()).HasParseError());
    ++pushed[static_cast<int64_t>(job["periodic_tick"].GetDouble())];
  }
  REQUIRE(pushed.size() >= 3);
  // Not early: no tick later than Redis's clock at the end (the one a
  // minute ahead pushed the next minute's); not before the first worker
  // started (the one behind owed the last minute's).
  CHECK(pushed.rbegin()->first <= end);
  CHECK(pushed.begin()->first >= static_cast<int64_t>(start));
  // Once, and none skipped between the first and the last.
  int64_t expected = pushed.begin()->first;
  for (const auto& [tick, count] : pushed) {
    CHECK_MESSAGE(count == 1, "tick " << tick << " pushed " << count << " times");
    CHECK_MESSAGE(tick == expected, "ticks from " << expected << " to " << tick - 1 << " skipped");
    expected = tick + 1;
  }
  // And on time: the last second's tick was pushed, not a minute later.
  CHECK(pushed.rbegin()->first >= static_cast<int64_t>(end) - 2);
}

TEST_CASE_FIXTURE(PeriodicWorkers, "periodic: a different declaration loses and pushes nothing") {
  auto first = Launch(0);
  REQUIRE(Registered(first->pid()));
  // The newest declaration wins: the second worker's, every two seconds.
  std::vector<std::string> argv = {
      BuildPath("RELIABLEQ_BIN"),
      "worker",
      "--redis",
      server().Url(),
      "-r",
      BuildPath("RELIABLEQ_DEMO_PLUGIN"),
      "-q",
      "idle",
      "--periodic",
      R"(beat={"cron":"*/2 * * * * *","class":"Beat","queue":"other"})"};
  ChildProcess second(argv, {}, dir_ + "/second.log");
  REQUIRE(Registered(second.pid()));
  // The first logs the conflict (periodic_conflict), naming the winner, and
  // pushes nothing.
  CHECK_MESSAGE(
      WaitUntil([&] { return first->Log().find("replaced this worker's") != std::string::npos; }),
      first->Log());
  CHECK(WaitUntil([&] { return !LRange("queue:other").empty(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  CHECK(HGet("reliableq:periodic:beat", "cron") == "*/2 * * * * *");
  for (const std::string& payload : LRange("queue:periodic")) {
    rapidjson::Document job;
    job.Parse(payload.c_str());
    // Only ticks from before the second declared may be the first's.
    CHECK(job["periodic_tick"].GetDouble() <
          std::stod(HGet("reliableq:periodic:beat", "declared_at")));
  }
  // `periodic list` shows the declaration in force and whose it is.
  CommandResult list = RunCommand(
      {BuildPath("RELIABLEQ_BIN"), "periodic", "list", "--json", "--redis", server().Url()});
  CHECK(list.exit_code == 0);
  rapidjson::Document listed;
  REQUIRE_FALSE(listed.Parse(list.out.c_str()).HasParseError());
  REQUIRE(listed["periodic"].Size() == 1);
  const rapidjson::Value& beat = listed["periodic"][0];
  CHECK(std::string(beat["name"].GetString()) == "beat");
  CHECK(std::string(beat["cron"].GetString()) == "*/2 * * * * *");
  CHECK(std::string(beat["queue"].GetString()) == "other");
  CHECK(
      std::string(beat["declared_by"].GetString()).find(":" + std::to_string(second.pid()) + ":") !=
      std::string::npos);
  CHECK(beat["next_tick"].GetDouble() > beat["last_tick"].GetDouble());
  CommandResult text =
      RunCommand({BuildPath("RELIABLEQ_BIN"), "periodic", "list", "--redis", server().Url()});
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("beat\n  cron:        */2 * * * * * (UTC)") == 0);
  first->Signal(SIGKILL);
  second.Signal(SIGKILL);
  first->Wait(std::chrono::seconds(5));
  second.Wait(std::chrono::seconds(5));
}

TEST_CASE("periodic: a bad declaration is a usage error naming the job and the field") {
  CommandResult r =
      RunCommand({BuildPath("RELIABLEQ_BIN"), "worker", "--redis", "unix:///nonexistent.sock",
                  "--periodic", R"(beat={"cron":"* 25 * * *","class":"Beat"})"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("periodic job \"beat\": cron: hour field \"25\"") != std::string::npos);
  r = RunCommand({BuildPath("RELIABLEQ_BIN"), "worker", "--periodic", "beat"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--periodic needs NAME=JSON") != std::string::npos);
}

}  // namespace

namespace {

// The jids RecordJob wrote to `path`, one a line.
std::set<std::string> RecordedJids(const std::string& path) {
  std::set<std::string> jids;
  CommandResult cat = RunCommand({"/bin/cat", path}, std::chrono::seconds(5));
  std::string::size_type from = 0;
  while (from < cat.out.size()) {
    std::string::size_type end = cat.out.find('\n', from);
    if (end == std::string::npos) end = cat.out.size();
    if (end > from) jids.insert(cat.out.substr(from, end - from));
    from = end + 1;
  }
  return jids;
}

}  // namespace

// A tick that cannot be submitted (Redis down, its connections killed) is
// tried again a second later: the worker reconnects, runs jobs, pushes
// ticks again and stops on SIGTERM. It used to arm its timer at 0 ms for
// the overdue tick and never leave libuv's timer phase: 100% CPU, no
// reconnect, no job, SIGTERM ignored.
TEST_CASE("periodic: after Redis is gone for a while the worker runs jobs and ticks again") {
  RedisServer server({"--appendonly", "yes"});
  char templ[] = "/tmp/rq_periodic_down_XXXXXX";
  const std::string dir = mkdtemp(templ);
  const std::string record = dir + "/record";
  std::vector<std::string> argv = {
      BuildPath("RELIABLEQ_BIN"), "worker", "--redis", server.Url(), "-r",
      BuildPath("RELIABLEQ_DEMO_PLUGIN"), "-q", "zq", "-c", "1", "--heartbeat-ttl", "2",
      "--heartbeat-interval", "0.25", "--periodic",
      R"(tick={"cron":"* * * * * *","class":"NoopJob","queue":"ptick"})"};
  ChildProcess worker(argv, {"RELIABLEQ_DEMO_LOG=" + record}, dir + "/worker.log");
  Result<std::unique_ptr<redis::Connection>> opened = redis::Connection::Create(server.Options());
  REQUIRE(opened.ok());
  redis::Connection& redis = **opened;
  auto ticks = [&]() -> long long {
    Result<redis::ReplyPtr> reply = redis.Command({"LLEN", "queue:ptick"});
    return reply.ok() && (*reply)->type == REDIS_REPLY_INTEGER ? (*reply)->integer : -1;
  };
  REQUIRE_MESSAGE(WaitUntil([&] { return ticks() >= 1; }, std::chrono::seconds(10)),
                  worker.Log());

  SUBCASE("Redis killed and started again 3 s later") {
    server.KillAndRestart(std::chrono::seconds(3));
  }
  SUBCASE("its connections killed five times") {
    for (int i = 0; i < 5; ++i) {
      REQUIRE(redis.Command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}).ok());
      REQUIRE(redis.Command({"CLIENT", "KILL", "TYPE", "pubsub"}).ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
  }

  // The job is pushed by another process, as a Rails app would.
  CommandResult pushed = RunCommand({BuildPath("RELIABLEQ_BIN"), "push", "RecordJob", R"(["x"])",
                                     "-q", "zq", "--redis", server.Url(), "--jid",
                                     "0123456789abcdef01234567"});
  REQUIRE_MESSAGE(pushed.exit_code == 0, pushed.err);
  CHECK_MESSAGE(WaitUntil([&] { return RecordedJids(record).count("0123456789abcdef01234567"); },
                          std::chrono::seconds(10)),
                worker.Log());
  const long long before = ticks();
  CHECK_MESSAGE(WaitUntil([&] { return ticks() > before; }, std::chrono::seconds(5)),
                worker.Log());
  worker.Signal(SIGTERM);
  std::optional<int> status = worker.Wait(std::chrono::seconds(10));
  CHECK_MESSAGE(status.has_value(), worker.Log());
  if (status) CHECK(*status == 0);
  int ignored = std::system(("rm -rf '" + dir + "'").c_str());
  (void)ignored;
}
