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
    CHECK(record["job"]["args"][1].GetInt() == 1250);
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
    CHECK(Text(parsed["job"], "jid") == big_jid);
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
