// Sentinel: real replication groups (tests/support/ha_servers.h): a client, an admin
// connection and a worker process find the master through the sentinels,
// follow it through a failover, and fail with a clear message, in bounded
// time, when the sentinels cannot name one.

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include <doctest/doctest.h>

#include "support/ha_servers.h"
#include "support/process.h"
#include "redis/connection.h"
#include "redis/discovery.h"
#include "reliableq/client.h"
#include "support/testutil.h"

namespace reliableq {
namespace {

using testing::PushUntilStored;
using testing::ReplicationGroup;
using Clock = std::chrono::steady_clock;

Job Record(const std::string& tag) {
  Job job;
  job.job_class = "RecordJob";
  job.queue = "ha";
  job.args = "[\"" + tag + "\"]";
  return job;
}

long long LengthOn(int port, const std::string& key) {
  auto connection = redis::Connection::Open(ReplicationGroup::Direct(port));
  REQUIRE(connection.ok());
  auto reply = (*connection)->Command({"LLEN", key});
  REQUIRE(reply.ok());
  return (*reply)->integer;
}


TEST_CASE("sentinel: a client pushes to the master the sentinels name, and follows a failover") {
  ReplicationGroup group;
  int first = group.MasterPort();
  Result<std::unique_ptr<Client>> client = Client::Open(group.SentinelOptions());
  REQUIRE(client.ok());
  PushResult before = PushUntilStored(**client, Record("before"), std::chrono::seconds(1));
  CHECK(before.outcome == PushOutcome::kAccepted);
  CHECK(LengthOn(first, "queue:ha") == 1);
  group.WaitInSync();

  int second = group.Failover();
  REQUIRE(second != first);
  PushResult after = PushUntilStored(**client, Record("after"), std::chrono::seconds(20));
  CHECK(after.outcome == PushOutcome::kAccepted);
  // The new master has both: the first by replication, the second pushed.
  CHECK(LengthOn(second, "queue:ha") == 2);
}

TEST_CASE("sentinel: every connection of the process follows the master when it moves") {
  ReplicationGroup group(1, 1);
  int master = group.MasterPort();
  int replica = 0;
  for (int port : group.DataPorts()) {
    if (port != master) replica = port;
  }
  RedisOptions options = group.SentinelOptions();
  auto connection = redis::Connection::Open(options);
  REQUIRE(connection.ok());
  REQUIRE((*connection)->Command({"SET", "k", "1"}).ok());
  std::shared_ptr<redis::Discovery> discovery = redis::Discovery::For(options);
  REQUIRE(discovery != nullptr);
  uint64_t epoch = discovery->epoch();
  // As if the sentinels announced the replica: the epoch moves, the
  // connection reconnects before its next command, ROLE shows a replica,
  // and the sentinels are asked again: the write still reaches the master.
  discovery->Announce(redis::Endpoint{"127.0.0.1", replica, {}});
  CHECK(discovery->epoch() == epoch + 1);
  auto reply = (*connection)->Command({"SET", "k", "2"});
  REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
  auto direct = redis::Connection::Open(ReplicationGroup::Direct(master));
  REQUIRE(direct.ok());
  auto value = (*direct)->Command({"GET", "k"});
  REQUIRE(value.ok());
  CHECK(std::string((*value)->str) == "2");
}

TEST_CASE("sentinel: no sentinel answers: the error names each one, without hanging") {
  int a = testing::FreeLoopbackPort(), b = testing::FreeLoopbackPort();
  Result<RedisOptions> options = RedisOptions::FromUrl(
      "redis+sentinel://127.0.0.1:" + std::to_string(a) + ",127.0.0.1:" + std::to_string(b) +
      "/mymaster?sentinel_timeout=300");
  REQUIRE(options.ok());
  auto start = Clock::now();
  Result<std::unique_ptr<Client>> client = Client::Open(*options);
  REQUIRE_FALSE(client.ok());
  CHECK(Clock::now() - start < std::chrono::seconds(3));
  std::string message = client.status().ToString();
  CHECK(message.find("127.0.0.1:" + std::to_string(a)) != std::string::npos);
  CHECK(message.find("127.0.0.1:" + std::to_string(b)) != std::string::npos);
  CHECK(message.find("no sentinel named the master 'mymaster'") != std::string::npos);
}

TEST_CASE("sentinel: a master name the sentinels do not know is named in the error; --sentinel") {
  ReplicationGroup group(0, 1);
  Result<RedisOptions> options = RedisOptions::FromUrl(
      "redis+sentinel://127.0.0.1:" + std::to_string(group.sentinel_ports()[0]) + "/othermaster");
  REQUIRE(options.ok());
  Result<std::unique_ptr<Client>> client = Client::Open(*options);
  REQUIRE_FALSE(client.ok());
  CHECK(client.status().ToString().find("does not know a master named 'othermaster'") !=
        std::string::npos);

  // The program: --sentinel takes the master's name from the URL's host,
  // as Sidekiq's sentinels: option does.
  std::string sentinel = "127.0.0.1:" + std::to_string(group.sentinel_ports()[0]);
  std::string bin = testing::BuildPath("RELIABLEQ_BIN");
  testing::CommandResult found =
      testing::RunCommand({bin, "stats", "--redis", "redis://mymaster/0", "--sentinel", sentinel});
  CHECK_MESSAGE(found.exit_code == 0, found.err);
  testing::CommandResult unknown = testing::RunCommand(
      {bin, "stats", "--redis", "redis://othermaster/0", "--sentinel", sentinel});
  CHECK(unknown.exit_code == 1);
  CHECK(unknown.err.find("does not know a master named 'othermaster'") != std::string::npos);
  testing::CommandResult misused = testing::RunCommand(
      {bin, "stats", "--redis", "unix:///tmp/redis.sock", "--sentinel", sentinel});
  CHECK(misused.exit_code == 2);
  CHECK(misused.err.find("--sentinel needs a redis:// or rediss:// URL") != std::string::npos);
}

TEST_CASE("sentinel: an address that stays a replica fails after the ROLE checks, naming it") {
  ReplicationGroup group(1, 0);
  int replica = group.DataPorts()[1];
  int sentinel = group.AddSentinel(replica);
  Result<RedisOptions> options = RedisOptions::FromUrl(
      "redis+sentinel://127.0.0.1:" + std::to_string(sentinel) + "/mymaster");
  REQUIRE(options.ok());
  auto start = Clock::now();
  auto connection = redis::Connection::Open(*options);
  REQUIRE_FALSE(connection.ok());
  CHECK(Clock::now() - start < std::chrono::seconds(5));
  std::string message = connection.status().ToString();
  CHECK_MESSAGE(message.find("is not a master") != std::string::npos, message);
  CHECK_MESSAGE(message.find("127.0.0.1:" + std::to_string(replica) + " (ROLE: slave) 3 times") !=
                    std::string::npos,
                message);
  CHECK_MESSAGE(message.find("127.0.0.1:" + std::to_string(sentinel)) != std::string::npos,
                message);
}

TEST_CASE("sentinel: a worker's +switch-master subscription moves off a sentinel that froze") {
  ReplicationGroup group(1, 2);
  std::string dir = std::filesystem::temp_directory_path() /
                    ("reliableq-sentinel-watch-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  // Only the first sentinel in the URL: the worker subscribes there first.
  testing::ChildProcess worker(
      {testing::BuildPath("RELIABLEQ_BIN"), "worker", "--redis", group.SentinelUrl(), "-r",
       testing::BuildPath("RELIABLEQ_DEMO_PLUGIN"), "-q", "ha", "-c", "1",
       "--heartbeat-interval", "0.25", "--heartbeat-ttl", "10"},
      {"RELIABLEQ_DEMO_LOG=" + dir + "/executions.log"}, dir + "/worker.log");
  REQUIRE(testing::WaitUntil(
      [&] { return worker.Log().find("started") != std::string::npos; }, std::chrono::seconds(10)));
  group.PauseSentinel(0);
  // Within its PING interval (5 s) and the sentinel timeout (1 s), the
  // subscription is on the other sentinel, which announces the failover.
  std::this_thread::sleep_for(std::chrono::seconds(7));
  auto direct = redis::Connection::Open(ReplicationGroup::Direct(group.sentinel_ports()[1]));
  REQUIRE(direct.ok());
  int old_master = group.MasterPort();
  REQUIRE((*direct)->Command({"SENTINEL", "FAILOVER", ReplicationGroup::kMasterName}).ok());
  CHECK_MESSAGE(
      testing::WaitUntil(
          [&] {
            return worker.Log().find("sentinels switched master 'mymaster'") != std::string::npos;
          },
          std::chrono::seconds(20)),
      worker.Log());
  auto named = (*direct)->Command(
      {"SENTINEL", "get-master-addr-by-name", ReplicationGroup::kMasterName});
  REQUIRE(named.ok());
  CHECK(std::atoi((*named)->element[1]->str) != old_master);
  group.ResumeSentinel(0);
  worker.Signal(SIGTERM);
  CHECK(worker.Wait(std::chrono::seconds(15)).has_value());
  std::filesystem::remove_all(dir);
}

TEST_CASE("sentinel: a worker process follows failovers and runs every job") {
  ReplicationGroup group;
  std::string dir = std::filesystem::temp_directory_path() /
                    ("reliableq-sentinel-worker-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string record_log = dir + "/executions.log";
  testing::ChildProcess worker(
      {testing::BuildPath("RELIABLEQ_BIN"), "worker", "--redis", group.SentinelUrl(), "-r",
       testing::BuildPath("RELIABLEQ_DEMO_PLUGIN"), "-q", "ha", "-c", "4",
       "--heartbeat-interval", "0.25", "--heartbeat-ttl", "3"},
      {"RELIABLEQ_DEMO_LOG=" + record_log}, dir + "/worker.log");
  Result<std::unique_ptr<Client>> client = Client::Open(group.SentinelOptions());
  REQUIRE(client.ok());
  std::set<std::string> pushed;
  auto push_some = [&](const std::string& tag) {
    for (int i = 0; i < 20; ++i) {
      PushResult result =
          PushUntilStored(**client, Record(tag + std::to_string(i)), std::chrono::seconds(20));
      REQUIRE_MESSAGE(result.stored(), result.reason.ToString());
      pushed.insert(result.jid);
    }
  };
  auto all_ran = [&] {
    std::set<std::string> done = testing::RecordedJids(record_log);
    for (const std::string& jid : pushed) {
      if (done.count(jid) == 0) return false;
    }
    return true;
  };
  push_some("a");
  REQUIRE(testing::WaitUntil(all_ran, std::chrono::seconds(20)));
  group.WaitInSync();
  group.Failover();
  // The worker heard the sentinels announce it (+switch-master), and moved.
  CHECK_MESSAGE(testing::WaitUntil(
      [&] { return worker.Log().find("sentinels switched master 'mymaster'") != std::string::npos; },
      std::chrono::seconds(10)), worker.Log());
  push_some("b");
  REQUIRE_MESSAGE(testing::WaitUntil(all_ran, std::chrono::seconds(30)), worker.Log());
  group.WaitInSync();
  group.KillMaster();
  push_some("c");
  REQUIRE_MESSAGE(testing::WaitUntil(all_ran, std::chrono::seconds(30)), worker.Log());
  CHECK(worker.running());
  // Its working list on the master it ended on holds nothing it is not
  // running: the reconcile after each move found nothing stranded.
  std::string log = worker.Log();
  CHECK(log.find("reconnected") != std::string::npos);
  worker.Signal(SIGTERM);
  CHECK(worker.Wait(std::chrono::seconds(15)).has_value());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace reliableq
