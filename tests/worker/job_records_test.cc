// Job records and progress (reliableq(1), JOB RECORDS; reliableq-schema(7),
// "Job records"), with real worker processes: the final record each end of
// a job's life writes, with the result of each handler kind (a C++ handler,
// a command's result line, an HTTP body), its retention by Redis TTL, the
// classes that keep none; and a command's progress, in Sidekiq's work hash
// while the job runs and in its record after.

#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include <string>
#include <vector>

#include "worker/outcomes_fixture.h"

using namespace reliableq;
using namespace reliableq::testing;
using namespace std::chrono_literals;

namespace {

rapidjson::Document Parsed(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  return doc;
}

std::string Text(const rapidjson::Value& object, const char* name) {
  auto it = object.FindMember(name);
  return it != object.MemberEnd() && it->value.IsString() ? it->value.GetString() : "<absent>";
}

class RecordsFixture : public OutcomesFixture {
 public:
  // Pushes one job and waits (bounded) until it has left queue, working
  // list and every set but dead; returns its jid.
  std::string RunToEnd(const std::string& job_class, const std::string& args = "[]") {
    Job job;
    job.job_class = job_class;
    job.args = args;
    std::string jid = AcceptedJid(client_->Push(job));
    bool ended = WaitUntil([&] { return Exists("reliableq:job:" + jid); }, 15s);
    CHECK_MESSAGE(ended, (job_class + ": no record"));
    return jid;
  }

  // The record of `jid`, parsed; an empty object when there is none.
  rapidjson::Document Record(const std::string& jid) {
    std::string text = Get("reliableq:job:" + jid);
    return Parsed(text.empty() ? "{}" : text);
  }
};

}  // namespace

TEST_CASE_FIXTURE(RecordsFixture,
                  "each end of a job's life keeps its record, with the result of every handler "
                  "kind, for its class's retention") {
  std::string url = StartHttpServer();
  std::vector<std::string> args = {
      "-r",
      BuildPath("RELIABLEQ_DEMO_PLUGIN"),
      "--exec",
      "CmdJob=" + Script("cmd", "echo 'result {\"charge\": \"ch_9\"}' >&3"),
      "--exec",
      "CardJob=" + Script("card", "echo 'dead the card was refused' >&3"),
      "--exec",
      "ShortJob=" + Script("short", "true"),
      "--exec",
      "OffJob=" + Script("off", "true"),
      "--exec",
      "BigJob=" + Script("big", "printf 'result \"%01200d\"\\n' 0 >&3"),
      "--http-handler",
      "HookJob=" + url + "/status/200",
      "--records",
      "3600",
      "--record",
      "ShortJob=1",
      "--record",
      "OffJob=0",
      "--record-max-bytes",
      "1024"};
  StartWorker(args);
  double before = Now();

  SUBCASE("a C++ handler's result, the record's fields") {
    std::string jid = RunToEnd("PaymentJob", "[\"order-1\", 1250]");
    rapidjson::Document record = Record(jid);
    CHECK(Text(record, "state") == "done");
    CHECK(Text(record, "jid") == jid);
    CHECK(Text(record, "class") == "PaymentJob");
    CHECK(Text(record, "queue") == "default");
    CHECK(Text(record, "process").find(':') != std::string::npos);
    CHECK(record["attempts"].GetInt() == 1);
    CHECK(record["started_at"].GetDouble() >= before);
    CHECK(record["at"].GetDouble() >= record["started_at"].GetDouble());
    CHECK(record["at"].GetDouble() <= Now());
    CHECK(Text(record["result"], "charge") == "ch_" + jid);
    CHECK(record["result"]["amount_cents"].GetInt() == 1250);
    // A done job keeps its arguments, not its whole payload.
    CHECK(record["args"][1].GetInt() == 1250);
    CHECK_FALSE(record.HasMember("job"));
    CHECK_FALSE(record.HasMember("error_class"));
    // The class's retention, as a Redis TTL.
    long long ttl = Integer({"TTL", "reliableq:job:" + jid});
    CHECK(ttl > 3500);
    CHECK(ttl <= 3600);
  }
  SUBCASE("a command's result line and an HTTP body") {
    rapidjson::Document command = Record(RunToEnd("CmdJob"));
    CHECK(Text(command["result"], "charge") == "ch_9");
    // Not JSON: kept as a JSON string.
    rapidjson::Document hook = Record(RunToEnd("HookJob"));
    CHECK(Text(hook, "state") == "done");
    CHECK(Text(hook, "result") == "status 200");
  }
  SUBCASE("dead: the error, no result; a result over the cap: its size") {
    rapidjson::Document card = Record(RunToEnd("CardJob"));
    CHECK(Text(card, "state") == "dead");
    CHECK(Text(card, "error_class") == "Reliableq::CommandFailed");
    CHECK(Text(card, "error_message").find("the card was refused") != std::string::npos);
    CHECK(Text(card["job"], "error_class") == "Reliableq::CommandFailed");
    CHECK_FALSE(card.HasMember("result"));
    std::string big_jid = RunToEnd("BigJob");
    std::string big = Get("reliableq:job:" + big_jid);
    CHECK(big.size() <= 1024);
    rapidjson::Document parsed = Parsed(big);
    CHECK(parsed["result_bytes"].GetInt() == 1202);
    CHECK_FALSE(parsed.HasMember("result"));
    CHECK(parsed["args"].IsArray());
  }
  SUBCASE("a class's own retention expires its records; a class with 0 keeps none") {
    std::string short_jid = RunToEnd("ShortJob");
    CHECK(Integer({"PTTL", "reliableq:job:" + short_jid}) <= 1000);
    Job off;
    off.job_class = "OffJob";
    off.args = "[]";
    std::string off_jid = AcceptedJid(client_->Push(off));
    REQUIRE(WaitUntil([&] { return Get("stat:processed") == "2"; }, 10s));
    CHECK(WaitUntil([&] { return !Exists("reliableq:job:" + short_jid); }, 3s));
    CHECK_FALSE(Exists("reliableq:job:" + off_jid));
  }
}

TEST_CASE_FIXTURE(RecordsFixture,
                  "a command's progress reaches its work hash within about a second, without "
                  "waiting for the next beat, and ends in its record") {
  // Beats every 5 s: progress shows only if it brings a beat forward.
  StartWorker({"--heartbeat-ttl", "15", "--exec",
               "CopyJob=" + Script("copy",
                                   "echo 'progress 40 copying 4 of 10' >&3; sleep 3; "
                                   "echo 'progress 90' >&3; sleep 0.5"),
               "--exec", "OtherJob=" + Script("other", "true"), "--record", "CopyJob=60"},
              "5");
  // Registered (its first beat) before the job comes, so that the job's
  // start is not itself a first beat.
  REQUIRE(WaitUntil([&] { return SMembers("processes").size() == 1; }, 10s));
  std::string identity = SMembers("processes")[0];
  Job job;
  job.job_class = "CopyJob";
  job.args = "[]";
  std::string jid = AcceptedJid(client_->Push(job));
  double pushed = Now();
  rapidjson::Document work;
  bool shown = WaitUntil(
      [&] {
        auto all = redis().Command({"HVALS", identity + ":work"});
        if (!all.ok() || (*all)->elements != 1) return false;
        work = Parsed(std::string((*all)->element[0]->str, (*all)->element[0]->len));
        return work.HasMember("progress");
      },
      3s);
  REQUIRE_MESSAGE(shown, "no progress in the work hash");
  // Within the job's first 3 s, long before the next regular beat.
  CHECK(Now() - pushed < 3);
  CHECK(work["progress"]["percent"].GetDouble() == 40);
  CHECK(Text(work["progress"], "message") == "copying 4 of 10");
  CHECK(Text(work, "payload").find(jid) != std::string::npos);
  REQUIRE(WaitUntil([&] { return Exists("reliableq:job:" + jid); }, 10s));
  rapidjson::Document record = Record(jid);
  CHECK(record["progress"]["percent"].GetDouble() == 90);
  CHECK_FALSE(record["progress"].HasMember("message"));
  // A class without records keeps none.
  Job other;
  other.job_class = "OtherJob";
  other.args = "[]";
  std::string other_jid = AcceptedJid(client_->Push(other));
  REQUIRE(WaitUntil([&] { return Get("stat:processed") == "2"; }, 10s));
  CHECK_FALSE(Exists("reliableq:job:" + other_jid));
}

TEST_CASE_FIXTURE(RecordsFixture,
                  "one job through schedule, queue, run, retry, dead, retry from dead and done: "
                  "reliableq job tells each state") {
  const std::string bin = BuildPath("RELIABLEQ_BIN");
  // What `reliableq job` says of the job now: its --json state.
  std::string jid;
  auto state = [&] {
    CommandResult found = RunCommand({bin, "--redis", server().Url(), "job", jid, "--json"});
    rapidjson::Document doc = Parsed(found.out.empty() ? "{}" : found.out);
    return Text(doc, "state");
  };
  auto cli = [&](std::vector<std::string> words) {
    std::vector<std::string> argv = {bin, "--redis", server().Url()};
    argv.insert(argv.end(), words.begin(), words.end());
    CommandResult done = RunCommand(argv);
    CHECK_MESSAGE(done.exit_code == 0, done.err);
    return done.out;
  };
  // The handler: progress, then it waits for the test's word in `control`:
  // "fail", "dead" or "ok" (with a result).
  std::string control = dir_ + "/control";
  std::string handler =
      Script("flaky",
             "echo 'progress 25 charging' >&3\n"
             "for i in $(seq 1 100); do [ -s " +
                 control +
                 " ] && break; sleep 0.1; done\n"
                 "word=$(cat " +
                 control + "); : > " + control +
                 "\n"
                 "[ \"$word\" = dead ] && { echo 'dead the card was refused' >&3; exit 1; }\n"
                 "[ \"$word\" = ok ] || { echo 'fail the gateway said no' >&3; exit 1; }\n"
                 "echo 'result {\"charge\": \"ch_42\"}' >&3");

  jid = cli({"push", "FlakyJob", "[7]", "--in", "3600", "--retry", "1"});
  jid = jid.substr(0, jid.find('\n'));
  CHECK(state() == "scheduled");
  cli({"scheduled", "retry", jid});  // Sidekiq's "Add to queue"
  CHECK(state() == "queued");

  StartWorker({"--exec", "FlakyJob=" + handler, "--records", "3600"}, "0.25");
  CHECK(WaitUntil([&] { return state() == "running"; }, 10s));
  // Its progress, within about a second.
  CHECK(WaitUntil(
      [&] {
        CommandResult running = RunCommand({bin, "--redis", server().Url(), "job", jid});
        return running.out.find("charging") != std::string::npos;
      },
      5s));

  std::ofstream(control) << "fail";
  CHECK(WaitUntil([&] { return state() == "retry"; }, 10s));
  cli({"retries", "retry", jid});  // runs again at once, and fails for good
  CHECK(WaitUntil([&] { return state() == "running"; }, 10s));
  std::ofstream(control) << "dead";
  CHECK(WaitUntil([&] { return state() == "dead"; }, 10s));
  // The record of its death, beside its place in the dead set.
  std::string dead_json = RunCommand({bin, "--redis", server().Url(), "job", jid, "--json"}).out;
  rapidjson::Document dead = Parsed(dead_json);
  REQUIRE_MESSAGE(dead["last_end"].IsObject(), dead_json);
  CHECK(Text(dead["last_end"], "state") == "dead");
  CHECK(Text(dead["last_end"], "error_message") == "the card was refused");

  cli({"dead", "retry", jid});
  CHECK(WaitUntil([&] { return state() == "running"; }, 10s));
  std::ofstream(control) << "ok";
  CHECK(WaitUntil([&] { return state() == "done"; }, 10s));
  CommandResult done = RunCommand({bin, "--redis", server().Url(), "job", jid, "--json"});
  CHECK(done.exit_code == 0);
  rapidjson::Document doc = Parsed(done.out);
  REQUIRE(doc.HasMember("record"));
  CHECK(Text(doc["record"]["result"], "charge") == "ch_42");
  // Sidekiq's count: each retry by hand (retries retry, dead retry) gave
  // one back, so retry_count was -1 in the payload that succeeded.
  CHECK(doc["record"]["attempts"].GetInt() == 1);
  CHECK(doc["record"]["args"][0].GetInt() == 7);
  // Gone with its record: unknown, exit 1.
  Run({"DEL", "reliableq:job:" + jid});
  CommandResult gone = RunCommand({bin, "--redis", server().Url(), "job", jid});
  CHECK(gone.exit_code == 1);
  CHECK(state() == "unknown");
}
