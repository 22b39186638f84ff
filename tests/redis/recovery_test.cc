// The janitor pass and Admin end to end on data laid out by hand, as a
// crashed worker would have left it: registry entries, heartbeats (or their
// absence), working lists and queues.

#include "protocol/recovery.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "codec/job_codec.h"
#include "protocol/keys.h"
#include "protocol/process_entry.h"
#include "reliableq/admin.h"
#include "protocol/script_calls.h"
#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::codec;
using namespace reliableq::protocol;
using namespace reliableq::testing;

namespace {

using Strings = std::vector<std::string>;

const std::string kDead1 = "host-a:11:aaaaaaaaaaaa";
const std::string kDead2 = "host-b:22:bbbbbbbbbbbb";
const std::string kLive = "host-c:33:cccccccccccc";
const std::string kBroken = "host-d:44:dddddddddddd";

std::string Entry(const std::string& identity, const Strings& queues) {
  std::string json = R"({"identity":")" + identity + R"(","hostname":"h","pid":1,)" +
                     R"("started_at":1700000000.5,"queues":[)";
  for (size_t i = 0; i < queues.size(); ++i) {
    json += (i ? ",\"" : "\"") + queues[i] + "\"";
  }
  return json + "]}";
}

std::string Job(const std::string& tag) {
  return R"({"class":"HardJob","args":[")" + tag +
         R"("],"queue":"q","jid":"0123456789abcdef01234567","created_at":1700000000.1234567})";
}

std::string Interrupted(const std::string& payload, int n) {
  return payload.substr(0, payload.size() - 1) + ",\"interrupted_count\":" + std::to_string(n) +
         "}";
}

struct RecoveryFixture : RedisFixture {
  Keys keys;

  void Register(const std::string& identity, const std::string& entry, bool alive) {
    Run({"HSET", keys.Registry(), identity, entry});
    Run({"SADD", "processes", identity});
    Run({"HSET", identity, "busy", "1"});
    if (alive) Run({"SET", keys.Heartbeat(identity), "1", "PX", "60000"});
  }

  // Jobs fetched in this order (the first is the oldest, at the right).
  void Fetched(const std::string& identity, const std::string& queue, const Strings& jobs) {
    for (const std::string& job : jobs) Run({"LPUSH", keys.Working(identity, queue), job});
  }

  // Two dead processes, a live one and one whose registry entry is garbage.
  void Cluster() {
    Register(kDead1, Entry(kDead1, {"critical", "default"}), false);
    Fetched(kDead1, "critical", {Job("c1"), Job("c2")});
    Fetched(kDead1, "default", {Job("d1")});
    Register(kDead2, Entry(kDead2, {"default", "default", "low"}), false);
    Fetched(kDead2, "default", {Interrupted(Job("d2"), 3)});
    Register(kLive, Entry(kLive, {"default"}), true);
    Fetched(kLive, "default", {Job("live")});
    Register(kBroken, "{not json", false);
    Run({"LPUSH", "queue:default", "waiting"});
  }

  std::unique_ptr<Admin> OpenAdmin() {
    auto admin = Admin::Open(options());
    REQUIRE_MESSAGE(admin.ok(), admin.status().ToString());
    return std::move(admin.value());
  }

};

// "identity alive queue:requeued/dead ..." for compact comparisons.
Strings Describe(const RecoveryReport& report) {
  Strings out;
  for (const IdentityRecovery& id : report.identities) {
    std::string line = id.identity + (id.alive ? " alive" : " dead");
    for (const QueueRecovery& q : id.queues) {
      line += " " + q.queue + ":" + std::to_string(q.requeued) + "/" + std::to_string(q.dead);
    }
    out.push_back(line);
  }
  return out;
}

}  // namespace

TEST_CASE("a registry entry's queues are read once each, and a bad one names none") {
  ProcessEntry entry;
  CHECK(DecodeProcessEntry(Entry("x", {"b", "a", "b"}), &entry));
  CHECK(entry.queues == Strings{"b", "a"});
  for (const char* bad : {"{not json", "[]", R"({"queues":"a"})", R"({"queues":[1]})",
                          R"({"queues":["a",""]})", R"({"identity":"x"})"}) {
    CAPTURE(bad);
    ProcessEntry none;
    CHECK_FALSE(DecodeProcessEntry(bad, &none));
    CHECK(none.queues.empty());
  }
  // Nested far deeper than a recursive parser's stack allows: refused, no
  // crash.
  std::string deep = R"({"identity":)" + std::string(1000000, '[') + std::string(1000000, ']') + "}";
  ProcessEntry none;
  CHECK_FALSE(DecodeProcessEntry(deep, &none));
}

TEST_CASE("a registry entry reads back as it was written") {
  ProcessEntry entry;
  entry.identity = "host:42:abcdef012345";
  entry.hostname = "host";
  entry.pid = 42;
  entry.started_at = 1700000000.5;
  entry.queues = {"critical", "default"};
  entry.clients = {17, 18};
  std::string json = EncodeProcessEntry(entry);
  CHECK(json == R"({"identity":"host:42:abcdef012345","hostname":"host","pid":42,)"
                R"("started_at":1700000000.500000,"queues":["critical","default"],)"
                R"("clients":[17,18]})");
  ProcessEntry read;
  REQUIRE(DecodeProcessEntry(json, &read));
  CHECK(read.identity == entry.identity);
  CHECK(read.hostname == entry.hostname);
  CHECK(read.pid == 42);
  CHECK(read.started_at == 1700000000.5);
  CHECK(read.queues == entry.queues);
  CHECK(read.clients == entry.clients);
  CHECK(read.beat_client == 0);
  CHECK(read.ttl_ms == 0);
  CHECK(read.run_id.empty());

  // What lets a janitor judge the process by its connections.
  entry.beat_client = 17;
  entry.ttl_ms = 30000;
  entry.run_id = "0123456789abcdef0123456789abcdef01234567";
  entry.clients_run = entry.run_id;
  json = EncodeProcessEntry(entry);
  CHECK(json == R"({"identity":"host:42:abcdef012345","hostname":"host","pid":42,)"
                R"("started_at":1700000000.500000,"queues":["critical","default"],)"
                R"("clients":[17,18],"clients_run":"0123456789abcdef0123456789abcdef01234567",)"
                R"("beat_client":17,"ttl_ms":30000,)"
                R"("run_id":"0123456789abcdef0123456789abcdef01234567"})");
  REQUIRE(DecodeProcessEntry(json, &read));
  CHECK(read.beat_client == 17);
  CHECK(read.ttl_ms == 30000);
  CHECK(read.run_id == entry.run_id);
  CHECK(read.clients_run == entry.run_id);
  // Values of the wrong kind read as unknown.
  REQUIRE(DecodeProcessEntry(R"({"queues":[],"beat_client":-3,"ttl_ms":"30000","run_id":7})",
                             &read));
  CHECK(read.beat_client == 0);
  CHECK(read.ttl_ms == 0);
  CHECK(read.run_id.empty());
}

TEST_CASE_FIXTURE(RecoveryFixture, "a process whose key has the wrong type does not stop the pass") {
  // queue:critical holds a string: kDead1's critical list cannot go back,
  // so kDead1 is reported and left as it is, and kDead2 (after it in
  // identity order) is recovered all the same, dry run or not.
  Cluster();
  Run({"SET", "queue:critical", "not a list"});
  auto admin = OpenAdmin();
  RecoverOptions dry;
  dry.dry_run = true;
  for (bool dry_run : {true, false}) {
    CAPTURE(dry_run);
    auto report = admin->Recover(dry_run ? dry : RecoverOptions{});
    REQUIRE_MESSAGE(report.ok(), report.status().ToString());
    REQUIRE(report->identities.size() >= 2);
    const IdentityRecovery& first = report->identities[0];
    CHECK(first.identity == kDead1);
    CHECK(first.error.find("WRONGTYPE") != std::string::npos);
    CHECK(first.queues.empty());
    CHECK(report->identities[1].identity == kDead2);
    CHECK(report->identities[1].error.empty());
    CHECK(Describe(*report)[1] == kDead2 + " dead default:0/1 low:0/0");
  }
  // kDead1 keeps its jobs and its registration, for a later pass.
  CHECK(LRange(keys.Working(kDead1, "critical")) == Strings{Job("c2"), Job("c1")});
  CHECK(LRange(keys.Working(kDead1, "default")) == Strings{Job("d1")});
  CHECK(HGet(keys.Registry(), kDead1) == Entry(kDead1, {"critical", "default"}));
  CHECK(Get("queue:critical") == "not a list");
  // kDead2 is gone, its job in the dead set.
  CHECK(HGet(keys.Registry(), kDead2).empty());
  CHECK(ZRange("dead").size() == 1);
  // Once the key is fixed, the next pass recovers kDead1.
  Run({"DEL", "queue:critical"});
  auto again = admin->Recover({});
  REQUIRE(again.ok());
  CHECK(again->identities[0].error.empty());
  CHECK(Describe(*again)[0] == kDead1 + " dead critical:2/0 default:1/0");
}

TEST_CASE_FIXTURE(RecoveryFixture, "a pass moves nothing when Redis records another key layout") {
  Cluster();
  auto admin = OpenAdmin();
  Run({"SET", keys.Schema(), "3"});
  auto report = admin->Recover({});
  REQUIRE_FALSE(report.ok());
  CHECK(report.status().code() == Status::Code::kInvalidArgument);
  CHECK(report.status().message().find("layout '3' at reliableq:schema") != std::string::npos);
  CHECK(report.status().message().find("upgrade this process") != std::string::npos);
  CHECK(LRange(keys.Working(kDead1, "critical")) == Strings{Job("c2"), Job("c1")});
  CHECK(HGet(keys.Registry(), kDead1) == Entry(kDead1, {"critical", "default"}));
  // No record is layout 1: the pass runs, and writes no record.
  Run({"DEL", keys.Schema()});
  report = admin->Recover({});
  REQUIRE_MESSAGE(report.ok(), report.status().ToString());
  CHECK_FALSE(Exists(keys.Schema()));
  CHECK(LRange(keys.Working(kDead1, "critical")).empty());
}

TEST_CASE_FIXTURE(RecoveryFixture, "Recover returns the jobs of dead processes only") {
  Cluster();
  auto admin = OpenAdmin();
  auto report = admin->Recover({});
  REQUIRE_MESSAGE(report.ok(), report.status().ToString());
  CHECK(Describe(*report) == Strings{kDead1 + " dead critical:2/0 default:1/0",
                                     kDead2 + " dead default:0/1 low:0/0",
                                     kBroken + " dead",
                                     kLive + " alive"});
  CHECK(LRange("queue:critical") == Strings{Interrupted(Job("c2"), 1), Interrupted(Job("c1"), 1)});
  CHECK(LRange("queue:default") == Strings{"waiting", Interrupted(Job("d1"), 1)});
  Strings dead = ZRange("dead");
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].find(R"("interrupted_count":4,"error_class":"Reliableq::Interrupted")") !=
        std::string::npos);
  CHECK(SMembers("queues") == Strings{"critical", "default"});

  // The dead are unregistered, everywhere; the live one and the unreadable
  // entry stay.
  CHECK(HGet(keys.Registry(), kDead1).empty());
  CHECK(HGet(keys.Registry(), kDead2).empty());
  CHECK(HGet(keys.Registry(), kBroken) == "{not json");
  CHECK(HGet(keys.Registry(), kLive) == Entry(kLive, {"default"}));
  CHECK(SMembers("processes") == Strings{kLive, kBroken});
  CHECK_FALSE(Exists(kDead1));
  CHECK(Exists(kLive));
  CHECK(LRange(keys.Working(kLive, "default")) == Strings{Job("live")});
  CHECK(Exists(keys.Heartbeat(kLive)));

  // A second pass finds nothing more to do.
  auto again = admin->Recover({});
  REQUIRE(again.ok());
  CHECK(Describe(*again) == Strings{kBroken + " dead", kLive + " alive"});
}

TEST_CASE_FIXTURE(RecoveryFixture, "Recover of one identity touches no other") {
  Cluster();
  auto admin = OpenAdmin();
  RecoverOptions options;
  options.identity = kDead2;
  auto report = admin->Recover(options);
  REQUIRE(report.ok());
  CHECK(Describe(*report) == Strings{kDead2 + " dead default:0/1 low:0/0"});
  CHECK(LRange(keys.Working(kDead1, "critical")).size() == 2);
  CHECK(HGet(keys.Registry(), kDead1) == Entry(kDead1, {"critical", "default"}));
  CHECK(HGet(keys.Registry(), kDead2).empty());

  options.identity = kLive;
  report = admin->Recover(options);
  REQUIRE(report.ok());
  CHECK(Describe(*report) == Strings{kLive + " alive"});
  CHECK(LRange(keys.Working(kLive, "default")) == Strings{Job("live")});
}

TEST_CASE_FIXTURE(RecoveryFixture, "Recover of an unknown identity, or force without one") {
  Cluster();
  auto before = Snapshot();
  auto admin = OpenAdmin();
  RecoverOptions options;
  options.identity = "nobody:1:000000000000";
  auto report = admin->Recover(options);
  REQUIRE_FALSE(report.ok());
  CHECK(report.status().IsNotFound());
  CHECK(report.status().message() == "no registered process nobody:1:000000000000");

  RecoverOptions force;
  force.force = true;
  report = admin->Recover(force);
  REQUIRE_FALSE(report.ok());
  CHECK(report.status().IsInvalidArgument());
  CHECK(Snapshot() == before);
}

TEST_CASE_FIXTURE(RecoveryFixture, "Recover with force takes a live process's jobs") {
  Cluster();
  auto admin = OpenAdmin();
  RecoverOptions options;
  options.identity = kLive;
  options.force = true;
  auto report = admin->Recover(options);
  REQUIRE(report.ok());
  CHECK(Describe(*report) == Strings{kLive + " alive default:1/0"});
  CHECK(LRange("queue:default") == Strings{"waiting", Interrupted(Job("live"), 1)});
  CHECK_FALSE(Exists(keys.Working(kLive, "default")));
  // Unregistered, heartbeat included: its next beat learns it was declared dead.
  CHECK(HGet(keys.Registry(), kLive).empty());
  CHECK_FALSE(Exists(keys.Heartbeat(kLive)));
  // The others were not looked at.
  CHECK(LRange(keys.Working(kDead1, "critical")).size() == 2);
}

TEST_CASE_FIXTURE(RecoveryFixture, "Recover dry run reports the real run and changes nothing") {
  Cluster();
  auto admin = OpenAdmin();
  auto before = Snapshot();
  RecoverOptions dry;
  dry.dry_run = true;
  auto preview = admin->Recover(dry);
  REQUIRE(preview.ok());
  CHECK(Snapshot() == before);
  auto real = admin->Recover({});
  REQUIRE(real.ok());
  CHECK(Describe(*preview) == Describe(*real));
  CHECK(Snapshot() != before);
}

TEST_CASE_FIXTURE(RecoveryFixture, "a pass loops over batches and keeps the order") {
  Register(kDead1, Entry(kDead1, {"default"}), false);
  Strings jobs;
  for (int i = 0; i < 2500; ++i) jobs.push_back(Job("j" + std::to_string(i)));
  Fetched(kDead1, "default", jobs);
  jobs[7] = Interrupted(jobs[7], 3);
  Run({"LSET", keys.Working(kDead1, "default"), std::to_string(2500 - 1 - 7), jobs[7]});

  RecoveryConfig config;
  config.batch = 300;
  config.dry_run = true;
  auto preview = RunRecoveryPass(redis(), config, 1700000100.25);
  REQUIRE(preview.ok());
  CHECK(Describe(*preview) == Strings{kDead1 + " dead default:2499/1"});

  config.dry_run = false;
  auto report = RunRecoveryPass(redis(), config, 1700000100.25);
  REQUIRE(report.ok());
  CHECK(Describe(*report) == Strings{kDead1 + " dead default:2499/1"});
  Strings queue = LRange("queue:default");
  REQUIRE(queue.size() == 2499);
  // Newest leftmost, oldest (the first fetched) rightmost: taken next.
  CHECK(queue.front() == Interrupted(jobs[2499], 1));
  CHECK(queue.back() == Interrupted(jobs[0], 1));
  Strings expected;
  for (int i = 2499; i >= 0; --i) {
    if (i != 7) expected.push_back(Interrupted(jobs[i], 1));
  }
  CHECK(queue == expected);
  auto dead = ZRangeWithScores("dead");
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].second == 1700000100.25);
  CHECK(dead[0].first.find(R"("failed_at":1700000100.250000})") != std::string::npos);
  CHECK(HGet(keys.Registry(), kDead1).empty());
}

TEST_CASE_FIXTURE(RecoveryFixture, "max_interruptions 0 sends every interrupted job dead") {
  Cluster();
  auto admin = OpenAdmin();
  RecoverOptions options;
  options.identity = kDead1;
  options.max_interruptions = 0;
  auto report = admin->Recover(options);
  REQUIRE(report.ok());
  CHECK(Describe(*report) == Strings{kDead1 + " dead critical:0/2 default:0/1"});
  CHECK(ZRange("dead").size() == 3);
  CHECK_FALSE(Exists("queue:critical"));
}

TEST_CASE_FIXTURE(RecoveryFixture, "a pass with another key prefix uses its own keys") {
  Keys other("app1:");
  Run({"HSET", other.Registry(), kDead1, Entry(kDead1, {"default"})});
  Run({"LPUSH", other.Working(kDead1, "default"), Job("p")});
  Cluster();  // under the default prefix: not this pass's business
  RecoveryConfig config;
  config.keys = other;
  auto report = RunRecoveryPass(redis(), config, 1700000100.25);
  REQUIRE(report.ok());
  CHECK(Describe(*report) == Strings{kDead1 + " dead default:1/0"});
  CHECK(LRange("queue:default") == Strings{"waiting", Interrupted(Job("p"), 1)});
  CHECK(LRange(keys.Working(kDead1, "critical")).size() == 2);
}

TEST_CASE_FIXTURE(RecoveryFixture, "a pass closes the named connections of dead processes") {
  // Connections as workers leave them: named after their identity, with
  // their ids published in the registry entry.
  struct Client {
    std::unique_ptr<redis::Connection> connection;
    std::string id;
  };
  auto open = [&](const std::string& name) {
    auto connection = redis::Connection::Open(options());
    REQUIRE(connection.ok());
    Client client{std::move(connection.value()), ""};
    REQUIRE(client.connection->Command({"CLIENT", "SETNAME", name}).ok());
    auto id = client.connection->Command({"CLIENT", "ID"});
    REQUIRE(id.ok());
    client.id = std::to_string((*id)->integer);
    return client;
  };
  auto connected = [&](const Client& client) {
    auto listed = redis().Command({"CLIENT", "LIST", "ID", client.id});
    REQUIRE(listed.ok());
    return (*listed)->len > 0;
  };
  Client dead = open(keys.ClientName(kDead1));
  Client reused = open("somebody-else");  // an id kDead1 published, now someone else's
  Client live = open(keys.ClientName(kLive));
  auto with_clients = [](std::string entry, const Strings& ids) {
    entry.pop_back();
    entry += ",\"clients\":[";
    for (size_t i = 0; i < ids.size(); ++i) entry += (i ? "," : "") + ids[i];
    return entry + "]}";
  };
  Register(kDead1, with_clients(Entry(kDead1, {"default"}), {dead.id, reused.id}), false);
  Register(kLive, with_clients(Entry(kLive, {"default"}), {live.id}), true);

  RecoveryConfig config;
  config.dry_run = true;
  REQUIRE(RunRecoveryPass(redis(), config, 1700000100.25).ok());
  CHECK(connected(dead));  // a dry run closes nothing

  config.dry_run = false;
  REQUIRE(RunRecoveryPass(redis(), config, 1700000100.25).ok());
  CHECK(WaitUntil([&] { return !connected(dead); }, std::chrono::seconds(2)));
  CHECK(connected(reused));
  CHECK(connected(live));
}

TEST_CASE_FIXTURE(RecoveryFixture, "GetStats reads Sidekiq's figures and reliableq's") {
  const double now = NowSeconds();
  Run({"SET", "stat:processed", "42"});
  Run({"SET", "stat:failed", "7"});
  Run({"SADD", "queues", "default", "critical", "empty"});
  // queue:default: the oldest (rightmost) was enqueued 100 s ago, float s.
  Run({"LPUSH", "queue:default",
       R"({"class":"A","args":[],"enqueued_at":)" + FormatEpoch(now - 100) + "}"});
  Run({"LPUSH", "queue:default",
       R"({"class":"A","args":[],"enqueued_at":)" + FormatEpoch(now - 1) + "}"});
  // queue:critical: Sidekiq 8 writes integer milliseconds.
  Run({"LPUSH", "queue:critical",
       R"({"class":"A","args":[],"enqueued_at":)" +
           std::to_string(static_cast<long long>((now - 50) * 1000)) + "}"});
  Run({"ZADD", "schedule", "1", "s1", "2", "s2"});
  Run({"ZADD", "retry", "1", "r1", "2", "r2", "3", "r3"});
  Run({"ZADD", "dead", "1", "x"});
  Run({"SADD", "processes", "p1", "p2", "p3"});
  Run({"HSET", "p1", "busy", "3"});
  Run({"HSET", "p2", "busy", "4"});  // p3 has no hash any more: busy 0
  Run({"HSET", keys.Registry(), "p1", Entry("p1", {"default", "critical"})});
  Run({"HSET", keys.Registry(), "p9", Entry("p9", {"default"})});
  Run({"HSET", keys.Registry(), "bad", "{"});
  Run({"LPUSH", keys.Working("p1", "default"), "a", "b"});
  Run({"LPUSH", keys.Working("p1", "critical"), "c"});
  Run({"LPUSH", keys.Working("p9", "default"), "d"});
  Run({"LPUSH", keys.Working("bad", "default"), "e"});  // unnamed by any entry

  auto admin = OpenAdmin();
  auto stats = admin->GetStats();
  REQUIRE_MESSAGE(stats.ok(), stats.status().ToString());
  CHECK(stats->processed == 42);
  CHECK(stats->failed == 7);
  REQUIRE(stats->queues.size() == 3);
  CHECK(stats->queues[0].name == "critical");
  CHECK(stats->queues[0].size == 1);
  CHECK(stats->queues[0].latency == doctest::Approx(50).epsilon(0.05));
  CHECK(stats->queues[1].name == "default");
  CHECK(stats->queues[1].size == 2);
  CHECK(stats->queues[1].latency == doctest::Approx(100).epsilon(0.05));
  CHECK(stats->queues[2].name == "empty");
  CHECK(stats->queues[2].size == 0);
  CHECK(stats->queues[2].latency == 0);
  CHECK(stats->enqueued == 3);
  CHECK(stats->scheduled == 2);
  CHECK(stats->retries == 3);
  CHECK(stats->dead == 1);
  CHECK(stats->processes == 3);
  CHECK(stats->busy == 7);
  CHECK(stats->in_progress == 4);
}

TEST_CASE_FIXTURE(RecoveryFixture, "GetStats of an empty Redis is all zeros") {
  auto admin = OpenAdmin();
  auto stats = admin->GetStats();
  REQUIRE(stats.ok());
  CHECK(stats->processed == 0);
  CHECK(stats->failed == 0);
  CHECK(stats->queues.empty());
  CHECK(stats->enqueued == 0);
  CHECK(stats->processes == 0);
  CHECK(stats->busy == 0);
  CHECK(stats->in_progress == 0);
}

TEST_CASE_FIXTURE(RecoveryFixture, "GetStats latency of jobs without a usable enqueued_at") {
  Run({"SADD", "queues", "a", "b", "c"});
  Run({"LPUSH", "queue:a", "not json"});
  Run({"LPUSH", "queue:b", R"({"class":"A","args":[]})"});
  Run({"LPUSH", "queue:c", R"({"class":"A","enqueued_at":)" + FormatEpoch(NowSeconds() + 3600) +
                               "}"});  // in the future: clock skew
  auto admin = OpenAdmin();
  auto stats = admin->GetStats();
  REQUIRE(stats.ok());
  REQUIRE(stats->queues.size() == 3);
  for (const QueueStats& q : stats->queues) {
    CAPTURE(q.name);
    CHECK(q.size == 1);
    CHECK(q.latency == 0);
  }
}

TEST_CASE_FIXTURE(RecoveryFixture, "GetStats reports a key of the wrong type") {
  Run({"SADD", "queues", "a"});
  Run({"SET", "queue:a", "not a list"});
  auto admin = OpenAdmin();
  auto stats = admin->GetStats();
  REQUIRE_FALSE(stats.ok());
  CHECK(stats.status().message().find("queue:a") != std::string::npos);
}

// ------------------------------------- processes whose connections are gone

namespace {

// A worker's view of itself for these tests: named connections whose ids it
// publishes, and beats sent with heartbeat.lua as the worker sends them.
struct ConnectionsFixture : RecoveryFixture {
  struct Named {
    std::unique_ptr<redis::Connection> connection;
    int64_t id = 0;
  };

  Named Connect(const std::string& identity) {
    auto connection = redis::Connection::Open(options());
    REQUIRE(connection.ok());
    Named named{std::move(connection.value()), 0};
    REQUIRE(named.connection->Command({"CLIENT", "SETNAME", keys.ClientName(identity)}).ok());
    auto id = named.connection->Command({"CLIENT", "ID"});
    REQUIRE(id.ok());
    named.id = (*id)->integer;
    return named;
  }

  // Closes the connection and waits until the server has let it go.
  void Close(Named* named) {
    named->connection.reset();
    const std::string id = std::to_string(named->id);
    REQUIRE(WaitUntil([&] {
      auto listed = redis().Command({"CLIENT", "LIST", "ID", id});
      return listed.ok() && (*listed)->len == 0;
    }));
  }

  // One heartbeat.lua call as a worker's beat on connection `beat_client`
  // would send it, publishing `clients`. The entry's ttl (what the janitor
  // compares the server's uptime with) is `ttl_ms`; the key itself lives
  // a minute, so that it can only go by a janitor's hand here.
  void Beat(const std::string& identity, int64_t beat_client, std::vector<int64_t> clients,
            int64_t ttl_ms = 500, Strings queues = {"default"}) {
    ProcessEntry entry;
    entry.identity = identity;
    entry.hostname = "h";
    entry.pid = 1;
    entry.started_at = 1700000000.5;
    entry.queues = std::move(queues);
    entry.clients = std::move(clients);
    entry.beat_client = beat_client;
    entry.ttl_ms = ttl_ms;
    BeatFields fields;
    fields.ttl_millis = 60000;
    fields.registry_entry = EncodeProcessEntry(entry);
    fields.info = "{}";
    fields.now = 1700000100.5;
    auto reply = redis().Eval(HeartbeatCall(keys, identity, std::move(fields)));
    REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
  }

  std::string ServerInfo(const std::string& field) {
    auto info = redis().Command({"INFO", "server"});
    REQUIRE(info.ok());
    std::string text((*info)->str, (*info)->len);
    size_t at = text.find("\n" + field + ":");
    REQUIRE(at != std::string::npos);
    at += field.size() + 2;
    return text.substr(at, text.find('\r', at) - at);
  }

  // The fast rule needs the server up longer than the entry's ttl (500 ms).
  void WaitForUptime() {
    REQUIRE(WaitUntil([&] { return std::stoll(ServerInfo("uptime_in_seconds")) >= 1; },
                      std::chrono::seconds(3)));
  }

  ProcessEntry Published(const std::string& identity) {
    ProcessEntry entry;
    REQUIRE(DecodeProcessEntry(HGet(keys.Registry(), identity), &entry));
    return entry;
  }
};

const IdentityRecovery* Find(const RecoveryReport& report, const std::string& identity) {
  for (const IdentityRecovery& id : report.identities) {
    if (id.identity == identity) return &id;
  }
  return nullptr;
}

}  // namespace

TEST_CASE_FIXTURE(ConnectionsFixture, "a beat stores its connection's id and the server's run_id") {
  Named command = Connect(kLive);
  Beat(kLive, command.id, {command.id});
  CHECK(Get(keys.Heartbeat(kLive)) == std::to_string(command.id));
  ProcessEntry entry = Published(kLive);
  CHECK(entry.beat_client == command.id);
  CHECK(entry.ttl_ms == 500);
  CHECK(entry.run_id == ServerInfo("run_id"));
  CHECK(entry.run_id.size() == 40);
  // An entry that names no connection (an older worker's) is stored as
  // given, and its key holds 1.
  const std::string old = Entry(kDead1, {"default"});
  BeatFields fields;
  fields.ttl_millis = 60000;
  fields.registry_entry = old;
  fields.info = "{}";
  fields.now = 1700000100.5;
  REQUIRE(redis().Eval(HeartbeatCall(keys, kDead1, std::move(fields))).ok());
  CHECK(Get(keys.Heartbeat(kDead1)) == "1");
  CHECK(HGet(keys.Registry(), kDead1) == old);
}

TEST_CASE_FIXTURE(ConnectionsFixture, "drop_heartbeat deletes the key only while it names the id") {
  Named first = Connect(kLive);
  Beat(kLive, first.id, {first.id});
  const std::string key = keys.Heartbeat(kLive);
  // As a janitor pass calls it: with the entry it read, here the current one.
  std::string info = redis().Command({"INFO", "server"}).value()->str;
  size_t at = info.find("run_id:") + 7;
  const std::string run_id = info.substr(at, info.find('\r', at) - at);
  auto drop = [&](int64_t id, std::string entry = "", std::string server = "") {
    if (entry.empty()) entry = HGet(keys.Registry(), kLive);
    if (server.empty()) server = run_id;
    auto reply = redis().Eval(DropHeartbeatCall(keys, kLive, id, entry, server));
    REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
    return (*reply)->integer;
  };
  // A beat on the same connection after the janitor read the entry listed
  // a new queue (a namespace's): the janitor would miss its working list,
  // so the key stays until a pass reads the new entry.
  const std::string read_before = HGet(keys.Registry(), kLive);
  Beat(kLive, first.id, {first.id}, 500, {"default", "cron:new"});
  CHECK(drop(first.id, read_before) == 0);
  CHECK(Get(key) == std::to_string(first.id));
  // The process reconnected and beat from its new connection: the id the
  // janitor saw in the entry no longer matches, and the key stays.
  Named second = Connect(kLive);
  Beat(kLive, second.id, {second.id});
  CHECK(drop(first.id) == 0);
  CHECK(Get(key) == std::to_string(second.id));
  CHECK(Integer({"PTTL", key}) > 50000);
  // The client list was read on another server (a failover moved the
  // janitor's connection in between): nothing is dropped.
  CHECK(drop(second.id, "", std::string(40, '0')) == 0);
  CHECK(Get(key) == std::to_string(second.id));
  CHECK(drop(second.id) == 1);
  CHECK_FALSE(Exists(key));
  CHECK(drop(second.id) == 0);  // gone already
  // A key of another type is refused, untouched.
  Run({"LPUSH", key, "x"});
  auto wrong = redis().Eval(DropHeartbeatCall(keys, kLive, second.id, "{}", run_id));
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.status().message().find("WRONGTYPE drop_heartbeat") != std::string::npos);
  CHECK(LRange(key) == Strings{"x"});
  auto bad = redis().Eval(ScriptId::kDropHeartbeat, {key}, {"0"});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().IsInvalidArgument());
}

TEST_CASE_FIXTURE(ConnectionsFixture, "a process with none of its connections left goes at once") {
  WaitForUptime();
  // kDead1: two connections, both of which go away (SIGKILL closes them all).
  Named command = Connect(kDead1);
  Named idle = Connect(kDead1);
  Beat(kDead1, command.id, {command.id, idle.id});
  Fetched(kDead1, "default", {Job("k1"), Job("k2")});
  // kLive: its connection stays open.
  Named live = Connect(kLive);
  Beat(kLive, live.id, {live.id});
  Fetched(kLive, "default", {Job("live")});

  auto admin = OpenAdmin();
  // One connection left is enough to be alive.
  Close(&command);
  auto report = admin->Recover({});
  REQUIRE_MESSAGE(report.ok(), report.status().ToString());
  CHECK(Describe(*report) == Strings{kDead1 + " alive", kLive + " alive"});

  Close(&idle);
  auto before = Snapshot();
  RecoverOptions dry;
  dry.dry_run = true;
  auto preview = admin->Recover(dry);
  REQUIRE(preview.ok());
  CHECK(Snapshot() == before);  // the heartbeat key too
  report = admin->Recover({});
  REQUIRE_MESSAGE(report.ok(), report.status().ToString());
  CHECK(Describe(*preview) == Describe(*report));
  CHECK(Describe(*report) == Strings{kDead1 + " dead default:2/0", kLive + " alive"});
  const IdentityRecovery* dead = Find(*report, kDead1);
  REQUIRE(dead != nullptr);
  CHECK(dead->evidence == DeathEvidence::kConnectionsGone);
  CHECK(Find(*report, kLive)->evidence == DeathEvidence::kNone);
  CHECK(LRange("queue:default") == Strings{Interrupted(Job("k2"), 1), Interrupted(Job("k1"), 1)});
  CHECK(HGet(keys.Registry(), kDead1).empty());
  CHECK_FALSE(Exists(keys.Heartbeat(kDead1)));
  CHECK(LRange(keys.Working(kLive, "default")) == Strings{Job("live")});
  CHECK(Get(keys.Heartbeat(kLive)) == std::to_string(live.id));
}

TEST_CASE_FIXTURE(ConnectionsFixture, "a beat on a new connection after the check keeps it alive") {
  WaitForUptime();
  Named old_connection = Connect(kDead1);
  Beat(kDead1, old_connection.id, {old_connection.id});
  const std::string checked = HGet(keys.Registry(), kDead1);
  Fetched(kDead1, "default", {Job("k1")});
  Close(&old_connection);
  // The process reconnects and beats right after a janitor read its entry
  // and found that connection gone: the pass still holds the entry it read,
  // which is what the registry shows it here; the key names the new
  // connection.
  Named reconnected = Connect(kDead1);
  Beat(kDead1, reconnected.id, {reconnected.id});
  Run({"HSET", keys.Registry(), kDead1, checked});

  RecoveryConfig config;
  auto report = RunRecoveryPass(redis(), config, 1700000100.25);
  REQUIRE_MESSAGE(report.ok(), report.status().ToString());
  CHECK(Describe(*report) == Strings{kDead1 + " alive"});
  CHECK(Get(keys.Heartbeat(kDead1)) == std::to_string(reconnected.id));
  CHECK(LRange(keys.Working(kDead1, "default")) == Strings{Job("k1")});
  CHECK(HGet(keys.Registry(), kDead1) == checked);
  CHECK_FALSE(Exists("queue:default"));
}

TEST_CASE_FIXTURE(ConnectionsFixture, "connections tell nothing about ids of another server run") {
  WaitForUptime();
  Named gone = Connect(kDead1);
  Named gone_too = Connect(kDead2);
  Beat(kDead1, gone.id, {gone.id});
  Beat(kDead2, gone_too.id, {gone_too.id}, /*ttl_ms=*/3600 * 1000);
  Fetched(kDead1, "default", {Job("k1")});
  Fetched(kDead2, "default", {Job("k2")});
  Close(&gone);
  Close(&gone_too);
  // kDead1's entry was written on another server (a restart or a failover
  // since): its ids may belong to anyone here.
  ProcessEntry entry = Published(kDead1);
  entry.run_id = std::string(40, 'f');
  Run({"HSET", keys.Registry(), kDead1, EncodeProcessEntry(entry)});
  // kDead2's ttl is longer than the server has been up: its worker may not
  // have reconnected yet since the server started.
  // kOld is an older worker's entry: no beat connection, key "1".
  const std::string kOld = "host-e:55:eeeeeeeeeeee";
  Register(kOld, Entry(kOld, {"default"}), true);
  Fetched(kOld, "default", {Job("k3")});

  RecoveryConfig config;
  auto report = RunRecoveryPass(redis(), config, 1700000100.25);
  REQUIRE_MESSAGE(report.ok(), report.status().ToString());
  CHECK(Describe(*report) == Strings{kDead1 + " alive", kDead2 + " alive", kOld + " alive"});
  CHECK_FALSE(Exists("queue:default"));
  CHECK(Exists(keys.Heartbeat(kDead1)));
  CHECK(Exists(keys.Heartbeat(kDead2)));

  // The same entries with this server's run_id and a short ttl go at once.
  entry.run_id = ServerInfo("run_id");
  Run({"HSET", keys.Registry(), kDead1, EncodeProcessEntry(entry)});
  report = RunRecoveryPass(redis(), config, 1700000100.25);
  REQUIRE(report.ok());
  CHECK(Describe(*report) == Strings{kDead1 + " dead default:1/0", kDead2 + " alive",
                                     kOld + " alive"});

  // kDead2's entry saying that this server run gave out every id it lists
  // (clients_run) is judged at once, however long its ttl: a live worker
  // would have published its new connections.
  ProcessEntry long_ttl = Published(kDead2);
  REQUIRE(long_ttl.run_id == ServerInfo("run_id"));
  long_ttl.clients_run = std::string(40, 'e');  // another run's ids: not enough
  Run({"HSET", keys.Registry(), kDead2, EncodeProcessEntry(long_ttl)});
  report = RunRecoveryPass(redis(), config, 1700000100.25);
  REQUIRE(report.ok());
  CHECK(Describe(*report) == Strings{kDead2 + " alive", kOld + " alive"});
  long_ttl.clients_run = long_ttl.run_id;
  Run({"HSET", keys.Registry(), kDead2, EncodeProcessEntry(long_ttl)});
  report = RunRecoveryPass(redis(), config, 1700000100.25);
  REQUIRE(report.ok());
  CHECK(Describe(*report) == Strings{kDead2 + " dead default:1/0", kOld + " alive"});
}

TEST_CASE_FIXTURE(RecoveryFixture, "Recover says an expired heartbeat made a process dead") {
  Cluster();
  auto admin = OpenAdmin();
  auto report = admin->Recover({});
  REQUIRE(report.ok());
  for (const IdentityRecovery& id : report->identities) {
    CAPTURE(id.identity);
    CHECK(id.evidence ==
          (id.alive ? DeathEvidence::kNone : DeathEvidence::kHeartbeatExpired));
  }
}
