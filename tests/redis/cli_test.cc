// The `reliableq` program, run as a child process against the test Redis.
// Its path comes from $RELIABLEQ_BIN (set by tests/redis/meson.build), the test
// plugins' from $RELIABLEQ_TEST_PLUGIN_{FAILS,EMPTY,ONE}.

#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "reliableq/plugin.h"
#include "support/testutil.h"
#include "version.h"

extern char** environ;

namespace reliableq {


namespace {

using testing::NowSeconds;
using testing::RedisFixture;

struct Outcome {
  int exit_code = -1;  // -1 when killed by a signal
  std::string out;
  std::string err;
  bool timed_out = false;
  std::chrono::milliseconds elapsed{0};
};

std::string EnvPath(const char* name) {
  const char* value = std::getenv(name);
  REQUIRE_MESSAGE(value != nullptr, name << " is not set: run the tests through meson");
  return value;
}

// Runs the program with `args` and waits for it, at most `limit`; a child
// still running then is killed. REDIS_URL is removed from its environment
// unless `redis_url` gives one.
Outcome RunCli(const std::vector<std::string>& args,
               std::chrono::milliseconds limit = std::chrono::seconds(20),
               const char* redis_url = nullptr) {
  std::string binary = EnvPath("RELIABLEQ_BIN");
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "REDIS_URL=", 10) != 0) env.emplace_back(*e);
  }
  if (redis_url != nullptr) env.push_back(std::string("REDIS_URL=") + redis_url);

  int out_pipe[2], err_pipe[2];
  REQUIRE(pipe2(out_pipe, O_CLOEXEC) == 0);
  REQUIRE(pipe2(err_pipe, O_CLOEXEC) == 0);
  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    std::vector<char*> argv = {binary.data()};
    std::vector<std::string> copy = args;
    for (std::string& arg : copy) argv.push_back(arg.data());
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    execve(binary.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);

  Outcome outcome;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&outcome.out, &outcome.err};
  int open_fds = 2;
  auto deadline = start + limit;
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      outcome.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    if (poll(fds, 2, static_cast<int>(left.count())) < 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (pollfd& fd : fds) {
    if (fd.fd >= 0) close(fd.fd);
  }
  // Both pipes are closed; the child may still be exiting, but not for long.
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      outcome.timed_out = true;
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    usleep(1000);
  }
  outcome.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  if (WIFEXITED(status)) outcome.exit_code = WEXITSTATUS(status);
  return outcome;
}

std::vector<std::string> With(std::vector<std::string> args, const std::string& url) {
  args.push_back("--redis");
  args.push_back(url);
  return args;
}

// A usage error: exit 2, nothing on stdout, exactly one line on stderr in
// the documented form.
void CheckUsageError(const Outcome& outcome, const std::string& verb,
                     const std::string& reason_part = "") {
  CHECK(!outcome.timed_out);
  CHECK(outcome.exit_code == 2);
  CHECK(outcome.out.empty());
  std::string see =
      verb.empty() ? "(see 'reliableq --help')\n" : "(see 'reliableq " + verb + " --help')\n";
  CHECK_MESSAGE(outcome.err.rfind("reliableq: ", 0) == 0, outcome.err);
  CHECK_MESSAGE(outcome.err.size() >= see.size(), outcome.err);
  CHECK_MESSAGE(outcome.err.compare(outcome.err.size() - std::min(see.size(), outcome.err.size()),
                                    see.size(), see) == 0,
                outcome.err);
  CHECK_MESSAGE(outcome.err.find('\n') == outcome.err.size() - 1, outcome.err);
  if (!reason_part.empty())
    CHECK_MESSAGE(outcome.err.find(reason_part) != std::string::npos, outcome.err);
}

rapidjson::Document ParseJson(const std::string& text) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseFullPrecisionFlag>(text.c_str());
  REQUIRE_MESSAGE(!doc.HasParseError(), text);
  return doc;
}

bool IsJid(const std::string& text) {
  return text.size() == 24 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

TEST_CASE_FIXTURE(RedisFixture, "push prints the jid and writes the job") {
  Outcome outcome = RunCli(With({"push", "HardJob", R"([1, "bob"])"}, server().Url()));
  REQUIRE(outcome.exit_code == 0);
  CHECK(outcome.err.empty());
  REQUIRE(outcome.out.size() == 25);
  CHECK(outcome.out.back() == '\n');
  std::string jid = outcome.out.substr(0, 24);
  CHECK(IsJid(jid));
  CHECK(SMembers("queues") == std::vector<std::string>{"default"});
  std::vector<std::string> list = LRange("queue:default");
  REQUIRE(list.size() == 1);
  CHECK(list[0].rfind(R"({"class":"HardJob","args":[1,"bob"],"queue":"default","retry":true,)"
                      R"("jid":")" +
                          jid + R"(","created_at":)",
                      0) == 0);
  CHECK(ParseJson(list[0])["enqueued_at"].IsDouble());
}

TEST_CASE_FIXTURE(RedisFixture, "push takes the queue, retry, jid and extra fields") {
  Outcome outcome = RunCli(With({"push", "Mailer", "-q", "mail", "--retry", "3", "--jid", "jid-1",
                                 "--extra", R"({"tags":["a"],"retry_queue":"slow"})"},
                                server().Url()));
  REQUIRE(outcome.exit_code == 0);
  CHECK(outcome.out == "jid-1\n");
  std::vector<std::string> list = LRange("queue:mail");
  REQUIRE(list.size() == 1);
  rapidjson::Document job = ParseJson(list[0]);
  CHECK(std::string(job["class"].GetString()) == "Mailer");
  CHECK(job["args"].IsArray());
  CHECK(job["args"].Empty());
  CHECK(std::string(job["queue"].GetString()) == "mail");
  CHECK(job["retry"].GetInt() == 3);
  CHECK(list[0].find(R"(,"tags":["a"],"retry_queue":"slow"})") != std::string::npos);

  // A later option overrides an earlier one.
  outcome = RunCli(With({"push", "Other", "-q", "first", "--queue", "second"}, server().Url()));
  REQUIRE(outcome.exit_code == 0);
  CHECK(!Exists("queue:first"));
  CHECK(LRange("queue:second").size() == 1);

  // The global option also works before the verb, and --queue=VALUE too.
  outcome = RunCli({"--redis", server().Url(), "push", "--queue=low", "A", "--retry=false"});
  REQUIRE(outcome.exit_code == 0);
  REQUIRE(LRange("queue:low").size() == 1);
  CHECK(ParseJson(LRange("queue:low")[0])["retry"].IsFalse());
}

TEST_CASE_FIXTURE(RedisFixture, "push --in and --at schedule the job") {
  double before = NowSeconds();
  Outcome in = RunCli(With({"push", "Later", "--in", "60.5"}, server().Url()));
  double after = NowSeconds();
  REQUIRE(in.exit_code == 0);
  CHECK(IsJid(in.out.substr(0, 24)));
  auto scheduled = ZRangeWithScores("schedule");
  REQUIRE(scheduled.size() == 1);
  CHECK(scheduled[0].second >= before + 60.5 - 1e-3);
  CHECK(scheduled[0].second <= after + 60.5 + 1e-3);
  CHECK(ParseJson(scheduled[0].first)["jid"].GetString() == in.out.substr(0, 24));
  CHECK(!Exists("queue:default"));
  CHECK(!Exists("queues"));

  double at = std::floor(NowSeconds()) + 7200.25;
  Outcome at_outcome = RunCli(With({"push", "Later", "--at", std::to_string(at)}, server().Url()));
  REQUIRE(at_outcome.exit_code == 0);
  scheduled = ZRangeWithScores("schedule");
  REQUIRE(scheduled.size() == 2);
  CHECK(std::fabs(scheduled[1].second - at) < 1e-6);

  // A time that has passed pushes now.
  Outcome past = RunCli(With({"push", "Now", "--at", "1000000000"}, server().Url()));
  REQUIRE(past.exit_code == 0);
  CHECK(LRange("queue:default").size() == 1);
}

TEST_CASE_FIXTURE(RedisFixture, "push refuses bad input with a usage error and writes nothing") {
  const std::vector<std::vector<std::string>> cases = {
      {"push", "A", "[1,"},                              // ARGS_JSON does not parse
      {"push", "A", R"({"a":1})"},                       // not an array
      {"push", "A", "[]", "--extra", "[1]"},             // extra not an object
      {"push", "A", "[]", "--extra", R"({"jid":"x"})"},  // a field the client sets
      {"push", "A", "--retry", "maybe"},
      {"push", "A", "--in", "soon"},
      {"push", "A", "--at", "nan"},
      {"push", "A", "--in", "1", "--at", "2"},
      {"push", "A", "[]", "extra-argument"},
      {"push"},
      {"push", ""},
      {"push", "A", "-q", ""},
      {"push", "A", "--queue"},  // no value
      {"push", "A", "--jid", "bad\x01jid"},
  };
  for (const auto& args : cases) {
    std::string command_line;
    for (const std::string& arg : args) command_line += arg + " ";
    CAPTURE(command_line);
    CheckUsageError(RunCli(With(args, server().Url())), "push");
  }
  CHECK(Integer({"DBSIZE"}) == 0);
}

TEST_CASE("unknown options are usage errors on one line") {
  CheckUsageError(RunCli({"push", "A", "--bogus"}), "push", "unknown option '--bogus'");
  CheckUsageError(RunCli({"stats", "--bogus=1"}), "stats", "unknown option '--bogus'");
  CheckUsageError(RunCli({"recover", "-x"}), "recover", "unknown option '-x'");
  CheckUsageError(RunCli({"worker", "--nope"}), "worker", "unknown option '--nope'");
  CheckUsageError(RunCli({"stats", "--json=yes"}), "stats", "takes no value");
  CheckUsageError(RunCli({"--bogus", "stats"}), "", "unknown option '--bogus'");
  CheckUsageError(RunCli({"-q", "x", "push", "A"}), "", "unknown option '-q'");
  CheckUsageError(RunCli({}), "", "missing command");
  CheckUsageError(RunCli({"frobnicate"}), "", "unknown command 'frobnicate'");
  CheckUsageError(RunCli({"help", "frobnicate"}), "", "unknown command 'frobnicate'");
  CheckUsageError(RunCli({"stats", "--redis", "http://x"}), "stats", "bad Redis URL");
}

TEST_CASE("every verb prints its help on stdout with exit 0") {
  for (std::string verb :
       {"push", "stats", "recover", "worker", "retries", "dead", "scheduled", "queues", "queue"}) {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{verb, "--help"}, std::vector<std::string>{verb, "-h"},
          std::vector<std::string>{"help", verb},
          // Help wins over anything else on the line.
          std::vector<std::string>{verb, "--bogus", "--help"}}) {
      Outcome outcome = RunCli(args);
      CAPTURE(verb);
      CHECK(outcome.exit_code == 0);
      CHECK(outcome.err.empty());
      CHECK(outcome.out.rfind("usage: reliableq " + verb, 0) == 0);
      CHECK(outcome.out.find("--redis URL") != std::string::npos);
    }
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--help"}, std::vector<std::string>{"-h"},
        std::vector<std::string>{"help"}}) {
    Outcome outcome = RunCli(args);
    CHECK(outcome.exit_code == 0);
    CHECK(outcome.out.rfind("usage: reliableq [--redis URL]", 0) == 0);
    for (const char* verb : {"push", "stats", "recover", "worker", "retries", "dead",
                             "scheduled", "queues", "queue", "help"}) {
      CHECK(outcome.out.find(std::string("\n  ") + verb + " ") != std::string::npos);
    }
  }
  Outcome version = RunCli({"--version"});
  CHECK(version.exit_code == 0);
  // The release from meson.build, then what it needs of Redis.
  CHECK(version.out.starts_with("reliableq " RELIABLEQ_VERSION "\n"));
  CHECK(version.out.find("\nneeds Redis 6.2 or later: LMOVE, ") != std::string::npos);
  CHECK(version.out.find("\nplugin ABI " + std::to_string(RELIABLEQ_PLUGIN_ABI_VERSION) + "\n") !=
        std::string::npos);
}

TEST_CASE_FIXTURE(RedisFixture, "stats --json counts what was pushed") {
  for (int i = 0; i < 3; ++i) REQUIRE(RunCli(With({"push", "A"}, server().Url())).exit_code == 0);
  for (int i = 0; i < 2; ++i) {
    REQUIRE(RunCli(With({"push", "B", "-q", "low"}, server().Url())).exit_code == 0);
  }
  REQUIRE(RunCli(With({"push", "C", "--in", "600"}, server().Url())).exit_code == 0);
  Run({"SET", "stat:processed", "7"});
  Run({"SET", "stat:failed", "2"});
  Run({"ZADD", "retry", "1700000000", R"({"class":"R","args":[]})"});
  Run({"ZADD", "dead", "1700000000", R"({"class":"D","args":[]})"});
  Run({"ZADD", "dead", "1700000001", R"({"class":"E","args":[]})"});

  Outcome outcome = RunCli(With({"stats", "--json"}, server().Url()));
  REQUIRE(outcome.exit_code == 0);
  CHECK(outcome.err.empty());
  CHECK(outcome.out.back() == '\n');
  CHECK(outcome.out.find('\n') == outcome.out.size() - 1);
  rapidjson::Document stats = ParseJson(outcome.out);
  CHECK(stats["processed"].GetInt64() == 7);
  CHECK(stats["failed"].GetInt64() == 2);
  CHECK(stats["enqueued"].GetInt64() == 5);
  CHECK(stats["in_progress"].GetInt64() == 0);
  CHECK(stats["scheduled"].GetInt64() == 1);
  CHECK(stats["retries"].GetInt64() == 1);
  CHECK(stats["dead"].GetInt64() == 2);
  CHECK(stats["processes"].GetInt64() == 0);
  CHECK(stats["busy"].GetInt64() == 0);
  const rapidjson::Value& queues = stats["queues"];
  REQUIRE(queues.Size() == 2);
  CHECK(std::string(queues[0]["name"].GetString()) == "default");
  CHECK(queues[0]["size"].GetInt64() == 3);
  CHECK(queues[0]["latency"].GetDouble() >= 0);
  CHECK(queues[0]["latency"].GetDouble() < 60);
  CHECK(std::string(queues[1]["name"].GetString()) == "low");
  CHECK(queues[1]["size"].GetInt64() == 2);

  Outcome text = RunCli(With({"stats"}, server().Url()));
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("processed:    7\n") != std::string::npos);
  CHECK(text.out.find("enqueued:     5\n") != std::string::npos);
  CHECK(text.out.find("in progress:  0\n") != std::string::npos);
  CHECK(text.out.find("dead:         2\n") != std::string::npos);
  CHECK(text.out.find("queue    size  latency\n") != std::string::npos);
  CHECK(text.out.find("\ndefault     3 ") != std::string::npos);
  CHECK(text.out.find("\nlow         2 ") != std::string::npos);
}

TEST_CASE_FIXTURE(RedisFixture, "limits lists each limiter with its counts; stats sums parked") {
  Outcome none = RunCli(With({"limits"}, server().Url()));
  REQUIRE(none.exit_code == 0);
  CHECK(none.out == "no limits declared\n");
  Run({"HSET", "reliableq:limits", "mail",
       R"({"name":"mail","classes":["Mailer","Digest"],"concurrency":2,"rate":10,"period":1.0})",
       "broken", "not json"});
  Run({"HSET", "reliableq:limit:mail", "1@host:1:abc", "100", "2@host:1:abc", "100"});
  Run({"RPUSH", "reliableq:limit:mail:waiting", "{}", "{}", "{}"});
  // One start in the window, one long out of it.
  Run({"ZADD", "reliableq:limit:mail:starts", "1", "old@x", "99999999999", "new@x"});
  Run({"RPUSH", "reliableq:limit:broken:waiting", "{}"});

  Outcome json = RunCli(With({"limits", "--json"}, server().Url()));
  REQUIRE(json.exit_code == 0);
  rapidjson::Document doc = ParseJson(json.out);
  const rapidjson::Value& limits = doc["limits"];
  REQUIRE(limits.Size() == 2);
  CHECK(std::string(limits[0]["name"].GetString()) == "broken");
  CHECK(limits[0]["classes"].Size() == 0);
  CHECK(limits[0]["concurrency"].GetInt64() == 0);
  CHECK(limits[0]["parked"].GetInt64() == 1);
  const rapidjson::Value& mail = limits[1];
  CHECK(std::string(mail["name"].GetString()) == "mail");
  REQUIRE(mail["classes"].Size() == 2);
  CHECK(std::string(mail["classes"][1].GetString()) == "Digest");
  CHECK(mail["concurrency"].GetInt64() == 2);
  CHECK(mail["rate"].GetInt64() == 10);
  CHECK(mail["period"].GetDouble() == 1.0);
  CHECK(mail["running"].GetInt64() == 2);
  CHECK(mail["parked"].GetInt64() == 3);
  CHECK(mail["window_starts"].GetInt64() == 1);

  Outcome text = RunCli(With({"limits"}, server().Url()));
  REQUIRE(text.exit_code == 0);
  CHECK_MESSAGE(text.out.find("\nbroken                             -              -        0 "
                              "       1        0\n") != std::string::npos,
                text.out);
  CHECK_MESSAGE(text.out.find("\nmail ") != std::string::npos, text.out);
  CHECK_MESSAGE(text.out.find(" 2          10/1s        2        3        1  Mailer,Digest\n") !=
                    std::string::npos,
                text.out);
  CheckUsageError(RunCli(With({"limits", "extra"}, server().Url())), "limits",
                  "unexpected argument 'extra'");

  Outcome stats = RunCli(With({"stats", "--json"}, server().Url()));
  REQUIRE(stats.exit_code == 0);
  CHECK(ParseJson(stats.out)["parked"].GetInt64() == 4);
  Outcome stats_text = RunCli(With({"stats"}, server().Url()));
  CHECK(stats_text.out.find("parked:       4\n") != std::string::npos);
}

TEST_CASE("usage errors come before any I/O: an unreachable Redis, no spool made") {
  // Nothing listens there: a verb that connected first would exit 1.
  const std::string url = "unix:///nonexistent.sock";
  char templ[] = "/tmp/reliableq-usage-XXXXXX";
  REQUIRE(mkdtemp(templ) != nullptr);
  const std::string spool = std::string(templ) + "/spool";
  const std::string long_queue(120 * 1024, 'q');
  const std::vector<std::vector<std::string>> cases = {
      {"push", "A", "--jid", "bad\x01jid"},
      {"push", "A", "--extra", R"({"jid":"x"})"},
      {"push", "A", "--extra", R"({"unique_key":"x"})"},
      {"push", "A", "--unique", "--unique-key", "has\"quote"},
      {"push", "A", "-q", long_queue},
      {"push", "A", "-q", "bad\xff"},
      {"queue", "pause", std::string(1001, 'q')},
      {"queue", "clear", std::string(1001, 'q'), "--yes"},
  };
  for (const auto& args : cases) {
    std::vector<std::string> with_spool = args;
    if (args[0] == "push") with_spool.insert(with_spool.end(), {"--spool", spool});
    CAPTURE(args[0] + " " + args[args.size() > 2 ? 2 : 1].substr(0, 40));
    CheckUsageError(RunCli(With(with_spool, url)), args[0]);
    struct stat st;
    CHECK(stat(spool.c_str(), &st) != 0);
  }
  CheckUsageError(RunCli(With({"push", "A", "-q", long_queue}, url)), "push",
                  "the queue name is longer than 1000 bytes");
  CheckUsageError(RunCli(With({"worker", "-r", "x.so", "-q", std::string(1001, 'q')}, url)),
                  "worker", "longer than 1000 bytes");
  rmdir(templ);
}

TEST_CASE("an unreachable Redis is a runtime error naming it, quickly") {
  const std::string url = "unix:///nonexistent.sock";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"push", "A", "--redis", url},
        std::vector<std::string>{"stats", "--redis", url},
        std::vector<std::string>{"recover", "--dry-run", "--redis", url}}) {
    Outcome outcome = RunCli(args);
    CAPTURE(args[0]);
    CHECK(outcome.exit_code == 1);
    CHECK(outcome.out.empty());
    CHECK(outcome.err.rfind("reliableq: IO error: ", 0) == 0);
    CHECK(outcome.err.find("/nonexistent.sock") != std::string::npos);
    CHECK(outcome.err.find('\n') == outcome.err.size() - 1);
    CHECK(outcome.elapsed < std::chrono::seconds(2));
  }
  // $REDIS_URL is the default.
  Outcome from_env = RunCli({"stats"}, std::chrono::seconds(20), url.c_str());
  CHECK(from_env.exit_code == 1);
  CHECK(from_env.err.find("/nonexistent.sock") != std::string::npos);
}

TEST_CASE("recover refuses bad options") {
  CheckUsageError(RunCli({"recover", "--force"}), "recover", "--force needs --identity");
  CheckUsageError(RunCli({"recover", "--max-interruptions", "-1"}), "recover",
                  "--max-interruptions");
  CheckUsageError(RunCli({"recover", "--max-interruptions", "x"}), "recover",
                  "--max-interruptions");
  CheckUsageError(RunCli({"recover", "--identity"}), "recover", "needs a value");
  CheckUsageError(RunCli({"recover", "now"}), "recover", "unexpected argument 'now'");
}

TEST_CASE_FIXTURE(RedisFixture, "recover with no registered process moves nothing") {
  Outcome outcome = RunCli(With({"recover"}, server().Url()));
  CHECK(outcome.exit_code == 0);
  CHECK(outcome.out == "no dead processes\n");
  outcome = RunCli(With({"recover", "--json", "--dry-run"}, server().Url()));
  CHECK(outcome.exit_code == 0);
  rapidjson::Document report = ParseJson(outcome.out);
  CHECK(report["dry_run"].IsTrue());
  CHECK(report["identities"].IsArray());
  CHECK(report["identities"].Empty());
  // An identity that is not registered is a runtime error.
  outcome =
      RunCli(With({"recover", "--identity", "nohost:1:abcdefabcdef", "--force"}, server().Url()));
  CHECK(outcome.exit_code == 1);
  CHECK(outcome.err.rfind("reliableq: Not found: ", 0) == 0);
  CHECK(Integer({"DBSIZE"}) == 0);
}

TEST_CASE("worker refuses bad options before it loads anything") {
  CheckUsageError(RunCli({"worker"}), "worker",
                  "no job classes: load a plugin with -r, or map classes to programs or URLs "
                  "with --exec or --http-handler");
  CheckUsageError(RunCli({"worker", "-q", "default"}), "worker", "no job classes");
  CheckUsageError(RunCli({"worker", "-r", "x.so", "-q", "a", "-q", "b", "-q", "a"}), "worker",
                  "queue 'a' given twice");
  CheckUsageError(RunCli({"worker", "-r", "x.so", "-q", "a,b"}), "worker", "weight");
  CheckUsageError(RunCli({"worker", "-r", "x.so", "-q", "a,-1"}), "worker", "weight");
  CheckUsageError(RunCli({"worker", "-r", "x.so", "-q", ",3"}), "worker", "empty queue name");
  CheckUsageError(RunCli({"worker", "-r", "x.so", "-c", "0"}), "worker", "concurrency");
  CheckUsageError(RunCli({"worker", "-r", "x.so", "--concurrency", "many"}), "worker",
                  "concurrency");
  CheckUsageError(
      RunCli({"worker", "-r", "x.so", "--heartbeat-ttl", "9", "--heartbeat-interval", "5"}),
      "worker", "at least twice");
  CheckUsageError(RunCli({"worker", "-r", "x.so", "--heartbeat-ttl", "2"}), "worker",
                  "at least twice");
  CheckUsageError(RunCli({"worker", "-r", "x.so", "--heartbeat-interval", "0"}), "worker",
                  "--heartbeat-interval");
  CheckUsageError(RunCli({"worker", "-r", "x.so", "-t", "soon"}), "worker", "--timeout");
  CheckUsageError(RunCli({"worker", "-r", "x.so", "--janitor-interval", "-1"}), "worker",
                  "--janitor-interval");
  CheckUsageError(RunCli({"worker", "-r", "x.so", "--max-interruptions", "1.5"}), "worker",
                  "--max-interruptions");
  CheckUsageError(RunCli({"worker", "-r", "x.so", "leftover"}), "worker", "unexpected argument");
}

TEST_CASE("worker refuses each bad --limit with a one-line reason") {
  auto limit = [](std::vector<std::string> specs) {
    std::vector<std::string> args = {"worker", "-r", "x.so"};
    for (std::string& spec : specs) {
      args.push_back("--limit");
      args.push_back(std::move(spec));
    }
    return RunCli(args);
  };
  CheckUsageError(limit({"mail"}), "worker", "--limit: limit 'mail': want NAME=SPEC");
  CheckUsageError(limit({"m a=concurrency=1"}), "worker", "the name must be 1 to 100");
  CheckUsageError(limit({"mail="}), "worker", "empty SPEC");
  CheckUsageError(limit({"mail=concurrency=1,"}), "worker", "trailing comma");
  CheckUsageError(limit({"mail=five"}), "worker", "'five' is not KEY=VALUE");
  CheckUsageError(limit({"mail=speed=3"}), "worker", "unknown key 'speed'");
  CheckUsageError(limit({"mail=concurrency=0"}), "worker", "concurrency must be an integer");
  CheckUsageError(limit({"mail=concurrency=1,concurrency=2"}), "worker", "concurrency given twice");
  CheckUsageError(limit({"mail=rate=10"}), "worker", "rate must be R/PERIOD");
  CheckUsageError(limit({"mail=rate=10/1d"}), "worker", "rate must be R/PERIOD");
  CheckUsageError(limit({"mail=rate=10/200h"}), "worker", "at most a week");
  CheckUsageError(limit({"mail=classes=Mailer"}), "worker", "set concurrency=N, rate=R/PERIOD");
  CheckUsageError(limit({"mail=concurrency=1,classes=A,B\"c"}), "worker", "bad class name");
  CheckUsageError(limit({"mail=concurrency=1", "mail=rate=1/1s"}), "worker", "declared twice");
  CheckUsageError(limit({"a=concurrency=1,classes=Mailer", "b=rate=1/1s,classes=Mailer"}), "worker",
                  "class Mailer already belongs to another limit");
}

TEST_CASE("worker refuses bad handler and timeout options, and programs it cannot run") {
  CheckUsageError(RunCli({"worker", "--exec", "EmailJob"}), "worker",
                  "--exec needs CLASS=PROGRAM [ARG]..., not 'EmailJob'");
  CheckUsageError(RunCli({"worker", "--exec", "EmailJob=  "}), "worker", "--exec needs");
  CheckUsageError(RunCli({"worker", "--exec", "A=/bin/true", "--exec", "A=/bin/false"}), "worker",
                  "class 'A' given twice");
  CheckUsageError(RunCli({"worker", "--exec", "EmailJob=/nonexistent/send-mail"}), "worker",
                  "command handler for EmailJob: /nonexistent/send-mail: No such file or "
                  "directory");
  CheckUsageError(RunCli({"worker", "--exec", "Dir=/tmp"}), "worker",
                  "command handler for Dir: /tmp: not an executable file");
  CheckUsageError(RunCli({"worker", "--exec", "EmailJob=no-such-program-here"}), "worker",
                  "no-such-program-here: not found in the handlers' PATH");
  CheckUsageError(RunCli({"worker", "--exec", "A=/bin/true", "--http-handler", "A=http://h/"}),
                  "worker", "class A has both a command handler and an HTTP handler");
  Outcome secret = RunCli({"worker", "--http-handler", "Hook=ftp://user:hunter2@h/jobs"});
  CheckUsageError(secret, "worker", "HTTP handler for Hook");
  CHECK(secret.err.find("hunter2") == std::string::npos);
  CheckUsageError(
      RunCli({"worker", "--http-handler", "A=http://h/", "--http-client-errors", "A=kill"}),
      "worker", "--http-client-errors needs [CLASS=]dead|discard|retry, not 'A=kill'");
  CheckUsageError(
      RunCli({"worker", "--http-handler", "A=http://h/", "--http-client-errors", "B=discard"}),
      "worker", "--http-client-errors: class 'B' has no --http-handler");
  CheckUsageError(RunCli({"worker", "--exec", "A=/bin/true", "--job-timeout", "0"}), "worker",
                  "--job-timeout needs [CLASS=]SECONDS");
  CheckUsageError(RunCli({"worker", "--exec", "A=/bin/true", "--job-timeout", "A=x"}), "worker",
                  "--job-timeout needs");
  CheckUsageError(RunCli({"worker", "--exec", "A=/bin/true", "--kill-grace", "-1"}), "worker",
                  "--kill-grace");
  CheckUsageError(RunCli({"worker", "--exec", "A=/bin/true", "--on-overrun", "maybe"}), "worker",
                  "--on-overrun needs keep or exit, not 'maybe'");
  CheckUsageError(RunCli({"worker", "--exec", "A=/bin/true", "--exec-env", "RELIABLEQ_JOB=x"}),
                  "worker", "RELIABLEQ_JOB is set by the worker for each job");
}

TEST_CASE("worker -C: a bad config file is a usage error naming file, line and key") {
  char templ[] = "/tmp/reliableq-config-XXXXXX";
  REQUIRE(mkdtemp(templ) != nullptr);
  const std::string dir = templ;
  auto write = [&](const std::string& name, const std::string& text) {
    std::string path = dir + "/" + name;
    FILE* f = std::fopen(path.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
    return path;
  };
  std::string unknown = write("unknown.yml", "concurrency: 5\nconcurency: 6\n");
  CheckUsageError(RunCli({"worker", "-C", unknown, "-r", "x.so"}), "worker",
                  unknown + ":2: key 'concurency': unknown");
  std::string wrong = write("wrong.yml", "queues: default\ntimeout: [1]\n");
  CheckUsageError(RunCli({"worker", "-C", wrong, "-r", "x.so"}), "worker",
                  wrong + ":2: key 'timeout': expected a number, not a list");
  std::string range = write("range.yml", "concurrency: 0\n");
  CheckUsageError(RunCli({"worker", "-C", range, "-r", "x.so"}), "worker",
                  range + ":1: key 'concurrency': concurrency must be an integer from 1 to 1000");
  std::string secret = write("secret.yml", "redis: redis://:${RQ_TEST_UNSET}@h/0\n");
  CheckUsageError(RunCli({"worker", "-C", secret, "-r", "x.so"}), "worker",
                  secret + ":1: key 'redis': environment variable RQ_TEST_UNSET is not set");
  CheckUsageError(RunCli({"worker", "-C", dir + "/missing.yml", "-r", "x.so"}), "worker",
                  "cannot read config file " + dir + "/missing.yml: No such file or directory");
  // A password in a bad URL from the file stays out of the message.
  std::string url = write("url.yml", "redis: redis://:hunter2@h:notaport/0\n");
  Outcome outcome = RunCli({"worker", "-C", url, "-r", "x.so"});
  CHECK(outcome.exit_code == 2);
  CHECK_MESSAGE(outcome.err.find(url + ":1: key 'redis': ") != std::string::npos, outcome.err);
  CHECK_MESSAGE(outcome.err.find("hunter2") == std::string::npos, outcome.err);
  // With a valid file, a flag out of range is reported as the flag.
  std::string good = write("good.yml", "concurrency: 5\n");
  CheckUsageError(RunCli({"worker", "-C", good, "-r", "x.so", "-c", "0"}), "worker",
                  "concurrency must be an integer from 1 to 1000, not '0'");
  std::string cmd = "rm -rf '" + dir + "'";
  CHECK(std::system(cmd.c_str()) == 0);
}

TEST_CASE("worker and web warn once at start about secrets every user can read") {
  char templ[] = "/tmp/reliableq-secrets-XXXXXX";
  REQUIRE(mkdtemp(templ) != nullptr);
  const std::string dir = templ;
  auto write = [&](const std::string& name, const std::string& text, mode_t mode) {
    std::string path = dir + "/" + name;
    FILE* f = std::fopen(path.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
    REQUIRE(chmod(path.c_str(), mode) == 0);
    return path;
  };
  // Nothing listens at the URL and the plugin does not exist: each run
  // stops (exit 1) right after the start-up checks, where the warning is.
  const std::string url = "unix:///nonexistent.sock";
  auto warnings = [](const Outcome& outcome, const std::string& path) {
    size_t count = 0;
    for (size_t at = outcome.err.find("'" + path + "' holds a secret and every user can read it");
         at != std::string::npos; at = outcome.err.find("'" + path + "' holds", at + 1)) {
      ++count;
    }
    return count;
  };
  std::string open_password = write("open-password", "pw\n", 0644);
  std::string closed_password = write("closed-password", "pw\n", 0640);
  Outcome open = RunCli(With({"worker", "-r", "/nonexistent/x.so", "--redis-password-file",
                              open_password}, url));
  CHECK(open.exit_code == 1);
  CHECK_MESSAGE(warnings(open, open_password) == 1, open.err);
  CHECK_MESSAGE(open.err.find("(mode 0644)") != std::string::npos, open.err);
  CHECK(open.err.find("pw\n") == std::string::npos);
  Outcome closed = RunCli(With({"worker", "-r", "/nonexistent/x.so", "--redis-password-file",
                                closed_password}, url));
  CHECK_MESSAGE(warnings(closed, closed_password) == 0, closed.err);
  // A config file whose redis URL holds the password; in the JSON log too.
  std::string config = write("w.yml", "redis: redis://:s3cret@127.0.0.1:1/0\n", 0644);
  Outcome json = RunCli({"worker", "-C", config, "-r", "/nonexistent/x.so", "--log-format",
                         "json"});
  CHECK_MESSAGE(warnings(json, config) == 1, json.err);
  CHECK(json.err.find("\"event\":\"secret_file_readable\"") != std::string::npos);
  CHECK(json.err.find("s3cret") == std::string::npos);
  std::string by_environment = write("env.yml", "redis: redis://:${HOME}@127.0.0.1:1/0\n", 0644);
  Outcome env = RunCli({"worker", "-C", by_environment, "-r", "/nonexistent/x.so"});
  CHECK_MESSAGE(warnings(env, by_environment) == 0, env.err);
  // reliableq web: its token and users files.
  std::string token = write("token", "tok\n", 0604);
  std::string users = write("users", "alice:pw\n", 0644);
  Outcome web = RunCli(With({"web", "--token-file", token, "--basic-auth-file", users}, url));
  CHECK(web.exit_code == 1);
  CHECK_MESSAGE(warnings(web, token) == 1, web.err);
  CHECK_MESSAGE(warnings(web, users) == 1, web.err);
  std::string cmd = "rm -rf '" + dir + "'";
  CHECK(std::system(cmd.c_str()) == 0);
}

TEST_CASE("worker and web refuse a --log-format other than text or json") {
  CheckUsageError(RunCli({"worker", "-r", "x.so", "--log-format", "xml"}), "worker",
                  "--log-format must be text or json, not 'xml'");
  CheckUsageError(RunCli({"worker", "-r", "x.so", "--log-format", "JSON"}), "worker",
                  "--log-format must be text or json");
  CheckUsageError(RunCli({"worker", "-r", "x.so", "--log-format"}), "worker", "needs a value");
  CheckUsageError(RunCli({"web", "--log-format", "xml"}), "web",
                  "--log-format must be text or json, not 'xml'");
}

TEST_CASE("worker stops with exit 1 when a plugin cannot be used") {
  auto check_runtime_error = [](const Outcome& outcome, const std::string& part) {
    CHECK(!outcome.timed_out);
    CHECK(outcome.exit_code == 1);
    CHECK(outcome.out.empty());
    CHECK_MESSAGE(outcome.err.rfind("reliableq: ", 0) == 0, outcome.err);
    CHECK_MESSAGE(outcome.err.find(part) != std::string::npos, outcome.err);
    CHECK(outcome.err.find('\n') == outcome.err.size() - 1);
  };
  check_runtime_error(RunCli({"worker", "-r", "/nonexistent/libjobs.so"}),
                      "cannot load plugin '/nonexistent/libjobs.so'");
  // A library without the entry point.
  check_runtime_error(RunCli({"worker", "-r", "libc.so.6"}),
                      "plugin 'libc.so.6' does not define reliableq_register");
  std::string fails = EnvPath("RELIABLEQ_TEST_PLUGIN_FAILS");
  check_runtime_error(RunCli({"worker", "-r", fails}),
                      "plugin '" + fails + "': reliableq_register returned 7");
  // A good plugin first does not save a bad one after it.
  std::string one = EnvPath("RELIABLEQ_TEST_PLUGIN_ONE");
  check_runtime_error(RunCli({"worker", "-r", one, "-r", "/nonexistent/b.so"}),
                      "/nonexistent/b.so");
  // Loaded fine, but Redis is not there: Server::Open fails.
  Outcome outcome = RunCli({"worker", "-r", one, "--redis", "unix:///nonexistent.sock"});
  check_runtime_error(outcome, "/nonexistent.sock");
  CHECK(outcome.elapsed < std::chrono::seconds(2));
}

TEST_CASE("worker refuses plugins that register no class") {
  std::string empty = EnvPath("RELIABLEQ_TEST_PLUGIN_EMPTY");
  CheckUsageError(RunCli({"worker", "-r", empty}), "worker", "no job classes");
}

// A failed job as the worker leaves it in retry or dead.
std::string FailedJob(const std::string& jid, int retry_count, const std::string& queue = "low") {
  return R"({"class":"HardJob","args":[1,"caf\u00e9"],"queue":")" + queue +
         R"(","retry":true,"jid":")" + jid +
         R"(","created_at":1700000000.5,"enqueued_at":1700000000.75,"error_message":)"
         R"("boom\nmore","error_class":"std::runtime_error","failed_at":1700000001.5,)"
         R"("retry_count":)" +
         std::to_string(retry_count) + "}";
}

const std::string kJid1 = "111111111111111111111111";
const std::string kJid2 = "222222222222222222222222";
const std::string kJid3 = "333333333333333333333333";

TEST_CASE("the job-set and queue verbs refuse bad command lines") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"retries"}, "missing subcommand (list, show, retry, delete or kill)"},
      {{"dead"}, "missing subcommand (list, show, retry or delete)"},
      {{"retries", "frob"}, "unknown subcommand 'frob'"},
      {{"dead", "kill", "x"}, "unknown subcommand 'kill'"},
      {{"scheduled", "kill", "x"}, "unknown subcommand 'kill'"},
      {{"retries", "list", "extra"}, "unexpected argument 'extra'"},
      {{"retries", "show"}, "show needs a JID"},
      {{"retries", "show", "a", "b"}, "unexpected argument 'b'"},
      {{"retries", "retry"}, "retry needs a JID or --all"},
      {{"dead", "delete"}, "delete needs a JID or --all"},
      {{"retries", "kill"}, "kill needs a JID or --all"},
      {{"retries", "retry", "x", "--all"}, "give a JID or --all, not both"},
      {{"retries", "list", "--all"}, "--all goes with retry, delete or kill"},
      {{"scheduled", "show", "x", "--all"}, "--all goes with retry, delete only"},
      {{"retries", "show", "x", "--limit", "3"}, "--limit goes with list only"},
      {{"retries", "list", "--limit", "-1"}, "--limit needs a non-negative integer"},
      {{"retries", "list", "--limit", "many"}, "--limit needs a non-negative integer"},
      {{"dead", "retry", "x", "--json"}, "--json goes with list and show only"},
      {{"retries", "show", ""}, "the jid is empty"},
      {{"retries", "list", "--yes"}, "unknown option '--yes'"},
      {{"queues", "extra"}, "unexpected argument 'extra'"},
      {{"queue"}, "missing subcommand (clear, pause, resume)"},
      {{"queue", "drain", "x"}, "unknown subcommand 'drain'"},
      {{"queue", "pause"}, "pause needs a queue NAME"},
      {{"queue", "resume", "a", "b"}, "unexpected argument 'b'"},
      {{"queue", "pause", ""}, "the queue name is empty"},
      {{"queue", "pause", "a", "--yes"}, "--yes is only for clear"},
      {{"queue", "resume", "a", "--force"}, "--force is only for pause"},
      {{"queue", "clear", "a", "--yes", "--force"}, "--force is only for pause"},
      {{"queue", "clear"}, "clear needs a queue NAME"},
      {{"queue", "clear", "a", "b", "--yes"}, "unexpected argument 'b'"},
      {{"queue", "clear", "", "--yes"}, "the queue name is empty"},
      {{"queue", "clear", "default"}, "add --yes to confirm"},
  };
  for (const auto& [args, reason] : cases) {
    std::string command_line;
    for (const std::string& arg : args) command_line += arg + " ";
    CAPTURE(command_line);
    CheckUsageError(RunCli(args), args[0], reason);
  }
}

TEST_CASE_FIXTURE(RedisFixture, "retries list and show print every entry, as text and JSON") {
  Run({"ZADD", "retry", "1700000300.5", FailedJob(kJid2, 1, "default")});
  Run({"ZADD", "retry", "1700000200.25", FailedJob(kJid1, 0)});
  Run({"ZADD", "retry", "1700000400", "not a job"});

  Outcome json = RunCli(With({"retries", "list", "--json"}, server().Url()));
  REQUIRE(json.exit_code == 0);
  CHECK(json.err.empty());
  rapidjson::Document listing = ParseJson(json.out);
  CHECK(std::string(listing["set"].GetString()) == "retry");
  CHECK(listing["size"].GetInt64() == 3);
  const rapidjson::Value& entries = listing["entries"];
  REQUIRE(entries.Size() == 3);
  CHECK(entries[0]["score"].GetDouble() == 1700000200.25);
  CHECK(std::string(entries[0]["jid"].GetString()) == kJid1);
  CHECK(std::string(entries[0]["class"].GetString()) == "HardJob");
  CHECK(std::string(entries[0]["queue"].GetString()) == "low");
  CHECK(entries[0]["retry_count"].GetInt() == 0);
  CHECK(std::string(entries[0]["error_class"].GetString()) == "std::runtime_error");
  CHECK(std::string(entries[0]["error_message"].GetString()) == "boom\nmore");
  CHECK(entries[0]["valid"].IsTrue());
  CHECK(std::string(entries[0]["payload"].GetString()) == FailedJob(kJid1, 0));
  CHECK(std::string(entries[1]["jid"].GetString()) == kJid2);
  CHECK(entries[2]["valid"].IsFalse());
  CHECK(entries[2]["jid"].IsNull());
  CHECK(entries[2]["retry_count"].IsNull());
  CHECK(std::string(entries[2]["payload"].GetString()) == "not a job");

  Outcome limited = RunCli(With({"retries", "list", "--limit", "1", "--json"}, server().Url()));
  REQUIRE(limited.exit_code == 0);
  CHECK(ParseJson(limited.out)["entries"].Size() == 1);
  CHECK(ParseJson(limited.out)["size"].GetInt64() == 3);

  Outcome text = RunCli(With({"retries", "list", "--limit", "2"}, server().Url()));
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.rfind("time (UTC)  ", 0) == 0);
  CHECK(text.out.find("  retry_count  error\n") != std::string::npos);
  CHECK(text.out.find("2023-11-14 22:16:40  " + kJid1 +
                      "  HardJob  low      0            "
                      "std::runtime_error: boom\\nmore\n") != std::string::npos);
  CHECK(text.out.find(kJid2 + "  HardJob  default  1") != std::string::npos);
  CHECK(text.out.find("2 of 3 shown (--limit 0 shows all)\n") != std::string::npos);

  Outcome show = RunCli(With({"retries", "show", kJid1}, server().Url()));
  REQUIRE(show.exit_code == 0);
  CHECK(show.out.find("jid:            " + kJid1 + "\n") != std::string::npos);
  CHECK(show.out.find("time:           2023-11-14 22:16:40 UTC\n") != std::string::npos);
  CHECK(show.out.find("score:          1700000200.25\n") != std::string::npos);
  CHECK(show.out.find("retry_count:    0\n") != std::string::npos);
  CHECK(show.out.find("payload:        " + FailedJob(kJid1, 0) + "\n") != std::string::npos);
  Outcome show_json = RunCli(With({"retries", "show", kJid2, "--json"}, server().Url()));
  REQUIRE(show_json.exit_code == 0);
  CHECK(std::string(ParseJson(show_json.out)["payload"].GetString()) ==
        FailedJob(kJid2, 1, "default"));

  Outcome empty = RunCli(With({"scheduled", "list"}, server().Url()));
  CHECK(empty.exit_code == 0);
  CHECK(empty.out == "no scheduled jobs\n");
  CHECK(RunCli(With({"dead", "list"}, server().Url())).out == "no dead jobs\n");
}

TEST_CASE_FIXTURE(RedisFixture, "retries retry, kill and delete act on one entry or all") {
  Run({"ZADD", "retry", "1700000100", FailedJob(kJid1, 2)});
  Run({"ZADD", "retry", "1700000200", FailedJob(kJid2, 0)});
  Run({"ZADD", "retry", "1700000300", FailedJob(kJid3, 5, "default")});

  // A jid that is not there: exit 1, one line, nothing changed.
  for (const char* sub : {"show", "retry", "delete", "kill"}) {
    Outcome missing = RunCli(With({"retries", sub, "ffffffffffffffffffffffff"}, server().Url()));
    CAPTURE(sub);
    CHECK(missing.exit_code == 1);
    CHECK(missing.out.empty());
    CHECK(missing.err ==
          "reliableq: Not found: no job with jid ffffffffffffffffffffffff in retry\n");
  }
  CHECK(ZRange("retry").size() == 3);
  CHECK(!Exists("dead"));
  CHECK(!Exists("queues"));

  double before = NowSeconds();
  Outcome retried = RunCli(With({"retries", "retry", kJid1}, server().Url()));
  double after = NowSeconds();
  REQUIRE(retried.exit_code == 0);
  CHECK(retried.out == kJid1 + ": back to queue low\n");
  std::vector<std::string> low = LRange("queue:low");
  REQUIRE(low.size() == 1);
  rapidjson::Document job = ParseJson(low[0]);
  CHECK(job["retry_count"].GetInt() == 1);
  CHECK(job["enqueued_at"].GetDouble() >= before - 1e-3);
  CHECK(job["enqueued_at"].GetDouble() <= after + 1e-3);
  CHECK(SMembers("queues") == std::vector<std::string>{"low"});
  // The same jid again: it is gone.
  CHECK(RunCli(With({"retries", "retry", kJid1}, server().Url())).exit_code == 1);

  Outcome killed = RunCli(With({"retries", "kill", kJid2}, server().Url()));
  REQUIRE(killed.exit_code == 0);
  CHECK(killed.out == kJid2 + ": moved from retry to dead\n");
  CHECK(ZRange("dead") == std::vector<std::string>{FailedJob(kJid2, 0)});

  Outcome deleted = RunCli(With({"retries", "delete", kJid3}, server().Url()));
  REQUIRE(deleted.exit_code == 0);
  CHECK(deleted.out == kJid3 + ": deleted from retry\n");
  CHECK(!Exists("retry"));

  for (int i = 0; i < 3; ++i) {
    Run({"ZADD", "retry", std::to_string(1700000000 + i), FailedJob(std::to_string(i), i)});
  }
  Outcome kill_all = RunCli(With({"retries", "kill", "--all"}, server().Url()));
  REQUIRE(kill_all.exit_code == 0);
  CHECK(kill_all.out == "moved 3 entries from retry to dead\n");
  CHECK(ZRange("dead").size() == 4);

  Run({"ZADD", "retry", "1", FailedJob("x", 0)});
  Run({"ZADD", "retry", "2", "not a job"});
  Outcome retry_all = RunCli(With({"retries", "retry", "--all"}, server().Url()));
  REQUIRE(retry_all.exit_code == 0);
  CHECK(retry_all.out ==
        "1 job from retry back to their queues; 1 entry that is not a job left in retry\n");
  CHECK(LRange("queue:low").size() == 2);
  Outcome delete_all = RunCli(With({"retries", "delete", "--all"}, server().Url()));
  REQUIRE(delete_all.exit_code == 0);
  CHECK(delete_all.out == "deleted 1 entry from retry\n");
  CHECK(!Exists("retry"));
}

TEST_CASE_FIXTURE(RedisFixture, "dead and scheduled retry, and their retry_count handling") {
  Run({"ZADD", "dead", "1700000100", FailedJob(kJid1, 25)});
  Run({"ZADD", "dead", "1700000200", FailedJob(kJid2, 0, "default")});
  Outcome dead_list = RunCli(With({"dead", "list", "--json"}, server().Url()));
  REQUIRE(dead_list.exit_code == 0);
  // Latest death first.
  CHECK(std::string(ParseJson(dead_list.out)["entries"][0]["jid"].GetString()) == kJid2);
  Outcome retried = RunCli(With({"dead", "retry", "--all"}, server().Url()));
  REQUIRE(retried.exit_code == 0);
  CHECK(retried.out == "2 jobs from dead back to their queues\n");
  CHECK(!Exists("dead"));
  REQUIRE(LRange("queue:low").size() == 1);
  CHECK(ParseJson(LRange("queue:low")[0])["retry_count"].GetInt() == 24);
  CHECK(ParseJson(LRange("queue:default")[0])["retry_count"].GetInt() == -1);

  // A scheduled job is enqueued as it is (plus enqueued_at).
  std::string later =
      R"({"class":"Later","args":[],"queue":"default","jid":")" + kJid3 + R"(","retry_count":7})";
  Run({"ZADD", "schedule", "1900000000", later});
  Outcome scheduled = RunCli(With({"scheduled", "list"}, server().Url()));
  REQUIRE(scheduled.exit_code == 0);
  CHECK(scheduled.out.rfind("time (UTC)           jid                       class  queue\n", 0) ==
        0);
  CHECK(scheduled.out.find("error") == std::string::npos);
  Outcome now = RunCli(With({"scheduled", "retry", kJid3}, server().Url()));
  REQUIRE(now.exit_code == 0);
  CHECK(now.out == kJid3 + ": back to queue default\n");
  std::vector<std::string> defaults = LRange("queue:default");
  REQUIRE(defaults.size() == 2);
  CHECK(defaults[0].rfind(later.substr(0, later.size() - 1) + ",\"enqueued_at\":", 0) == 0);
  CHECK(!Exists("schedule"));
  Run({"ZADD", "schedule", "1900000000", later});
  Outcome gone = RunCli(With({"scheduled", "delete", "--all"}, server().Url()));
  CHECK(gone.out == "deleted 1 entry from schedule\n");
}

TEST_CASE_FIXTURE(RedisFixture, "queues lists the queues; queue clear deletes one with --yes") {
  REQUIRE(RunCli(With({"push", "A", "-q", "mail"}, server().Url())).exit_code == 0);
  REQUIRE(RunCli(With({"push", "A", "-q", "mail"}, server().Url())).exit_code == 0);
  REQUIRE(RunCli(With({"push", "B"}, server().Url())).exit_code == 0);

  Outcome json = RunCli(With({"queues", "--json"}, server().Url()));
  REQUIRE(json.exit_code == 0);
  rapidjson::Document doc = ParseJson(json.out);
  const rapidjson::Value& queues = doc["queues"];
  REQUIRE(queues.Size() == 2);
  CHECK(std::string(queues[0]["name"].GetString()) == "default");
  CHECK(queues[0]["size"].GetInt64() == 1);
  CHECK(std::string(queues[1]["name"].GetString()) == "mail");
  CHECK(queues[1]["size"].GetInt64() == 2);
  CHECK(queues[1]["latency"].GetDouble() >= 0);
  CHECK(queues[1]["latency"].GetDouble() < 60);
  Outcome text = RunCli(With({"queues"}, server().Url()));
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.rfind("queue    size  latency\ndefault     1 ", 0) == 0);
  CHECK(queues[1]["paused"].IsFalse());

  // pause and resume: the state column, and the JSON flag.
  Outcome paused = RunCli(With({"queue", "pause", "mail"}, server().Url()));
  REQUIRE(paused.exit_code == 0);
  CHECK(paused.out ==
        "queue mail paused: no live worker told at once; each worker applies it within one "
        "heartbeat (5 s by default)\n");
  CHECK(RunCli(With({"queue", "pause", "mail"}, server().Url())).out ==
        "queue mail was already paused\n");
  text = RunCli(With({"queues"}, server().Url()));
  CHECK(text.out.find("queue    size  latency  state\n") == 0);
  CHECK(text.out.find("\nmail        2 ") != std::string::npos);
  CHECK(text.out.find("  paused\n") != std::string::npos);
  CHECK(ParseJson(RunCli(With({"stats", "--json"}, server().Url())).out)["queues"][1]["paused"]
            .IsTrue());
  CHECK(RunCli(With({"queue", "resume", "mail"}, server().Url())).out ==
        "queue mail resumed: no live worker told at once; each worker applies it within one "
        "heartbeat (5 s by default)\n");
  CHECK(RunCli(With({"queue", "resume", "mail"}, server().Url())).out ==
        "queue mail was not paused\n");
  CHECK(RunCli(With({"queues"}, server().Url())).out.find("paused") == std::string::npos);

  // Without --yes nothing happens.
  CheckUsageError(RunCli(With({"queue", "clear", "mail"}, server().Url())), "queue", "--yes");
  CHECK(LRange("queue:mail").size() == 2);
  Outcome cleared = RunCli(With({"queue", "clear", "mail", "--yes"}, server().Url()));
  REQUIRE(cleared.exit_code == 0);
  CHECK(cleared.out == "queue mail cleared: 2 jobs deleted\n");
  CHECK(!Exists("queue:mail"));
  CHECK(SMembers("queues") == std::vector<std::string>{"default"});
  Outcome unknown = RunCli(With({"queue", "clear", "mail", "--yes"}, server().Url()));
  CHECK(unknown.exit_code == 1);
  CHECK(unknown.err == "reliableq: Not found: no queue named 'mail'\n");
  CHECK(RunCli(With({"queues"}, server().Url())).out.find("mail") == std::string::npos);
  REQUIRE(RunCli(With({"queue", "clear", "default", "--yes"}, server().Url())).exit_code == 0);
  CHECK(RunCli(With({"queues"}, server().Url())).out == "no queues\n");
}

TEST_CASE_FIXTURE(RedisFixture, "queue pause refuses a queue it does not know unless --force") {
  REQUIRE(RunCli(With({"push", "A", "-q", "critical"}, server().Url())).exit_code == 0);
  // A typo in an incident: refused, naming the queue meant; nothing paused.
  Outcome typo = RunCli(With({"queue", "pause", "critcal"}, server().Url()));
  CHECK(typo.exit_code == 1);
  CHECK(typo.out.empty());
  CHECK(typo.err ==
        "reliableq: Not found: no queue named 'critcal' (did you mean 'critical'?); add --force "
        "to pause it ahead of its first job\n");
  CHECK_FALSE(Exists("reliableq:paused"));
  // Meant (ahead of a deploy): --force pauses it.
  Outcome ahead = RunCli(With({"queue", "pause", "nightly", "--force"}, server().Url()));
  CHECK(ahead.exit_code == 0);
  CHECK(ahead.out.rfind("queue nightly paused: ", 0) == 0);
  CHECK(SMembers("reliableq:paused") == std::vector<std::string>{"nightly"});
  // Known now (paused): no --force needed again.
  CHECK(RunCli(With({"queue", "pause", "nightly"}, server().Url())).out ==
        "queue nightly was already paused\n");
}

// True when `text` is lines of inert UTF-8: no byte below 0x20 but the
// '\n' that ends each line, no DEL, no C1 control, nothing that is not
// well-formed UTF-8.
bool InertLines(const std::string& text) {
  if (text.empty() || text.back() != '\n') return false;
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n') || c == 0x7F) return false;
    if (c < 0x80) continue;
    size_t need = c >= 0xC2 && c <= 0xDF   ? 2
                  : c >= 0xE0 && c <= 0xEF ? 3
                  : c >= 0xF0 && c <= 0xF4 ? 4
                                           : 0;
    if (need == 0 || i + need > text.size()) return false;
    for (size_t k = 1; k < need; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    if (c == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0) return false;
    i += need - 1;
  }
  return true;
}

rapidjson::Document ParseStrictJson(const std::string& text) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseFullPrecisionFlag>(
      text.c_str(), text.size());
  REQUIRE_MESSAGE(!doc.HasParseError(), text);
  return doc;
}

// A failed job whose fields hold a forged line, terminal escapes, a C1
// control and bytes that are not UTF-8.
std::string HostileJob(const std::string& jid) {
  // Raw bytes inside a JSON string: 0xFF is not UTF-8, C2 9B is CSI.
  return R"({"class":"Evil\nINFO: forged\u001b[2J","args":[")" + std::string("\xff\xc2\x9b") +
         R"("],"queue":"lo\rw","retry":true,"jid":")" + jid +
         R"(","error_message":"boom\n\u0085x","error_class":"E\u001b]0;title\u0007",)"
         R"("failed_at":1700000001.5,"retry_count":1})";
}

TEST_CASE_FIXTURE(RedisFixture, "job-set verbs escape the job data they print") {
  for (const char* set : {"retry", "dead", "schedule"}) {
    Run({"ZADD", set, "1700000100", HostileJob(kJid1)});
    Run({"ZADD", set, "1700000200", "not a job\n\x1b[2J\xff"});
  }
  for (const char* verb : {"retries", "dead", "scheduled"}) {
    CAPTURE(verb);
    Outcome show = RunCli(With({verb, "show", kJid1}, server().Url()));
    REQUIRE(show.exit_code == 0);
    CHECK_MESSAGE(InertLines(show.out), show.out);
    CHECK(show.out.find("class:          Evil\\nINFO: forged\\x1b[2J\n") != std::string::npos);
    CHECK(show.out.find("queue:          lo\\rw\n") != std::string::npos);
    CHECK(show.out.find("error_class:    E\\x1b]0;title\\x07\n") != std::string::npos);
    CHECK(show.out.find("error_message:  boom\\n\\u0085x\n") != std::string::npos);
    CHECK(show.out.find(
              R"(payload:        {"class":"Evil\nINFO: forged\u001b[2J","args":["\xff\u009b"])") !=
          std::string::npos);
    // Every line is a field: nothing forged one of its own.
    size_t lines = 0;
    for (char c : show.out) lines += c == '\n';
    CHECK(lines == 9);

    Outcome list = RunCli(With({verb, "list"}, server().Url()));
    REQUIRE(list.exit_code == 0);
    CHECK_MESSAGE(InertLines(list.out), list.out);
    CHECK(list.out.find("Evil\\nINFO: forged\\x1b[2J") != std::string::npos);

    for (const char* sub : {"list", "show"}) {
      std::vector<std::string> args = {verb, sub};
      if (std::string(sub) == "show") args.push_back(kJid1);
      args.push_back("--json");
      Outcome json = RunCli(With(args, server().Url()));
      CAPTURE(sub);
      REQUIRE(json.exit_code == 0);
      CHECK_MESSAGE(InertLines(json.out), json.out);
      rapidjson::Document doc = ParseStrictJson(json.out);
      const rapidjson::Value* found = &doc;
      if (std::string(sub) == "list") {
        for (const rapidjson::Value& e : doc["entries"].GetArray()) {
          if (e["valid"].IsTrue()) found = &e;
        }
      }
      const rapidjson::Value& entry = *found;
      // The strings decode to what was stored, but for the bytes that are
      // not UTF-8, which become U+FFFD.
      CHECK(std::string(entry["class"].GetString()) == "Evil\nINFO: forged\x1b[2J");
      CHECK(std::string(entry["error_message"].GetString()) == "boom\n\xc2\x85x");
      CHECK(std::string(entry["payload"].GetString()).find("[\"\xEF\xBF\xBD\xc2\x9b\"]") !=
            std::string::npos);
    }
  }
  Outcome dead_list = RunCli(With({"dead", "list", "--json"}, server().Url()));
  REQUIRE(dead_list.exit_code == 0);
  CHECK(std::string(ParseStrictJson(dead_list.out)["entries"][0]["payload"].GetString()) ==
        "not a job\n\x1b[2J\xEF\xBF\xBD");
  Outcome retried = RunCli(With({"retries", "retry", kJid1}, server().Url()));
  REQUIRE(retried.exit_code == 0);
  CHECK(retried.out == kJid1 + ": back to queue lo\\rw\n");
}

TEST_CASE_FIXTURE(RedisFixture, "queues, stats and errors escape what Redis and the user gave") {
  Run({"SADD", "queues", "evil\x1b[2J\nq"});
  Run({"LPUSH", "queue:evil\x1b[2J\nq", R"({"class":"A","args":[],"enqueued_at":1})"});
  for (const char* verb : {"queues", "stats"}) {
    CAPTURE(verb);
    Outcome text = RunCli(With({verb}, server().Url()));
    REQUIRE(text.exit_code == 0);
    CHECK_MESSAGE(InertLines(text.out), text.out);
    CHECK(text.out.find("\nevil\\x1b[2J\\nq  ") != std::string::npos);
    Outcome json = RunCli(With({verb, "--json"}, server().Url()));
    REQUIRE(json.exit_code == 0);
    CHECK(std::string(ParseStrictJson(json.out)["queues"][0]["name"].GetString()) ==
          "evil\x1b[2J\nq");
  }
  // An error quoting what was typed stays one line.
  Outcome missing = RunCli(With({"dead", "show", "no\nsuch\x1b[2J"}, server().Url()));
  CHECK(missing.exit_code == 1);
  CHECK(missing.err == "reliableq: Not found: no job with jid no\\nsuch\\x1b[2J in dead\n");
  CheckUsageError(RunCli({"stats", "x\ny\x1b"}), "stats", "unexpected argument 'x\\ny\\x1b'");
}

TEST_CASE("worker refuses every option past its limit with a usage error") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"-c", "40000"}, "concurrency must be an integer from 1 to 1000, not '40000'"},
      {{"-c", "1001"}, "concurrency"},
      {{"-q", "a,1001"}, "queue weight must be an integer from 0 to 1000 in -q 'a,1001'"},
      {{"-q", "a,999999999"}, "queue weight"},
      {{"-t", "86400.001"}, "--timeout needs a number of seconds from 0 to 86400 s"},
      {{"-t", "999999999"}, "--timeout"},
      {{"--heartbeat-ttl", "1000000"}, "--heartbeat-ttl needs a number of seconds above 0"},
      {{"--heartbeat-interval", "86401"}, "--heartbeat-interval"},
      {{"--janitor-interval", "100000"}, "--janitor-interval"},
      {{"--poll-interval", "999999999"}, "--poll-interval"},
      {{"--prefix", std::string(129, 'p')}, "prefix must be at most 128"},
      {{"--prefix", "bad\x01:"}, "printable ASCII"},
      {{"--tag", std::string(257, 't')}, "the tag must be at most 256 bytes"},
  };
  for (const auto& [extra, reason] : cases) {
    std::vector<std::string> args = {"worker", "-r", "x.so"};
    args.insert(args.end(), extra.begin(), extra.end());
    CAPTURE(reason);
    CheckUsageError(RunCli(args), "worker", reason);
  }
  std::vector<std::string> many = {"worker", "-r", "x.so"};
  for (int i = 0; i <= 1000; ++i) {
    many.push_back("-q");
    many.push_back("q" + std::to_string(i));
  }
  CheckUsageError(RunCli(many), "worker", "at most 1000 queues (-q), not 1001");
  std::vector<std::string> labels = {"worker", "-r", "x.so"};
  for (int i = 0; i <= 100; ++i) {
    labels.push_back("--label");
    labels.push_back("l" + std::to_string(i));
  }
  CheckUsageError(RunCli(labels), "worker", "at most 100 labels, not 101");
}

TEST_CASE_FIXTURE(RedisFixture, "worker -c 40000 is a usage error that touches nothing") {
  // With a plugin that loads and a Redis that answers, only the limit
  // stands between this command line and 40000 threads.
  std::string one = EnvPath("RELIABLEQ_TEST_PLUGIN_ONE");
  Outcome outcome = RunCli(With({"worker", "-r", one, "-c", "40000"}, server().Url()),
                           std::chrono::seconds(10));
  CheckUsageError(outcome, "worker", "concurrency must be an integer from 1 to 1000");
  CHECK(Integer({"DBSIZE"}) == 0);
}

TEST_CASE("a redis:// URL without a host is a usage error") {
  for (const char* url : {"redis://", "redis://:6380/0", "redis:///1"}) {
    CAPTURE(url);
    CheckUsageError(RunCli({"stats", "--redis", url}), "stats", "no host");
  }
  Outcome from_env = RunCli({"queues"}, std::chrono::seconds(20), "redis://:6380");
  CheckUsageError(from_env, "queues", "REDIS_URL");
  CHECK(from_env.err.find("no host") != std::string::npos);
}

void CheckNoSecret(const Outcome& outcome, const std::string& secret);

// Every verb that reads or writes a group's keys, as it would be run.
const std::vector<std::vector<std::string>>& GroupVerbs() {
  static const std::vector<std::vector<std::string>> verbs = {
      {"stats"},        {"recover"},
      {"worker"},       {"retries", "list"},
      {"dead", "list"}, {"scheduled", "list"},
      {"queues"},       {"queue", "clear", "default", "--yes"},
      {"limits"},       {"periodic", "list"},
      {"push", "X"},    {"spool", "drain", "/nonexistent-spool"},
      {"web"},
  };
  return verbs;
}

TEST_CASE("a cluster URL without a queue group is a usage error for every verb that needs one") {
  // Nothing listens there: a verb that went on would fail to connect (1).
  const std::string cluster =
      "redis+cluster://127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  for (const std::vector<std::string>& verb : GroupVerbs()) {
    CAPTURE(verb[0]);
    std::vector<std::string> args = verb;
    args.insert(args.end(), {"--redis", cluster});
    CheckUsageError(RunCli(args, std::chrono::seconds(10)), verb[0],
                    "Redis Cluster needs a queue group: give --group G");
    // From the environment, the same.
    CheckUsageError(RunCli(verb, std::chrono::seconds(10), cluster.c_str()), verb[0],
                    "Redis Cluster needs a queue group");
  }
  // With a group (--group or the URL's), that is no longer the problem.
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--redis", cluster, "--group", "g"},
        std::vector<std::string>{"--redis", cluster + "/g"},
        std::vector<std::string>{"--redis", cluster + "?group=0"}}) {
    std::vector<std::string> args = {"stats"};
    args.insert(args.end(), extra.begin(), extra.end());
    Outcome outcome = RunCli(args, std::chrono::seconds(20));
    CHECK_MESSAGE(outcome.exit_code == 1, outcome.err);
    CHECK(outcome.err.find("needs a queue group") == std::string::npos);
  }
  // The verbs that work without one: groups reads the directory of groups
  // (its own slot), migrate takes the target's group from --group; neither
  // refuses for want of a group.
  Outcome groups = RunCli({"groups", "--redis", cluster}, std::chrono::seconds(20));
  CHECK_MESSAGE(groups.exit_code == 1, groups.err);
  CHECK(groups.err.find("needs a queue group") == std::string::npos);
  Outcome migrate = RunCli(
      {"migrate", "--redis", "redis://127.0.0.1:1/0", "--to", cluster, "--group", "g", "--dry-run"},
      std::chrono::seconds(20));
  CHECK_MESSAGE(migrate.exit_code == 1, migrate.err);
  CHECK(migrate.err.find("needs a queue group") == std::string::npos);
  // spool status reads no Redis.
  Outcome status =
      RunCli({"spool", "status", "/nonexistent-spool"}, std::chrono::seconds(10), cluster.c_str());
  CHECK(status.exit_code == 1);
  CHECK(status.err.find("needs a queue group") == std::string::npos);
}

TEST_CASE("push --spool with a cluster URL without a group refuses before making the directory") {
  char templ[] = "/tmp/reliableq-cli-XXXXXX";
  REQUIRE(mkdtemp(templ) != nullptr);
  const std::string spool = std::string(templ) + "/spool";
  CheckUsageError(RunCli({"push", "X", "--spool", spool, "--redis", "redis+cluster://127.0.0.1:1"}),
                  "push", "needs a queue group");
  CHECK(access(spool.c_str(), F_OK) != 0);
  std::error_code ignored;
  std::filesystem::remove_all(templ, ignored);
}

TEST_CASE("a cluster URL whose path is a number, or without a node, is a usage error") {
  const std::string secret = "pw-s3cret";
  Outcome numbered =
      RunCli({"stats", "--redis", "redis+cluster://:" + secret + "@127.0.0.1:7000/0"});
  CheckUsageError(numbered, "stats",
                  "the path of a cluster URL is its queue group, not a database (Redis Cluster "
                  "has database 0 only)");
  CHECK(numbered.err.find("--group or ?group=") != std::string::npos);
  CheckNoSecret(numbered, secret);
  for (const std::string& url : std::vector<std::string>{
           "redis+cluster://", "redis+cluster://:" + secret + "@/g", "rediss+cluster://h:1,/g"}) {
    CAPTURE(url);
    Outcome outcome = RunCli({"stats", "--redis", url});
    CheckUsageError(outcome, "stats", "no host (redis[s]+cluster://HOST[:PORT][,HOST[:PORT]...]");
    CheckNoSecret(outcome, secret);
  }
}

TEST_CASE("help --help prints the help with exit 0") {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"help", "--help"}, std::vector<std::string>{"help", "-h"},
        std::vector<std::string>{"--help", "help"}}) {
    Outcome outcome = RunCli(args);
    CHECK(outcome.exit_code == 0);
    CHECK(outcome.err.empty());
    CHECK(outcome.out.rfind("usage: reliableq [--redis URL]", 0) == 0);
  }
  Outcome push = RunCli({"help", "push", "--help"});
  CHECK(push.exit_code == 0);
  CHECK(push.out.rfind("usage: reliableq push", 0) == 0);
}

// Checks that nothing the program wrote contains `secret`.
void CheckNoSecret(const Outcome& outcome, const std::string& secret) {
  CHECK_MESSAGE(outcome.err.find(secret) == std::string::npos, outcome.err);
  CHECK_MESSAGE(outcome.out.find(secret) == std::string::npos, outcome.out);
}

TEST_CASE("a password in a bad URL or an argument never appears in an error") {
  const std::string secret = "pw-s3cret";
  for (const std::vector<std::string>& args : {
           std::vector<std::string>{"stats", "--redis", "redis://:" + secret + "@h:port"},
           std::vector<std::string>{"stats", "--redis", "redis://u:" + secret + "@h:99999/0"},
           std::vector<std::string>{"stats", "--redis", "redis://" + secret + "@h:1/x"},
           std::vector<std::string>{"stats", "--redis", "http://:" + secret + "@h"},
           std::vector<std::string>{"stats", "--redis", "unix:///s?password=" + secret + "&x=1"},
           std::vector<std::string>{"stats", "--redis", ":" + secret + "@h"},
           // A URL typed where it is not expected is quoted, masked.
           std::vector<std::string>{"stats", "redis://:" + secret + "@h:1/0"},
           std::vector<std::string>{"redis://:" + secret + "@h:1/0", "stats"},
           std::vector<std::string>{"worker", "-r", "x.so", "-q", "a,redis://:" + secret + "@h"},
       }) {
    CAPTURE(args[0] + " " + args[1]);
    Outcome outcome = RunCli(args);
    CHECK(outcome.exit_code == 2);
    CHECK(outcome.err.find("***") != std::string::npos);
    CheckNoSecret(outcome, secret);
  }
  Outcome from_env =
      RunCli({"stats"}, std::chrono::seconds(20), ("redis://:" + secret + "@h:port").c_str());
  CHECK(from_env.exit_code == 2);
  CheckNoSecret(from_env, secret);
}

TEST_CASE_FIXTURE(RedisFixture, "a worker refuses a Redis whose data follows another key layout") {
  // 3: newer than any layout this release knows (1, and 2 for groups).
  Run({"SET", "reliableq:schema", "3"});
  Run({"LPUSH", "queue:default", R"({"class":"A","args":[],"jid":"j1"})"});
  Outcome outcome =
      RunCli(With({"worker", "-r", EnvPath("RELIABLEQ_TEST_PLUGIN_ONE")}, server().Url()));
  CHECK(outcome.exit_code == 1);
  CHECK(outcome.err ==
        "reliableq: Invalid argument: Redis records reliableq key layout '3' at "
        "reliableq:schema; this reliableq runs layout 1: the data was migrated for a newer "
        "release; upgrade this process\n");
  // It touched nothing: the job waits, no process registered.
  CHECK(LRange("queue:default").size() == 1);
  CHECK(SMembers("processes").empty());
  CHECK(Get("reliableq:schema") == "3");
  // A worker's start records the layout where there is none.
  Run({"DEL", "reliableq:schema"});
  outcome = RunCli(With({"worker", "-r", EnvPath("RELIABLEQ_TEST_PLUGIN_ONE"), "-q", "none"},
                        server().Url()),
                   std::chrono::seconds(2));
  CHECK(Get("reliableq:schema") == "1");
}

TEST_CASE_FIXTURE(RedisFixture, "recover on a group no worker has started says what is true") {
  // No record and no registry: nothing a pass could move, nothing written.
  Outcome outcome = RunCli(With({"--group", "g9", "recover"}, server().Url()));
  CHECK_MESSAGE(outcome.exit_code == 0, outcome.err);
  CHECK(outcome.out == "no dead processes\n");
  CHECK(Snapshot().empty());
  // A registry without a record: the group's keys were written by something
  // that recorded no layout, so they are not moved.
  Run({"HSET", "reliableq:{g9}:registry", "h:1:aaaaaaaaaaaa", "{}"});
  outcome = RunCli(With({"--group", "g9", "recover"}, server().Url()));
  CHECK(outcome.exit_code == 1);
  CHECK(outcome.err ==
        "reliableq: Invalid argument: reliableq:{g9}:schema is missing, yet "
        "reliableq:{g9}:registry exists: no worker of group 'g9' has recorded the layout of "
        "these keys (a worker records it at start), so they may follow another; this "
        "reliableq runs layout 2\n");
  CHECK(HGet("reliableq:{g9}:registry", "h:1:aaaaaaaaaaaa") == "{}");
  CHECK_FALSE(Exists("reliableq:{g9}:schema"));
}

TEST_CASE("an unreachable Redis is named without its password") {
  const std::string secret = "pw-s3cret";
  std::string one = EnvPath("RELIABLEQ_TEST_PLUGIN_ONE");
  for (const std::string& url :
       {"redis://:" + secret + "@127.0.0.1:1/0", "unix:///nonexistent.sock?password=" + secret}) {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"stats"}, std::vector<std::string>{"push", "A"},
          std::vector<std::string>{"dead", "list"},
          std::vector<std::string>{"worker", "-r", one}}) {
      CAPTURE(url);
      CAPTURE(args[0]);
      Outcome outcome = RunCli(With(args, url));
      CHECK(outcome.exit_code == 1);
      CHECK((outcome.err.find("127.0.0.1:1") != std::string::npos ||
             outcome.err.find("/nonexistent.sock") != std::string::npos));
      CheckNoSecret(outcome, secret);
    }
  }
}

TEST_CASE("a wrong password is refused without being shown; a password file works") {
  testing::RedisServer secured;
  {
    auto admin = redis::Connection::Open(secured.Options());
    REQUIRE(admin.ok());
    REQUIRE((*admin)->Command({"CONFIG", "SET", "requirepass", "right-s3cret"}).ok());
  }
  const std::string wrong = "wrong-s3cret";
  std::string one = EnvPath("RELIABLEQ_TEST_PLUGIN_ONE");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"stats"}, std::vector<std::string>{"queues", "--json"},
        std::vector<std::string>{"worker", "-r", one}}) {
    CAPTURE(args[0]);
    Outcome outcome = RunCli(With(args, secured.Url() + "&password=" + wrong));
    CHECK(outcome.exit_code == 1);
    CHECK(outcome.err.find(secured.socket_path()) != std::string::npos);
    CheckNoSecret(outcome, wrong);
    CheckNoSecret(outcome, "right-s3cret");
  }

  const std::string dir = secured.dir();
  auto write_file = [](const std::string& path, const std::string& content) {
    FILE* file = std::fopen(path.c_str(), "w");
    REQUIRE(file != nullptr);
    std::fwrite(content.data(), 1, content.size(), file);
    std::fclose(file);
  };
  write_file(dir + "/right", "right-s3cret\n");
  write_file(dir + "/wrong", wrong + "\n");
  write_file(dir + "/empty", "\n");
  // The file's password wins over the URL's.
  Outcome ok = RunCli(With({"stats", "--redis-password-file", dir + "/right"},
                           secured.Url() + "&password=" + wrong));
  CHECK(ok.exit_code == 0);
  CHECK(ok.out.find("processed:") != std::string::npos);
  Outcome before_verb =
      RunCli({"--redis-password-file", dir + "/right", "--redis", secured.Url(), "queues"});
  CHECK(before_verb.exit_code == 0);
  Outcome refused = RunCli(With({"stats", "--redis-password-file", dir + "/wrong"}, secured.Url()));
  CHECK(refused.exit_code == 1);
  CheckNoSecret(refused, wrong);

  CheckUsageError(RunCli({"stats", "--redis-password-file", dir + "/missing"}), "stats",
                  "cannot read --redis-password-file '" + dir + "/missing': No such file");
  CheckUsageError(RunCli({"stats", "--redis-password-file", dir}), "stats",
                  "cannot read --redis-password-file '" + dir + "': Is a directory");
  CheckUsageError(RunCli({"worker", "-r", one, "--redis-password-file", dir + "/empty"}), "worker",
                  "--redis-password-file '" + dir + "/empty' is empty");
}

TEST_CASE("the job-set and queue verbs report an unreachable Redis with exit 1") {
  const std::string url = "unix:///nonexistent.sock";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"retries", "list"}, std::vector<std::string>{"dead", "show", "x"},
        std::vector<std::string>{"scheduled", "retry", "--all"},
        std::vector<std::string>{"queues"},
        std::vector<std::string>{"queue", "clear", "a", "--yes"}}) {
    Outcome outcome = RunCli(With(args, url));
    CAPTURE(args[0]);
    CHECK(outcome.exit_code == 1);
    CHECK(outcome.out.empty());
    CHECK(outcome.err.rfind("reliableq: IO error: ", 0) == 0);
  }
}

TEST_CASE_FIXTURE(RedisFixture, "job finds a job by jid, as text and JSON; unknown exits 1") {
  const std::string jid = "feedfacefeedfacefeedface";
  const std::string payload = R"({"class":"CaptureJob","args":["\u001b[31mred"],"queue":"media",)"
                              R"("jid":")" +
                              jid + R"(","enqueued_at":1700000001.5})";
  Run({"SADD", "queues", "media"});
  Run({"LPUSH", "queue:media", payload});
  Run({"LPUSH", "queue:media", R"({"class":"Other","args":[],"jid":"x"})"});
  Run({"SET", "reliableq:job:" + jid,
       R"({"state":"dead","at":1700000000,"process":"host:1:ab","error_class":"E",)"
       R"("error_message":"line1\nline2"})",
       "EX", "600"});

  Outcome text = RunCli(With({"job", jid}, server().Url()));
  CHECK_MESSAGE(text.exit_code == 0, text.err);
  CHECK(text.err.empty());
  CHECK_MESSAGE(text.out.find("jid:            " + jid + "\n") != std::string::npos, text.out);
  CHECK_MESSAGE(text.out.find("state:          queued in media at position 0 of 2 (0 = next), "
                              "enqueued 2023-11-14T22:13:21Z (") != std::string::npos,
                text.out);
  CHECK(text.out.find("class:          CaptureJob\n") != std::string::npos);
  // Untrusted text is escaped: no raw ESC reaches the terminal.
  CHECK(text.out.find('\x1b') == std::string::npos);
  CHECK(text.out.find(R"(args:           ["\u001b[31mred"])") != std::string::npos);
  CHECK(text.out.find("last end:       dead at 2023-11-14T22:13:20Z (") != std::string::npos);
  CHECK(text.out.find("record expires: 20") != std::string::npos);

  Outcome json = RunCli(With({"job", jid, "--json"}, server().Url()));
  CHECK_MESSAGE(json.exit_code == 0, json.err);
  rapidjson::Document doc = ParseJson(json.out);
  CHECK(std::string(doc["state"].GetString()) == "queued");
  CHECK(std::string(doc["queue"].GetString()) == "media");
  CHECK(doc["position"].GetInt64() == 0);
  CHECK(doc["list_size"].GetInt64() == 2);
  CHECK(std::string(doc["payload"].GetString()) == payload);
  CHECK(std::string(doc["job"]["class"].GetString()) == "CaptureJob");
  CHECK(doc["record"].IsNull());
  CHECK(std::string(doc["last_end"]["state"].GetString()) == "dead");
  CHECK(doc["record_ttl_ms"].GetInt64() > 0);
  CHECK(doc["not_searched"].GetArray().Size() == 0);

  // Beyond --scan-limit: unknown, exit 1, naming the queue not searched.
  Outcome bounded = RunCli(With({"job", jid, "--scan-limit", "1"}, server().Url()));
  CHECK(bounded.exit_code == 0);  // the record still says how it ended before
  Run({"DEL", "reliableq:job:" + jid});
  Run({"RPUSH", "queue:media", R"({"class":"Next","args":[],"jid":"y"})"});  // taken first
  bounded = RunCli(With({"job", jid, "--scan-limit", "1"}, server().Url()));
  CHECK_MESSAGE(bounded.exit_code == 1, bounded.out);
  CHECK(bounded.out.find("state:          unknown: ") != std::string::npos);
  CHECK_MESSAGE(bounded.out.find("not searched:   queue media has 3 jobs, only the first 1 "
                                 "searched") != std::string::npos,
                bounded.out);
  Outcome unknown = RunCli(With({"job", "nope", "--json"}, server().Url()));
  CHECK(unknown.exit_code == 1);
  CHECK(std::string(ParseJson(unknown.out)["state"].GetString()) == "unknown");

  // Bad arguments: one line, exit 2, before any I/O (no Redis at this URL).
  const std::string nowhere = "redis://127.0.0.1:1/0";
  CheckUsageError(RunCli(With({"job"}, nowhere)), "job", "missing JID");
  CheckUsageError(RunCli(With({"job", "a", "b"}, nowhere)), "job", "unexpected argument 'b'");
  CheckUsageError(RunCli(With({"job", ""}, nowhere)), "job", "the jid is empty");
  CheckUsageError(RunCli(With({"job", "a", "--scan-limit", "0"}, nowhere)), "job",
                  "--scan-limit needs a positive integer");
  CheckUsageError(RunCli(With({"job", "a", "--scan-limit", "x"}, nowhere)), "job");
}

TEST_CASE_FIXTURE(RedisFixture, "sequences lists held keys; sequence release and skip") {
  auto keyed = [](const std::string& jid) {
    return R"({"class":"Pay","args":[],"queue":"default","jid":")" + jid +
           R"(","sequence":"acct"})";
  };
  Outcome none = RunCli(With({"sequences"}, server().Url()));
  REQUIRE(none.exit_code == 0);
  CHECK(none.out == "no sequence keys held\n");

  const double now = NowSeconds();
  Run({"HSET", "reliableq:sequences", "acct", "j1", "evil\x1b[2J\nk", "k\n1"});
  Run({"ZADD", "reliableq:sequences:since", std::to_string(now - 400), "acct",
       std::to_string(now - 5), "evil\x1b[2J\nk"});
  Run({"RPUSH", "reliableq:sequence:acct", keyed("j2"), keyed("j3")});

  Outcome text = RunCli(With({"sequences"}, server().Url()));
  REQUIRE(text.exit_code == 0);
  CHECK_MESSAGE(InertLines(text.out), text.out);
  CHECK_MESSAGE(text.out.rfind("KEY ", 0) == 0, text.out);
  // Oldest hold first, untrusted text escaped.
  size_t acct = text.out.find("\nacct ");
  size_t evil = text.out.find("\nevil\\x1b[2J\\nk ");
  CHECK_MESSAGE(acct != std::string::npos, text.out);
  CHECK_MESSAGE(evil > acct, text.out);
  CHECK_MESSAGE(text.out.find(" 6 min 4") != std::string::npos, text.out);
  CHECK_MESSAGE(text.out.find("k\\n1") != std::string::npos, text.out);

  Outcome json = RunCli(With({"sequences", "--json", "--limit", "1"}, server().Url()));
  REQUIRE(json.exit_code == 0);
  rapidjson::Document doc = ParseJson(json.out);
  CHECK(doc["held"].GetInt64() == 2);
  REQUIRE(doc["sequences"].Size() == 1);
  CHECK(std::string(doc["sequences"][0]["key"].GetString()) == "acct");
  CHECK(std::string(doc["sequences"][0]["holder"].GetString()) == "j1");
  CHECK(doc["sequences"][0]["waiting"].GetInt64() == 2);
  Outcome limited = RunCli(With({"sequences", "--limit", "1"}, server().Url()));
  CHECK(limited.out.find("(1 of 2 held keys shown)\n") != std::string::npos);

  Outcome skipped = RunCli(With({"sequence", "skip", "acct"}, server().Url()));
  REQUIRE(skipped.exit_code == 0);
  CHECK(skipped.out == "sequence acct: job j2 moved to the dead set\n");
  CHECK(ZRange("dead") == std::vector<std::string>{keyed("j2")});
  Outcome released = RunCli(With({"sequence", "release", "acct"}, server().Url()));
  REQUIRE(released.exit_code == 0);
  CHECK(released.out == "sequence acct released from j1: handed on to j3\n");
  CHECK(HGet("reliableq:sequences", "acct") == "j3");
  CHECK(LRange("queue:default") == std::vector<std::string>{keyed("j3")});

  // A key nobody holds, a key no job waits for: exit 1, one line.
  Outcome free_key = RunCli(With({"sequence", "release", "no\x1b[2Jkey"}, server().Url()));
  CHECK(free_key.exit_code == 1);
  CHECK(free_key.out.empty());
  CHECK(free_key.err ==
        "reliableq: Not found: sequence key 'no\\x1b[2Jkey' is not held; nothing was done\n");
  Outcome nothing = RunCli(With({"sequence", "skip", "acct"}, server().Url()));
  CHECK(nothing.exit_code == 1);
  CHECK(nothing.err ==
        "reliableq: Not found: no job waits for sequence key 'acct'; nothing "
        "was done\n");
}

TEST_CASE("sequence and sequences refuse bad command lines before any I/O") {
  // Nothing listens there: a verb that connected first would exit 1.
  const std::string url = "unix:///nonexistent.sock";
  CheckUsageError(RunCli(With({"sequence"}, url)), "sequence", "missing subcommand");
  CheckUsageError(RunCli(With({"sequence", "free", "k"}, url)), "sequence",
                  "unknown subcommand 'free'");
  CheckUsageError(RunCli(With({"sequence", "release"}, url)), "sequence",
                  "release needs a sequence KEY");
  CheckUsageError(RunCli(With({"sequence", "skip", ""}, url)), "sequence",
                  "skip needs a sequence KEY");
  CheckUsageError(RunCli(With({"sequence", "skip", "k", "more"}, url)), "sequence",
                  "unexpected argument 'more'");
  CheckUsageError(RunCli(With({"sequences", "--limit", "0"}, url)), "sequences",
                  "--limit needs a positive integer, not '0'");
  CheckUsageError(RunCli(With({"sequences", "--limit", "x"}, url)), "sequences");
  CheckUsageError(RunCli(With({"sequences", "extra"}, url)), "sequences",
                  "unexpected argument 'extra'");
}

}  // namespace
}  // namespace reliableq
