// Limits with real worker processes (`reliableq worker --limit ...`): a
// concurrency limit holds across workers, a rate limit spaces the starts,
// and the slot of a SIGKILLed worker is freed by the janitor while its job
// still runs (at least once). reliableq(1), LIMITS.

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "protocol/keys.h"
#include "support/process.h"
#include "reliableq/client.h"
#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::protocol;
using namespace reliableq::testing;
using namespace std::chrono_literals;

namespace {

class LimitWorkerFixture : public RedisFixture {
 public:
  LimitWorkerFixture() {
    char templ[] = "/tmp/reliableq-limits-XXXXXX";
    dir_ = mkdtemp(templ);
    auto client = Client::Open(options());
    REQUIRE_MESSAGE(client.ok(), client.status().ToString());
    client_ = std::move(client.value());
  }
  ~LimitWorkerFixture() {
    workers_.clear();  // SIGKILLs what still runs
    std::string cmd = "rm -rf '" + dir_ + "'";
    int ignored = std::system(cmd.c_str());
    (void)ignored;
  }

  ChildProcess& StartWorker(std::vector<std::string> options) {
    std::vector<std::string> argv = {BuildPath("RELIABLEQ_BIN"),
                                     "worker",
                                     "--redis",
                                     server().Url(),
                                     "-r",
                                     BuildPath("RELIABLEQ_DEMO_PLUGIN"),
                                     "--heartbeat-ttl",
                                     "1",
                                     "--heartbeat-interval",
                                     "0.25",
                                     "--janitor-interval",
                                     "0.5"};
    argv.insert(argv.end(), options.begin(), options.end());
    std::string log = dir_ + "/worker" + std::to_string(workers_.size()) + ".log";
    workers_.push_back(std::make_unique<ChildProcess>(
        argv, std::vector<std::string>{"RELIABLEQ_DEMO_LOG=" + dir_ + "/runs"}, log));
    return *workers_.back();
  }

  // A command handler that writes "s <ns>" as it starts and "e <ns>" as it
  // ends (after `seconds`) to the ledger.
  std::string TimedScript(const std::string& seconds) {
    std::string path = dir_ + "/timed.sh";
    std::ofstream(path) << "#!/bin/sh\n"
                        << "cat > /dev/null\n"
                        << "echo \"s $(date +%s%N)\" >> " << dir_ << "/ledger\n"
                        << "sleep " << seconds << "\n"
                        << "echo \"e $(date +%s%N)\" >> " << dir_ << "/ledger\n";
    chmod(path.c_str(), 0755);
    return path;
  }

  // The ledger's events, by time: (nanoseconds, +1 start / -1 end).
  std::vector<std::pair<long long, int>> Events() {
    std::vector<std::pair<long long, int>> events;
    std::ifstream in(dir_ + "/ledger");
    std::string kind;
    long long at = 0;
    while (in >> kind >> at) events.emplace_back(at, kind == "s" ? 1 : -1);
    std::sort(events.begin(), events.end());
    return events;
  }

  void Push(const std::string& job_class, const std::string& args, int n) {
    for (int i = 0; i < n; ++i) {
      Job job;
      job.job_class = job_class;
      job.args = args;
      AcceptedJid(client_->Push(job));
    }
  }

  std::string dir_;
  std::unique_ptr<Client> client_;
  std::vector<std::unique_ptr<ChildProcess>> workers_;
  Keys keys_;
};

}  // namespace

TEST_CASE_FIXTURE(LimitWorkerFixture, "a concurrency limit of 2 holds across two workers") {
  constexpr int kJobs = 10;
  std::string script = TimedScript("0.3");
  for (int i = 0; i < 2; ++i) {
    StartWorker({"-c", "4", "--exec", "SlowJob=" + script, "--limit",
                 "slow=concurrency=2,"
                 "classes=SlowJob"});
  }
  Push("SlowJob", "[]", kJobs);
  REQUIRE_MESSAGE(WaitUntil(
                      [&] {
                        auto events = Events();
                        return std::count_if(events.begin(), events.end(),
                                             [](auto e) { return e.second < 0; }) == kJobs;
                      },
                      30s),
                  "jobs ended: " << Events().size());
  int running = 0, most = 0;
  for (auto [at, step] : Events()) {
    running += step;
    most = std::max(most, running);
  }
  MESSAGE("most running at once: " << most);
  CHECK(most <= 2);
  CHECK(most >= 1);
  // Every slot is given back, and nothing waits.
  CHECK(WaitUntil([&] { return Integer({"HLEN", keys_.Limit("slow")}) == 0; }, 5s));
  CHECK(LRange(keys_.LimitWaiting("slow")).empty());
  CHECK(LRange("queue:default").empty());
  CHECK(HGet(keys_.Limits(), "slow").find("\"concurrency\":2") != std::string::npos);
}

TEST_CASE_FIXTURE(LimitWorkerFixture, "a rate limit of 2 per second spaces the starts") {
  constexpr int kJobs = 6;
  std::string script = TimedScript("0");
  StartWorker({"-c", "4", "--exec", "FastJob=" + script, "--poll-interval", "0.1", "--limit",
               "FastJob=rate=2/1s"});
  StartWorker({"-c", "4", "--exec", "FastJob=" + script, "--poll-interval", "0.1", "--limit",
               "FastJob=rate=2/1s"});
  Push("FastJob", "[]", kJobs);
  REQUIRE(WaitUntil([&] { return Events().size() == 2 * kJobs; }, 30s));
  std::vector<long long> starts;
  for (auto [at, step] : Events()) {
    if (step > 0) starts.push_back(at);
  }
  // No three starts within one period (less what a handler's start adds
  // after its slot was taken).
  for (size_t i = 2; i < starts.size(); ++i) {
    CAPTURE(i);
    CHECK(starts[i] - starts[i - 2] >= 800'000'000LL);
  }
}

TEST_CASE_FIXTURE(LimitWorkerFixture, "a SIGKILLed worker's slot is freed by the janitor") {
  const std::vector<std::string> limit = {"-c", "2", "--limit", "RecordJob=concurrency=1"};
  ChildProcess& doomed = StartWorker(limit);
  Job job;
  job.job_class = "RecordJob";
  job.args = "[\"x\", 1500]";
  std::string jid = AcceptedJid(client_->Push(job));
  REQUIRE(WaitUntil([&] { return Integer({"HLEN", keys_.Limit("RecordJob")}) == 1; }, 10s));
  doomed.Signal(SIGKILL);
  REQUIRE(doomed.Wait(5s));
  // Another worker's janitor frees the slot; the recovered job runs there.
  StartWorker(limit);
  REQUIRE(WaitUntil(
      [&] {
        std::ifstream in(dir_ + "/runs");
        std::string line;
        while (std::getline(in, line)) {
          if (line == jid) return true;
        }
        return false;
      },
      20s));
  CHECK(WaitUntil([&] { return Integer({"HLEN", keys_.Limit("RecordJob")}) == 0; }, 5s));
  CHECK(LRange(keys_.LimitWaiting("RecordJob")).empty());
}

TEST_CASE_FIXTURE(LimitWorkerFixture, "a refused acquire is tried again, not left in the list") {
  // A waiting list of the wrong type: limit_acquire.lua refuses (WRONGTYPE)
  // and writes nothing.
  Run({"SET", keys_.LimitWaiting("RecordJob"), "not a list"});
  StartWorker({"-c", "2", "--limit", "RecordJob=concurrency=1"});
  Job job;
  job.job_class = "RecordJob";
  job.args = "[\"x\", 0]";
  std::string jid = AcceptedJid(client_->Push(job));
  auto ran = [&] {
    std::ifstream in(dir_ + "/runs");
    std::string line;
    while (std::getline(in, line)) {
      if (line == jid) return true;
    }
    return false;
  };
  // Fetched, refused: it waits in the worker's working list, not run.
  REQUIRE(WaitUntil([&] { return LRange("queue:default").empty(); }, 10s));
  std::this_thread::sleep_for(1s);
  CHECK_FALSE(ran());
  CHECK(Integer({"HLEN", keys_.Limit("RecordJob")}) == 0);
  // Repaired: a later try takes the slot and the job runs, once.
  Run({"DEL", keys_.LimitWaiting("RecordJob")});
  REQUIRE(WaitUntil(ran, 10s));
  CHECK(WaitUntil([&] { return Integer({"HLEN", keys_.Limit("RecordJob")}) == 0; }, 5s));
}

TEST_CASE_FIXTURE(LimitWorkerFixture, "jobs of classes no limit names run untouched beside a limit") {
  // A worker with a limit fetches unlimited jobs in the same batches as
  // limited ones; each must reach its handler with its payload whole (an
  // empty payload would send it to dead as "not a job").
  constexpr int kJobs = 20;
  StartWorker({"-c", "4", "--limit", "slow=concurrency=1,classes=SlowJob"});
  Push("RecordJob", "[\"x\"]", kJobs);
  REQUIRE_MESSAGE(WaitUntil(
                      [&] {
                        std::ifstream in(dir_ + "/runs");
                        return std::count(std::istreambuf_iterator<char>(in),
                                          std::istreambuf_iterator<char>(), '\n') == kJobs;
                      },
                      20s),
                  "dead: " << Integer({"ZCARD", keys_.Dead()}));
  CHECK(Integer({"ZCARD", keys_.Dead()}) == 0);
  CHECK(Integer({"ZCARD", keys_.Retry()}) == 0);
}
