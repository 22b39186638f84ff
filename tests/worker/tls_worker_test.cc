// Real worker processes over TLS (`reliableq worker --redis rediss://...`):
// they run what a TLS client pushed, a SIGKILLed one's jobs are recovered
// by another, and a restart of Redis is survived, as over a plain socket
// (crash_test.cc, tools/chaos).

#include <signal.h>

#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "support/process.h"
#include "reliableq/client.h"
#include "support/testutil.h"

namespace reliableq::testing {
namespace {

using namespace std::chrono_literals;

TEST_CASE("workers over TLS run pushed jobs, recover a SIGKILLed worker's, survive a restart") {
  // An append-only file, so that a restart keeps every job.
  TlsRedisServer tls(false, {"--appendonly", "yes", "--appendfsync", "always"});
  auto admin_opened = redis::Connection::Open(tls.server().Options());
  REQUIRE(admin_opened.ok());
  redis::Connection& admin = **admin_opened;
  char templ[] = "/tmp/reliableq-tls-worker-XXXXXX";
  REQUIRE(mkdtemp(templ) != nullptr);
  const std::string dir = templ;
  const std::string record_log = dir + "/executions.log";

  auto client = Client::Open(tls.Options());
  REQUIRE_MESSAGE(client.ok(), client.status().ToString());
  std::set<std::string> pushed;
  for (int i = 0; i < 200; ++i) {
    Job job;
    job.job_class = "RecordJob";
    job.args = R"(["x", 5])";
    pushed.insert(AcceptedJid((*client)->Push(job)));
  }

  auto executions = [&] {
    std::map<std::string, int> counts;
    std::ifstream in(record_log);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) ++counts[line];
    }
    return counts;
  };
  std::vector<std::unique_ptr<ChildProcess>> workers;
  auto start_worker = [&] {
    std::vector<std::string> argv = {
        BuildPath("RELIABLEQ_BIN"), "worker", "--redis", tls.Url(), "--redis-tls-ca",
        tls.certs().ca(), "-r", BuildPath("RELIABLEQ_DEMO_PLUGIN"), "-c", "5",
        "--heartbeat-ttl", "1", "--heartbeat-interval", "0.25", "--janitor-interval", "0.5"};
    std::string log = dir + "/worker" + std::to_string(workers.size()) + ".log";
    workers.push_back(std::make_unique<ChildProcess>(
        argv, std::vector<std::string>{"RELIABLEQ_DEMO_LOG=" + record_log}, log));
    return workers.back().get();
  };

  ChildProcess* first = start_worker();
  bool started = WaitUntil([&] { return executions().size() >= 30; }, 20s);
  REQUIRE_MESSAGE(started, first->Log());
  first->Signal(SIGKILL);
  REQUIRE(first->Wait(5s));

  ChildProcess* second = start_worker();
  // Redis dies and comes back on the same port while the worker runs: it
  // reconnects over TLS and goes on.
  REQUIRE(WaitUntil([&] { return executions().size() >= 60; }, 20s));
  tls.server().KillAndRestart();
  REQUIRE_MESSAGE(
      WaitUntil([&] { return second->Log().find("reconnected to Redis at") != std::string::npos; },
                20s),
      second->Log());
  bool drained = WaitUntil(
      [&] {
        auto length = admin.Command({"LLEN", "queue:default"});
        return executions().size() == pushed.size() && length.ok() && (*length)->integer == 0;
      },
      60s);
  CHECK_MESSAGE(drained, second->Log());
  std::map<std::string, int> runs = executions();
  size_t lost = 0;
  for (const std::string& jid : pushed) lost += runs.count(jid) == 0 ? 1 : 0;
  CHECK(lost == 0);
  CHECK(runs.size() == pushed.size());
  // No certificate trouble in the second worker's log. (A handshake cut
  // short while Redis restarted may be logged: that is the outage.)
  CHECK(second->Log().find("certificate") == std::string::npos);
  CHECK(second->Log().find("hostname mismatch") == std::string::npos);
  CHECK(second->Log().find("rediss://127.0.0.1:" + std::to_string(tls.port())) !=
        std::string::npos);

  second->Signal(SIGTERM);
  CHECK(second->Wait(30s));
  workers.clear();
  std::string cmd = "rm -rf '" + dir + "'";
  CHECK(std::system(cmd.c_str()) == 0);
}

}  // namespace
}  // namespace reliableq::testing
