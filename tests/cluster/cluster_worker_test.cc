// Real workers on a real Redis Cluster (tests/support/cluster_servers.h: three
// primaries, three replicas): queue groups on different primaries run their
// jobs, retries, scheduled jobs and dead jobs; the janitor of a group
// recovers a SIGKILLed worker's jobs; a resharding under load and a
// primary SIGKILLed under load lose no job (reliableq(1), CLUSTER).
//
// Every job is a RecordJob of the demo plugin: it appends its jid to the
// worker's RELIABLEQ_DEMO_LOG, so a job that ran is a line in a file,
// whatever happened to Redis meanwhile.

#include <doctest/doctest.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/cluster_servers.h"
#include "protocol/keys.h"
#include "support/process.h"
#include "redis/connection.h"
#include "redis/key_slot.h"
#include "reliableq/client.h"
#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::protocol;
using namespace reliableq::testing;
using namespace std::chrono_literals;

namespace {

class ClusterWorkers {
 public:
  ClusterWorkers() : cluster_(RedisCluster::Shared()) {
    char templ[] = "/tmp/reliableq-cluster-workers-XXXXXX";
    dir_ = mkdtemp(templ);
  }
  ~ClusterWorkers() {
    workers_.clear();  // SIGKILLs what still runs
    if (getenv("RELIABLEQ_KEEP_TEST_DIR")) return;
    std::string cmd = "rm -rf '" + dir_ + "'";
    int ignored = std::system(cmd.c_str());
    (void)ignored;
  }

  // A worker of `group`, recording the jids it runs in `record`.
  ChildProcess& StartWorker(const std::string& group, const std::string& record,
                            const std::string& concurrency = "4",
                            const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {BuildPath("RELIABLEQ_BIN"),
                                     "worker",
                                     "--redis",
                                     cluster_.Url(group),
                                     "-r",
                                     BuildPath("RELIABLEQ_DEMO_PLUGIN"),
                                     "-c",
                                     concurrency,
                                     "--heartbeat-ttl",
                                     "1",
                                     "--heartbeat-interval",
                                     "0.25",
                                     "--janitor-interval",
                                     "0.5",
                                     "--poll-interval",
                                     "0.2"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    std::string log = dir_ + "/worker" + std::to_string(workers_.size()) + ".log";
    workers_.push_back(std::make_unique<ChildProcess>(
        argv, std::vector<std::string>{"RELIABLEQ_DEMO_LOG=" + dir_ + "/" + record}, log));
    return *workers_.back();
  }

  std::unique_ptr<Client> OpenClient(const std::string& group, int wait_replicas = 0) {
    ClientOptions options;
    options.wait_replicas = wait_replicas;
    auto client = Client::Open(cluster_.Options(group), options);
    REQUIRE_MESSAGE(client.ok(), client.status().ToString());
    return std::move(client.value());
  }

  std::unique_ptr<redis::Connection> Connect(const std::string& group) {
    auto connection = redis::Connection::Open(cluster_.Options(group));
    REQUIRE_MESSAGE(connection.ok(), connection.status().ToString());
    return std::move(connection.value());
  }

  // How often each jid appears in `record`.
  std::map<std::string, int> Ran(const std::string& record) const {
    std::map<std::string, int> ran;
    std::ifstream in(dir_ + "/" + record);
    std::string jid;
    while (in >> jid) ++ran[jid];
    return ran;
  }

  // True once every jid of `jids` ran at least once (bounded by `limit`).
  bool AllRan(const std::string& record, const std::set<std::string>& jids,
              std::chrono::seconds limit) const {
    return WaitUntil(
        [&] {
          auto ran = Ran(record);
          for (const auto& jid : jids) {
            if (!ran.count(jid)) return false;
          }
          return true;
        },
        limit);
  }

  std::string Missing(const std::string& record, const std::set<std::string>& jids) const {
    auto ran = Ran(record);
    size_t missing = 0;
    for (const auto& jid : jids) missing += ran.count(jid) ? 0 : 1;
    return std::to_string(missing) + " of " + std::to_string(jids.size()) + " never ran; logs in " +
           dir_;
  }

  static Job Record(const std::string& arg, int sleep_ms = 0) {
    Job job;
    job.job_class = "RecordJob";
    job.args =
        sleep_ms > 0 ? "[\"" + arg + "\"," + std::to_string(sleep_ms) + "]" : "[\"" + arg + "\"]";
    return job;
  }

  RedisCluster& cluster_;
  std::string dir_;
  std::vector<std::unique_ptr<ChildProcess>> workers_;
};

long long IntegerReply(redis::Connection& redis, const redis::Argv& command) {
  auto reply = redis.Command(command);
  REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
  return reply.value()->integer;
}

// A group of this file's own ("<tag><n>") whose "{group}" is in `slot`:
// the connection tests write keys of their own into RedisCluster's groups,
// and each case here takes its own tag.
std::string WorkerGroupInSlot(int slot, const std::string& tag) {
  for (int n = 0; n < 1000000; ++n) {
    std::string group = tag + std::to_string(n);
    if (redis::KeySlot("{" + group + "}") == slot) return group;
  }
  FAIL("no group in slot " << slot);
  return "";
}

std::string WorkerGroupOn(RedisCluster& cluster, int port, const std::string& tag) {
  return WorkerGroupInSlot(cluster.LowestSlotOf(port), tag);
}

// Whether some replica of the primary on `port` is connected to it.
bool HasLiveReplica(int port) {
  auto redis = redis::Connection::Open(RedisCluster::Direct(port));
  REQUIRE_MESSAGE(redis.ok(), redis.status().ToString());
  auto info = redis.value()->Command({"INFO", "replication"});
  REQUIRE_MESSAGE(info.ok(), info.status().ToString());
  return std::string(info.value()->str).find("connected_slaves:0") == std::string::npos;
}

}  // namespace

TEST_CASE_FIXTURE(ClusterWorkers,
                  "groups on three primaries: jobs, scheduled jobs, retries and dead jobs") {
  std::vector<int> primaries = cluster_.PrimaryPorts();
  REQUIRE(primaries.size() == 3);
  std::vector<std::string> groups;
  for (int port : primaries) groups.push_back(WorkerGroupOn(cluster_, port, "jobs"));

  std::map<std::string, std::set<std::string>> pushed;
  std::map<std::string, std::string> doomed_jids;
  for (const auto& group : groups) {
    // Job records too, in the group's slot.
    StartWorker(group, group + ".ran", "4", {"--records", "600"});
    auto client = OpenClient(group);
    for (int i = 0; i < 40; ++i) {
      pushed[group].insert(AcceptedJid(client->Push(Record(group + "-" + std::to_string(i)))));
    }
    pushed[group].insert(AcceptedJid(client->PushIn(Record(group + "-later"), 1.0)));
    Job doomed;
    doomed.job_class = "FailingJob";
    doomed.retry = Retry::Times(0);  // straight to dead
    doomed_jids[group] = AcceptedJid(client->Push(doomed));
    Job retried;
    retried.job_class = "FailingJob";
    retried.retry = Retry::Times(3);
    AcceptedJid(client->Push(retried));
  }
  for (const auto& group : groups) {
    CHECK_MESSAGE(AllRan(group + ".ran", pushed[group], 30s),
                  Missing(group + ".ran", pushed[group]));
    // Every key of the group is in its slot, on its own primary.
    Keys keys("reliableq:", group);
    auto redis = Connect(group);
    CHECK(WaitUntil([&] { return IntegerReply(*redis, {"ZCARD", keys.Dead()}) == 1; }, 10s));
    CHECK(WaitUntil([&] { return IntegerReply(*redis, {"ZCARD", keys.Retry()}) == 1; }, 10s));
    CHECK(IntegerReply(*redis, {"LLEN", keys.Queue("default")}) == 0);
    CHECK(IntegerReply(*redis, {"ZCARD", keys.Schedule()}) == 0);
    auto count = [&](const std::string& key) {
      auto reply = redis->Command({"GET", key});
      REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
      return reply.value()->str ? std::stoll(reply.value()->str) : 0LL;
    };
    // Failures count as processed; the counts may land a beat after the jobs.
    CHECK(WaitUntil([&] { return count(keys.Processed()) >= 43; }, 5s));
    CHECK(WaitUntil([&] { return count(keys.Failed()) >= 2; }, 5s));
    // Each end's record, found by `reliableq job` in its group.
    for (const std::string& jid : {*pushed[group].begin(), doomed_jids[group]}) {
      CHECK(WaitUntil(
          [&] {
            return IntegerReply(*redis, {"EXISTS", keys.JobRecord(jid)}) == 1;
          },
          5s));
      CommandResult found = RunCommand(
          {BuildPath("RELIABLEQ_BIN"), "--redis", cluster_.Url(group), "job", jid, "--json"});
      CHECK_MESSAGE(found.exit_code == 0, found.err);
      bool dead = jid == doomed_jids[group];
      CHECK(found.out.find(dead ? R"("state":"dead")" : R"("state":"done")") != std::string::npos);
    }
  }
  // A group's jobs ran only in its own worker.
  for (const auto& group : groups) {
    for (const auto& [jid, times] : Ran(group + ".ran")) CHECK(pushed[group].count(jid) == 1);
  }
}

TEST_CASE_FIXTURE(ClusterWorkers,
                  "sequences in groups on two primaries: each key's jobs run one at a time in "
                  "push order across two workers, every key in the group's slot") {
  std::vector<int> primaries = cluster_.PrimaryPorts();
  REQUIRE(primaries.size() == 3);
  constexpr int kKeys = 5;
  constexpr int kPerKey = 6;
  for (int p = 0; p < 2; ++p) {
    std::string group = WorkerGroupOn(cluster_, primaries[p], "seq");
    CAPTURE(group);
    auto client = OpenClient(group);
    std::map<std::string, std::vector<std::string>> pushed;  // key -> jids in push order
    for (int i = 0; i < kPerKey; ++i) {
      for (int k = 0; k < kKeys; ++k) {
        std::string key = "cus_" + std::to_string(k);
        Job job = Record(key + "-" + std::to_string(i), 20);
        job.sequence = Sequence{key};
        pushed[key].push_back(AcceptedJid(client->Push(job)));
      }
    }
    // Both workers append to one record: a key's jobs never overlap, so
    // its lines are in the order they ran.
    StartWorker(group, group + ".ran");
    StartWorker(group, group + ".ran");
    std::set<std::string> all;
    for (const auto& [key, jids] : pushed) all.insert(jids.begin(), jids.end());
    REQUIRE_MESSAGE(AllRan(group + ".ran", all, 30s), Missing(group + ".ran", all));
    std::vector<std::string> lines;
    {
      std::ifstream in(dir_ + "/" + group + ".ran");
      std::string jid;
      while (in >> jid) lines.push_back(jid);
    }
    CHECK(lines.size() == all.size());
    for (const auto& [key, jids] : pushed) {
      std::vector<std::string> order;
      for (const std::string& line : lines) {
        if (std::find(jids.begin(), jids.end(), line) != jids.end()) order.push_back(line);
      }
      CHECK_MESSAGE(order == jids, key);
    }
    Keys keys("reliableq:", group);
    auto redis = Connect(group);
    CHECK(WaitUntil([&] { return IntegerReply(*redis, {"EXISTS", keys.Sequences()}) == 0; }, 5s));
    workers_.clear();
  }
}

TEST_CASE_FIXTURE(ClusterWorkers, "the janitor of a group recovers a SIGKILLed worker's jobs") {
  std::string group = WorkerGroupOn(cluster_, cluster_.PrimaryPorts().back(), "recover");
  ChildProcess& doomed = StartWorker(group, "first.ran");
  auto client = OpenClient(group);
  Keys keys("reliableq:", group);
  std::set<std::string> jids;
  for (int i = 0; i < 4; ++i) jids.insert(AcceptedJid(client->Push(Record("slow", 3000))));
  auto redis = Connect(group);
  // All four are in the worker's working list when it dies.
  REQUIRE(WaitUntil(
      [&] {
        return IntegerReply(*redis, {"LLEN", keys.Queue("default")}) == 0;
      },
      10s));
  std::this_thread::sleep_for(300ms);
  doomed.Signal(SIGKILL);
  (void)doomed.Wait(5s);
  // Killed within the jobs' 3 s: none ended there; the second worker runs
  // them all once the first one's heartbeat is gone.
  StartWorker(group, "second.ran");
  CHECK_MESSAGE(WaitUntil(
                    [&] {
                      auto ran = Ran("second.ran");
                      return ran.size() == jids.size();
                    },
                    60s),
                Missing("second.ran", jids));
  for (const auto& [jid, times] : Ran("second.ran")) CHECK(jids.count(jid) == 1);
  CHECK(Ran("first.ran").empty());
}

TEST_CASE_FIXTURE(ClusterWorkers, "a resharding under load loses no job") {
  // The group sits in the lowest slot of its primary, so that the reshard
  // below (which takes a primary's lowest slots first) moves it.
  std::vector<int> primaries = cluster_.PrimaryPorts();
  int from = primaries[0];
  int to = primaries[1];
  int slot = cluster_.LowestSlotOf(from);
  std::string group = WorkerGroupInSlot(slot, "reshard");
  StartWorker(group, "reshard.ran", "8");

  std::set<std::string> accepted;
  std::atomic<bool> stop{false};
  std::thread producer([&] {
    auto client = OpenClient(group);
    for (int i = 0; !stop && i < 100000; ++i) {
      auto pushed = client->Push(Record("r" + std::to_string(i)));
      if (pushed.ok() && (pushed.value().outcome == PushOutcome::kAccepted)) {
        accepted.insert(pushed.value().jid);
      }
      std::this_thread::sleep_for(2ms);
    }
  });
  std::this_thread::sleep_for(1s);
  cluster_.Reshard(from, to, 40);
  std::this_thread::sleep_for(1s);
  stop = true;
  producer.join();
  CHECK(cluster_.OwnerOf(slot) == to);
  MESSAGE("pushed " << accepted.size() << " jobs while slots moved");
  CHECK(accepted.size() > 100);
  CHECK_MESSAGE(AllRan("reshard.ran", accepted, 60s), Missing("reshard.ran", accepted));
}

TEST_CASE_FIXTURE(ClusterWorkers,
                  "a primary SIGKILLed under load: every push a replica confirmed runs") {
  // A primary with a replica still up (an earlier case may have failed one
  // over already, leaving its new primary without a replica).
  int victim = 0;
  for (int port : cluster_.PrimaryPorts()) {
    if (HasLiveReplica(port)) victim = port;
  }
  REQUIRE(victim != 0);
  int slot = cluster_.LowestSlotOf(victim);
  std::string group = WorkerGroupInSlot(slot, "failover");
  StartWorker(group, "failover.ran", "8");

  std::set<std::string> replicated;
  std::atomic<bool> stop{false};
  std::thread producer([&] {
    auto client = OpenClient(group, 1);
    for (int i = 0; !stop && i < 100000; ++i) {
      auto pushed = client->Push(Record("f" + std::to_string(i)));
      if (pushed.ok() && pushed.value().outcome == PushOutcome::kReplicated) {
        replicated.insert(pushed.value().jid);
      }
      std::this_thread::sleep_for(2ms);
    }
  });
  std::this_thread::sleep_for(1s);
  cluster_.Kill(victim);
  int promoted = cluster_.WaitForPromotion(victim, slot);
  MESSAGE("slot " << slot << " moved from " << victim << " to " << promoted);
  std::this_thread::sleep_for(2s);
  stop = true;
  producer.join();
  MESSAGE(replicated.size() << " pushes confirmed by a replica");
  CHECK(replicated.size() > 100);
  // (After the promotion the new primary has no replica: pushes are not
  // confirmed any more, and do not count.)
  CHECK_MESSAGE(AllRan("failover.ran", replicated, 60s), Missing("failover.ran", replicated));
}

TEST_CASE_FIXTURE(ClusterWorkers,
                  "migrate moves a single Redis's jobs into a group that a worker then runs") {
  RedisServer single;
  auto client = Client::Open(single.Options());
  REQUIRE_MESSAGE(client.ok(), client.status().ToString());
  std::set<std::string> jids;
  for (int i = 0; i < 300; ++i) {
    Job job = Record("m" + std::to_string(i));
    if (i % 3 == 0) job.queue = "critical";
    jids.insert(AcceptedJid(client.value()->Push(job)));
  }
  // Scheduled in the past: due at once, promoted by the group's poller.
  jids.insert(AcceptedJid(client.value()->PushAt(Record("due"), 1.0)));

  std::string group = WorkerGroupOn(cluster_, cluster_.PrimaryPorts().front(), "migrate");
  std::string url = cluster_.Url(group);
  ChildProcess migrate({BuildPath("RELIABLEQ_BIN"), "--redis", single.Url(), "migrate", "--to",
                        url.substr(0, url.rfind('/')), "--group", group},
                       {}, dir_ + "/migrate.log");
  REQUIRE(migrate.Wait(60s) == std::optional<int>(0));
  // Nothing of the jobs is left on the single Redis.
  auto left = redis::Connection::Open(single.Options());
  REQUIRE(left.ok());
  CHECK(IntegerReply(*left.value(), {"EXISTS", "queue:default", "queue:critical", "schedule"}) ==
        0);

  StartWorker(group, "migrated.ran", "4", {"-q", "critical", "-q", "default"});
  CHECK_MESSAGE(AllRan("migrated.ran", jids, 60s), Missing("migrated.ran", jids));
  for (const auto& [jid, times] : Ran("migrated.ran")) CHECK(times == 1);
}

namespace reliableq::testing {
TEST_CASE_FIXTURE(ClusterWorkers,
                  "a redis:// URL to a cluster node: a worker refuses it, a verb names the cause") {
  std::vector<int> primaries = cluster_.PrimaryPorts();
  REQUIRE(primaries.size() >= 2);
  const std::string plain = "redis://127.0.0.1:" + std::to_string(primaries[0]);
  // The node would serve its own slots and answer MOVED for the others:
  // the worker refuses at start, before it writes anything.
  CommandResult worker = RunCommand({BuildPath("RELIABLEQ_BIN"), "worker", "--redis", plain, "-r",
                                     BuildPath("RELIABLEQ_DEMO_PLUGIN"), "-q", "default"});
  CAPTURE(worker.err);
  CHECK(worker.exit_code == 1);
  CHECK(std::count(worker.err.begin(), worker.err.end(), '\n') == 1);
  CHECK(worker.err.find("127.0.0.1:" + std::to_string(primaries[0]) +
                        " db 0 is a node of a Redis Cluster (cluster_enabled:1)") !=
        std::string::npos);
  CHECK(worker.err.find("use a redis+cluster:// URL") != std::string::npos);
  RedisOptions schema = cluster_.Options(WorkerGroupOn(cluster_, primaries[0], "plain"));
  schema.cluster.route_key = "reliableq:schema";
  auto where = redis::Connection::Open(schema);
  REQUIRE_MESSAGE(where.ok(), where.status().ToString());
  CHECK(IntegerReply(**where, {"EXISTS", "reliableq:schema"}) == 0);

  // A verb reads the group of a slot another primary owns: MOVED, and
  // the message says what it means.
  const std::string group = WorkerGroupOn(cluster_, primaries[1], "plain");
  CommandResult stats =
      RunCommand({BuildPath("RELIABLEQ_BIN"), "--redis", plain, "--group", group, "stats"});
  CAPTURE(stats.err);
  CHECK(stats.exit_code == 1);
  CHECK(stats.err.find("MOVED " + std::to_string(redis::KeySlot("{" + group + "}"))) !=
        std::string::npos);
  CHECK(stats.err.find("is a node of a Redis Cluster") != std::string::npos);
  CHECK(stats.err.find("use a redis+cluster:// URL") != std::string::npos);
  // Through a cluster URL the same verb works.
  CommandResult routed =
      RunCommand({BuildPath("RELIABLEQ_BIN"), "--redis", cluster_.Url(group), "stats"});
  CHECK_MESSAGE(routed.exit_code == 0, routed.err);
}

// A Client's pushes go in batches through Connection::Send, which leaves
// MOVED, ASK and TRYAGAIN in place; the client sends such a push again
// where the slot is (Connection::Resend), so that no push is refused while
// its group's slot migrates or just after it moved.
TEST_CASE("a Client push during and after a slot migration is accepted") {
  RedisCluster& cluster = RedisCluster::Shared();
  std::vector<int> primaries = cluster.PrimaryPorts();
  // The slot moves to a primary with a live replica (the failovers of
  // earlier cases leave their promoted replicas without one).
  auto with_replica = std::find_if(primaries.begin(), primaries.end(), HasLiveReplica);
  REQUIRE(with_replica != primaries.end());
  std::iter_swap(primaries.begin() + 1, with_replica);
  std::string group = WorkerGroupOn(cluster, primaries[0], "pushmove");
  int slot = redis::KeySlot(group);
  auto client = Client::Open(cluster.Options(group), ClientOptions());
  REQUIRE(client.ok());
  // A client that waits for a replica: a push sent again after a
  // redirection gets a WAIT of its own, on the node that ran it.
  ClientOptions waiting;
  waiting.wait_replicas = 1;
  auto waiting_client = Client::Open(cluster.Options(group), waiting);
  REQUIRE(waiting_client.ok());
  auto push = [&](const std::string& tag, Client* by = nullptr) {
    Job j;
    j.job_class = "Demo";
    j.args = "[]";
    auto pushed = (by != nullptr ? by : client->get())->Push(j);
    REQUIRE(pushed.ok());
    MESSAGE(tag << ": outcome " << static_cast<int>(pushed->outcome) << " "
                << pushed->reason.ToString());
    return pushed->outcome;
  };
  CHECK(push("before") == PushOutcome::kAccepted);
  cluster.BeginMigration(slot, primaries[1]);
  CHECK(push("migrating, nothing moved") == PushOutcome::kAccepted);
  cluster.MigrateKeys(slot, primaries[1], 1);
  // The push's keys are split between the nodes (TRYAGAIN) until the
  // migration moves the rest: it waits, and runs once they are together.
  std::thread finish([&] {
    std::this_thread::sleep_for(300ms);
    cluster.MigrateKeys(slot, primaries[1], 100);
  });
  CHECK(push("migrating, one key moved") == PushOutcome::kAccepted);
  finish.join();
  CHECK(push("migrating, all moved (ASK)") == PushOutcome::kAccepted);
  CHECK(push("migrating, all moved (ASK), waiting", waiting_client->get()) ==
        PushOutcome::kReplicated);
  cluster.FinishMigration(slot, primaries[1]);
  CHECK(push("after: MOVED, waiting", waiting_client->get()) == PushOutcome::kReplicated);
  CHECK(push("after: MOVED") == PushOutcome::kAccepted);
  CHECK(push("after, again") == PushOutcome::kAccepted);
  // Each push stored once, all on the slot's new primary.
  auto redis = redis::Connection::Open(cluster.Options(group));
  REQUIRE(redis.ok());
  auto length = redis.value()->Command({"LLEN", Keys("reliableq:", group).Queue("default")});
  REQUIRE(length.ok());
  CHECK(length.value()->integer == 8);
  CHECK(cluster.OwnerOf(slot) == primaries[1]);
}
}  // namespace reliableq::testing
