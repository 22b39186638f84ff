// OutcomesFixture: a private Redis, real worker processes with command and
// HTTP handlers, the HTTP server of tests/support, and the reading of where
// a job ended one run (external_outcomes_test.cc, job_records_test.cc).

#ifndef RELIABLEQ_TESTS_WORKER_OUTCOMES_FIXTURE_H_
#define RELIABLEQ_TESTS_WORKER_OUTCOMES_FIXTURE_H_

#include <doctest/doctest.h>
#include <rapidjson/document.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "reliableq/client.h"
#include "support/process.h"
#include "support/testutil.h"

namespace reliableq::testing {

using namespace std::chrono_literals;

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

inline std::string Field(const std::string& payload, const char* name) {
  rapidjson::Document doc;
  doc.Parse(payload.c_str());
  if (doc.HasParseError() || !doc.HasMember(name)) return "<absent>";
  const rapidjson::Value& value = doc[name];
  if (value.IsString()) return value.GetString();
  if (value.IsInt()) return std::to_string(value.GetInt());
  return "<other>";
}

inline double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Where a job ended one run, and what that run counted.
struct Ending {
  std::string jid;
  std::string place;                    // "gone", "queue", "schedule", "retry" or "dead"
  std::string payload;                  // in a sorted set or the queue
  double score = 0;                     // in a sorted set: when it runs again, or when it died
  long long processed = 0, failed = 0;  // what the run added to the counters
  double pushed_at = 0, ended_at = 0;

  // Its score, as an offset from the run: at least `low` seconds after the
  // push, at most `high` after the end.
  bool ScoredWithin(double low, double high) const {
    return score >= pushed_at + low - 0.01 && score <= ended_at + high + 0.01;
  }
};

class OutcomesFixture : public RedisFixture {
 public:
  OutcomesFixture() {
    char templ[] = "/tmp/reliableq-outcomes-XXXXXX";
    dir_ = mkdtemp(templ);
    auto client = Client::Open(options());
    REQUIRE_MESSAGE(client.ok(), client.status().ToString());
    client_ = std::move(client.value());
  }
  ~OutcomesFixture() {
    children_.clear();  // SIGKILLed by PID and reaped
    std::string cmd = "rm -rf '" + dir_ + "'";
    int ignored = std::system(cmd.c_str());
    (void)ignored;
  }

  // A worker process (at debug level: -v) with these handler options,
  // beating every `heartbeat_interval` seconds.
  ChildProcess& StartWorker(std::vector<std::string> extra,
                            const std::string& heartbeat_interval = "0.25") {
    std::vector<std::string> argv = {BuildPath("RELIABLEQ_BIN"),
                                     "worker",
                                     "--redis",
                                     server().Url(),
                                     "-c",
                                     "2",
                                     "--heartbeat-ttl",
                                     "1",
                                     "--heartbeat-interval",
                                     heartbeat_interval,
                                     "--kill-grace",
                                     "0.2",
                                     "-v"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return Start(argv, "worker.log");
  }

  // The HTTP server of tests/support, its base URL.
  std::string StartHttpServer() {
    std::string script =
        BuildPath("RELIABLEQ_EXAMPLES_DIR") + "/../tests/support/" + "outcome_http_server.py";
    std::string out = dir_ + "/http.out";
    Start({FindProgram("python3"), script, "--log", dir_ + "/requests"}, "http.out");
    std::string port;
    REQUIRE(WaitUntil(
        [&] {
          std::string text = ReadFile(out);
          if (text.find('\n') == std::string::npos) return false;
          port = text.substr(0, text.find('\n'));
          return true;
        },
        10s));
    return "http://127.0.0.1:" + port;
  }

  // A /bin/sh script dir/`name` with `body`.
  std::string Script(const std::string& name, const std::string& body) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    chmod(path.c_str(), 0755);
    return path;
  }

  long long Counter(const char* key) {
    std::string count = Get(key);
    return count.empty() ? 0 : std::stoll(count);
  }

  // Where `jid` is now: its place, payload and score.
  Ending Locate(const std::string& jid) {
    Ending found;
    found.jid = jid;
    found.place = "gone";
    for (const std::string& entry : LRange("queue:default")) {
      if (Field(entry, "jid") == jid) found.place = "queue", found.payload = entry;
    }
    for (const char* set : {"schedule", "retry", "dead"}) {
      for (const auto& [entry, score] : ZRangeWithScores(set)) {
        if (Field(entry, "jid") != jid) continue;
        found.place = set;
        found.payload = entry;
        found.score = score;
      }
    }
    return found;
  }

  // Pushes one job of `job_class`, waits (bounded) for its run to end,
  // that is for stat:processed to count it and the job to be `expected`,
  // and takes it out of the way (a snoozed or retried job would run again
  // during the next case and count twice).
  Ending RunOne(const std::string& job_class, const std::string& expected) {
    long long processed = Counter("stat:processed");
    long long failed = Counter("stat:failed");
    double pushed_at = Now();
    Job job;
    job.job_class = job_class;
    job.args = "[]";
    std::string jid = AcceptedJid(client_->Push(job));
    bool counted = WaitUntil([&] { return Counter("stat:processed") > processed; }, 15s);
    CHECK_MESSAGE(counted, (job_class + ": never counted as processed"));
    Ending ending = Locate(jid);
    WaitUntil(
        [&] {
          ending = Locate(jid);
          return ending.place == expected;
        },
        2s);
    ending.ended_at = Now();
    ending.pushed_at = pushed_at;
    ending.processed = Counter("stat:processed") - processed;
    ending.failed = Counter("stat:failed") - failed;
    if (ending.place != "gone" && ending.place != "queue")
      Run({"ZREM", ending.place, ending.payload});
    return ending;
  }

  std::string WorkerLog() { return ReadFile(dir_ + "/worker.log"); }

  // The worker log's lines that hold every one of `parts`.
  std::vector<std::string> LogLines(const std::vector<std::string>& parts) {
    std::vector<std::string> lines;
    std::istringstream in(WorkerLog());
    for (std::string line; std::getline(in, line);) {
      bool all = true;
      for (const std::string& part : parts) all = all && line.find(part) != std::string::npos;
      if (all) lines.push_back(line);
    }
    return lines;
  }

  std::string dir_;
  std::unique_ptr<Client> client_;

 private:
  ChildProcess& Start(const std::vector<std::string>& argv, const std::string& log) {
    children_.push_back(
        std::make_unique<ChildProcess>(argv, std::vector<std::string>{}, dir_ + "/" + log));
    return *children_.back();
  }

  std::vector<std::unique_ptr<ChildProcess>> children_;
};

}  // namespace reliableq::testing

#endif  // RELIABLEQ_TESTS_WORKER_OUTCOMES_FIXTURE_H_
