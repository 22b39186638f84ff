// How command and HTTP handlers end their jobs (reliableq(1), OUTCOMES),
// with real worker processes: an HTTP server (tests/support/
// outcome_http_server.py) answering each status of the table, a hang and a
// reset; and shell scripts writing every verb of the outcome channel on
// fd 3. Each job is run alone and checked where it ends (gone, schedule,
// retry or dead), with its retry_count, its score and the counters
// stat:processed and stat:failed.

#include <string>

#include "worker/outcomes_fixture.h"

using namespace reliableq;
using namespace reliableq::testing;
using namespace std::chrono_literals;

namespace {

// Checks that `ending` is a failure retried with the class's backoff
// (Sidekiq's: 15 to 24 s after a first failure), with this error_class.
void CheckRetried(const Ending& ending, const std::string& error_class) {
  CHECK(ending.place == "retry");
  CHECK(Field(ending.payload, "retry_count") == "0");
  CHECK(Field(ending.payload, "error_class") == error_class);
  CHECK(ending.ScoredWithin(15, 25));
  CHECK(ending.processed == 1);
  CHECK(ending.failed == 1);
}

// A snooze: in schedule `seconds` later, no retry spent, nothing failed.
void CheckSnoozed(const Ending& ending, double low, double high) {
  CHECK(ending.place == "schedule");
  CHECK(ending.ScoredWithin(low, high));
  CHECK(Field(ending.payload, "retry_count") == "<absent>");
  CHECK(Field(ending.payload, "error_class") == "<absent>");
  CHECK(Field(ending.payload, "snooze_count") == "1");
  CHECK(ending.processed == 1);
  CHECK(ending.failed == 0);
}

}  // namespace

TEST_CASE_FIXTURE(OutcomesFixture, "HTTP answers decide: each status of the table ends its job") {
  const std::string url = StartHttpServer();
  std::vector<std::string> handlers = {"H200=/status/200",
                                       "H400=/status/400",
                                       "H404=/status/404",
                                       "H410=/status/410",
                                       "H422=/status/422",
                                       "H429=/status/429",
                                       "H503=/status/503",
                                       "H503Date=/status/503-date",
                                       "H503Bad=/status/503-bad",
                                       "H302=/status/302",
                                       "Hang=/hang",
                                       "Reset=/reset",
                                       "Once429=/once/429"};
  std::vector<std::string> args = {"--job-timeout",        "Hang=1",
                                   "--http-client-errors", "H410=discard",
                                   "--http-client-errors", "H422=retry"};
  for (const std::string& handler : handlers) {
    size_t equals = handler.find('=');
    args.push_back("--http-handler");
    args.push_back(handler.substr(0, equals + 1) + url + handler.substr(equals + 1));
  }
  StartWorker(args);

  SUBCASE("2xx: done") {
    Ending ending = RunOne("H200", "gone");
    CHECK(ending.place == "gone");
    CHECK(ending.processed == 1);
    CHECK(ending.failed == 0);
    // The body is the result, kept in the job's record (job_records_test.cc)
    // and nowhere else.
    CHECK(LogLines({ending.jid, "status 200"}).empty());
  }
  SUBCASE("400 and 404: dead at once, whatever retries are left") {
    for (std::string job_class : {"H400", "H404"}) {
      CAPTURE(job_class);
      Ending ending = RunOne(job_class, "dead");
      CHECK(ending.place == "dead");
      CHECK(Field(ending.payload, "error_class") == "Reliableq::HttpFailed");
      std::string status = job_class.substr(1);
      CHECK(Field(ending.payload, "error_message") == "HTTP " + status + ": status " + status);
      CHECK(Field(ending.payload, "retry_count") == "0");
      CHECK(ending.ScoredWithin(0, 0));  // the dead set's score: when it died
      CHECK(ending.processed == 1);
      CHECK(ending.failed == 1);
    }
  }
  SUBCASE("410 with --http-client-errors H410=discard: dropped, counted as failed") {
    Ending ending = RunOne("H410", "gone");
    CHECK(ending.place == "gone");
    CHECK(ending.processed == 1);
    CHECK(ending.failed == 1);
  }
  SUBCASE("422 with --http-client-errors H422=retry: retried with the class's backoff") {
    CheckRetried(RunOne("H422", "retry"), "Reliableq::HttpFailed");
  }
  SUBCASE("429 with Retry-After: 2 is a snooze of 2 s") {
    CheckSnoozed(RunOne("H429", "schedule"), 2, 2);
  }
  SUBCASE("503 with Retry-After as an HTTP date is a snooze until that date") {
    // The date has whole seconds: 3 s ahead is 2 to 3 s ahead.
    CheckSnoozed(RunOne("H503Date", "schedule"), 2, 3);
  }
  SUBCASE("503 without Retry-After, or with one that is neither form: retried as a failure") {
    Ending ending = RunOne("H503", "retry");
    CheckRetried(ending, "Reliableq::HttpFailed");
    CHECK(Field(ending.payload, "error_message") == "HTTP 503: status 503");
    CheckRetried(RunOne("H503Bad", "retry"), "Reliableq::HttpFailed");
    CHECK(LogLines({"WARN: Retry-After 'soon' is neither seconds nor an HTTP date"}).size() == 1);
  }
  SUBCASE("a redirect not followed: retried as a failure") {
    Ending ending = RunOne("H302", "retry");
    CheckRetried(ending, "Reliableq::HttpFailed");
    CHECK(Field(ending.payload, "error_message").find("HTTP 302") == 0);
  }
  SUBCASE("no answer within the job's timeout: Reliableq::JobTimeout, retried") {
    Ending ending = RunOne("Hang", "retry");
    CheckRetried(ending, "Reliableq::JobTimeout");
    CHECK(Field(ending.payload, "error_message").find("timed out after 1 s") == 0);
  }
  SUBCASE("a connection reset: Reliableq::HttpUnreachable, retried") {
    Ending ending = RunOne("Reset", "retry");
    CheckRetried(ending, "Reliableq::HttpUnreachable");
  }
  SUBCASE("a snoozed job runs again after its delay and then succeeds, no retry spent") {
    long long processed = Counter("stat:processed");
    Job job;
    job.job_class = "Once429";
    job.args = "[]";
    std::string jid = AcceptedJid(client_->Push(job));
    REQUIRE(WaitUntil([&] { return Counter("stat:processed") == processed + 2; }, 10s));
    CHECK(Counter("stat:failed") == 0);
    CHECK(Locate(jid).place == "gone");
    CHECK(ReadFile(dir_ + "/requests") == "/once/429 " + jid + "\n/once/429 " + jid + "\n");
  }
}

TEST_CASE_FIXTURE(OutcomesFixture, "a command handler ends its job with its fd 3 outcome line") {
  std::vector<std::pair<std::string, std::string>> scripts = {
      {"Snooze", "echo 'snooze 2' >&3"},
      {"Retry", "echo 'retry 300 the gateway is busy' >&3; exit 1"},
      {"Discard", "echo 'discard the order was deleted' >&3"},
      {"Dead", "echo 'dead the card was refused' >&3"},
      {"Fail", "echo 'fail it broke' >&3; exit 0"},
      {"FailBare", "echo 'boom' >&2; echo fail >&3"},
      {"Result", "echo 'result {\"charged\": 1200}' >&3; echo 'progress 50' >&3"},
      {"Log", "printf 'log warn cache \\033[31mcold\\n' >&3; echo 'log debug detail' >&3"},
      {"Bad", "echo 'succeed please' >&3; echo 'snooze -1' >&3; exit 0"},
      {"Long", "head -c 70000 /dev/zero | tr '\\0' x >&3; echo >&3; exit 0"},
      {"LastWins", "echo 'dead no' >&3; echo 'log info between' >&3; echo 'snooze 2' >&3; exit 1"},
      {"Silent", "echo 'on stderr' >&2; exit 3"},
      {"Timeout", "echo 'snooze 1' >&3; exec sleep 30"},
  };
  std::vector<std::string> args = {"--job-timeout", "Timeout=0.5"};
  for (const auto& [job_class, body] : scripts) {
    args.push_back("--exec");
    args.push_back(job_class + "=" + Script(job_class + ".sh", body));
  }
  StartWorker(args);

  SUBCASE("snooze 2: in schedule 2 s later, no retry spent, not failed") {
    CheckSnoozed(RunOne("Snooze", "schedule"), 2, 2);
  }
  SUBCASE("retry 300 MESSAGE, with exit 1: retried after 300 s (plus jitter), the line winning") {
    Ending ending = RunOne("Retry", "retry");
    CHECK(ending.place == "retry");
    CHECK(Field(ending.payload, "retry_count") == "0");
    CHECK(Field(ending.payload, "error_class") == "Reliableq::CommandFailed");
    CHECK(Field(ending.payload, "error_message") == "the gateway is busy");
    CHECK(ending.ScoredWithin(300, 310));
    CHECK(ending.processed == 1);
    CHECK(ending.failed == 1);
  }
  SUBCASE("discard MESSAGE: dropped, counted as failed") {
    Ending ending = RunOne("Discard", "gone");
    CHECK(ending.place == "gone");
    CHECK(ending.processed == 1);
    CHECK(ending.failed == 1);
  }
  SUBCASE("dead MESSAGE: to the dead set now") {
    Ending ending = RunOne("Dead", "dead");
    CHECK(ending.place == "dead");
    CHECK(Field(ending.payload, "error_class") == "Reliableq::CommandFailed");
    CHECK(Field(ending.payload, "error_message") == "the card was refused");
    CHECK(Field(ending.payload, "retry_count") == "0");
    CHECK(ending.processed == 1);
    CHECK(ending.failed == 1);
  }
  SUBCASE("fail MESSAGE with exit 0: a failure retried with the class's backoff") {
    Ending ending = RunOne("Fail", "retry");
    CheckRetried(ending, "Reliableq::CommandFailed");
    CHECK(Field(ending.payload, "error_message") == "it broke");
    // Without a message: the verb, then stderr's tail.
    ending = RunOne("FailBare", "retry");
    CheckRetried(ending, "Reliableq::CommandFailed");
    CHECK(Field(ending.payload, "error_message") == "the program said fail; stderr: boom");
  }
  SUBCASE("result and progress: the job done, neither taken for an outcome nor logged") {
    Ending ending = RunOne("Result", "gone");
    CHECK(ending.processed == 1);
    CHECK(ending.failed == 0);
    // They go to the job's record and work hash (job_records_test.cc).
    CHECK(LogLines({ending.jid, "charged"}).empty());
    CHECK(LogLines({ending.jid, "outcome channel"}).empty());
  }
  SUBCASE("log LEVEL TEXT: a worker line at that level, escaped, in the job's context") {
    Ending ending = RunOne("Log", "gone");
    CHECK(ending.failed == 0);
    std::vector<std::string> warn = LogLines({"class=Log", "jid=" + ending.jid, "WARN: cache "});
    REQUIRE(warn.size() == 1);
    CHECK(warn[0].find("cache \\x1b[31mcold") != std::string::npos);
    CHECK(warn[0].find('\x1b') == std::string::npos);
    CHECK(LogLines({"jid=" + ending.jid, "DEBUG: detail"}).size() == 1);
  }
  SUBCASE("unknown verbs, bad numbers and lines above 64 KiB: warned, escaped, ignored") {
    Ending bad = RunOne("Bad", "gone");
    CHECK(bad.processed == 1);
    CHECK(bad.failed == 0);
    CHECK(LogLines({bad.jid, "WARN: outcome channel: ignored an unknown verb: 'succeed please'"})
              .size() == 1);
    CHECK(LogLines({bad.jid, "WARN: outcome channel: ignored snooze needs SECONDS"}).size() == 1);
    Ending long_line = RunOne("Long", "gone");
    CHECK(long_line.failed == 0);
    CHECK(LogLines({long_line.jid, "ignored a line of 70000 bytes, above the 65536 allowed"})
              .size() == 1);
  }
  SUBCASE("the last outcome line wins, over an exit status too") {
    CheckSnoozed(RunOne("LastWins", "schedule"), 2, 2);
  }
  SUBCASE("no outcome line: the exit status decides, as before") {
    Ending ending = RunOne("Silent", "retry");
    CheckRetried(ending, "Reliableq::CommandFailed");
    CHECK(Field(ending.payload, "error_message") == "exited with status 3; stderr: on stderr");
  }
  SUBCASE("the timeout wins over any line") {
    Ending ending = RunOne("Timeout", "retry");
    CheckRetried(ending, "Reliableq::JobTimeout");
  }
}
