// Jobs crossing between Ruby Sidekiq (the Debian ruby-sidekiq 6.4.1 and
// ruby-gitlab-sidekiq-fetcher 0.8.0) and reliableq on one redis-server:
//
// - Ruby pushes (Sidekiq::Client.push, perform_async, perform_in, push_bulk,
//   ActiveJob's wrapper), a reliableq Server runs the jobs: jobs_push.rb
//   writes what it pushed, jobs_compare.rb compares it with what the
//   handlers saw, with Ruby's own idea of equal values.
// - reliableq pushes (the CLI and the C++ Client), a real `sidekiq` process
//   runs the jobs, with BasicFetch and with gitlab's reliable fetch
//   (jobs_sidekiq_worker.rb records every run).
// - A mixed fleet: Sidekiq and two reliableq worker processes on one
//   queue; one reliableq worker is SIGKILLed while it holds jobs.
// - Integers beyond 64 bits, which Ruby reads and writes as Integers, in
//   both directions and through a failure.
// - Sidekiq 8's payloads (integer-millisecond timestamps, its ActiveJob
//   wrapper's new name, retry_for from a failed_at in milliseconds) in a
//   reliableq worker.
//
// Scripts come from $RELIABLEQ_INTEROP_DIR, the programs from $RELIABLEQ_BIN
// and $RELIABLEQ_DEMO_PLUGIN (tests/interop/meson.build). A missing ruby, sidekiq or
// gem is a failure, never a skip: tools/setup installs them.

#include <doctest/doctest.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "interop_util.h"
#include "protocol/keys.h"
#include "reliableq/client.h"
#include "reliableq/server.h"
#include "support/process.h"
#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::protocol;
using namespace reliableq::testing;
using namespace std::chrono_literals;

namespace {

constexpr const char* kActiveJobWrapper = "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper";
// Sidekiq 8's name for the same wrapper; the old one still works there.
constexpr const char* kActiveJobWrapper8 = "Sidekiq::ActiveJob::Wrapper";
// Processor threads of each in-process Server: more than one, so that jobs
// run side by side as in a deployment.
constexpr int kConcurrency = 4;

rapidjson::Document ParseJson(const std::string& text) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseFullPrecisionFlag>(text.c_str(), text.size());
  REQUIRE_MESSAGE(!doc.HasParseError(), "not JSON: " << text.substr(0, 300));
  return doc;
}

std::string String(const rapidjson::Value& value) {
  return value.IsString() ? std::string(value.GetString(), value.GetStringLength()) : "";
}

// What a reliableq handler saw of one job.
struct SeenJob {
  std::string jid;
  std::string job_class;
  std::optional<std::string> wrapped;
  std::string queue;
  std::string args;  // job.args() as a user would write it out with RapidJSON
  std::string raw;
  double ran_at = 0;
};

// A handler that records every job it runs; safe on many processor threads.
class Recorder {
 public:
  Handler handler() {
    return [this](const JobView& job) {
      SeenJob seen;
      seen.ran_at = NowSeconds();
      seen.jid = job.jid();
      seen.job_class = job.job_class();
      auto wrapped = job.payload().FindMember("wrapped");
      if (wrapped != job.payload().MemberEnd() && wrapped->value.IsString()) {
        seen.wrapped = String(wrapped->value);
      }
      seen.queue = job.queue();
      rapidjson::StringBuffer buffer;
      rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
      job.args().Accept(writer);
      seen.args = buffer.GetString();
      seen.raw = job.raw();
      std::lock_guard<std::mutex> lock(mu_);
      seen_.push_back(std::move(seen));
    };
  }

  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_.size();
  }

  std::vector<SeenJob> jobs() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

  // The SEEN.json of jobs_compare.rb.
  std::string ToJson() {
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
    w.StartArray();
    for (const SeenJob& job : jobs()) {
      w.StartObject();
      w.Key("jid");
      w.String(job.jid);
      w.Key("class");
      w.String(job.job_class);
      w.Key("wrapped");
      if (job.wrapped) {
        w.String(*job.wrapped);
      } else {
        w.Null();
      }
      w.Key("queue");
      w.String(job.queue);
      w.Key("args");
      w.RawValue(job.args.data(), job.args.size(), rapidjson::kArrayType);
      w.Key("raw");
      w.String(job.raw);
      w.Key("ran_at");
      w.Double(job.ran_at);
      w.EndObject();
    }
    w.EndArray();
    return buffer.GetString();
  }

 private:
  std::mutex mu_;
  std::vector<SeenJob> seen_;
};

// Stops a process the way an operator does: TERM, then KILL if it has not
// ended within `grace`. Returns its wait status, or nullopt if it is still
// there 5 s after the KILL. Asserts nothing: destructors call it too.
std::optional<int> StopProcess(ChildProcess& process, std::chrono::milliseconds grace) {
  process.Signal(SIGTERM);
  std::optional<int> status = process.Wait(grace);
  if (!status) {
    process.Signal(SIGKILL);
    status = process.Wait(5s);
  }
  return status;
}

// True when `status` says the process exited by itself with status 0.
bool ExitedCleanly(const std::optional<int>& status) {
  return status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0;
}

// One JSON object per complete line of `path` (a line still being written
// has no newline yet and is left for the next read).
std::vector<rapidjson::Document> ReadJsonLines(const std::string& path) {
  std::vector<rapidjson::Document> lines;
  std::string text = ReadFile(path);
  size_t start = 0;
  while (true) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) break;
    if (end > start) lines.push_back(ParseJson(text.substr(start, end - start)));
    start = end + 1;
  }
  return lines;
}

// The jids in `path`, one per line, with how often each appears.
std::map<std::string, int> CountLines(const std::string& path) {
  std::map<std::string, int> counts;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) ++counts[line];
  }
  return counts;
}

// A real `sidekiq` process with jobs_sidekiq_worker.rb.
class SidekiqProcess {
 public:
  SidekiqProcess(const RedisServer& redis, const ScratchDir& dir, const std::string& fetch,
                 const std::string& queue, const std::string& record) {
    std::vector<std::string> argv = {RequireProgram("sidekiq"),
                                     "-r", InteropFile("jobs_sidekiq_worker.rb"),
                                     "-c", "5",
                                     "-q", queue,
                                     "-t", "3"};
    log_ = dir / ("sidekiq-" + fetch + ".log");
    process_ = std::make_unique<ChildProcess>(
        argv,
        std::vector<std::string>{"RELIABLEQ_INTEROP_REDIS_SOCKET=" + redis.socket_path(),
                                 "RELIABLEQ_INTEROP_RECORD=" + record,
                                 "RELIABLEQ_INTEROP_FETCH=" + fetch},
        log_);
  }
  ~SidekiqProcess() { Stop(); }

  ChildProcess& process() { return *process_; }
  std::string Log() const { return ReadFile(log_); }

  // TERM, and KILL if it has not stopped 10 s later (its -t is 3 s, and
  // gitlab's fetch may be in a 5 s sleep it cannot leave).
  std::optional<int> Stop() {
    if (!stopped_) stopped_ = StopProcess(*process_, 10s);
    return stopped_;
  }

 private:
  std::string log_;
  std::unique_ptr<ChildProcess> process_;
  std::optional<int> stopped_;
};

// Every `reliableq:working:*` and gitlab `working:*` list that is not empty.
std::vector<std::string> NonEmptyWorkingLists(RedisFixture& fixture) {
  std::vector<std::string> found;
  for (const char* pattern : {"reliableq:working:*", "working:*"}) {
    auto reply = fixture.redis().Command({"KEYS", pattern});
    REQUIRE(reply.ok());
    for (size_t i = 0; i < (*reply)->elements; ++i) {
      std::string key((*reply)->element[i]->str, (*reply)->element[i]->len);
      if (fixture.Integer({"LLEN", key}) > 0) found.push_back(key);
    }
  }
  return found;
}

// WaitUntil for conditions that read whole files: checked every 50 ms.
bool PollUntil(const std::function<bool()>& condition, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
}

// A stat counter; Sidekiq's readers take a missing key as 0.
long long Counter(RedisFixture& fixture, std::string_view key) {
  std::string value = fixture.Get(std::string(key));
  return value.empty() ? 0 : std::stoll(value);
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : ", ") + part;
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------
// 1. Ruby pushes, reliableq runs.

namespace {

// Pushes with jobs_push.rb in `mode`, runs a reliableq Server until every
// pushed job ran, then compares with jobs_compare.rb.
void RubyPushesReliableqRuns(RedisFixture& fixture, const std::string& mode) {
  ScratchDir dir;
  const std::string pushed_path = dir / "pushed.json";
  CommandResult pushed_run =
      RunRuby({InteropFile("jobs_push.rb"), fixture.server().Url(), pushed_path, mode});
  MESSAGE(pushed_run.out);
  rapidjson::Document pushed = ParseJson(ReadFile(pushed_path));
  const size_t count = pushed["jobs"].Size();
  REQUIRE(count > 0);
  bool scheduled = false;
  for (const auto& job : pushed["jobs"].GetArray()) scheduled |= !job["at"].IsNull();
  if (mode == "plain") REQUIRE(scheduled);

  Recorder recorder;
  HandlerRegistry registry;
  // Sidekiq runs ActiveJob's wrapper class, which runs the wrapped job: a
  // reliableq handler is registered under the wrapper's name too, and finds
  // the ActiveJob class in "wrapped" and in args[0]["job_class"].
  registry.Register("InteropJob", recorder.handler());
  registry.Register(kActiveJobWrapper, recorder.handler());
  // Never the handler of a wrapped job: dispatch is on "class", as in
  // Sidekiq.
  Recorder misrouted;
  registry.Register("GreetingJob", misrouted.handler());
  ServerOptions options =
      InteropServerOptions(fixture.options(), {{"interop", 0}, {"interop_low", 0}}, kConcurrency);
  RunningServer server(options, std::move(registry));
  const Keys keys(options.prefix);
  auto acked = [&] {
    return recorder.size() >= count &&
           Counter(fixture, Keys().Processed()) >= static_cast<long long>(count);
  };
  bool all_ran = WaitUntil(acked, 20s);
  INFO("ran " << recorder.size() << " of " << count << " jobs; schedule holds "
              << fixture.Integer({"ZCARD", "schedule"}));
  REQUIRE(all_ran);
  // Acknowledged: nothing left where a job can wait or be held.
  for (const char* queue : {"interop", "interop_low"}) {
    CHECK(fixture.Integer({"LLEN", Keys().Queue(queue)}) == 0);
    CHECK(fixture.Integer({"LLEN", keys.Working(server.identity(), queue)}) == 0);
  }
  CHECK(server.Stop().ok());
  CHECK(fixture.Integer({"ZCARD", "schedule"}) == 0);
  CHECK(fixture.Integer({"ZCARD", "retry"}) == 0);
  CHECK(fixture.Integer({"ZCARD", "dead"}) == 0);
  CHECK(Counter(fixture, Keys().Processed()) == static_cast<long long>(count));
  CHECK(Counter(fixture, Keys().Failed()) == 0);
  CHECK(recorder.size() == count);
  CHECK(misrouted.size() == 0);

  const std::string seen_path = dir / "seen.json";
  WriteFile(seen_path, recorder.ToJson());
  RunRubyChecks({InteropFile("jobs_compare.rb"), pushed_path, seen_path,
                 mode == "bignum" ? "bignums-as-floats" : ""},
                "jobs_compare: ");
}

}  // namespace

TEST_CASE_FIXTURE(RedisFixture,
                  "Ruby's push, perform_async, perform_in, push_bulk and ActiveJob jobs run in "
                  "reliableq with the same args") {
  RubyPushesReliableqRuns(*this, "plain");
}

TEST_CASE_FIXTURE(RedisFixture,
                  "Ruby integers beyond 64 bits stay exact in the payload and reach a handler "
                  "as the nearest double") {
  RubyPushesReliableqRuns(*this, "bignum");
}

TEST_CASE_FIXTURE(RedisFixture,
                  "Ruby's keyed pushes (set(sequence:), the push hash, sidekiq_options) run one "
                  "at a time per key, in push order, across two reliableq workers") {
  ScratchDir dir;
  const std::string pushed_path = dir / "pushed.json";
  constexpr int kPerKey = 6;
  CommandResult pushed_run = RunRuby({InteropFile("jobs_push.rb"), server().Url(), pushed_path,
                                      "sequence", std::to_string(kPerKey)});
  MESSAGE(pushed_run.out);
  const size_t count = ParseJson(ReadFile(pushed_path))["jobs"].Size();
  REQUIRE(count == 11 * kPerKey);

  struct KeyedRun {
    std::string key;
    int index;
    double start, end;
  };
  std::mutex mu;
  std::vector<KeyedRun> runs;
  auto handler = [&](const JobView& job) {
    KeyedRun run{String(job.args()[0]), job.args()[1].GetInt(), NowSeconds(), 0};
    // Every job carries its key as Ruby wrote it.
    if (!job.payload().HasMember("sequence")) run.key = "(no sequence field)";
    std::this_thread::sleep_for(3ms);
    run.end = NowSeconds();
    std::lock_guard<std::mutex> lock(mu);
    runs.push_back(run);
  };
  HandlerRegistry first, second;
  first.Register("PaymentEventJob", handler);
  first.Register("LedgerJob", handler);
  second.Register("PaymentEventJob", handler);
  second.Register("LedgerJob", handler);
  ServerOptions options = InteropServerOptions(this->options(), {{"sequenced", 0}}, kConcurrency);
  RunningServer a(options, std::move(first));
  RunningServer b(options, std::move(second));
  REQUIRE(WaitUntil(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return runs.size() >= count;
      },
      20s));
  std::lock_guard<std::mutex> lock(mu);
  CHECK(runs.size() == count);
  std::map<std::string, std::vector<KeyedRun>> by_key;
  for (const KeyedRun& run : runs) by_key[run.key].push_back(run);
  CHECK(by_key.size() == 11);
  for (auto& [key, mine] : by_key) {
    CAPTURE(key);
    std::sort(mine.begin(), mine.end(),
              [](const KeyedRun& x, const KeyedRun& y) { return x.start < y.start; });
    REQUIRE(mine.size() == static_cast<size_t>(kPerKey));
    for (int i = 0; i < kPerKey; ++i) {
      CHECK(mine[i].index == i);
      if (i > 0) CHECK(mine[i].start >= mine[i - 1].end);
    }
  }
}

// ---------------------------------------------------------------------------
// 2. reliableq pushes, Ruby runs.

namespace {

// The same values, spelled as a user may type them (escapes, spaces, 1e20)
// and as Ruby's JSON.generate writes them once Sidekiq parsed them.
constexpr const char* kRichArgsTyped =
    R"([ "caf\u00e9 \u2603 \ud83d\ude00", "", [], {}, null, true, false, 0, -1,)"
    R"( 2147483648, -2147483649, 9007199254740993, 9223372036854775807,)"
    R"( -9223372036854775808, 18446744073709551615, 0.1, -2.5, 3.0, -0.0, 1e20, 1E-7,)"
    R"( 123456789.123456789, {"nested": {"list": [1, [2, [3, {"deep": null}]]],)"
    R"( "\u00fcn\u00efc\u00f6d\u00e9": "\u2603"}, "a\/b": "x/y",)"
    R"( "quote": "he said \"hi\" \\o/", "control": "tab\tnewline\n\u0001",)"
    R"( "empty": {"s": "", "a": [], "h": {}}, "numbers": [-0.5, 1e300, 7]} ])";
constexpr const char* kRichArgsRuby =
    "[\"caf\xC3\xA9 \xE2\x98\x83 \xF0\x9F\x98\x80\",\"\",[],{},null,true,false,0,-1,"
    "2147483648,-2147483649,9007199254740993,9223372036854775807,"
    "-9223372036854775808,18446744073709551615,0.1,-2.5,3.0,-0.0,1.0e+20,1.0e-07,"
    "123456789.12345679,{\"nested\":{\"list\":[1,[2,[3,{\"deep\":null}]]],"
    "\"\xC3\xBCn\xC3\xAF" "c\xC3\xB6" "d\xC3\xA9\":\"\xE2\x98\x83\"},\"a/b\":\"x/y\","
    "\"quote\":\"he said \\\"hi\\\" \\\\o/\",\"control\":\"tab\\tnewline\\n\\u0001\","
    "\"empty\":{\"s\":\"\",\"a\":[],\"h\":{}},\"numbers\":[-0.5,1.0e+300,7]}]";

struct PushedJob {
  std::string how;
  std::string args_ruby;   // the args as Ruby writes them
  std::string retry_json;  // the retry field as Ruby writes it
  double at = 0;           // when it is due, if scheduled
};

// Pushes with the CLI and the Client; returns jid -> what was pushed.
std::map<std::string, PushedJob> PushFromReliableq(RedisFixture& fixture,
                                                   const std::string& queue) {
  std::map<std::string, PushedJob> pushed;
  auto cli = [&](std::vector<std::string> args, PushedJob job) {
    args.insert(args.begin(), {BuildPath("RELIABLEQ_BIN"), "--redis", fixture.server().Url()});
    CommandResult run = RunCommand(args);
    INFO("reliableq push: " << run.out << run.err);
    REQUIRE(run.exit_code == 0);
    std::string jid = run.out.substr(0, run.out.find('\n'));
    REQUIRE(jid.size() == 24);
    pushed[jid] = std::move(job);
  };
  cli({"push", "InteropJob", kRichArgsTyped, "-q", queue, "--retry", "2", "--extra",
       R"({"tags":["cli"],"display_class":"Interop"})"},
      {"reliableq push", kRichArgsRuby, "2"});
  cli({"push", "InteropJob", "[]", "-q", queue, "--retry", "false"},
      {"reliableq push --retry false", "[]", "false"});

  auto client = Client::Open(fixture.options());
  REQUIRE_MESSAGE(client.ok(), client.status().ToString());
  auto job = [&](const std::string& args, Retry retry = Retry::Enabled()) {
    Job j;
    j.job_class = "InteropJob";
    j.args = args;
    j.queue = queue;
    j.retry = retry;
    return j;
  };
  std::string jid = AcceptedJid((*client)->Push(job(kRichArgsTyped)));
  pushed[jid] = {"Client::Push", kRichArgsRuby, "true"};

  std::vector<Job> bulk = {job("[1]"), job(R"([2,"two"])"), job(R"([{"three":3.0}])"),
                           job("[]", Retry::Times(0)), job("[null,[null]]")};
  const char* bulk_ruby[] = {"[1]", R"([2,"two"])", R"([{"three":3.0}])", "[]", "[null,[null]]"};
  std::vector<std::string> jids = AcceptedJids((*client)->PushBulk(bulk));
  REQUIRE(jids.size() == bulk.size());
  for (size_t i = 0; i < bulk.size(); ++i) {
    pushed[jids[i]] = {"Client::PushBulk", bulk_ruby[i], i == 3 ? "0" : "true"};
  }

  double due = NowSeconds() + 1;
  jid = AcceptedJid((*client)->PushIn(job(R"(["in one second"])"), 1.0));
  pushed[jid] = {"Client::PushIn", R"(["in one second"])", "true", due};
  CHECK(fixture.Integer({"ZCARD", "schedule"}) == 1);

  // Stored as Sidekiq itself would write them (reliableq-schema(7)).
  CommandResult redump = RunRuby(
      {InteropFile("jobs_redump.rb"), fixture.server().Url(), Keys().Queue(queue), "schedule"});
  MESSAGE(redump.out);
  return pushed;
}

// Runs a real `sidekiq` with `fetch` on queue "interop" until every job of
// `pushed` ran, stops it, and checks that each ran once, as it was pushed.
void SidekiqRuns(RedisFixture& fixture, const std::string& fetch,
                 const std::map<std::string, PushedJob>& pushed) {
  ScratchDir dir;
  const std::string record = dir / "ruby.jsonl";
  SidekiqProcess sidekiq(fixture.server(), dir, fetch, "interop", record);
  auto recorded = [&] { return ReadJsonLines(record).size(); };
  bool all_ran = PollUntil(
      [&] { return recorded() >= pushed.size() || !sidekiq.process().running(); }, 40s);
  INFO("sidekiq log:\n" << sidekiq.Log());
  REQUIRE(sidekiq.process().running());
  REQUIRE_MESSAGE(all_ran, "Sidekiq ran " << recorded() << " of " << pushed.size() << " jobs");
  CHECK(ExitedCleanly(sidekiq.Stop()));

  std::map<std::string, int> runs;
  for (const auto& line : ReadJsonLines(record)) {
    std::string jid = String(line["jid"]);
    ++runs[jid];
    auto it = pushed.find(jid);
    INFO("job " << jid);
    REQUIRE(it != pushed.end());
    const PushedJob& want = it->second;
    INFO(want.how);
    CHECK(String(line["class"]) == "InteropJob");
    CHECK(String(line["queue"]) == "interop");
    CHECK(String(line["args_json"]) == want.args_ruby);
    rapidjson::StringBuffer retry;
    rapidjson::Writer<rapidjson::StringBuffer> writer(retry);
    line["retry"].Accept(writer);
    CHECK(std::string(retry.GetString()) == want.retry_json);
    // Float seconds: what 6.x and 7.x read, and what 8.x reads as seconds.
    CHECK(String(line["created_at_type"]) == "Float");
    CHECK(String(line["enqueued_at_type"]) == "Float");
    double ran_at = line["ran_at"].GetDouble();
    CHECK(line["created_at"].GetDouble() <= ran_at);
    CHECK(line["enqueued_at"].GetDouble() <= ran_at);
    if (want.at != 0) {
      CHECK(ran_at >= want.at - 0.01);
      CHECK(line["enqueued_at"].GetDouble() >= want.at - 0.01);
    }
  }
  for (const auto& [jid, job] : pushed) {
    INFO(job.how << " " << jid);
    CHECK(runs[jid] == 1);
  }
  // Done and acknowledged, and counted by Sidekiq as processed.
  CHECK(fixture.Integer({"LLEN", "queue:interop"}) == 0);
  CHECK(fixture.Integer({"ZCARD", "schedule"}) == 0);
  CHECK(fixture.Integer({"ZCARD", "retry"}) == 0);
  CHECK(fixture.Integer({"ZCARD", "dead"}) == 0);
  std::vector<std::string> held = NonEmptyWorkingLists(fixture);
  CHECK_MESSAGE(held.empty(), "jobs still held in " << Join(held));
  CHECK(Counter(fixture, Keys().Processed()) == static_cast<long long>(pushed.size()));
  CHECK(Counter(fixture, Keys().Failed()) == 0);
}

}  // namespace

TEST_CASE_FIXTURE(RedisFixture,
                  "jobs pushed by the reliableq CLI and Client run in Sidekiq with BasicFetch") {
  SidekiqRuns(*this, "basic", PushFromReliableq(*this, "interop"));
}

TEST_CASE_FIXTURE(RedisFixture,
                  "jobs pushed by the reliableq CLI and Client run in Sidekiq with gitlab's "
                  "reliable fetch") {
  SidekiqRuns(*this, "gitlab", PushFromReliableq(*this, "interop"));
}

TEST_CASE_FIXTURE(RedisFixture,
                  "integers beyond 64 bits pushed by reliableq reach Sidekiq as integers") {
  // Ruby reads these as Integer (JSON.parse makes a Bignum); a Float in
  // their place is another value, and Sidekiq would run the job with it.
  const std::string args = "[18446744073709551616,-36893488147419103232,"
                           "1180591620717411303424,[1267650600228229401496703205376]]";
  std::map<std::string, PushedJob> pushed;
  CommandResult run = RunCommand({BuildPath("RELIABLEQ_BIN"), "--redis", server().Url(), "push",
                                  "InteropJob", args, "-q", "interop"});
  INFO("reliableq push: " << run.out << run.err);
  REQUIRE(run.exit_code == 0);
  pushed[run.out.substr(0, run.out.find('\n'))] = {"reliableq push", args, "true"};
  auto client = Client::Open(options());
  REQUIRE_MESSAGE(client.ok(), client.status().ToString());
  Job job;
  job.job_class = "InteropJob";
  job.args = args;
  job.queue = "interop";
  pushed[AcceptedJid((*client)->Push(job))] = {"Client::Push", args, "true"};
  for (const std::string& payload : LRange("queue:interop")) {
    CHECK_MESSAGE(payload.find(args) != std::string::npos, "stored as " << payload);
  }
  SidekiqRuns(*this, "basic", pushed);
}

TEST_CASE_FIXTURE(RedisFixture,
                  "a failed job keeps its integers beyond 64 bits in its retry entry") {
  // As Ruby's Sidekiq::Client writes it; the failure bookkeeping must not
  // turn the arguments into other values (Sidekiq would retry the job with
  // Floats).
  const std::string args = R"([18446744073709551616,"x",[-36893488147419103232]])";
  const std::string payload = R"({"retry":true,"queue":"interop","class":"FailingJob","args":)" +
                              args +
                              R"(,"jid":"0123456789abcdef01234567",)"
                              R"("created_at":1700000000.5,"enqueued_at":1700000000.5})";
  Run({"LPUSH", "queue:interop", payload});
  HandlerRegistry registry;
  registry.Register("FailingJob",
                    [](const JobView&) { throw std::runtime_error("failed on purpose"); });
  RunningServer server(InteropServerOptions(options(), {{"interop", 0}}, kConcurrency),
                       std::move(registry));
  REQUIRE(WaitUntil([&] { return Integer({"ZCARD", "retry"}) == 1; }, 10s));
  CHECK(server.Stop().ok());
  std::vector<std::string> retry = ZRange("retry");
  REQUIRE(retry.size() == 1);
  INFO("retry entry: " << retry[0]);
  CHECK(retry[0].find(R"("args":)" + args + ",") != std::string::npos);
}

// ---------------------------------------------------------------------------
// 3. A mixed fleet.

namespace {

// Short liveness settings, so that the survivor recovers within seconds.
constexpr const char* kTtl = "1";
constexpr const char* kHeartbeat = "0.25";
constexpr const char* kJanitor = "0.5";

std::string IdentityOf(RedisFixture& fixture, pid_t pid) {
  std::string found;
  WaitUntil([&] {
    for (const std::string& id : fixture.SMembers("processes")) {
      if (id.find(":" + std::to_string(pid) + ":") != std::string::npos) found = id;
    }
    return !found.empty();
  });
  return found;
}

void MixedFleet(RedisFixture& fixture, const std::string& fetch) {
  constexpr int kPerSide = 1000;
  constexpr int kMillis = 10;
  ScratchDir dir;

  // Half the jobs from Ruby, half from the C++ client, one queue.
  std::set<std::string> pushed;
  const std::string ruby_pushed = dir / "ruby-pushed.json";
  RunRuby({InteropFile("jobs_push.rb"), fixture.server().Url(), ruby_pushed, "fleet",
           std::to_string(kPerSide), std::to_string(kMillis)});
  rapidjson::Document ruby_jobs = ParseJson(ReadFile(ruby_pushed));
  for (const auto& job : ruby_jobs["jobs"].GetArray()) pushed.insert(String(job["jid"]));
  auto client = Client::Open(fixture.options());
  REQUIRE_MESSAGE(client.ok(), client.status().ToString());
  std::vector<Job> jobs(kPerSide);
  for (int i = 0; i < kPerSide; ++i) {
    jobs[i].job_class = "RecordJob";
    jobs[i].args = "[\"rq-" + std::to_string(i) + "\"," + std::to_string(kMillis) + "]";
    jobs[i].queue = "fleet";
  }
  std::vector<std::string> jids = AcceptedJids((*client)->PushBulk(jobs));
  pushed.insert(jids.begin(), jids.end());
  REQUIRE(pushed.size() == 2 * kPerSide);
  REQUIRE(fixture.Integer({"LLEN", "queue:fleet"}) == 2 * kPerSide);

  // Sidekiq first: gitlab's fetch sleeps 5 s each time it finds the queue
  // empty, so it must start while there is work.
  const std::string ruby_record = dir / "ruby.jsonl";
  SidekiqProcess sidekiq(fixture.server(), dir, fetch, "fleet", ruby_record);
  bool started = PollUntil(
      [&] { return ReadJsonLines(ruby_record).size() >= 20 || !sidekiq.process().running(); },
      20s);
  INFO("sidekiq log:\n" << sidekiq.Log());
  REQUIRE(sidekiq.process().running());
  REQUIRE(started);

  std::vector<std::unique_ptr<ChildProcess>> workers;
  std::vector<std::string> logs;
  for (int i = 0; i < 2; ++i) {
    logs.push_back(dir / ("worker" + std::to_string(i) + ".jids"));
    workers.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{BuildPath("RELIABLEQ_BIN"), "worker", "--redis",
                                 fixture.server().Url(), "-r", BuildPath("RELIABLEQ_DEMO_PLUGIN"),
                                 "-q", "fleet", "-c", "5", "-t", "3", "--heartbeat-ttl", kTtl,
                                 "--heartbeat-interval", kHeartbeat, "--janitor-interval",
                                 kJanitor},
        std::vector<std::string>{"RELIABLEQ_DEMO_LOG=" + logs.back()},
        dir / ("worker" + std::to_string(i) + ".log")));
  }
  ChildProcess& victim = *workers[0];
  ChildProcess& survivor = *workers[1];
  const std::string victim_id = IdentityOf(fixture, victim.pid());
  REQUIRE_FALSE(victim_id.empty());
  REQUIRE(WaitUntil([&] { return CountLines(logs[0]).size() >= 50; }, 20s));
  victim.Signal(SIGKILL);
  REQUIRE(victim.Wait(5s));
  auto killed_at = std::chrono::steady_clock::now();
  // What it held when it died: the only jobs that may run twice.
  const std::string orphan_list = Keys().Working(victim_id, "fleet");
  std::set<std::string> orphaned;
  for (const std::string& payload : fixture.LRange(orphan_list)) {
    orphaned.insert(String(ParseJson(payload)["jid"]));
  }
  INFO("jobs held by the killed worker: " << orphaned.size());
  CHECK_FALSE(orphaned.empty());
  // The survivor's janitor hands them back within heartbeat ttl + janitor
  // interval (plus scheduling slack); Sidekiq's processes never would.
  REQUIRE(WaitUntil([&] { return fixture.Integer({"LLEN", orphan_list}) == 0; }, 15s));
  double recovery =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  CHECK(recovery < std::stod(kTtl) + std::stod(kJanitor) + 2.0);

  auto runs = [&] {
    std::map<std::string, int> all;
    std::map<std::string, int> ruby;
    for (const auto& line : ReadJsonLines(ruby_record)) ++ruby[String(line["jid"])];
    for (const auto& side : {ruby, CountLines(logs[0]), CountLines(logs[1])}) {
      for (const auto& [jid, n] : side) all[jid] += n;
    }
    return std::make_tuple(all, ruby, CountLines(logs[0]), CountLines(logs[1]));
  };
  bool drained = PollUntil(
      [&] {
        return fixture.Integer({"LLEN", "queue:fleet"}) == 0 &&
               fixture.Integer({"LLEN", orphan_list}) == 0 &&
               std::get<0>(runs()).size() >= pushed.size();
      },
      60s);
  CHECK(drained);
  CHECK(ExitedCleanly(StopProcess(survivor, 10s)));
  CHECK(ExitedCleanly(sidekiq.Stop()));

  auto [all, ruby, by_victim, by_survivor] = runs();
  MESSAGE("ran by Sidekiq (" << fetch << "): " << ruby.size() << ", by the killed worker: "
                             << by_victim.size() << ", by the survivor: " << by_survivor.size()
                             << "; held by the killed worker: " << orphaned.size());
  size_t lost = 0, twice = 0, unexplained = 0, unknown = 0;
  for (const std::string& jid : pushed) {
    if (all.count(jid) == 0) ++lost;
  }
  for (const auto& [jid, n] : all) {
    if (pushed.count(jid) == 0) ++unknown;
    if (n > 1) ++twice;
    if (n > 1 && (n > 2 || orphaned.count(jid) == 0)) ++unexplained;
  }
  MESSAGE("run twice: " << twice << " (at most the " << orphaned.size() << " held)");
  CHECK(lost == 0);
  CHECK(unknown == 0);
  CHECK(unexplained == 0);  // a second run only for a job the killed worker held
  CHECK(ruby.size() > 0);
  CHECK(by_victim.size() > 0);
  CHECK(by_survivor.size() > 0);

  // Nothing left anywhere, and no trace of the dead process in the
  // records Sidekiq's Web UI reads.
  CHECK(fixture.Integer({"LLEN", "queue:fleet"}) == 0);
  std::vector<std::string> held = NonEmptyWorkingLists(fixture);
  CHECK_MESSAGE(held.empty(), "jobs still held in " << Join(held));
  CHECK(fixture.Integer({"ZCARD", "schedule"}) == 0);
  CHECK(fixture.Integer({"ZCARD", "retry"}) == 0);
  CHECK(fixture.Integer({"ZCARD", "dead"}) == 0);
  CHECK(fixture.SMembers("processes").empty());
  CHECK(Counter(fixture, Keys().Failed()) == 0);
}

}  // namespace

TEST_CASE_FIXTURE(RedisFixture,
                  "a mixed fleet (Sidekiq with gitlab's reliable fetch, two reliableq workers) "
                  "runs every job; a SIGKILLed worker's jobs are recovered") {
  MixedFleet(*this, "gitlab");
}

TEST_CASE_FIXTURE(RedisFixture,
                  "a mixed fleet (Sidekiq with BasicFetch, two reliableq workers) runs every "
                  "job; a SIGKILLed worker's jobs are recovered") {
  MixedFleet(*this, "basic");
}

// ---------------------------------------------------------------------------
// 4. Sidekiq 8 payloads (data contract section 6).

namespace {

long long NowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

TEST_CASE_FIXTURE(RedisFixture,
                  "Sidekiq 8 jobs (millisecond timestamps, Sidekiq::ActiveJob::Wrapper) run in "
                  "reliableq") {
  const std::string ms = std::to_string(NowMillis());
  // What Sidekiq 8's client writes: integer milliseconds, and ActiveJob's
  // wrapper under its new name.
  const std::string active_job =
      std::string(R"({"retry":true,"queue":"interop","class":")") + kActiveJobWrapper8 +
      R"(","wrapped":"GreetingJob","args":[{"job_class":"GreetingJob",)"
      R"("job_id":"5b4d1c9e-0000-4000-8000-000000000001","arguments":["Ada"]}],)"
      R"("jid":"a00000000000000000000001","created_at":)" + ms + R"(,"enqueued_at":)" + ms + "}";
  const std::string scheduled =
      R"({"retry":true,"queue":"interop","class":"InteropJob","args":["later"],)"
      R"("jid":"a00000000000000000000002","created_at":)" + ms + "}";
  Run({"LPUSH", "queue:interop", active_job});
  Run({"SADD", "queues", "interop"});
  char due[32];
  std::snprintf(due, sizeof(due), "%.6f", NowSeconds() + 0.3);
  Run({"ZADD", "schedule", due, scheduled});

  Recorder recorder;
  HandlerRegistry registry;
  registry.Register("InteropJob", recorder.handler());
  registry.Register(kActiveJobWrapper, recorder.handler());
  registry.Register(kActiveJobWrapper8, recorder.handler());
  RunningServer server(InteropServerOptions(options(), {{"interop", 0}}, kConcurrency),
                       std::move(registry));
  REQUIRE(WaitUntil([&] { return recorder.size() >= 2 && Counter(*this, Keys().Processed()) >= 2; },
                    10s));
  CHECK(server.Stop().ok());
  std::map<std::string, SeenJob> seen;
  for (SeenJob& job : recorder.jobs()) seen[job.jid] = job;
  REQUIRE(seen.size() == 2);
  const SeenJob& wrapped = seen["a00000000000000000000001"];
  CHECK(wrapped.job_class == kActiveJobWrapper8);
  CHECK(wrapped.wrapped == std::optional<std::string>("GreetingJob"));
  CHECK(wrapped.raw == active_job);
  // Promoted: the poller's enqueued_at is float seconds, which Sidekiq 8
  // reads as seconds; the client's integer milliseconds stay as they were.
  const std::string& promoted = seen["a00000000000000000000002"].raw;
  INFO("promoted payload: " << promoted);
  CHECK(promoted.find(R"("created_at":)" + ms + ",") != std::string::npos);
  rapidjson::Document doc = ParseJson(promoted);
  REQUIRE(doc.HasMember("enqueued_at"));
  CHECK(doc["enqueued_at"].IsDouble());
  CHECK(doc["enqueued_at"].GetDouble() > 1e9);
  CHECK(doc["enqueued_at"].GetDouble() < 1e11);
  CHECK(Integer({"LLEN", "queue:interop"}) == 0);
  CHECK(Integer({"ZCARD", "schedule"}) == 0);
  CHECK(Counter(*this, Keys().Failed()) == 0);
}

TEST_CASE_FIXTURE(RedisFixture,
                  "retry_for counts from Sidekiq 8's failed_at in milliseconds as from 7's in "
                  "seconds") {
  // Both first failed two minutes ago and may be retried for one minute:
  // their retries are used up, and the next failure sends them to the dead
  // set, whichever Sidekiq version recorded the first failure.
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.6f", NowSeconds() - 120);
  const std::string millis = std::to_string(NowMillis() - 120000);
  auto job = [](const std::string& jid, const std::string& failed_at) {
    return R"({"retry":true,"queue":"interop","class":"FailingJob","args":[],"jid":")" + jid +
           R"(","created_at":1700000000.5,"enqueued_at":1700000000.5,"retry_for":60,)"
           R"("retry_count":0,"failed_at":)" + failed_at +
           R"(,"error_message":"first","error_class":"RuntimeError"})";
  };
  Run({"LPUSH", "queue:interop", job("b00000000000000000000007", seconds),
       job("b00000000000000000000008", millis)});
  HandlerRegistry registry;
  registry.Register("FailingJob",
                    [](const JobView&) { throw std::runtime_error("failed again"); });
  RunningServer server(InteropServerOptions(options(), {{"interop", 0}}, kConcurrency),
                       std::move(registry));
  REQUIRE(WaitUntil([&] { return Integer({"ZCARD", "retry"}) + Integer({"ZCARD", "dead"}) == 2; },
                    10s));
  CHECK(server.Stop().ok());
  std::string dead;
  for (const std::string& entry : ZRange("dead")) dead += entry + "\n";
  INFO("dead: " << dead);
  INFO("retry: " << Join(ZRange("retry")));
  CHECK(dead.find("b00000000000000000000007") != std::string::npos);
  CHECK(dead.find("b00000000000000000000008") != std::string::npos);
  CHECK(Integer({"ZCARD", "retry"}) == 0);
}
