// The worker's config file (src/cli/config_file.h): YAML to option values,
// and every mistake named with file, line and key.

#include "cli/config_file.h"

#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <string>

#include "cli/handler_options.h"
#include "cli/retry_options.h"

using reliableq::cli::ConfigEntry;
using reliableq::cli::ParseConfig;

namespace {

std::map<std::string, std::string> environment = {
    {"REDIS_HOST", "redis.internal"}, {"EMPTY", ""}, {"SECRET", "p$ss"}};

reliableq::cli::EnvironmentLookup Lookup() {
  return [](std::string_view name) -> std::optional<std::string> {
    auto it = environment.find(std::string(name));
    if (it == environment.end()) return std::nullopt;
    return it->second;
  };
}

// The entries of `text`; fails the test when it does not parse.
std::map<std::string, std::vector<std::string>> Parse(const std::string& text) {
  auto entries = ParseConfig(text, "w.yml", Lookup());
  REQUIRE_MESSAGE(entries.ok(), entries.status().ToString());
  std::map<std::string, std::vector<std::string>> by_option;
  for (const ConfigEntry& entry : *entries) by_option[entry.option] = entry.values;
  return by_option;
}

// The one-line error for `text`.
std::string Error(const std::string& text) {
  auto entries = ParseConfig(text, "w.yml", Lookup());
  REQUIRE_FALSE(entries.ok());
  CHECK(entries.status().message().find('\n') == std::string::npos);
  return entries.status().message();
}

}  // namespace

TEST_CASE("a sidekiq.yml-shaped file becomes the options it names") {
  auto options = Parse(
      ":concurrency: 20\n"
      ":queues:\n"
      "  - [critical, 3]\n"
      "  - default\n"
      "timeout: 8.5\n"
      "require: [/opt/app/jobs.so, more.so]\n"
      "labels: [blue]\n"
      "heartbeat_ttl: 10\n"
      "redis_tls_insecure: true\n"
      "verbose: false\n"
      "http: 9394\n");
  CHECK(options["concurrency"] == std::vector<std::string>{"20"});
  CHECK(options["queue"] == std::vector<std::string>{"critical,3", "default"});
  CHECK(options["timeout"] == std::vector<std::string>{"8.5"});
  CHECK(options["require"] == std::vector<std::string>{"/opt/app/jobs.so", "more.so"});
  CHECK(options["label"] == std::vector<std::string>{"blue"});
  CHECK(options["heartbeat-ttl"] == std::vector<std::string>{"10"});
  CHECK(options["redis-tls-insecure"] == std::vector<std::string>{""});
  CHECK(options["http"] == std::vector<std::string>{"9394"});
  // false is the flag not given.
  CHECK(options.count("verbose") == 0);
  // A single value where a list is expected is a list of one.
  CHECK(Parse("require: jobs.so\n")["require"] == std::vector<std::string>{"jobs.so"});
  // An empty file sets nothing.
  CHECK(Parse("").empty());
  CHECK(Parse("# only a comment\n").empty());
}

TEST_CASE("environment variables in values") {
  CHECK(Parse("redis: redis://${REDIS_HOST}:6380/0\n")["redis"] ==
        std::vector<std::string>{"redis://redis.internal:6380/0"});
  CHECK(Parse("tag: ${MISSING:-fallback}\n")["tag"] == std::vector<std::string>{"fallback"});
  // As in the shell, :- also replaces an empty value.
  CHECK(Parse("tag: ${EMPTY:-fallback}\n")["tag"] == std::vector<std::string>{"fallback"});
  CHECK(Parse("tag: a$$b ${SECRET} $x\n")["tag"] == std::vector<std::string>{"a$b p$ss $x"});
  CHECK(Parse("queues: [\"${REDIS_HOST}\"]\n")["queue"] ==
        std::vector<std::string>{"redis.internal"});

  CHECK(Error("redis: redis://${NOPE}/0\n") ==
        "w.yml:1: key 'redis': environment variable NOPE is not set");
  CHECK(Error("tag: ${NOPE\n") == "w.yml:1: key 'tag': '${' without its '}' (write $$ for a $)");
  CHECK(Error("tag: ${1X}\n") == "w.yml:1: key 'tag': '${1X}' is not ${NAME} or ${NAME:-default}");
}

TEST_CASE("mistakes name the file, the line and the key") {
  CHECK(Error("tag: a\nconcurency: 5\n") ==
        "w.yml:2: key 'concurency': unknown (see CONFIG FILE in reliableq(1) for the keys)");
  CHECK(Error("heartbeat-ttl: 5\n") ==
        "w.yml:1: key 'heartbeat-ttl': unknown (did you mean 'heartbeat_ttl'?)");
  CHECK(Error("\n\nconcurrency: ten\n") ==
        "w.yml:3: key 'concurrency': expected a whole number, not 'ten'");
  CHECK(Error("concurrency: 2.5\n") ==
        "w.yml:1: key 'concurrency': expected a whole number, not '2.5'");
  CHECK(Error("concurrency: [1]\n") == "w.yml:1: key 'concurrency': expected a number, not a list");
  CHECK(Error("timeout: soon\n") ==
        "w.yml:1: key 'timeout': expected a number of seconds, not 'soon'");
  CHECK(Error("tag: {a: 1}\n") == "w.yml:1: key 'tag': expected a single value, not a mapping");
  CHECK(Error("verbose: yes\n") == "w.yml:1: key 'verbose': expected true or false");
  CHECK(Error("tag:\n") == "w.yml:1: key 'tag': has no value");
  CHECK(Error("tag: a\n:tag: b\n") == "w.yml:2: key 'tag': given twice");
  CHECK(Error("queues:\n  - a\n  - [b, heavy]\n") ==
        "w.yml:1: key 'queues': item at line 3: weight: expected a whole number, not 'heavy'");
  CHECK(Error("queues:\n  - [a, 1, 2]\n") ==
        "w.yml:1: key 'queues': item at line 2: expected a queue name or [name, weight]");
  CHECK(Error("labels: [[a]]\n") ==
        "w.yml:1: key 'labels': item at line 1: expected a single value");
  CHECK(Error("- concurrency\n") == "w.yml:1: expected a mapping of keys (concurrency: 10, ...)");
  CHECK(Error("concurrency: 5\n  bad: [\n").starts_with("w.yml:"));
  CHECK(Error("a: [\n").starts_with("w.yml:2: not YAML: "));
  CHECK(Error("tag: a\n---\ntag: b\n") == "w.yml:2: a second YAML document; a config file holds one");
  // YAML's own null is no value, a quoted empty string is one.
  CHECK(Error("tag: ~\n") == "w.yml:1: key 'tag': has no value");
  CHECK(Parse("tag: \"\"\n")["tag"] == std::vector<std::string>{""});
}

TEST_CASE("nesting past a small depth is refused at once, not after quadratic parsing") {
  // 100,000 levels, flow and block: refused where the 65th level opens,
  // within a fraction of a second (26 s of CPU before).
  std::string flow = "tag: " + std::string(100000, '[') + std::string(100000, ']') + "\n";
  std::string block;
  for (int level = 0; level < 100000; ++level) block += "- ";
  block += "x\n";
  for (const std::string& text : {flow, block}) {
    auto started = std::chrono::steady_clock::now();
    std::string error = Error(text);
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(1));
    CHECK_MESSAGE(error.find("nested deeper than 64 levels") != std::string::npos, error);
  }
  CHECK(Error("tag: " + std::string(64, '[') + "a" + std::string(64, ']') + "\n") ==
        "w.yml:1: nested deeper than 64 levels");
  // 64 levels are still YAML (and then the key's own mistake).
  CHECK(Error("tag: " + std::string(63, '[') + std::string(63, ']') + "\n") ==
        "w.yml:1: key 'tag': expected a single value, not a list");
}

TEST_CASE("the command line overrides the file, lists as a whole") {
  auto entries = ParseConfig("concurrency: 5\nqueues: [a, b]\ntag: file\n", "w.yml", Lookup());
  REQUIRE(entries.ok());
  auto args = reliableq::cli::ParseArgs(
      {"-c", "7", "-q", "c"},
      {{.name = "concurrency", .short_name = 'c', .takes_value = true},
       {.name = "queue", .short_name = 'q', .takes_value = true, .repeats = true},
       {.name = "tag", .takes_value = true}});
  REQUIRE(args.ok());
  reliableq::cli::ParsedArgs merged = reliableq::cli::WithConfig(*args, *entries);
  CHECK(merged.Value("concurrency") == "7");
  CHECK(merged.Values("queue") == std::vector<std::string>{"c"});
  CHECK(merged.Value("tag") == "file");
}

TEST_CASE("handlers and timeouts: mappings of class to program, URL or seconds") {
  auto options = Parse(
      "exec:\n"
      "  ReceiptJob: [python3, /srv/jobs/send receipt.py]\n"
      "  CleanupJob: /srv/jobs/cleanup.sh --all\n"
      "  '*': /srv/jobs/dispatch\n"
      "http_handlers:\n"
      "  WebhookJob: http://${REDIS_HOST}:8080/jobs\n"
      "http_client_errors:\n"
      "  WebhookJob: discard\n"
      "exec_env:\n"
      "  OUTBOX: /var/spool/receipts\n"
      "job_timeout:\n"
      "  ReceiptJob: 30\n"
      "  '*': 600\n"
      "kill_grace: 2.5\n"
      "on_overrun: exit\n");
  // A list keeps a word with a space whole: its words are joined with the
  // separator the option reader splits at.
  CHECK(options["exec"] ==
        std::vector<std::string>{"ReceiptJob=python3\x1f/srv/jobs/send receipt.py",
                                 "CleanupJob=/srv/jobs/cleanup.sh --all",
                                 "*=/srv/jobs/dispatch"});
  CHECK(options["http-handler"] ==
        std::vector<std::string>{"WebhookJob=http://redis.internal:8080/jobs"});
  CHECK(options["http-client-errors"] == std::vector<std::string>{"WebhookJob=discard"});
  CHECK(options["exec-env"] == std::vector<std::string>{"OUTBOX=/var/spool/receipts"});
  CHECK(options["job-timeout"] == std::vector<std::string>{"ReceiptJob=30", "*=600"});
  CHECK(options["kill-grace"] == std::vector<std::string>{"2.5"});
  CHECK(options["on-overrun"] == std::vector<std::string>{"exit"});
  // The default timeout alone, and the environment as a list, read as lists.
  auto plain =
      Parse("job_timeout: 45\nexec_env: [HOME, LANG=C.UTF-8]\nhttp_client_errors: retry\n");
  CHECK(plain["job-timeout"] == std::vector<std::string>{"45"});
  CHECK(plain["http-client-errors"] == std::vector<std::string>{"retry"});
  CHECK(plain["exec-env"] == std::vector<std::string>{"HOME", "LANG=C.UTF-8"});
  CHECK(Error("exec:\n  ReceiptJob:\n") == "w.yml:1: key 'exec': entry at line 2: has no value");
  CHECK(Error("exec:\n  ReceiptJob: {a: b}\n") ==
        "w.yml:1: key 'exec': entry at line 2: expected a single value, not a mapping");
}

TEST_CASE("backoff and retry_for: mappings of class to a schedule, read as the options") {
  auto options = Parse(
      "backoff:\n"
      "  WebhookJob: exponential:10:3600\n"
      "  ReceiptJob: '5,30,300'\n"
      "retry_for:\n"
      "  WebhookJob: 172800\n");
  CHECK(options["backoff"] ==
        std::vector<std::string>{"WebhookJob=exponential:10:3600", "ReceiptJob=5,30,300"});
  CHECK(options["retry-for"] == std::vector<std::string>{"WebhookJob=172800"});
}

TEST_CASE("ParseBackoff: a table, linear or exponential, every number in (0, a year]") {
  auto table = reliableq::cli::ParseBackoff("5,30,300");
  REQUIRE(table);
  CHECK(table->curve == reliableq::Backoff::Curve::kTable);
  CHECK(table->table == std::vector<double>{5, 30, 300});
  auto line = reliableq::cli::ParseBackoff("linear:2.5");
  REQUIRE(line);
  CHECK(line->curve == reliableq::Backoff::Curve::kLinear);
  CHECK(line->step == 2.5);
  CHECK(line->max == 0);
  auto doubling = reliableq::cli::ParseBackoff("exponential:10:3600");
  REQUIRE(doubling);
  CHECK(doubling->curve == reliableq::Backoff::Curve::kExponential);
  CHECK(doubling->max == 3600);
  for (const char* bad :
       {"", "0", "-5", "5,,6", "5,x", "linear", "linear:", "linear:0", "exponential:1:2:3",
        "geometric:2", "nan", "inf", "31536001", "exponential:1:0"}) {
    CAPTURE(bad);
    CHECK_FALSE(reliableq::cli::ParseBackoff(bad));
  }
}

TEST_CASE("periodic: a mapping of name to fields or to a JSON object") {
  auto options = Parse(
      "periodic:\n"
      "  report:\n"
      "    cron: \"0 6 * * mon-fri\"\n"
      "    class: Report\n"
      "    timezone: Europe/Berlin\n"
      "    args: '[\"daily\", 1]'\n"
      "    retry: 3\n"
      "    catch_up: true\n"
      "  tick: '{\"cron\":\"*/10 * * * * *\",\"class\":\"Tick\"}'\n"
      "  quoted:\n"
      "    cron: '* * * * *'\n"
      "    class: 'Say \"hi\"'\n");
  CHECK(options["periodic"] ==
        std::vector<std::string>{
            R"(report={"cron":"0 6 * * mon-fri","class":"Report","timezone":"Europe/Berlin",)"
            R"("args":["daily", 1],"retry":3,"catch_up":true})",
            R"(tick={"cron":"*/10 * * * * *","class":"Tick"})",
            R"(quoted={"cron":"* * * * *","class":"Say \"hi\""})"});
  CHECK(Error("periodic: [a]\n").find("w.yml:1: key 'periodic'") == 0);
  CHECK(Error("periodic:\n  r:\n    args: [1]\n").find("field args must be a single value") !=
        std::string::npos);
}

TEST_CASE("limits: a mapping of name to spec, or a list of NAME=SPEC") {
  auto mapped = Parse(
      "limits:\n"
      "  mail: \"rate=10/1s,classes=Mailer,Digest\"\n"
      "  ReportJob: concurrency=2\n");
  CHECK(mapped["limit"] == std::vector<std::string>{"mail=rate=10/1s,classes=Mailer,Digest",
                                                    "ReportJob=concurrency=2"});
  auto listed = Parse("limits: [\"mail=rate=10/1s\", ReportJob=concurrency=2]\n");
  CHECK(listed["limit"] == std::vector<std::string>{"mail=rate=10/1s", "ReportJob=concurrency=2"});
  CHECK(Error("limits:\n  mail:\n") == "w.yml:1: key 'limits': entry at line 2: has no value");
}

TEST_CASE("--http-client-errors: per class, or for every HTTP handler not named") {
  using reliableq::HttpClientErrors;
  auto read = [](std::vector<std::string> client_errors, reliableq::ServerOptions* options) {
    reliableq::cli::ParsedArgs args;
    args.SetDefault("http-handler", {"A=http://h/a", "B=http://h/b", "C=http://h/c"});
    args.SetDefault("http-client-errors", std::move(client_errors));
    return reliableq::cli::ReadHandlerOptions(args, options);
  };
  reliableq::ServerOptions options;
  REQUIRE(read({}, &options) == std::nullopt);
  CHECK(options.http_handlers["A"].client_errors == HttpClientErrors::kDead);  // the default

  options = {};
  REQUIRE(read({"B=discard", "retry", "C=dead"}, &options) == std::nullopt);
  CHECK(options.http_handlers["A"].client_errors == HttpClientErrors::kRetry);
  CHECK(options.http_handlers["B"].client_errors == HttpClientErrors::kDiscard);
  CHECK(options.http_handlers["C"].client_errors == HttpClientErrors::kDead);

  auto error = [&](std::vector<std::string> client_errors) {
    reliableq::ServerOptions ignored;
    return read(std::move(client_errors), &ignored).value_or("<accepted>");
  };
  CHECK(error({"A=kill"}) == "--http-client-errors needs [CLASS=]dead|discard|retry, not 'A=kill'");
  CHECK(error({"Dead"}) == "--http-client-errors needs [CLASS=]dead|discard|retry, not 'Dead'");
  CHECK(error({"=dead"}) == "--http-client-errors needs [CLASS=]dead|discard|retry, not '=dead'");
  CHECK(error({"D=dead"}) == "--http-client-errors: class 'D' has no --http-handler");
  CHECK(error({"A=dead", "A=retry"}) == "--http-client-errors: class 'A' given twice");
  CHECK(error({"dead", "retry"}) == "--http-client-errors: the default given twice");
}
