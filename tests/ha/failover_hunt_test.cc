// Failover, the hard cases: what the Sentinel code must keep when the
// interleavings are unkind (a master that freezes and comes back, a lookup
// another part of the process made with other settings, an address that
// cannot even be tried). Real replication groups (tests/support/ha_servers.h).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <uv.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include <doctest/doctest.h>

#include "support/ha_servers.h"
#include "support/process.h"
#include "redis/async_connection.h"
#include "redis/connection.h"
#include "redis/discovery.h"
#include "reliableq/client.h"
#include "support/testutil.h"

namespace reliableq {
namespace {

using testing::PushUntilStored;
using testing::ReplicationGroup;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// One reply of one server of the group; fails the test when it does not
// answer.
redis::ReplyPtr AskDirect(int port, const redis::Argv& command) {
  auto connection = redis::Connection::Open(ReplicationGroup::Direct(port));
  REQUIRE_MESSAGE(connection.ok(), connection.status().ToString());
  auto reply = (*connection)->Command(command);
  REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
  return std::move(*reply);
}

// The port every sentinel names once they agree on a master other than
// `old_port` which says it is one; 0 when they do not within `limit`. A
// frozen old master cannot be asked, so it is not waited for.
int WaitForPromotion(const ReplicationGroup& group, int old_port, seconds limit) {
  int found = 0;
  testing::WaitUntil(
      [&] {
        int named = 0;
        for (int sentinel : group.sentinel_ports()) {
          auto connection = redis::Connection::Open(ReplicationGroup::Direct(sentinel));
          if (!connection.ok()) return false;
          auto reply = (*connection)->Command(
              {"SENTINEL", "get-master-addr-by-name", ReplicationGroup::kMasterName});
          if (!reply.ok() || (*reply)->type != REDIS_REPLY_ARRAY) return false;
          int port = std::atoi((*reply)->element[1]->str);
          if (port == old_port || (named != 0 && port != named)) return false;
          named = port;
        }
        auto connection = redis::Connection::Open(ReplicationGroup::Direct(named));
        if (!connection.ok()) return false;
        auto role = (*connection)->Command({"ROLE"});
        if (!role.ok() || redis::RoleOf(role->get()) != "master") return false;
        found = named;
        return true;
      },
      limit);
  return found;
}

Job Record(const std::string& tag, int sleep_ms) {
  Job job;
  job.job_class = "RecordJob";
  job.queue = "hunt";
  job.args = "[\"" + tag + "\"," + std::to_string(sleep_ms) + "]";
  return job;
}


// Runs `loop` until `done` (bounded).
bool RunLoopUntil(uv_loop_t* loop, const std::function<bool()>& done, milliseconds limit) {
  return testing::WaitUntil(
      [&] {
        uv_run(loop, UV_RUN_NOWAIT);
        return done();
      },
      limit);
}

TEST_CASE("failover hunt: two setups that differ only in sentinel credentials keep their own") {
  ReplicationGroup group(0, 1);
  RedisOptions right = group.SentinelOptions();
  // The same sentinels and master, with a sentinel password the sentinels
  // do not have (a mistyped admin command, a second client of the process
  // configured for another environment).
  Result<RedisOptions> wrong =
      RedisOptions::FromUrl(group.SentinelUrl() + "?sentinel_password=not-the-password");
  REQUIRE(wrong.ok());
  std::shared_ptr<redis::Discovery> other = redis::Discovery::For(*wrong);
  REQUIRE(other != nullptr);
  // A connection with the right settings must not ask the sentinels with
  // the other one's password (nor the other way round).
  auto connection = redis::Connection::Open(right);
  CHECK_MESSAGE(connection.ok(), connection.status().ToString());
  std::shared_ptr<redis::Discovery> mine = redis::Discovery::For(right);
  CHECK(mine->options().password.empty());
}

TEST_CASE("failover hunt: an async connection asks the sentinels again when the master it was "
          "told of cannot even be tried") {
  ReplicationGroup group(0, 1);
  RedisOptions options = group.SentinelOptions();
  uv_loop_t loop;
  REQUIRE(uv_loop_init(&loop) == 0);
  {
    redis::AsyncConnection connection(&loop, options);
    auto connect = [&]() -> Status {
      std::optional<Status> ready;
      connection.Connect([&](const Status& s) { ready = s; });
      RunLoopUntil(&loop, [&] { return ready.has_value(); }, seconds(10));
      REQUIRE(ready.has_value());
      return *ready;
    };
    REQUIRE(connect().ok());
    connection.Close();
    // As a +switch-master, or a sentinel's answer, naming a host this
    // machine cannot resolve (sentinels announcing hostnames, a record not
    // published yet): the connect fails before any socket exists.
    std::shared_ptr<redis::Discovery> discovery = redis::Discovery::For(options);
    discovery->Announce(redis::Endpoint{"no-such-host.invalid", group.MasterPort(), {}});
    Status first = connect();
    REQUIRE_FALSE(first.ok());
    // The blocking connection asks the sentinels again after such a
    // failure (Connection::ConnectToMaster); so must this one, or it tries
    // the same address forever.
    Status again = connect();
    CHECK_MESSAGE(again.ok(), again.ToString());
    connection.Close();
  }
  for (int i = 0; i < 100 && uv_loop_alive(&loop); ++i) uv_run(&loop, UV_RUN_NOWAIT);
  uv_loop_close(&loop);
}

TEST_CASE("failover hunt: a sentinel that names a replica does not hide the ones that name "
          "the master") {
  ReplicationGroup group(1, 1);
  int master = group.MasterPort();
  int replica = group.DataPorts()[1];
  REQUIRE(replica != master);
  // A sentinel with a stale view (cut off from the others, or restarted
  // with an old configuration) that names the replica; it answers first.
  int stale = group.AddSentinel(replica);
  Result<RedisOptions> options = RedisOptions::FromUrl(
      "redis+sentinel://127.0.0.1:" + std::to_string(stale) + ",127.0.0.1:" +
      std::to_string(group.sentinel_ports()[0]) + "/mymaster");
  REQUIRE(options.ok());
  // ROLE shows a replica each time; the next look must go to another
  // sentinel, which names the master. Asking the stale one first again
  // (it answered last) fails every connection of the process for good.
  auto connection = redis::Connection::Open(*options);
  REQUIRE_MESSAGE(connection.ok(), connection.status().ToString());
  auto port = (*connection)->Command({"CONFIG", "GET", "port"});
  REQUIRE(port.ok());
  CHECK(std::atoi((*port)->element[1]->str) == master);
}

// A TCP port that accepts connections (the kernel completes them) and
// never answers: a sentinel that is frozen, or cut off behind a firewall
// that lets the handshake through.
class SilentPort {
 public:
  SilentPort() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(listen(fd_, 16) == 0);
    socklen_t length = sizeof address;
    REQUIRE(getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    port_ = ntohs(address.sin_port);
  }
  ~SilentPort() { close(fd_); }
  SilentPort(const SilentPort&) = delete;
  SilentPort& operator=(const SilentPort&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST_CASE("failover hunt: a lookup running on another thread holds the loop's calls no longer "
          "than one lookup") {
  SilentPort a, b;
  // One lookup: 2 sentinels x 500 ms (discovery.h: at most the timeout
  // times the number of sentinels).
  Result<RedisOptions> options = RedisOptions::FromUrl(
      "redis+sentinel://127.0.0.1:" + std::to_string(a.port()) + ",127.0.0.1:" +
      std::to_string(b.port()) + "/mymaster?sentinel_timeout=500");
  REQUIRE(options.ok());
  std::shared_ptr<redis::Discovery> discovery = redis::Discovery::For(*options);
  const auto one_lookup = milliseconds(1000);
  auto timed = [](const std::function<void()>& call) {
    auto start = Clock::now();
    call();
    return std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  };
  // The janitor's thread (a blocking connection) starts a lookup; the
  // worker's loop then breaks a connection (Fail calls Invalidate) and
  // connects again (Connect calls Find).
  std::thread janitor([&] { CHECK_FALSE(discovery->Find().ok()); });
  std::this_thread::sleep_for(milliseconds(100));
  milliseconds invalidate = timed([&] { discovery->Invalidate(discovery->epoch()); });
  janitor.join();
  std::thread janitor_again([&] { CHECK_FALSE(discovery->Find().ok()); });
  std::this_thread::sleep_for(milliseconds(100));
  milliseconds find = timed([&] { CHECK_FALSE(discovery->Find().ok()); });
  janitor_again.join();
  // Invalidate only marks the answer stale: it has no reason to wait for
  // the sentinels.
  CHECK_MESSAGE(invalidate < one_lookup / 4, "Invalidate took " << invalidate.count() << " ms");
  // A Find that meets a lookup on its way may wait for that one, but not
  // for it and then one more of its own.
  CHECK_MESSAGE(find < one_lookup * 3 / 2, "Find took " << find.count() << " ms");
}

TEST_CASE("failover hunt: a worker whose master froze and came back strands no job") {
  ReplicationGroup group;
  std::string dir = std::filesystem::temp_directory_path() /
                    ("reliableq-failover-hunt-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string record_log = dir + "/executions.log";
  testing::ChildProcess worker(
      {testing::BuildPath("RELIABLEQ_BIN"), "worker", "--redis", group.SentinelUrl(), "-r",
       testing::BuildPath("RELIABLEQ_DEMO_PLUGIN"), "-q", "hunt", "-c", "4",
       "--heartbeat-interval", "0.5", "--heartbeat-ttl", "15"},
      {"RELIABLEQ_DEMO_LOG=" + record_log}, dir + "/worker.log");
  // The heartbeat outlives the failover: the worker is not taken for dead,
  // so what empties its working list on the new master is the reconcile
  // that follows its move, not the one after a re-registration.
  RedisOptions client_options = group.SentinelOptions();
  client_options.command_timeout = milliseconds(1000);
  std::set<std::string> pushed;
  auto ran = [&] { return testing::RecordedJids(record_log); };
  auto all_ran = [&] {
    std::set<std::string> done = ran();
    for (const std::string& jid : pushed) {
      if (done.count(jid) == 0) return false;
    }
    return true;
  };
  auto push_some = [&](const std::string& tag, int n, int sleep_ms) {
    Result<std::unique_ptr<Client>> client = Client::Open(client_options);
    REQUIRE_MESSAGE(client.ok(), client.status().ToString());
    for (int i = 0; i < n; ++i) {
      PushResult result =
          PushUntilStored(**client, Record(tag + std::to_string(i), sleep_ms), seconds(20));
      REQUIRE_MESSAGE(result.stored(), result.reason.ToString());
      pushed.insert(result.jid);
    }
  };

  // Slow jobs: when the master freezes, the worker holds some (running and
  // prefetched) in its working list, with acks on their way.
  int old_master = group.MasterPort();
  push_some("a", 24, 250);
  REQUIRE(testing::WaitUntil([&] { return ran().size() >= 4; }, seconds(10)));
  group.WaitInSync();
  group.Pause(old_master);
  int new_master = WaitForPromotion(group, old_master, seconds(30));
  // It comes back while it still takes itself for the master: what the
  // worker's dead connections left in its socket runs there now, until the
  // sentinels turn it into a replica.
  group.Resume(old_master);
  REQUIRE(new_master != 0);
  push_some("b", 8, 0);
  REQUIRE_MESSAGE(testing::WaitUntil(all_ran, seconds(40)), worker.Log());
  CHECK(worker.running());

  // Nothing stays in the worker's working list on the new master: every
  // job there was run (all_ran) and its ack, or the reconcile, took it out.
  auto stranded = [&] {
    redis::ReplyPtr keys = AskDirect(new_master, {"KEYS", "reliableq:working:*"});
    long long total = 0;
    for (size_t i = 0; i < keys->elements; ++i) {
      total += AskDirect(new_master, {"LLEN", keys->element[i]->str})->integer;
    }
    return total;
  };
  bool emptied = testing::WaitUntil([&] { return stranded() == 0; }, seconds(10));
  CHECK_MESSAGE(emptied, "jobs left in the working lists: " << stranded() << "\n" << worker.Log());
  CHECK(AskDirect(new_master, {"LLEN", "queue:hunt"})->integer == 0);
  worker.Signal(SIGTERM);
  CHECK(worker.Wait(seconds(15)).has_value());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace reliableq
