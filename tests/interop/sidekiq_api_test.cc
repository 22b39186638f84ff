// Sidekiq's own Ruby API reads what reliableq's worker writes: a Server
// fails jobs into retry and dead, then sidekiq_api_check.rb (run with the
// system's ruby and its ruby-sidekiq 6.4.1) checks every entry through
// Sidekiq::RetrySet, DeadSet, Stats and the Web UI, and "retries now" one
// of each; finally a reliableq worker runs the jobs Sidekiq pushed back.
//
// The script's path comes from $RELIABLEQ_INTEROP_SCRIPT (tests/interop/meson.build).
// A missing ruby or Sidekiq gem is a failure, never a skip: tools/setup
// installs both.

#include <doctest/doctest.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "interop_util.h"
#include "support/process.h"
#include "reliableq/client.h"
#include "reliableq/server.h"
#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::testing;
using namespace std::chrono_literals;

namespace {

constexpr const char* kMessage = "interop: failed on purpose, caf\u00e9 \u2603";

// The worker of this test: both queues the jobs go to, two threads.
ServerOptions Options(const RedisOptions& redis) {
  return InteropServerOptions(redis, {{"default", 0}, {"low", 0}}, /*concurrency=*/2);
}

struct Pushed {
  std::string jid;
  std::string queue;  // where its entry says it goes
  int retry_count;    // in its entry
  const char* set;    // "retry" or "dead"
};

void AddExpected(rapidjson::Writer<rapidjson::StringBuffer>& w, const Pushed& job,
                 const std::string& args) {
  w.StartObject();
  w.Key("jid");
  w.String(job.jid);
  w.Key("class");
  w.String("FailingJob");
  w.Key("args");
  w.RawValue(args.data(), args.size(), rapidjson::kArrayType);
  w.Key("queue");
  w.String(job.queue);
  w.Key("retry_count");
  w.Int(job.retry_count);
  w.Key("error_class");
  w.String("std::runtime_error");
  w.Key("error_message");
  w.String(kMessage);
  w.EndObject();
}

}  // namespace

TEST_CASE_FIXTURE(RedisFixture,
                  "Sidekiq's API reads and retries reliableq's retry and dead entries") {
  const std::string script = BuildPath("RELIABLEQ_INTEROP_SCRIPT");
  // Before any work: a machine without ruby fails at once.
  RequireProgram("ruby");

  auto client = Client::Open(options());
  REQUIRE_MESSAGE(client.ok(), client.status().ToString());
  const std::string args = R"([1,"two",{"three":3.5}])";
  auto push = [&](const std::string& queue, Retry retry, const std::string& extra) {
    Job job;
    job.job_class = "FailingJob";
    job.args = args;
    job.queue = queue;
    job.retry = retry;
    job.extra = extra;
    return AcceptedJid((*client)->Push(job));
  };
  // First failure; a later failure (retried_at); retry_queue; retry 0 (dead
  // at once); the 25th retry used up (dead, exhausted).
  std::vector<Pushed> jobs = {
      {push("default", Retry::Enabled(), "{}"), "default", 0, "retry"},
      {push("low", Retry::Enabled(), R"({"retry_count":3,"failed_at":1700000000.5})"), "low", 4,
       "retry"},
      {push("default", Retry::Enabled(), R"({"retry_queue":"slow"})"), "slow", 0, "retry"},
      {push("low", Retry::Times(0), "{}"), "low", 0, "dead"},
      {push("default", Retry::Enabled(), R"({"retry_count":24,"failed_at":1700000000.5})"),
       "default", 25, "dead"},
  };

  {
    HandlerRegistry registry;
    registry.Register("FailingJob", [](const JobView&) { throw std::runtime_error(kMessage); });
    RunningServer server(Options(options()), std::move(registry));
    bool failed_all = WaitUntil(
        [&] {
          return Integer({"ZCARD", "retry"}) == 3 && Integer({"ZCARD", "dead"}) == 2;
        },
        20s);
    CHECK(server.Stop().ok());
    REQUIRE_MESSAGE(failed_all, "the worker did not fail every job into retry and dead");
  }

  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> spec(buffer);
  spec.StartObject();
  for (const char* set : {"retry", "dead"}) {
    spec.Key(set);
    spec.StartArray();
    for (const Pushed& job : jobs) {
      if (std::string(job.set) == set) AddExpected(spec, job, args);
    }
    spec.EndArray();
  }
  // Retry now: the later failure from retry, the retry-0 job from dead.
  spec.Key("retry_now");
  spec.StartObject();
  spec.Key("retry");
  spec.String(jobs[1].jid);
  spec.Key("dead");
  spec.String(jobs[3].jid);
  spec.EndObject();
  spec.EndObject();
  const std::string spec_path = server().dir() + "/interop-spec.json";
  WriteFile(spec_path, buffer.GetString());
  RunRubyChecks({script, server().Url(), spec_path}, "sidekiq_api_check: ", 120s);

  // What Sidekiq pushed back runs in a reliableq worker: the retried job
  // with retry_count 4 - 1, the dead one with 0 - 1.
  CHECK(Integer({"ZCARD", "retry"}) == 2);
  CHECK(Integer({"ZCARD", "dead"}) == 1);
  auto ran = std::make_shared<std::map<std::string, int>>();
  auto mu = std::make_shared<std::mutex>();
  {
    HandlerRegistry registry;
    registry.Register("FailingJob", [ran, mu](const JobView& job) {
      std::lock_guard<std::mutex> lock(*mu);
      (*ran)[std::string(job.jid())] = job.retry_count().value_or(-100);
    });
    RunningServer server(Options(options()), std::move(registry));
    bool done = WaitUntil(
        [&] {
          std::lock_guard<std::mutex> lock(*mu);
          return ran->size() >= 2 && Integer({"LLEN", "queue:low"}) == 0;
        },
        20s);
    CHECK(server.Stop().ok());
    REQUIRE(done);
  }
  std::lock_guard<std::mutex> lock(*mu);
  CHECK(ran->size() == 2);
  CHECK(ran->count(jobs[1].jid) == 1);
  CHECK((*ran)[jobs[1].jid] == 3);
  CHECK(ran->count(jobs[3].jid) == 1);
  CHECK((*ran)[jobs[3].jid] == -1);
  CHECK(Integer({"ZCARD", "retry"}) == 2);
  CHECK(Integer({"ZCARD", "dead"}) == 1);
}
