// ProcessorPool without Redis: handlers run on the pool's threads, outcomes
// come back through TakeFinished, and the loop side (wake-ups, the lease,
// hand-back lists, shutdown) behaves as processor_pool.h says. Time comes
// from a fake clock; waits for the threads are bounded polls.

#include "server/processor_pool.h"

#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/fake_clock.h"

using namespace reliableq;
using namespace reliableq::base;
using namespace reliableq::protocol;
using namespace reliableq::server;
using reliableq::testing::FakeClock;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using Strings = std::vector<std::string>;

namespace {

constexpr double kNow = 1700000000.5;
constexpr milliseconds kPatience(5000);  // the most any wait for the threads takes

// Strings added from several threads (events, log lines), in order.
class Events {
 public:
  void Add(std::string event) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(event));
  }
  Strings Get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  mutable std::mutex mu_;
  Strings events_;
};

// Holds handlers until the test opens it, and counts who came and went.
class Gate {
 public:
  void Pass() {
    std::unique_lock<std::mutex> lock(mu_);
    ++entered_;
    changed_.notify_all();
    changed_.wait(lock, [this] { return open_; });
    ++left_;
    changed_.notify_all();
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    changed_.notify_all();
  }
  bool WaitEntered(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, kPatience, [&] { return entered_ >= n; });
  }
  bool WaitLeft(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, kPatience, [&] { return left_ >= n; });
  }
  int entered() {
    std::lock_guard<std::mutex> lock(mu_);
    return entered_;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  bool open_ = false;
  int entered_ = 0;
  int left_ = 0;
};

std::string Job(const std::string& job_class, const std::string& jid,
                const std::string& extra = "") {
  return R"({"class":")" + job_class + R"(","args":[1,"two"],"jid":")" + jid + '"' + extra + "}";
}

// A pool over a fake clock with handlers "Ok" (returns), "Boom" (throws
// std::runtime_error("boom")) and "Block" (waits at the gate). Everything
// the threads use is held by shared_ptr, so a thread left behind by
// Shutdown may outlive the test safely.
struct Harness {
  // Now() from kNow, which the retry scores and timestamps are checked against.
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>(kNow, steady_clock::now());
  std::shared_ptr<Events> lines = std::make_shared<Events>();
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();
  std::shared_ptr<std::atomic<int>> wakes = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<int>> ran = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<Events> events = std::make_shared<Events>();
  ProcessorConfig config;
  std::unique_ptr<ProcessorPool> pool;

  Harness() {
    config.queue_names = {"default", "mail"};
    config.random_below = [](int n) { return std::min(3, n - 1); };
    config.clock = clock;
    auto ran_count = ran;
    auto seen = events;
    config.registry.Register("Ok", [ran_count, seen](const JobView& job) {
      ++*ran_count;
      seen->Add("Ok " + std::string(job.jid()) + " in " + std::string(job.queue()));
    });
    config.registry.Register("Boom", [ran_count](const JobView&) {
      ++*ran_count;
      throw std::runtime_error("boom");
    });
    auto block_gate = gate;
    config.registry.Register("Block", [ran_count, block_gate](const JobView&) {
      ++*ran_count;
      block_gate->Pass();
    });
  }

  ~Harness() {
    // Never leave a handler waiting on a failed check's way out.
    gate->Open();
  }

  void Start(int threads, LogLevel level = LogLevel::kInfo) {
    config.threads = threads;
    auto sink = lines;
    config.log = std::make_shared<Logger>(
        level, [sink](LogLevel, std::string_view line) { sink->Add(std::string(line)); });
    auto count = wakes;
    pool = std::make_unique<ProcessorPool>(config, [count] { ++*count; });
    pool->Start();
  }

  void LeaseAnHour() { pool->SetLease(clock->Monotonic() + std::chrono::hours(1)); }

  void Submit(std::vector<FetchedJob> jobs) {
    pool->Submit(&jobs);
    CHECK(jobs.empty());
  }

  // Takes outcomes until `n` came, or kPatience passed.
  std::vector<FinishedJob> WaitFinished(size_t n) {
    std::vector<FinishedJob> out;
    steady_clock::time_point deadline = steady_clock::now() + kPatience;
    while (out.size() < n && steady_clock::now() < deadline) {
      pool->TakeFinished(&out);
      if (out.size() < n) std::this_thread::sleep_for(milliseconds(1));
    }
    REQUIRE(out.size() == n);
    return out;
  }
};

const FinishedJob& Find(const std::vector<FinishedJob>& jobs, const std::string& payload) {
  auto it = std::find_if(jobs.begin(), jobs.end(),
                         [&](const FinishedJob& job) { return job.payload == payload; });
  REQUIRE(it != jobs.end());
  return *it;
}

rapidjson::Document Parse(const std::string& json) {
  rapidjson::Document document;
  document.Parse(json.c_str(), json.size());
  REQUIRE_FALSE(document.HasParseError());
  REQUIRE(document.IsObject());
  return document;
}

bool WaitUntil(const std::function<bool()>& done) {
  steady_clock::time_point deadline = steady_clock::now() + kPatience;
  while (!done()) {
    if (steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

}  // namespace

TEST_CASE("jobs run and come back succeeded, failed with Sidekiq's fields, or invalid") {
  Harness h;
  h.Start(2);
  h.LeaseAnHour();
  const std::string ok = Job("Ok", "j1");
  const std::string boom = Job("Boom", "j2", R"(,"retry":true,"queue":"mail")");
  const std::string again = Job("Boom", "j3", R"(,"retry":true,"retry_count":2)");
  const std::string not_json = "this is not JSON";
  const std::string no_args = R"({"class":"Ok","jid":"j4"})";
  h.Submit({{1, ok}, {1, boom}, {0, again}, {0, not_json}, {1, no_args}});
  std::vector<FinishedJob> done = h.WaitFinished(5);
  CHECK(h.pool->finished_total() == 5);
  CHECK(h.pool->held() == 0);
  CHECK(*h.ran == 3);  // the invalid ones run nothing

  const FinishedJob& succeeded = Find(done, ok);
  CHECK(succeeded.outcome == Outcome::kSucceeded);
  CHECK(succeeded.queue == 1);
  CHECK(succeeded.updated_payload.empty());
  CHECK(succeeded.error.empty());
  CHECK(h.events->Get() == Strings{"Ok j1 in mail"});

  // A first failure: failed_at and retry_count 0, then a retry after
  // Sidekiq's 0^4 + 15 + rand(10) * 1 seconds, rand(10) being 3.
  const FinishedJob& failed = Find(done, boom);
  CHECK(failed.outcome == Outcome::kFailed);
  CHECK(failed.queue == 1);
  CHECK(failed.error == "std::runtime_error: boom");
  CHECK(failed.action == FailureAction::kRetry);
  CHECK(failed.score == kNow + 15 + 3);
  rapidjson::Document failed_doc = Parse(failed.updated_payload);
  CHECK(std::string(failed_doc["error_class"].GetString()) == "std::runtime_error");
  CHECK(std::string(failed_doc["error_message"].GetString()) == "boom");
  CHECK(failed_doc["retry_count"].GetInt() == 0);
  CHECK(failed_doc["failed_at"].GetDouble() == kNow);
  CHECK(std::string(failed_doc["jid"].GetString()) == "j2");

  // A third failure: retried_at and retry_count 3, after 3^4 + 15 + 3 * 4.
  const FinishedJob& retried = Find(done, again);
  CHECK(retried.outcome == Outcome::kFailed);
  CHECK(retried.queue == 0);
  CHECK(retried.action == FailureAction::kRetry);
  CHECK(retried.score == kNow + 81 + 15 + 3 * 4);
  rapidjson::Document retried_doc = Parse(retried.updated_payload);
  CHECK(retried_doc["retry_count"].GetInt() == 3);
  CHECK(retried_doc["retried_at"].GetDouble() == kNow);
  CHECK(std::string(retried_doc["queue"].GetString()) == "default");

  for (const std::string* payload : {&not_json, &no_args}) {
    const FinishedJob& invalid = Find(done, *payload);
    CHECK(invalid.outcome == Outcome::kInvalid);
    CHECK_FALSE(invalid.error.empty());
    CHECK(invalid.updated_payload.empty());
  }
}

TEST_CASE("a job whose retries are used up goes to dead, and the death handlers run once") {
  Harness h;
  auto deaths = std::make_shared<Events>();
  h.config.max_retries = 25;
  h.config.death_handlers.push_back([deaths](const JobView& job, const JobError& error) {
    deaths->Add(std::string(job.jid()) + " " + error.error_class + " " + error.message);
  });
  h.Start(1);
  h.LeaseAnHour();
  const std::string last = Job("Boom", "j24", R"(,"retry_count":24)");
  const std::string no_retry = Job("Boom", "jf", R"(,"retry":false)");
  h.Submit({{0, last}, {0, no_retry}});
  std::vector<FinishedJob> done = h.WaitFinished(2);

  const FinishedJob& dead = Find(done, last);
  CHECK(dead.outcome == Outcome::kFailed);
  CHECK(dead.action == FailureAction::kDead);
  CHECK(dead.score == kNow);
  CHECK(Parse(dead.updated_payload)["retry_count"].GetInt() == 25);

  const FinishedJob& dropped = Find(done, no_retry);
  CHECK(dropped.outcome == Outcome::kFailed);
  CHECK(dropped.action == FailureAction::kDrop);

  CHECK(deaths->Get() ==
        Strings{"j24 std::runtime_error boom", "jf std::runtime_error boom"});
}

TEST_CASE("a handler's own outcome: snooze, retry after, discard and dead now") {
  Harness h;
  auto deaths = std::make_shared<Events>();
  h.config.death_handlers.push_back([deaths](const JobView& job, const JobError& error) {
    deaths->Add(std::string(job.jid()) + " " + error.error_class + " " +
                (job.payload().HasMember("discarded_at") ? "discarded" : "kept"));
  });
  h.config.max_snoozes = 3;
  h.config.registry.Register(
      "Snooze", [](const JobView&) { throw JobSnooze(std::chrono::milliseconds(2500)); });
  h.config.registry.Register("Later", [](const JobView&) { throw JobRetry(300, "busy"); });
  h.config.registry.Register(
      "Gone", [](const JobView&) { throw JobDiscard("the order was deleted", "App::OrderGone"); });
  h.config.registry.Register("Refused", [](const JobView&) { throw JobDead("card refused"); });
  JobClassOptions patient;
  patient.max_snoozes = 10;
  h.config.registry.Register(
      "Patient",
      [](const JobView&) {
        throw JobSnooze(std::chrono::hours(24 * 400));  // past the year it is held to
      },
      patient);
  h.Start(2);
  h.LeaseAnHour();
  const std::string first = Job("Snooze", "s1", R"(,"retry_count":2)");
  const std::string spent = Job("Snooze", "s2", R"(,"snooze_count":3)");
  const std::string patient_job = Job("Patient", "s3", R"(,"snooze_count":3)");
  const std::string later = Job("Later", "r1");
  const std::string gone = Job("Gone", "d1", R"(,"retry_count":24)");
  const std::string refused = Job("Refused", "k1");
  h.Submit({{0, first}, {0, spent}, {0, patient_job}, {0, later}, {0, gone}, {0, refused}});
  std::vector<FinishedJob> done = h.WaitFinished(6);

  // A snooze spends no retry and records no error: snooze_count + 1, due
  // after the delay.
  const FinishedJob& snoozed = Find(done, first);
  CHECK(snoozed.outcome == Outcome::kSnoozed);
  CHECK(snoozed.score == kNow + 2.5);
  rapidjson::Document snoozed_doc = Parse(snoozed.updated_payload);
  CHECK(snoozed_doc["snooze_count"].GetInt() == 1);
  CHECK(snoozed_doc["retry_count"].GetInt() == 2);
  CHECK_FALSE(snoozed_doc.HasMember("error_class"));
  // One snooze past the most allowed is a failure.
  const FinishedJob& too_often = Find(done, spent);
  CHECK(too_often.outcome == Outcome::kFailed);
  CHECK(too_often.action == FailureAction::kRetry);
  CHECK(std::string(Parse(too_often.updated_payload)["error_class"].GetString()) ==
        "Reliableq::SnoozedTooOften");
  // A class may allow more; a delay beyond a year is held to one.
  const FinishedJob& long_snooze = Find(done, patient_job);
  CHECK(long_snooze.outcome == Outcome::kSnoozed);
  CHECK(long_snooze.score == kNow + 365.0 * 24 * 3600);
  CHECK(Parse(long_snooze.updated_payload)["snooze_count"].GetInt() == 4);

  const FinishedJob& retried = Find(done, later);
  CHECK(retried.outcome == Outcome::kFailed);
  CHECK(retried.action == FailureAction::kRetry);
  CHECK(retried.score == kNow + 300 + 3);  // and Sidekiq's jitter, rand(10) = 3
  // A discard holds even with the retries used up; the death handlers run.
  const FinishedJob& discarded = Find(done, gone);
  CHECK(discarded.action == FailureAction::kDrop);
  rapidjson::Document gone_doc = Parse(discarded.updated_payload);
  CHECK(gone_doc["discarded_at"].GetDouble() == kNow);
  CHECK(std::string(gone_doc["error_class"].GetString()) == "App::OrderGone");
  const FinishedJob& dead = Find(done, refused);
  CHECK(dead.action == FailureAction::kDead);
  CHECK(Parse(dead.updated_payload)["retry_count"].GetInt() == 0);
  Strings death_lines = deaths->Get();  // two threads: in either order
  std::sort(death_lines.begin(), death_lines.end());
  CHECK(death_lines == Strings{"d1 App::OrderGone discarded", "k1 reliableq::JobDead kept"});
}

TEST_CASE("a job of a class no handler knows fails with Reliableq::UnknownJobClass") {
  Harness h;
  h.Start(1);
  h.LeaseAnHour();
  const std::string unknown = Job("NoSuchJob", "j9");
  h.Submit({{0, unknown}});
  std::vector<FinishedJob> done = h.WaitFinished(1);
  CHECK(done[0].payload == unknown);
  CHECK(done[0].outcome == Outcome::kFailed);
  CHECK(done[0].action == FailureAction::kRetry);  // a deploy may add the class
  CHECK(done[0].score == kNow + 15 + 3);
  rapidjson::Document doc = Parse(done[0].updated_payload);
  CHECK(std::string(doc["error_class"].GetString()) == "Reliableq::UnknownJobClass");
  CHECK(std::string(doc["error_message"].GetString()).find("NoSuchJob") != std::string::npos);
  CHECK(*h.ran == 0);
}

TEST_CASE("a failure is logged with the job's class and jid and the time on the clock") {
  Harness h;
  h.config.registry.Register("Slow", [clock = h.clock](const JobView&) {
    clock->Advance(milliseconds(2500));
    throw std::logic_error("too slow");
  });
  h.Start(1);
  h.LeaseAnHour();
  h.Submit({{0, Job("Slow", "js")}, {0, Job("Ok", "jo")}});
  std::vector<FinishedJob> done = h.WaitFinished(2);
  CHECK(Find(done, Job("Slow", "js")).score == kNow + 2.5 + 15 + 3);
  // At kInfo a success logs nothing: the lines are the failure and where
  // the job goes next, both with the job's context.
  Strings lines = h.lines->Get();
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].find("tid=p0 class=Slow jid=js WARN: fail: 2.500000 sec: std::logic_error: "
                      "too slow") != std::string::npos);
  CHECK(lines[1].find("tid=p0 class=Slow jid=js INFO: will retry in 18 s: std::logic_error: "
                      "too slow") != std::string::npos);
}

TEST_CASE("the wake callback comes once per ArmWake, however many jobs finish") {
  Harness h;
  h.Start(4);
  std::vector<FetchedJob> five;
  for (int i = 0; i < 5; ++i) five.push_back({0, Job("Ok", "a" + std::to_string(i))});
  h.Submit(five);  // not started: no lease yet
  CHECK(h.pool->ArmWake());
  h.LeaseAnHour();
  h.WaitFinished(5);
  CHECK(*h.wakes == 1);

  // Armed again: three more finish, one more wake.
  CHECK(h.pool->ArmWake());
  h.Submit({{0, Job("Ok", "b0")}, {0, Job("Ok", "b1")}, {0, Job("Ok", "b2")}});
  h.WaitFinished(3);
  CHECK(*h.wakes == 2);

  // Not armed: two finish, and no wake comes.
  h.Submit({{0, Job("Ok", "c0")}, {1, Job("Ok", "c1")}});
  REQUIRE(WaitUntil([&] { return h.pool->finished_total() == 10; }));
  CHECK(*h.wakes == 2);
  // Outcomes are waiting: ArmWake says so, and they are not worth a wake.
  CHECK_FALSE(h.pool->ArmWake());
  std::this_thread::sleep_for(milliseconds(20));
  CHECK(*h.wakes == 2);
  h.WaitFinished(2);

  // The arming above still holds: the next outcome wakes.
  h.Submit({{0, Job("Ok", "d0")}});
  h.WaitFinished(1);
  CHECK(*h.wakes == 3);
}

TEST_CASE("nothing starts before the first SetLease") {
  Harness h;
  h.Start(2);
  h.Submit({{0, Job("Ok", "j1")}, {1, Job("Ok", "j2")}});
  // Threads held by the lease look again every 100 ms: give them a look.
  std::this_thread::sleep_for(milliseconds(150));
  CHECK(*h.ran == 0);
  CHECK(h.pool->finished_total() == 0);
  CHECK(h.pool->ready() == 2);
  CHECK(h.pool->held() == 2);
  CHECK(h.pool->running() == 0);
  h.LeaseAnHour();
  h.WaitFinished(2);
  CHECK(*h.ran == 2);
}

TEST_CASE("nothing starts while the lease is in the past; moving it forward starts the jobs") {
  Harness h;
  h.Start(2);
  steady_clock::time_point t = h.clock->Monotonic();
  h.pool->SetLease(t - std::chrono::seconds(1));
  h.Submit({{0, Job("Ok", "j1")}, {1, Job("Ok", "j2")}});
  // With work waiting and the lease out, threads look again every 100 ms.
  std::this_thread::sleep_for(milliseconds(150));
  CHECK(*h.ran == 0);
  CHECK(h.pool->ready() == 2);
  CHECK(h.pool->Running().empty());

  h.pool->SetLease(t + std::chrono::seconds(60));
  h.WaitFinished(2);
  CHECK(*h.ran == 2);

  // The clock passes the lease (a pause longer than the ttl): again nothing
  // starts until the next beat extends it.
  h.clock->Advance(std::chrono::seconds(61));
  h.Submit({{0, Job("Ok", "j3")}});
  std::this_thread::sleep_for(milliseconds(150));
  CHECK(*h.ran == 2);
  CHECK(h.pool->ready() == 1);
  h.pool->SetLease(t + std::chrono::seconds(120));
  h.WaitFinished(1);
  CHECK(*h.ran == 3);
}

TEST_CASE("TakeNotStarted returns the jobs not started, in order, and they never run") {
  Harness h;
  h.Start(2);
  h.pool->SetLease(h.clock->Monotonic() - std::chrono::seconds(1));
  h.Submit({{0, Job("Ok", "j1")}, {1, Job("Ok", "j2")}, {0, Job("Ok", "j3")}});
  std::vector<FetchedJob> back = h.pool->TakeNotStarted();
  REQUIRE(back.size() == 3);
  CHECK(back[0].queue == 0);
  CHECK(back[0].payload == Job("Ok", "j1"));
  CHECK(back[1].queue == 1);
  CHECK(back[1].payload == Job("Ok", "j2"));
  CHECK(back[2].queue == 0);
  CHECK(back[2].payload == Job("Ok", "j3"));
  CHECK(h.pool->ready() == 0);
  CHECK(h.pool->held() == 0);
  CHECK(h.pool->TakeNotStarted().empty());

  h.LeaseAnHour();
  std::this_thread::sleep_for(milliseconds(100));
  CHECK(*h.ran == 0);
  CHECK(h.pool->finished_total() == 0);
}

TEST_CASE("Running lists a job while its handler runs") {
  Harness h;
  h.Start(2);
  h.LeaseAnHour();
  const std::string blocked = Job("Block", "jb");
  h.Submit({{1, blocked}});
  REQUIRE(h.gate->WaitEntered(1));
  std::vector<RunningJob> running = h.pool->Running();
  REQUIRE(running.size() == 1);
  CHECK(running[0].slot >= 0);
  CHECK(running[0].slot < 2);
  CHECK(running[0].queue == 1);
  CHECK(running[0].payload == blocked);
  CHECK(running[0].started_at == kNow);
  CHECK(h.pool->running() == 1);
  CHECK(h.pool->held() == 1);
  CHECK(h.pool->ready() == 0);
  CHECK(h.pool->finished_total() == 0);

  h.gate->Open();
  std::vector<FinishedJob> done = h.WaitFinished(1);
  CHECK(done[0].outcome == Outcome::kSucceeded);
  CHECK(h.pool->Running().empty());
  CHECK(h.pool->held() == 0);
}

TEST_CASE("HeldPayloads lists running and finished jobs, and not-started ones on request") {
  Harness h;
  h.Start(1);  // one thread: the blocked job keeps the others waiting
  h.LeaseAnHour();
  const std::string a = Job("Block", "ja");
  const std::string b = Job("Ok", "jb");
  const std::string c = Job("Ok", "jc");
  h.Submit({{0, a}, {1, b}, {0, c}});
  REQUIRE(h.gate->WaitEntered(1));
  CHECK(h.pool->ready() == 2);

  std::vector<Strings> held(2);
  h.pool->HeldPayloads(false, &held);
  CHECK(held[0] == Strings{a});
  CHECK(held[1].empty());

  std::vector<Strings> all(2);
  all[1].push_back("already there");  // appended to, not replaced
  h.pool->HeldPayloads(true, &all);
  CHECK(all[0] == Strings{a, c});
  CHECK(all[1] == Strings{"already there", b});

  // Finished but not taken: still held (their ack has not gone out).
  h.gate->Open();
  REQUIRE(WaitUntil([&] { return h.pool->finished_total() == 3; }));
  std::vector<Strings> finished(2);
  h.pool->HeldPayloads(false, &finished);
  CHECK(finished[0] == Strings{a, c});
  CHECK(finished[1] == Strings{b});

  h.WaitFinished(3);
  std::vector<Strings> none(2);
  h.pool->HeldPayloads(true, &none);
  CHECK(none[0].empty());
  CHECK(none[1].empty());
}

TEST_CASE("Shutdown joins idle threads at once") {
  Harness h;
  h.Start(4);
  h.LeaseAnHour();
  h.Submit({{0, Job("Ok", "j1")}});
  h.WaitFinished(1);
  steady_clock::time_point start = steady_clock::now();
  h.pool->Shutdown(std::chrono::seconds(10));
  // Idle threads wait at most a second for work before they look again:
  // well under that means Shutdown woke them.
  CHECK(steady_clock::now() - start < milliseconds(800));
  CHECK(*h.wakes == 1);
  h.pool.reset();
  CHECK(*h.ran == 1);
}

TEST_CASE("Shutdown leaves a handler blocked past the wait behind, and returns in about the wait") {
  Harness h;
  h.Start(2);
  h.LeaseAnHour();
  h.Submit({{0, Job("Block", "jb")}});
  REQUIRE(h.gate->WaitEntered(1));
  steady_clock::time_point start = steady_clock::now();
  h.pool->Shutdown(milliseconds(200));
  milliseconds took = std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
  CHECK(took >= milliseconds(190));
  CHECK(took < milliseconds(1500));
  h.pool.reset();  // the pool goes; its detached thread still runs the handler

  // The handler returns after the pool is gone: its outcome is dropped and
  // no wake comes. The gate, counters and logger are shared with the thread.
  h.gate->Open();
  REQUIRE(h.gate->WaitLeft(1));
  std::this_thread::sleep_for(milliseconds(50));
  CHECK(*h.wakes == 0);
  CHECK(*h.ran == 1);
}

TEST_CASE("middleware runs outermost first around the handler") {
  Harness h;
  auto events = h.events;
  for (const char* name : {"outer", "inner"}) {
    h.config.middleware.push_back(
        [events, name](const JobView& job, const std::function<void()>& next) {
          events->Add(std::string(name) + " before " + std::string(job.job_class()));
          next();
          events->Add(std::string(name) + " after");
        });
  }
  h.Start(1);
  h.LeaseAnHour();
  h.Submit({{0, Job("Ok", "j1")}});
  std::vector<FinishedJob> done = h.WaitFinished(1);
  CHECK(done[0].outcome == Outcome::kSucceeded);
  CHECK(events->Get() ==
        Strings{"outer before Ok", "inner before Ok", "Ok j1 in default", "inner after",
                "outer after"});
}

TEST_CASE("a middleware that swallows the handler's exception makes the job succeed") {
  Harness h;
  auto events = h.events;
  h.config.middleware.push_back([events](const JobView&, const std::function<void()>& next) {
    try {
      next();
    } catch (const std::exception& e) {
      events->Add(std::string("swallowed ") + e.what());
    }
  });
  h.Start(1);
  h.LeaseAnHour();
  h.Submit({{0, Job("Boom", "j1")}});
  std::vector<FinishedJob> done = h.WaitFinished(1);
  CHECK(done[0].outcome == Outcome::kSucceeded);
  CHECK(done[0].updated_payload.empty());
  CHECK(done[0].error.empty());
  CHECK(events->Get() == Strings{"swallowed boom"});
  CHECK(*h.ran == 1);
}

TEST_CASE("a middleware that rethrows keeps the failure; one that skips next skips the job") {
  Harness h;
  auto events = h.events;
  h.config.middleware.push_back([events](const JobView& job, const std::function<void()>& next) {
    if (job.jid() == "skip") {
      events->Add("skipped");
      return;
    }
    try {
      next();
    } catch (...) {
      events->Add("saw it");
      throw;
    }
  });
  h.Start(1);
  h.LeaseAnHour();
  h.Submit({{0, Job("Boom", "j1")}, {0, Job("Boom", "skip")}});
  std::vector<FinishedJob> done = h.WaitFinished(2);
  const FinishedJob& failed = Find(done, Job("Boom", "j1"));
  CHECK(failed.outcome == Outcome::kFailed);
  CHECK(failed.error == "std::runtime_error: boom");
  CHECK(Find(done, Job("Boom", "skip")).outcome == Outcome::kSucceeded);
  CHECK(events->Get() == Strings{"saw it", "skipped"});
  CHECK(*h.ran == 1);
}

TEST_CASE("a C++ job past its deadline gets a stop request once, then is reported as overrun") {
  Harness h;
  auto stopped = std::make_shared<std::atomic<bool>>(false);
  auto gate = h.gate;
  JobClassOptions watch_options;
  watch_options.timeout = milliseconds(300);
  h.config.registry.Register(
      "Watch",
      [stopped, gate](const JobView& job) {
        std::stop_callback on_stop(job.stop_token(), [stopped] { *stopped = true; });
        gate->Pass();
      },
      watch_options);
  h.config.kill_grace = milliseconds(500);
  h.Start(1);
  h.LeaseAnHour();
  h.Submit({{0, Job("Watch", "jw")}});
  REQUIRE(h.gate->WaitEntered(1));
  steady_clock::time_point start = h.clock->Monotonic();
  CHECK(h.pool->CheckDeadlines(start + milliseconds(299)).empty());
  CHECK_FALSE(*stopped);

  std::vector<DeadlineEvent> events = h.pool->CheckDeadlines(start + milliseconds(300));
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == DeadlineEvent::Kind::kTimedOut);
  CHECK(events[0].payload == Job("Watch", "jw"));
  CHECK(events[0].timeout == milliseconds(300));
  CHECK(*stopped);  // requested synchronously, in this thread
  CHECK(h.pool->CheckDeadlines(start + milliseconds(700)).empty());

  events = h.pool->CheckDeadlines(start + milliseconds(800));
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == DeadlineEvent::Kind::kOverrun);
  CHECK(h.pool->CheckDeadlines(start + std::chrono::hours(1)).empty());
  h.gate->Open();
  CHECK(h.WaitFinished(1)[0].outcome == Outcome::kSucceeded);  // its result stands
  // The slot's next job gets a token that was not stopped.
  auto next_stopped = std::make_shared<std::atomic<int>>(-1);
  h.pool->Shutdown(milliseconds(1000));
  Harness again;
  again.config.registry.Register("Probe", [next_stopped](const JobView& job) {
    *next_stopped = job.stop_requested() ? 1 : 0;
  });
  JobClassOptions short_options;
  short_options.timeout = milliseconds(1);
  auto gate2 = again.gate;
  again.config.registry.Register(
      "Short", [gate2](const JobView&) { gate2->Pass(); }, short_options);
  again.Start(1);
  again.LeaseAnHour();
  again.Submit({{0, Job("Short", "js")}});
  REQUIRE(again.gate->WaitEntered(1));
  REQUIRE(again.pool->CheckDeadlines(again.clock->Monotonic() + milliseconds(5)).size() == 1);
  again.gate->Open();
  again.WaitFinished(1);
  again.Submit({{0, Job("Probe", "jp")}});
  again.WaitFinished(1);
  CHECK(*next_stopped == 0);
}

TEST_CASE("a job's timeout field wins, and a bad one fails the job as invalid") {
  Harness h;
  h.config.timeouts = TimeoutPolicy({{"*", milliseconds(60000)}});
  h.Start(1);
  h.LeaseAnHour();
  h.Submit({{0, Job("Block", "jt", R"(,"timeout":0.25)")}});
  REQUIRE(h.gate->WaitEntered(1));
  steady_clock::time_point start = h.clock->Monotonic();
  CHECK(h.pool->CheckDeadlines(start + milliseconds(249)).empty());
  CHECK(h.pool->CheckDeadlines(start + milliseconds(250)).size() == 1);
  h.gate->Open();
  h.WaitFinished(1);

  const std::string bad = Job("Ok", "jb", R"(,"timeout":"soon")");
  h.Submit({{0, bad}});
  std::vector<FinishedJob> done = h.WaitFinished(1);
  CHECK(done[0].outcome == Outcome::kFailed);
  rapidjson::Document failed = Parse(done[0].updated_payload);
  CHECK(std::string(failed["error_class"].GetString()) == "Reliableq::InvalidJob");
  CHECK(std::string(failed["error_message"].GetString()).find("timeout must be a number") !=
        std::string::npos);
  CHECK(*h.ran == 1);  // the handler of the bad one never ran
}

namespace {

// Registers "Cancel": it waits at the harness's gate, records whether its
// stop was requested by then ("stopped" or "running"), and honours it.
std::shared_ptr<Events> RegisterCancel(Harness& h) {
  auto seen = std::make_shared<Events>();
  auto gate = h.gate;
  h.config.registry.Register("Cancel", [seen, gate](const JobView& job) {
    gate->Pass();
    seen->Add(job.stop_requested() ? "stopped" : "running");
    job.ThrowIfStopRequested();
  });
  return seen;
}

}  // namespace

TEST_CASE("StopRunning lists the running jobs, stops them, and drops their outcomes") {
  Harness h;
  std::shared_ptr<Events> seen = RegisterCancel(h);
  h.Start(2);
  h.LeaseAnHour();
  h.Submit({{0, Job("Ok", "done-before")}});
  h.WaitFinished(1);  // acked as usual: finished before the stop
  const std::string stopped = Job("Cancel", "j1");
  h.Submit({{1, stopped}});
  REQUIRE(h.gate->WaitEntered(1));
  std::vector<RunningJob> running = h.pool->StopRunning(milliseconds(0));
  REQUIRE(running.size() == 1);
  CHECK(running[0].payload == stopped);
  CHECK(running[0].queue == 1);
  h.gate->Open();
  REQUIRE(WaitUntil([&] { return seen->Get().size() == 1; }));
  CHECK(seen->Get() == Strings{"stopped"});
  // Its thread returned; no outcome: the job goes back with the hand-back
  // alone, neither acked nor retried.
  REQUIRE(WaitUntil([&] { return h.pool->running() == 0; }));
  std::vector<FinishedJob> after;
  h.pool->TakeFinished(&after);
  CHECK(after.empty());
  CHECK(h.pool->finished_total() == 1);
  // Nothing was logged for it either (no fail, retry or drop line).
  for (const std::string& line : h.lines->Get()) CHECK(line.find("j1") == std::string::npos);
}

TEST_CASE("Fence stops the running jobs and drops their outcomes; the pool runs on") {
  Harness h;
  std::shared_ptr<Events> seen = RegisterCancel(h);
  h.Start(2);
  h.LeaseAnHour();
  const std::string fenced = Job("Cancel", "j1");
  FetchedJob held_slot{1, fenced};
  held_slot.limit_slot = 7;
  h.Submit({held_slot});
  REQUIRE(h.gate->WaitEntered(1));
  std::vector<RunningJob> running = h.pool->Fence();
  REQUIRE(running.size() == 1);
  CHECK(running[0].payload == fenced);
  CHECK(h.pool->Fence().empty());  // listed once
  int wakes_before = h.wakes->load();
  h.gate->Open();
  REQUIRE(WaitUntil([&] { return h.pool->running() == 0; }));
  CHECK(seen->Get() == Strings{"stopped"});
  // No outcome (the job stays in its working list), one wake-up, and its
  // limiter slot handed to the loop.
  std::vector<FinishedJob> after;
  h.pool->TakeFinished(&after);
  CHECK(after.empty());
  CHECK(h.wakes->load() == wakes_before + 1);
  std::vector<uint64_t> limit_slots;
  CHECK(h.pool->TakeFencedEnded(&limit_slots) == 1);
  CHECK(limit_slots == std::vector<uint64_t>{7});
  CHECK(h.pool->TakeFencedEnded(&limit_slots) == 0);
  for (const std::string& line : h.lines->Get()) CHECK(line.find("j1") == std::string::npos);
  // Unlike a hard stop, the next job runs and is acked as usual.
  h.Submit({{0, Job("Ok", "after")}});
  CHECK(h.WaitFinished(1)[0].outcome == Outcome::kSucceeded);
}

TEST_CASE("TimeoutPolicy: the job's field, then the server's class entry, the class's own, "
          "and the default") {
  TimeoutPolicy policy({{"Mail", milliseconds(2000)}, {"*", milliseconds(9000)}});
  auto of = [&](const std::string& json, const std::string& job_class,
                milliseconds class_timeout = milliseconds(0)) {
    rapidjson::Document job = Parse(json);
    return policy.For(job, job_class, class_timeout);
  };
  CHECK(*of(R"({"timeout":1.5})", "Mail").value() == milliseconds(1500));
  CHECK(*of(R"({"timeout":null})", "Mail").value() == milliseconds(2000));
  CHECK(*of("{}", "Mail", milliseconds(100)).value() == milliseconds(2000));
  CHECK(*of("{}", "Other", milliseconds(100)).value() == milliseconds(100));
  CHECK(*of("{}", "Other").value() == milliseconds(9000));
  CHECK(*of(R"({"timeout":0.0001})", "Other").value() == milliseconds(1));
  for (const char* bad : {R"({"timeout":0})", R"({"timeout":-1})", R"({"timeout":"5"})",
                          R"({"timeout":86401})", R"({"timeout":[1]})"}) {
    CAPTURE(bad);
    CHECK(of(bad, "Mail").status().IsInvalidArgument());
  }
  TimeoutPolicy none({});
  rapidjson::Document job = Parse("{}");
  CHECK_FALSE(none.For(job, "Mail", milliseconds(0)).value().has_value());
}
