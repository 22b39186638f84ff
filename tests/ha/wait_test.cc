// Replica acknowledgement (ClientOptions::wait_replicas, `reliableq push
// --wait-replicas`): real masters, replicas and sentinels on loopback ports
// (ha_servers.h). What a confirmation means is checked on the replica
// itself, right after the push returns; the number of WAITs a client sends
// is read from the master's INFO commandstats.

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "support/ha_servers.h"
#include "support/process.h"
#include "redis/connection.h"
#include "redis/reply.h"
#include "reliableq/client.h"
#include "support/testutil.h"

namespace reliableq {
namespace {

using testing::ReplicationGroup;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

Job MakeJob(std::string queue = "default") {
  Job job;
  job.job_class = "HardJob";
  job.args = "[1]";
  job.queue = std::move(queue);
  return job;
}

std::unique_ptr<Client> OpenClient(const RedisOptions& options, int wait_replicas,
                                   milliseconds wait_timeout = milliseconds(2000)) {
  ClientOptions client_options;
  client_options.wait_replicas = wait_replicas;
  client_options.wait_timeout = wait_timeout;
  auto client = Client::Open(options, std::move(client_options));
  REQUIRE_MESSAGE(client.ok(), client.status().ToString());
  return std::move(client.value());
}

std::unique_ptr<redis::Connection> Connect(int port) {
  auto connection = redis::Connection::Open(ReplicationGroup::Direct(port));
  REQUIRE_MESSAGE(connection.ok(), connection.status().ToString());
  return std::move(connection.value());
}

redis::ReplyPtr Command(int port, const redis::Argv& command) {
  auto reply = Connect(port)->Command(command);
  REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
  return std::move(reply.value());
}

// The members of a list or sorted set on the server at `port`.
std::vector<std::string> Members(int port, const redis::Argv& command) {
  redis::ReplyPtr reply = Command(port, command);
  REQUIRE(reply->type == REDIS_REPLY_ARRAY);
  std::vector<std::string> out;
  for (size_t i = 0; i < reply->elements; ++i) out.emplace_back(redis::View(reply->element[i]));
  return out;
}

// Whether some member of `key` (a list) on `port` names `jid`.
bool ListHolds(int port, const std::string& key, const std::string& jid) {
  for (const std::string& payload : Members(port, {"LRANGE", key, "0", "-1"})) {
    if (payload.find("\"jid\":\"" + jid + "\"") != std::string::npos) return true;
  }
  return false;
}

// How many WAIT commands the server at `port` ran since its last CONFIG
// RESETSTAT (INFO commandstats has no line for a command never run).
long long WaitCalls(int port) {
  redis::ReplyPtr reply = Command(port, {"INFO", "commandstats"});
  std::string info(redis::View(reply.get()));
  size_t at = info.find("cmdstat_wait:calls=");
  if (at == std::string::npos) return 0;
  return std::stoll(info.substr(at + std::string("cmdstat_wait:calls=").size()));
}

void ResetStats(int port) { Command(port, {"CONFIG", "RESETSTAT"}); }

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// SIGCONT on scope exit, so that a failed check leaves no server stopped.
class Paused {
 public:
  Paused(ReplicationGroup& group, int port) : group_(group), port_(port) { group_.Pause(port_); }
  ~Paused() { Resume(); }
  void Resume() {
    if (port_ == 0) return;
    group_.Resume(port_);
    port_ = 0;
  }

 private:
  ReplicationGroup& group_;
  int port_;
};

// Pushes until a push is replicated, at most 5 s: right after a full sync
// the first WAITs may wait for the replica's once-a-second ack, longer
// than a short wait_timeout.
void WarmUp(Client& client) {
  bool replicated = testing::WaitUntil(
      [&] { return client.Push(MakeJob("warmup"))->outcome == PushOutcome::kReplicated; },
      std::chrono::seconds(5));
  REQUIRE(replicated);
}

TEST_CASE("wait_replicas 1 with a live replica: replicated, and the replica has the job") {
  ReplicationGroup group(1, 0);
  int master = group.DataPorts()[0];
  int replica = group.DataPorts()[1];
  auto client = OpenClient(ReplicationGroup::Direct(master), 1);

  Result<PushResult> pushed = client->Push(MakeJob());
  REQUIRE(pushed.ok());
  CHECK_MESSAGE(pushed->outcome == PushOutcome::kReplicated, pushed->reason.ToString());
  CHECK(pushed->replicas >= 1);
  CHECK(pushed->stored());
  CHECK(pushed->reason.ok());
  // Read on the replica at once: WAIT returned only once it had the write.
  CHECK(ListHolds(replica, "queue:default", pushed->jid));

  // A scheduled push waits the same way.
  Result<PushResult> scheduled = client->PushIn(MakeJob(), 3600);
  REQUIRE(scheduled.ok());
  CHECK_MESSAGE(scheduled->outcome == PushOutcome::kReplicated, scheduled->reason.ToString());
  CHECK(scheduled->replicas >= 1);
  std::vector<std::string> schedule = Members(replica, {"ZRANGE", "schedule", "0", "-1"});
  REQUIRE(schedule.size() == 1);
  CHECK(schedule[0].find(scheduled->jid) != std::string::npos);
}

TEST_CASE("bulk with wait_replicas: one WAIT per batch, every job replicated") {
  ReplicationGroup group(1, 0);
  int master = group.DataPorts()[0];
  int replica = group.DataPorts()[1];
  auto client = OpenClient(ReplicationGroup::Direct(master), 1);
  // The first push loads push.lua (a NOSCRIPT round trip, with its own
  // WAIT), so that the count below is the bulk push's alone.
  WarmUp(*client);
  ResetStats(master);

  std::vector<Job> jobs(2500, MakeJob());
  Result<std::vector<PushResult>> pushed = client->PushBulk(jobs);
  REQUIRE(pushed.ok());
  REQUIRE(pushed->size() == jobs.size());
  for (const PushResult& result : *pushed) {
    REQUIRE_MESSAGE(result.outcome == PushOutcome::kReplicated, result.reason.ToString());
    REQUIRE(result.replicas >= 1);
  }
  // 2,500 jobs are three batches (1,000 per batch), each one round trip.
  CHECK(WaitCalls(master) == 3);
  redis::ReplyPtr length = Command(replica, {"LLEN", "queue:default"});
  CHECK(length->integer == 2500);
}

TEST_CASE("wait_replicas 0 sends no WAIT at all") {
  ReplicationGroup group(1, 0);
  int master = group.DataPorts()[0];
  auto client = OpenClient(ReplicationGroup::Direct(master), 0);
  ResetStats(master);
  Result<PushResult> pushed = client->Push(MakeJob());
  REQUIRE(pushed.ok());
  CHECK(pushed->outcome == PushOutcome::kAccepted);
  CHECK(pushed->replicas == 0);
  CHECK(client->PushIn(MakeJob(), 60)->outcome == PushOutcome::kAccepted);
  Result<std::vector<PushResult>> bulk = client->PushBulk(std::vector<Job>(1500, MakeJob()));
  REQUIRE(bulk.ok());
  for (const PushResult& result : *bulk) REQUIRE(result.outcome == PushOutcome::kAccepted);
  CHECK(WaitCalls(master) == 0);
}

TEST_CASE("a stopped replica: not confirmed after about wait_timeout, saying how many confirmed") {
  ReplicationGroup group(1, 0);
  int master = group.DataPorts()[0];
  int replica = group.DataPorts()[1];
  auto client = OpenClient(ReplicationGroup::Direct(master), 1, milliseconds(300));
  WarmUp(*client);
  {
    Paused paused(group, replica);
    auto start = Clock::now();
    Result<PushResult> pushed = client->Push(MakeJob());
    double took = Seconds(Clock::now() - start);
    REQUIRE(pushed.ok());
    CHECK(pushed->outcome == PushOutcome::kNotConfirmed);
    CHECK_FALSE(pushed->stored());
    CHECK(pushed->replicas == 0);
    CHECK(pushed->reason.IsTimeout());
    CHECK_MESSAGE(pushed->reason.message().find(
                      "stored on the master, but only 0 of 1 replicas confirmed it within "
                      "300 ms") != std::string::npos,
                  pushed->reason.ToString());
    CHECK(took >= 0.25);
    CHECK(took < 3.0);
    // It is on the master: pushing it again under its jid is the safe retry.
    CHECK(ListHolds(master, "queue:default", pushed->jid));

    // Bulk: the first batch is not confirmed, so the second is not sent.
    ResetStats(master);
    Result<std::vector<PushResult>> bulk = client->PushBulk(std::vector<Job>(1500, MakeJob()));
    REQUIRE(bulk.ok());
    CHECK((*bulk)[0].outcome == PushOutcome::kNotConfirmed);
    CHECK((*bulk)[999].outcome == PushOutcome::kNotConfirmed);
    CHECK((*bulk)[1000].outcome == PushOutcome::kRefused);
    CHECK((*bulk)[1000].reason.message().find("not sent: an earlier batch was not confirmed") !=
          std::string::npos);
    CHECK(WaitCalls(master) == 1);
  }
  // The same connection confirms again once the replica is back.
  bool confirmed = testing::WaitUntil(
      [&] { return client->Push(MakeJob())->outcome == PushOutcome::kReplicated; });
  CHECK(confirmed);
}

TEST_CASE("a WAIT longer than the command timeout does not break the connection") {
  ReplicationGroup group(1, 0);
  int master = group.DataPorts()[0];
  int replica = group.DataPorts()[1];
  RedisOptions options = ReplicationGroup::Direct(master);
  options.command_timeout = milliseconds(200);
  auto client = OpenClient(options, 1, milliseconds(700));
  WarmUp(*client);
  {
    Paused paused(group, replica);
    auto start = Clock::now();
    Result<PushResult> pushed = client->Push(MakeJob());
    double took = Seconds(Clock::now() - start);
    REQUIRE(pushed.ok());
    CHECK(pushed->outcome == PushOutcome::kNotConfirmed);
    // WAIT's own answer, not a connection that gave up on it.
    CHECK_MESSAGE(pushed->reason.message().find(
                      "only 0 of 1 replicas confirmed it within 700 ms") != std::string::npos,
                  pushed->reason.ToString());
    CHECK(took >= 0.65);
  }
  Result<PushResult> again = client->Push(MakeJob());
  REQUIRE(again.ok());
  CHECK_MESSAGE(again->outcome == PushOutcome::kReplicated, again->reason.ToString());
}

TEST_CASE("more replicas asked for than there are: not confirmed, 1 of 2") {
  ReplicationGroup group(1, 0);
  int master = group.DataPorts()[0];
  // WAIT always runs to its timeout here (the second replica never comes):
  // 2 s, so that the one replica acknowledges in time on a loaded machine
  // (at 200 ms it once had not, with other tests running beside this one).
  auto client = OpenClient(ReplicationGroup::Direct(master), 2, milliseconds(2000));
  Result<PushResult> pushed = client->Push(MakeJob());
  REQUIRE(pushed.ok());
  CHECK(pushed->outcome == PushOutcome::kNotConfirmed);
  CHECK_MESSAGE(
      pushed->reason.message().find("only 1 of 2 replicas confirmed it") != std::string::npos,
      pushed->reason.ToString());
}

TEST_CASE("a Redis that refuses WAIT: not confirmed, with Redis's reason") {
  ReplicationGroup group(1, 0);
  int master = group.DataPorts()[0];
  // As a managed Redis may: this user may run everything but WAIT.
  Command(master, {"ACL", "SETUSER", "nowait", "on", ">secret", "~*", "&*", "+@all", "-wait"});
  RedisOptions options = ReplicationGroup::Direct(master);
  options.username = "nowait";
  options.password = "secret";
  auto client = OpenClient(options, 1);
  Result<PushResult> pushed = client->Push(MakeJob());
  REQUIRE(pushed.ok());
  CHECK(pushed->outcome == PushOutcome::kNotConfirmed);
  CHECK_MESSAGE(
      pushed->reason.message().find("stored on the master, but WAIT failed") != std::string::npos,
      pushed->reason.ToString());
  CHECK_MESSAGE(pushed->reason.message().find("NOPERM") != std::string::npos,
                pushed->reason.ToString());
  CHECK(ListHolds(master, "queue:default", pushed->jid));
}

TEST_CASE("a script Redis lost: the round trip that sends it again ends with its own WAIT") {
  ReplicationGroup group(1, 0);
  int master = group.DataPorts()[0];
  auto client = OpenClient(ReplicationGroup::Direct(master), 1);
  WarmUp(*client);
  Command(master, {"SCRIPT", "FLUSH"});
  ResetStats(master);
  Result<PushResult> pushed = client->Push(MakeJob());
  REQUIRE(pushed.ok());
  CHECK_MESSAGE(pushed->outcome == PushOutcome::kReplicated, pushed->reason.ToString());
  // One WAIT after the NOSCRIPT answer, one after the call sent again.
  CHECK(WaitCalls(master) == 2);
}

TEST_CASE("pushes from many threads share round trips, and each is replicated") {
  ReplicationGroup group(1, 0);
  int master = group.DataPorts()[0];
  int replica = group.DataPorts()[1];
  auto client = OpenClient(ReplicationGroup::Direct(master), 1);
  WarmUp(*client);
  ResetStats(master);
  constexpr int kThreads = 8;
  constexpr int kEach = 100;
  std::atomic<int> replicated{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        Result<PushResult> pushed = client->Push(MakeJob());
        if (pushed.ok() && pushed->outcome == PushOutcome::kReplicated && pushed->replicas >= 1) {
          ++replicated;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(replicated == kThreads * kEach);
  // At most one WAIT per round trip, and a round trip carries one push at
  // least.
  CHECK(WaitCalls(master) <= kThreads * kEach);
  CHECK(Command(replica, {"LLEN", "queue:default"})->integer == kThreads * kEach);
}

TEST_CASE("Open refuses a negative wait_replicas and a wait_timeout that is not positive") {
  // Checked before connecting: no server is needed.
  RedisOptions options = ReplicationGroup::Direct(testing::FreeLoopbackPort());
  ClientOptions negative;
  negative.wait_replicas = -1;
  auto opened = Client::Open(options, negative);
  REQUIRE_FALSE(opened.ok());
  CHECK(opened.status().IsInvalidArgument());
  CHECK(opened.status().message().find("wait_replicas") != std::string::npos);
  for (int ms : {0, -5}) {
    ClientOptions zero;
    zero.wait_replicas = 1;
    zero.wait_timeout = milliseconds(ms);
    auto refused = Client::Open(options, zero);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().IsInvalidArgument());
    CHECK(refused.status().message().find("wait_timeout") != std::string::npos);
  }
}

// The recommended deployment, part 1: min-replicas-to-write makes a master
// that lost its replicas refuse writes, so that a master cut off from the
// rest stops taking pushes nobody will ever see.
TEST_CASE("min-replicas-to-write: a master whose replica is away refuses pushes, storing none") {
  ReplicationGroup group(1, 0);
  int master = group.DataPorts()[0];
  int replica = group.DataPorts()[1];
  Command(master, {"CONFIG", "SET", "min-replicas-to-write", "1"});
  Command(master, {"CONFIG", "SET", "min-replicas-max-lag", "1"});
  auto client = OpenClient(ReplicationGroup::Direct(master), 1, milliseconds(200));
  WarmUp(*client);
  Paused paused(group, replica);
  // Until the master notices (its replica's last ack is older than the lag,
  // checked once a second), pushes are stored and not confirmed; never
  // replicated.
  std::optional<PushResult> refused;
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!refused && Clock::now() < deadline) {
    Result<PushResult> pushed = client->Push(MakeJob());
    REQUIRE(pushed.ok());
    REQUIRE(pushed->outcome != PushOutcome::kReplicated);
    if (pushed->outcome == PushOutcome::kRefused) refused = *pushed;
  }
  REQUIRE_MESSAGE(refused.has_value(), "the master kept taking pushes for 10 s");
  CHECK_MESSAGE(refused->reason.message().find("NOREPLICAS") != std::string::npos,
                refused->reason.ToString());
  CHECK_FALSE(ListHolds(master, "queue:default", refused->jid));
}

// A failover after pushes that one replica confirmed while the other was
// cut off from the master (pointed at a port nothing listens on, so that
// it keeps its data and its offset but receives nothing). The master then
// stops answering (SIGSTOP) and the sentinels promote a replica.
struct FailoverRun {
  int master = 0;
  int confirming = 0;
  int lagging = 0;
  int promoted = 0;
  std::vector<std::string> jids;  // pushes confirmed by `confirming`
};

// `lagging_priority`: the cut-off replica's replica-priority (the others
// keep the default, 100); the sentinels see it before anything is pushed.
FailoverRun Failover(ReplicationGroup& group, int lagging_priority) {
  FailoverRun run;
  run.master = group.DataPorts()[0];
  run.confirming = group.DataPorts()[1];
  run.lagging = group.DataPorts()[2];
  if (lagging_priority != 100) {
    std::string priority = std::to_string(lagging_priority);
    Command(run.lagging, {"CONFIG", "SET", "replica-priority", priority});
    // A sentinel reads a replica's priority from its INFO, every 10 s.
    bool seen = testing::WaitUntil(
        [&] {
          for (int sentinel : group.sentinel_ports()) {
            redis::ReplyPtr replicas =
                Command(sentinel, {"SENTINEL", "REPLICAS", ReplicationGroup::kMasterName});
            bool found = false;
            for (size_t r = 0; r < replicas->elements; ++r) {
              const redisReply* fields = replicas->element[r];
              std::string port, value;
              for (size_t i = 0; i + 1 < fields->elements; i += 2) {
                std::string_view key = redis::View(fields->element[i]);
                if (key == "port") port = redis::View(fields->element[i + 1]);
                if (key == "slave-priority") value = redis::View(fields->element[i + 1]);
              }
              if (port == std::to_string(run.lagging) && value == priority) found = true;
            }
            if (!found) return false;
          }
          return true;
        },
        std::chrono::seconds(30));
    REQUIRE_MESSAGE(seen, "the sentinels did not see the new replica-priority within 30 s");
  }
  std::string nowhere = std::to_string(testing::FreeLoopbackPort());
  Command(run.lagging, {"REPLICAOF", "127.0.0.1", nowhere});
  auto client = OpenClient(ReplicationGroup::Direct(run.master), 1);
  for (int i = 0; i < 20; ++i) {
    Result<PushResult> pushed = client->Push(MakeJob());
    REQUIRE(pushed.ok());
    REQUIRE_MESSAGE(pushed->outcome == PushOutcome::kReplicated, pushed->reason.ToString());
    REQUIRE(pushed->replicas == 1);
    run.jids.push_back(pushed->jid);
  }
  group.Pause(run.master);
  bool moved = testing::WaitUntil(
      [&] {
        run.promoted = group.MasterPort();
        return run.promoted != run.master;
      },
      std::chrono::seconds(30));
  REQUIRE_MESSAGE(moved, "no failover within 30 s");
  bool is_master = testing::WaitUntil(
      [&] {
        redis::ReplyPtr role = Command(run.promoted, {"ROLE"});
        return role->type == REDIS_REPLY_ARRAY && role->elements > 0 &&
               redis::View(role->element[0]) == "master";
      },
      std::chrono::seconds(30));
  REQUIRE(is_master);
  return run;
}

// The recommended deployment, part 2: N = 1, replicas of equal priority.
// Sentinel promotes, among replicas of equal priority, the one with the
// greatest replication offset: at least that of the replica that confirmed
// the pushes, which therefore survive.
TEST_CASE("N=1, equal priorities: confirmed pushes survive the master's loss via Sentinel") {
  ReplicationGroup group(2, 3);
  FailoverRun run = Failover(group, 100);
  CHECK(run.promoted == run.confirming);
  for (const std::string& jid : run.jids) CHECK(ListHolds(run.promoted, "queue:default", jid));
  group.Resume(run.master);
}

// Why the recommendation says "equal priorities": priority comes before the
// offset, so a preferred replica that lags wins, and the pushes that only
// the other replica confirmed are gone.
TEST_CASE("N=1, a preferred replica that lags: Sentinel promotes it, confirmed pushes are lost") {
  ReplicationGroup group(2, 3);
  FailoverRun run = Failover(group, 10);
  CHECK(run.promoted == run.lagging);
  for (const std::string& jid : run.jids) {
    CHECK_FALSE(ListHolds(run.promoted, "queue:default", jid));
  }
  group.Resume(run.master);
}

TEST_CASE("reliableq push --wait-replicas: replicated, or not confirmed with the reason") {
  ReplicationGroup group(1, 0);
  int master = group.DataPorts()[0];
  int replica = group.DataPorts()[1];
  std::string bin = testing::BuildPath("RELIABLEQ_BIN");
  std::string url = "redis://127.0.0.1:" + std::to_string(master) + "/0";

  testing::CommandResult ok =
      testing::RunCommand({bin, "push", "HardJob", "[1]", "--redis", url, "--wait-replicas", "1"});
  CHECK_MESSAGE(ok.exit_code == 0, ok.err);
  CHECK(ok.err.find("replicated (1 replica)") != std::string::npos);
  std::string jid = ok.out.substr(0, ok.out.find('\n'));
  REQUIRE(jid.size() == 24);
  CHECK(ListHolds(replica, "queue:default", jid));

  {
    Paused paused(group, replica);
    testing::CommandResult late =
        testing::RunCommand({bin, "push", "HardJob", "[1]", "--redis", url, "--wait-replicas", "1",
                             "--wait-timeout", "200"});
    CHECK(late.exit_code == 1);
    CHECK(late.out.empty());
    CHECK_MESSAGE(late.err.find("not confirmed") != std::string::npos, late.err);
    CHECK_MESSAGE(
        late.err.find("only 0 of 1 replicas confirmed it within 200 ms") != std::string::npos,
        late.err);
    CHECK(late.err.find("--jid") != std::string::npos);
  }

  testing::CommandResult usage =
      testing::RunCommand({bin, "push", "HardJob", "--redis", url, "--wait-timeout", "200"});
  CHECK(usage.exit_code == 2);
  CHECK(usage.err.find("--wait-timeout needs --wait-replicas") != std::string::npos);
  testing::CommandResult bad =
      testing::RunCommand({bin, "push", "HardJob", "--redis", url, "--wait-replicas", "-1"});
  CHECK(bad.exit_code == 2);
  testing::CommandResult zero = testing::RunCommand(
      {bin, "push", "HardJob", "--redis", url, "--wait-replicas", "1", "--wait-timeout", "0"});
  CHECK(zero.exit_code == 2);
}

}  // namespace
}  // namespace reliableq
