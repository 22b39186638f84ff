// reliableq migrate: the key mapping alone, then the program against two
// real redis-servers, a layout-1 source (on a unix socket) and a target
// (on a loopback port), as an operator runs it.
// The move into a real Redis Cluster, with a worker of the group draining
// the moved queues, is in tests/cluster/cluster_worker_test.cc.

#include <doctest/doctest.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "migrate/key_map.h"
#include "migrate/mover.h"
#include "support/process.h"
#include "redis/connection.h"
#include "support/testutil.h"

namespace reliableq::testing {
namespace {

using migrate::GroupKey;
using migrate::Layout2Key;

TEST_CASE("Layout2Key puts a layout-1 key under the group's hash tag") {
  const std::string p = "reliableq:";
  CHECK(Layout2Key(p, "g", "queue:default") == "reliableq:{g}:queue:default");
  CHECK(Layout2Key(p, "g", "queues") == "reliableq:{g}:queues");
  CHECK(Layout2Key(p, "g", "schedule") == "reliableq:{g}:schedule");
  CHECK(Layout2Key(p, "g", "stat:processed:2026-11-24") ==
        "reliableq:{g}:stat:processed:2026-11-24");
  CHECK(Layout2Key(p, "g", "reliableq:paused") == "reliableq:{g}:paused");
  CHECK(Layout2Key(p, "g", "reliableq:limit:api:waiting") == "reliableq:{g}:limit:api:waiting");
  CHECK(Layout2Key(p, "eu-1.b", "reliableq:periodic:nightly:ticks") ==
        "reliableq:{eu-1.b}:periodic:nightly:ticks");
  // Another prefix; a Sidekiq key is never taken for a prefixed one.
  CHECK(Layout2Key("app:", "g", "app:unique:k") == "app:{g}:unique:k");
  CHECK(Layout2Key("app:", "g", "reliableq:unique:k") == "app:{g}:reliableq:unique:k");
  CHECK(Layout2Key("", "g", "dead") == "{g}:dead");
  CHECK(GroupKey(p, "g", "schema") == "reliableq:{g}:schema");
  CHECK(migrate::GroupsKey(p) == "reliableq:groups");
}

TEST_CASE("CheckGroupName accepts the layout's group names only") {
  CHECK(migrate::CheckGroupName("g").ok());
  CHECK(migrate::CheckGroupName("eu-west_1.a").ok());
  CHECK(migrate::CheckGroupName(std::string(64, 'x')).ok());
  CHECK(migrate::CheckGroupName("").IsInvalidArgument());
  CHECK(migrate::CheckGroupName(std::string(65, 'x')).IsInvalidArgument());
  for (const char* bad : {"a}b", "a{b", "a b", "a:b", "a*", "é"}) {
    CHECK_MESSAGE(migrate::CheckGroupName(bad).IsInvalidArgument(), bad);
  }
}

TEST_CASE("GlobEscaped makes a prefix match itself only") {
  CHECK(migrate::GlobEscaped("reliableq:") == "reliableq:");
  CHECK(migrate::GlobEscaped("a*b?[c]\\") == "a\\*b\\?\\[c\\]\\\\");
}

// The two servers, started once for the binary.
RedisServer& Source() {
  static RedisServer server;
  return server;
}

struct TargetServer {
  int port = FreeLoopbackPort();
  RedisServer server{{"--port", std::to_string(port), "--bind", "127.0.0.1"}};
  std::string Url() const { return "redis://127.0.0.1:" + std::to_string(port) + "/0"; }
  RedisOptions Options() const {
    RedisOptions options;
    options.port = port;
    return options;
  }
};

TargetServer& Target() {
  static TargetServer target;
  return target;
}

using Snapshot = std::map<std::string, std::string>;

// A job payload with what must survive byte for byte: non-ASCII text, an
// escaped newline and a raw byte that is not UTF-8.
std::string Job(const std::string& jid, const std::string& queue) {
  return "{\"class\":\"Mail\",\"args\":[\"h\\u00e9llo\\n\",\"\xff\"],\"queue\":\"" + queue +
         "\",\"jid\":\"" + jid + "\",\"retry\":true}";
}

class MigrateFixture {
 public:
  MigrateFixture() {
    auto source = redis::Connection::Open(Source().Options());
    REQUIRE(source.ok());
    source_ = std::move(*source);
    auto target = redis::Connection::Open(Target().Options());
    REQUIRE(target.ok());
    target_ = std::move(*target);
    Run(*source_, {"FLUSHALL"});
    Run(*target_, {"FLUSHALL"});
  }

  redis::Connection& source() { return *source_; }
  redis::Connection& target() { return *target_; }

  // The plan of queue:default's move into group g, as a list: the caller
  // picks its action.
  static migrate::PlannedKey DefaultQueueToGroupG() {
    migrate::PlannedKey key;
    key.source = "queue:default";
    key.target = "reliableq:{g}:queue:default";
    key.type = "list";
    key.kind = migrate::KeyKind::kQueue;
    return key;
  }

  static void Run(redis::Connection& redis, const redis::Argv& command) {
    auto reply = redis.Command(command);
    REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
  }

  // Every key with its DUMP.
  static Snapshot Dump(redis::Connection& redis) {
    Snapshot out;
    auto keys = redis.Command({"KEYS", "*"});
    REQUIRE(keys.ok());
    for (size_t i = 0; i < (*keys)->elements; ++i) {
      std::string key((*keys)->element[i]->str, (*keys)->element[i]->len);
      auto dump = redis.Command({"DUMP", key});
      REQUIRE(dump.ok());
      out[key] = std::string((*dump)->str, (*dump)->len);
    }
    return out;
  }

  static std::vector<std::string> Array(redis::Connection& redis, const redis::Argv& command) {
    auto reply = redis.Command(command);
    REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
    std::vector<std::string> out;
    for (size_t i = 0; i < (*reply)->elements; ++i) {
      out.emplace_back((*reply)->element[i]->str, (*reply)->element[i]->len);
    }
    return out;
  }

  static std::string Get(redis::Connection& redis, const std::string& key) {
    auto reply = redis.Command({"GET", key});
    REQUIRE(reply.ok());
    return (*reply)->type == REDIS_REPLY_STRING ? std::string((*reply)->str, (*reply)->len) : "";
  }

  static long long Integer(redis::Connection& redis, const redis::Argv& command) {
    auto reply = redis.Command(command);
    REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
    return (*reply)->integer;
  }

  // A layout-1 deployment with one key of every kind migrate moves, and
  // keys of the application and of reliableq that it leaves.
  void Populate() {
    redis::Connection& s = source();
    Run(s, {"SADD", "queues", "default", "critical"});
    Run(s, {"LPUSH", "queue:default", Job("d1", "default"), Job("d2", "default"),
            Job("d3", "default")});
    Run(s, {"LPUSH", "queue:critical", Job("c1", "critical"), Job("c2", "critical")});
    Run(s, {"ZADD", "schedule", "1900000000", Job("s1", "default"), "1900000001.5",
            Job("s2", "default")});
    Run(s, {"ZADD", "retry", "1800000000.25", Job("r1", "default")});
    Run(s, {"ZADD", "dead", "1700000000", Job("x1", "default")});
    Run(s, {"SET", "stat:processed", "10"});
    Run(s, {"SET", "stat:failed", "2"});
    Run(s, {"SET", "stat:processed:2026-11-24", "7", "EX", "157680000"});
    Run(s, {"SET", "stat:failed:2026-11-24", "1", "EX", "157680000"});
    Run(s, {"SADD", "reliableq:paused", "critical"});
    Run(s, {"HSET", "reliableq:limits", "api", "{\"name\":\"api\",\"concurrency\":1}"});
    Run(s, {"RPUSH", "reliableq:limit:api:waiting", Job("p1", "default")});
    Run(s, {"SET", "reliableq:unique:k1", "u1", "PX", "600000"});
    Run(s, {"SADD", "reliableq:periodic", "nightly"});
    Run(s, {"HSET", "reliableq:periodic:nightly", "cron", "0 3 * * *", "queue", "default"});
    Run(s, {"ZADD", "reliableq:periodic:nightly:ticks", "1700000000", "1700000000"});
    Run(s, {"SET", "reliableq:stat:expired", "4"});
    Run(s, {"LPUSH", "reliableq:audit", "{\"action\":\"pause\"}"});
    Run(s, {"SET", "reliableq:janitor:last", "{\"checked\":0}", "EX", "86400"});
    Run(s, {"LPUSH", "reliableq:janitor:passes", "{\"checked\":1}"});
    // Left on the source: the layout record, the registry entry of a
    // stopped process, and the application's keys (one looks like a queue
    // but is not in the queues SET).
    Run(s, {"SET", "reliableq:schema", "1"});
    Run(s, {"HSET", "reliableq:registry", "host:1:aaaaaaaaaaaa", "{\"queues\":[\"default\"]}"});
    Run(s, {"SET", "app:session:1", "secret"});
    Run(s, {"LPUSH", "queue:not-registered", "app data"});
    Run(s, {"SET", "stat:processed:today", "app counter"});
  }

  // The keys of the application and the ones migrate must leave (the
  // unique lock too: a moved job's payload names it by this name, which a
  // worker of the group never releases).
  static constexpr const char* kLeftKeys[] = {"reliableq:schema",     "reliableq:registry",
                                              "app:session:1",        "queue:not-registered",
                                              "stat:processed:today", "reliableq:unique:k1"};

  // The layout-1 name -> layout-2 name of every key Populate writes that
  // migrate moves.
  static std::map<std::string, std::string> MovedNames() {
    std::map<std::string, std::string> names;
    for (const char* key : {"queues",
                            "queue:default",
                            "queue:critical",
                            "schedule",
                            "retry",
                            "dead",
                            "stat:processed",
                            "stat:failed",
                            "stat:processed:2026-11-24",
                            "stat:failed:2026-11-24",
                            "reliableq:paused",
                            "reliableq:limits",
                            "reliableq:limit:api:waiting",
                            "reliableq:periodic",
                            "reliableq:periodic:nightly",
                            "reliableq:periodic:nightly:ticks",
                            "reliableq:stat:expired",
                            "reliableq:audit",
                            "reliableq:janitor:last",
                            "reliableq:janitor:passes"}) {
      names[key] = Layout2Key("reliableq:", "g", key);
    }
    return names;
  }

  CommandResult Migrate(std::vector<std::string> extra, std::vector<std::string> env = {}) {
    std::vector<std::string> argv = {BuildPath("RELIABLEQ_BIN"),
                                     "--redis",
                                     Source().Url(),
                                     "migrate",
                                     "--to",
                                     Target().Url(),
                                     "--group",
                                     "g"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunCommand(argv, std::chrono::seconds(60), env);
  }

  // The contents of every key, in a form that shows doubles: lists in
  // order, zsets with scores, sets and hashes sorted, strings.
  static std::string Contents(redis::Connection& redis, const std::string& key) {
    auto type = redis.Command({"TYPE", key});
    REQUIRE(type.ok());
    std::string t((*type)->str, (*type)->len);
    std::vector<std::string> parts;
    if (t == "list") parts = Array(redis, {"LRANGE", key, "0", "-1"});
    if (t == "zset") parts = Array(redis, {"ZRANGE", key, "0", "-1", "WITHSCORES"});
    if (t == "set") {
      parts = Array(redis, {"SMEMBERS", key});
      std::sort(parts.begin(), parts.end());
    }
    if (t == "hash") parts = Array(redis, {"HGETALL", key});
    if (t == "string") parts = {Get(redis, key)};
    std::string out = t;
    for (const std::string& part : parts) out += "|" + part;
    return out;
  }

  std::map<std::string, std::string> SourceContents() {
    std::map<std::string, std::string> out;
    for (const auto& [from, to] : MovedNames()) out[from] = Contents(source(), from);
    return out;
  }

  // Every moved key's contents on the target equal `before` (the source's
  // before the move), and the source no longer has it.
  void CheckMoved(const std::map<std::string, std::string>& before) {
    for (const auto& [from, to] : MovedNames()) {
      CHECK_MESSAGE(Contents(target(), to) == before.at(from), to);
      CHECK_MESSAGE(Integer(source(), {"EXISTS", from}) == 0, from);
    }
  }

 private:
  std::unique_ptr<redis::Connection> source_;
  std::unique_ptr<redis::Connection> target_;
};

TEST_CASE_FIXTURE(MigrateFixture, "migrate moves every kind of key into the group, byte for byte") {
  Populate();
  std::map<std::string, std::string> before = SourceContents();
  Snapshot source_before = Dump(source());

  CommandResult run = Migrate({"--json"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(run.out.find("\"moved_keys\":20") != std::string::npos);
  CHECK(run.out.find("\"jobs\":{\"queued\":5,\"scheduled\":2,\"retries\":1,\"dead\":1,"
                     "\"parked\":1}") != std::string::npos);
  CHECK(run.out.find("\"schema_written\":true,\"group_added\":true") != std::string::npos);
  CheckMoved(before);

  // The layout-2 names a worker of group g reads (reliableq-schema(7)).
  CHECK(Array(target(), {"LRANGE", "reliableq:{g}:queue:default", "0", "-1"}) ==
        std::vector<std::string>{Job("d3", "default"), Job("d2", "default"), Job("d1", "default")});
  CHECK(Get(target(), "reliableq:{g}:schema") == "2");
  CHECK(Integer(target(), {"SISMEMBER", "reliableq:groups", "g"}) == 1);
  // ttls move with their keys.
  long long last_ttl = Integer(target(), {"PTTL", "reliableq:{g}:janitor:last"});
  CHECK(last_ttl > 86000000);
  CHECK(last_ttl <= 86400000);
  CHECK(Integer(target(), {"TTL", "reliableq:{g}:stat:processed:2026-11-24"}) > 157000000);
  CHECK(Integer(target(), {"EXISTS", "reliableq:{g}:unique:k1"}) == 0);
  CHECK(Integer(target(), {"TTL", "reliableq:{g}:queue:default"}) == -1);

  // What is not moved stays as it was, and nothing else was written.
  Snapshot source_after = Dump(source());
  for (const char* key : kLeftKeys) {
    CHECK_MESSAGE(source_after[key] == source_before[key], key);
  }
  CHECK(source_after.size() == std::size(kLeftKeys));
  CHECK(Dump(target()).size() == MovedNames().size() + 2);  // + schema, groups

  // A second run finds nothing to move and changes nothing.
  Snapshot target_after = Dump(target());
  CommandResult again = Migrate({});
  INFO(again.err);
  REQUIRE(again.exit_code == 0);
  CHECK(again.out.find("moved 0 keys") != std::string::npos);
  CHECK(Dump(target()) == target_after);
}

TEST_CASE_FIXTURE(MigrateFixture, "migrate --dry-run prints the plan and writes nothing") {
  Populate();
  Snapshot source_before = Dump(source());
  CommandResult run = Migrate({"--dry-run"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(run.out.find("queue:default -> reliableq:{g}:queue:default: list of 3, copy whole") !=
        std::string::npos);
  CHECK(run.out.find("would move 20 keys into group 'g'; jobs: 5 queued, 2 scheduled, 1 retries, "
                     "1 dead, 1 parked") != std::string::npos);
  CHECK(Dump(source()) == source_before);
  CHECK(Dump(target()).empty());
}

// Each refusal: exit 1, one line naming the reason, nothing written on
// either side.
void CheckRefused(MigrateFixture& f, const std::string& expected,
                  std::vector<std::string> extra = {}) {
  Snapshot source_before = MigrateFixture::Dump(f.source());
  Snapshot target_before = MigrateFixture::Dump(f.target());
  CommandResult run = f.Migrate(extra);
  INFO(run.err);
  CHECK(run.exit_code == 1);
  CHECK(run.err.find(expected) != std::string::npos);
  CHECK(std::count(run.err.begin(), run.err.end(), '\n') == 1);
  CHECK(MigrateFixture::Dump(f.source()) == source_before);
  CHECK(MigrateFixture::Dump(f.target()) == target_before);
}

TEST_CASE_FIXTURE(MigrateFixture,
                  "migrate refuses while a process is alive or jobs are in flight") {
  Populate();
  SUBCASE("a reliableq heartbeat") {
    Run(source(), {"SET", "reliableq:heartbeat:host:2:bbbbbbbbbbbb", "7", "PX", "30000"});
    CheckRefused(*this,
                 "a worker is alive on the source (its heartbeat key "
                 "reliableq:heartbeat:host:2:bbbbbbbbbbbb exists): stop every worker");
  }
  SUBCASE("a Sidekiq process that beat recently") {
    Run(source(), {"SADD", "processes", "ruby:9:cccc"});
    Run(source(), {"HSET", "ruby:9:cccc", "beat", std::to_string(NowSeconds() - 5)});
    CheckRefused(*this, "process ruby:9:cccc beat ");
  }
  SUBCASE("a working list") {
    Run(source(), {"LPUSH", "reliableq:working:host:1:aaaaaaaaaaaa:default", Job("w1", "default")});
    CheckRefused(*this,
                 "working list reliableq:working:host:1:aaaaaaaaaaaa:default holds 1 "
                 "job of a stopped worker: run `reliableq recover` first");
  }
  SUBCASE("a source of another layout") {
    Run(source(), {"SET", "reliableq:schema", "2"});
    CheckRefused(*this, "the source records layout '2' at reliableq:schema");
  }
  SUBCASE("a target group of another layout") {
    Run(target(), {"SET", "reliableq:{g}:schema", "3"});
    CheckRefused(*this, "the target records layout '3' at reliableq:{g}:schema");
  }
  SUBCASE("a target key that differs") {
    Run(target(), {"LPUSH", "reliableq:{g}:queue:critical", Job("other", "critical")});
    CheckRefused(*this,
                 "the target already holds reliableq:{g}:queue:critical with another "
                 "value than the source's");
  }
  SUBCASE("a target key that differs, for a key that would move in batches") {
    Run(target(), {"LPUSH", "reliableq:{g}:queue:critical", Job("other", "critical")});
    CheckRefused(*this,
                 "the target already holds reliableq:{g}:queue:critical with another "
                 "value than the source's",
                 {"--batch", "1"});
  }
}

TEST_CASE_FIXTURE(MigrateFixture, "a Sidekiq process record with an old beat does not refuse") {
  Populate();
  Run(source(), {"SADD", "processes", "ruby:9:cccc"});
  Run(source(), {"HSET", "ruby:9:cccc", "beat", std::to_string(NowSeconds() - 120)});
  CommandResult run = Migrate({});
  INFO(run.err);
  CHECK(run.exit_code == 0);
}

// The command stopped right after its Nth write to the target, before the
// matching DEL or removal on the source, for every N it reaches: the rerun
// ends with every job once on the target and none on the source.
TEST_CASE_FIXTURE(MigrateFixture, "a run stopped between a copy and its removal loses nothing") {
  Populate();
  const std::map<std::string, std::string> before = SourceContents();
  const Snapshot source_before = Dump(source());
  const size_t writes = MovedNames().size();
  for (size_t n = 1; n <= writes; ++n) {
    CAPTURE(n);
    Run(source(), {"FLUSHALL"});
    Run(target(), {"FLUSHALL"});
    for (const auto& [key, dump] : source_before) {
      Run(source(), {"RESTORE", key, "0", dump});
    }
    Run(source(), {"PEXPIRE", "reliableq:unique:k1", "600000"});
    CommandResult stopped = Migrate({}, {"RELIABLEQ_TEST_MIGRATE_STOP_AFTER=" + std::to_string(n)});
    REQUIRE(stopped.exit_code == 75);
    // The key copied last is on both sides, whole.
    size_t on_both = 0;
    for (const auto& [from, to] : MovedNames()) {
      if (Integer(source(), {"EXISTS", from}) == 1 && Integer(target(), {"EXISTS", to}) == 1) {
        ++on_both;
        CHECK(Contents(source(), from) == Contents(target(), to));
      }
    }
    CHECK(on_both == 1);
    CommandResult rerun = Migrate({});
    INFO(rerun.err);
    REQUIRE(rerun.exit_code == 0);
    CheckMoved(before);
  }
}

// A queue and a zset above --batch move in batches; a stop after any batch
// and a rerun give the same lists, in order, without a job twice.
TEST_CASE_FIXTURE(MigrateFixture, "big lists and zsets move in batches and survive a stop") {
  const int kJobs = 2500;
  auto fill = [&] {
    Run(source(), {"FLUSHALL"});
    Run(target(), {"FLUSHALL"});
    Run(source(), {"SADD", "queues", "bulk"});
    for (int i = 0; i < kJobs; i += 500) {
      redis::Argv push = {"LPUSH", "queue:bulk"};
      redis::Argv add = {"ZADD", "retry"};
      std::vector<std::string> jobs, scores;
      for (int j = i; j < i + 500; ++j) {
        jobs.push_back(Job("b" + std::to_string(j), "bulk"));
        scores.push_back(std::to_string(1800000000 + j % 7) + ".5");
      }
      for (int j = 0; j < 500; ++j) {
        push.push_back(jobs[j]);
        add.push_back(scores[j]);
        add.push_back(jobs[j]);
      }
      Run(source(), push);
      Run(source(), add);
    }
  };
  fill();
  const std::string queue_before = Contents(source(), "queue:bulk");
  const std::string retry_before = Contents(source(), "retry");

  SUBCASE("in one run") {
    CommandResult run = Migrate({"--batch", "1000", "--json"});
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    CHECK(run.out.find("\"source\":\"queue:bulk\",\"target\":\"reliableq:{g}:queue:bulk\","
                       "\"type\":\"list\",\"kind\":\"queue\",\"action\":\"batches\","
                       "\"size\":2500,\"moved\":2500") != std::string::npos);
    CHECK(Contents(target(), "reliableq:{g}:queue:bulk") == queue_before);
    CHECK(Contents(target(), "reliableq:{g}:retry") == retry_before);
  }
  SUBCASE("stopped after each batch, then run again") {
    // Writes: the queues SET, 3 batches of the list, 3 of the zset.
    for (int n = 2; n <= 7; ++n) {
      CAPTURE(n);
      fill();
      CommandResult stopped =
          Migrate({"--batch", "1000"}, {"RELIABLEQ_TEST_MIGRATE_STOP_AFTER=" + std::to_string(n)});
      REQUIRE(stopped.exit_code == 75);
      CommandResult rerun = Migrate({"--batch", "1000"});
      INFO(rerun.err);
      REQUIRE(rerun.exit_code == 0);
      CHECK(Contents(target(), "reliableq:{g}:queue:bulk") == queue_before);
      CHECK(Contents(target(), "reliableq:{g}:retry") == retry_before);
      CHECK(Integer(source(), {"EXISTS", "queue:bulk", "retry"}) == 0);
      // The progress markers are gone once every key moved.
      CHECK(Integer(source(), {"EXISTS", "reliableq:migrate"}) == 0);
      CHECK(Integer(target(), {"EXISTS", "reliableq:{g}:migrate"}) == 0);
    }
  }
}

// A client that still pushes while its key moves: whole keys are deleted
// from the source only if unchanged since their copy (WATCH); lists in
// batches lose only what was copied from their right end.
TEST_CASE_FIXTURE(MigrateFixture, "a push while a key moves is never lost") {
  auto pusher = redis::Connection::Open(Source().Options());
  REQUIRE(pusher.ok());
  migrate::MigrationSettings settings;
  settings.group = "g";
  settings.batch = 2;
  migrate::PlannedKey key = DefaultQueueToGroupG();
  int pushes = 0;
  auto push_once = [&] {
    if (pushes++ == 0) {
      REQUIRE((*pusher)->Command({"LPUSH", "queue:default", Job("late", "default")}).ok());
    }
  };
  Run(source(),
      {"LPUSH", "queue:default", Job("d1", "default"), Job("d2", "default"), Job("d3", "default")});

  SUBCASE("copied whole") {
    key.action = migrate::Action::kRestore;
    migrate::Mover mover(source(), target(), settings, push_once);
    Result<int64_t> moved = mover.Move(key);
    REQUIRE_FALSE(moved.ok());
    CHECK(moved.status().IsRefused());
    CHECK(moved.status().message().find("changed on the source while it moved") !=
          std::string::npos);
    CHECK(Array(source(), {"LRANGE", "queue:default", "0", "-1"}) ==
          std::vector<std::string>{Job("late", "default"), Job("d3", "default"),
                                   Job("d2", "default"), Job("d1", "default")});
    CHECK(
        Array(target(), {"LRANGE", key.target, "0", "-1"}) ==
        std::vector<std::string>{Job("d3", "default"), Job("d2", "default"), Job("d1", "default")});
  }
  SUBCASE("in batches") {
    key.action = migrate::Action::kBatches;
    migrate::Mover mover(source(), target(), settings, push_once);
    Result<int64_t> moved = mover.Move(key);
    REQUIRE(moved.ok());
    CHECK(*moved == 4);
    CHECK(Integer(source(), {"EXISTS", "queue:default"}) == 0);
    CHECK(Array(target(), {"LRANGE", key.target, "0", "-1"}) ==
          std::vector<std::string>{Job("late", "default"), Job("d3", "default"),
                                   Job("d2", "default"), Job("d1", "default")});
  }
}

// Something that still takes jobs from the right end of the source list
// (a worker started after the checks) or gives jobs back there, between a
// batch's copy and its removal: the removal takes the copied jobs by value,
// so no job that was never copied leaves the source.
TEST_CASE_FIXTURE(MigrateFixture,
                  "a taker at the right end of a list while it moves loses nothing") {
  auto taker = redis::Connection::Open(Source().Options());
  REQUIRE(taker.ok());
  migrate::MigrationSettings settings;
  settings.group = "g";
  settings.batch = 3;
  migrate::PlannedKey key = DefaultQueueToGroupG();
  key.action = migrate::Action::kBatches;
  std::vector<std::string> taken;
  int writes = 0;
  auto take_oldest = [&] {
    // After the first batch's copy: a worker takes the two oldest jobs
    // (both copied) and a janitor gives one back at the right end.
    if (writes++ != 0) return;
    for (int i = 0; i < 2; ++i) {
      auto popped = (*taker)->Command({"RPOP", "queue:default"});
      REQUIRE(popped.ok());
      taken.emplace_back((*popped)->str, (*popped)->len);
    }
    REQUIRE((*taker)->Command({"RPUSH", "queue:default", Job("back", "default")}).ok());
  };
  for (int i = 1; i <= 7; ++i) {
    Run(source(), {"LPUSH", "queue:default", Job("j" + std::to_string(i), "default")});
  }
  migrate::Mover mover(source(), target(), settings, take_oldest);
  Result<int64_t> moved = mover.Move(key);
  REQUIRE_MESSAGE(moved.ok(), moved.status().ToString());
  CHECK(taken == std::vector<std::string>{Job("j1", "default"), Job("j2", "default")});
  CHECK(Integer(source(), {"EXISTS", "queue:default"}) == 0);
  // Every job is on the target, once, or was taken (and its copy stays: at
  // least once); none is lost.
  std::vector<std::string> on_target = Array(target(), {"LRANGE", key.target, "0", "-1"});
  std::multiset<std::string> all(on_target.begin(), on_target.end());
  for (int i = 1; i <= 7; ++i) {
    CHECK_MESSAGE(all.count(Job("j" + std::to_string(i), "default")) == 1, i);
  }
  CHECK(all.count(Job("back", "default")) == 1);
  CHECK(all.size() == 8);
}

// Layout 2's names differ from layout 1's: a deployment may move into a
// group on its own Redis.
TEST_CASE_FIXTURE(MigrateFixture, "migrate into a group on the source's own Redis") {
  Populate();
  std::map<std::string, std::string> before = SourceContents();
  CommandResult run = RunCommand({BuildPath("RELIABLEQ_BIN"), "--redis", Source().Url(), "migrate",
                                  "--to", Source().Url(), "--group", "g"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  for (const auto& [from, to] : MovedNames()) {
    CHECK_MESSAGE(Contents(source(), to) == before.at(from), to);
    CHECK_MESSAGE(Integer(source(), {"EXISTS", from}) == 0, from);
  }
  CHECK(Get(source(), "reliableq:schema") == "1");
  CHECK(Get(source(), "reliableq:{g}:schema") == "2");
}

// Redis replicates asynchronously: a key the target's primary acknowledged
// and its replica does not have yet is lost if the target fails over (a
// cluster promotes the replica by itself), so the source keeps it until the
// replicas confirm the copy (WAIT).
TEST_CASE_FIXTURE(MigrateFixture, "the source keeps a key until the target's replica has it") {
  Run(source(), {"SADD", "queues", "default"});
  Run(source(), {"LPUSH", "queue:default", Job("r1", "default"), Job("r2", "default")});
  TargetServer primary;
  const int replica_port = FreeLoopbackPort();
  RedisServer replica({"--port", std::to_string(replica_port), "--bind", "127.0.0.1", "--replicaof",
                       "127.0.0.1", std::to_string(primary.port)});
  auto to_primary = redis::Connection::Open(primary.Options());
  REQUIRE(to_primary.ok());
  REQUIRE(WaitUntil([&] {
    auto info = (*to_primary)->Command({"INFO", "replication"});
    return info.ok() &&
           std::string((*info)->str, (*info)->len).find("state=online") != std::string::npos;
  }));
  auto migrate = [&](std::vector<std::string> env = {}) {
    return RunCommand({BuildPath("RELIABLEQ_BIN"), "--redis", Source().Url(), "migrate", "--to",
                       primary.Url(), "--group", "g"},
                      std::chrono::seconds(60), env);
  };
  REQUIRE(kill(replica.pid(), SIGSTOP) == 0);
  // A run stopped right after its first copy: the rerun, which finds that
  // key on both sides, must not delete it from the source either.
  REQUIRE(migrate({"RELIABLEQ_TEST_MIGRATE_STOP_AFTER=1"}).exit_code == 75);
  CommandResult stalled = migrate();
  REQUIRE(kill(replica.pid(), SIGCONT) == 0);
  INFO(stalled.err);
  CHECK(stalled.exit_code == 1);
  CHECK(stalled.err.find("replicas confirmed") != std::string::npos);
  CHECK(Integer(source(), {"LLEN", "queue:default"}) == 2);
  CHECK(Integer(source(), {"SCARD", "queues"}) == 1);
  CommandResult rerun = migrate();
  INFO(rerun.err);
  REQUIRE(rerun.exit_code == 0);
  CHECK(Integer(source(), {"EXISTS", "queue:default"}) == 0);
  RedisOptions at_replica;
  at_replica.port = replica_port;
  auto to_replica = redis::Connection::Open(at_replica);
  REQUIRE(to_replica.ok());
  CHECK(Integer(**to_replica, {"LLEN", "reliableq:{g}:queue:default"}) == 2);
}

TEST_CASE_FIXTURE(MigrateFixture, "migrate refuses bad arguments with exit 2") {
  CommandResult run = Migrate({"--batch", "0"});
  CHECK(run.exit_code == 2);
  CHECK(run.err.find("--batch needs a positive integer") != std::string::npos);
  run = RunCommand({BuildPath("RELIABLEQ_BIN"), "--redis", Source().Url(), "migrate", "--to",
                    Target().Url(), "--group", "a}b"});
  CHECK(run.exit_code == 2);
  CHECK(run.err.find("may only hold letters") != std::string::npos);
  run = RunCommand({BuildPath("RELIABLEQ_BIN"), "--redis", Source().Url(), "migrate", "--to",
                    "redis://:hunter2@127.0.0.1:notaport/0", "--group", "g"});
  CHECK(run.exit_code == 2);
  CHECK(run.err.find("hunter2") == std::string::npos);
  run = RunCommand(
      {BuildPath("RELIABLEQ_BIN"), "--redis", Source().Url(), "migrate", "--group", "g"});
  CHECK(run.exit_code == 2);
  CHECK(run.err.find("--to URL is required") != std::string::npos);
}

// The source of a migration is layout 1: a group in its URL (the one of
// --redis, or of REDIS_URL) is refused, whether or not it is --group's.
TEST_CASE_FIXTURE(MigrateFixture, "migrate refuses a source whose URL names a queue group") {
  Populate();
  const Snapshot source_before = Dump(source());
  const std::string bin = BuildPath("RELIABLEQ_BIN");
  for (const std::string& group : {std::string("g"), std::string("other")}) {
    CAPTURE(group);
    const std::string url = Source().Url() + "&group=" + group;
    for (bool from_env : {false, true}) {
      CAPTURE(from_env);
      std::vector<std::string> argv = {bin};
      if (!from_env) argv.insert(argv.end(), {"--redis", url});
      argv.insert(argv.end(), {"migrate", "--to", Target().Url(), "--group", "g", "--dry-run"});
      CommandResult run = RunCommand(
          argv, std::chrono::seconds(20),
          from_env ? std::vector<std::string>{"REDIS_URL=" + url} : std::vector<std::string>{});
      INFO(run.err);
      CHECK(run.exit_code == 2);
      CHECK(run.out.empty());
      CHECK(run.err.find("the source of a migration is layout 1, without a queue group, but its "
                         "URL names group '" +
                         group + "'") != std::string::npos);
      CHECK(std::count(run.err.begin(), run.err.end(), '\n') == 1);
    }
  }
  CHECK(Dump(source()) == source_before);
  CHECK(Dump(target()).empty());
}

TEST_CASE_FIXTURE(MigrateFixture, "migrate --dry-run --json says what would move, not moved") {
  Populate();
  CommandResult run = Migrate({"--dry-run", "--json"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  rapidjson::Document doc;
  doc.Parse(run.out.c_str());
  REQUIRE_FALSE(doc.HasParseError());
  CHECK(doc["dry_run"].IsTrue());
  CHECK_FALSE(doc.HasMember("moved_keys"));
  REQUIRE(doc.HasMember("would_move_keys"));
  CHECK(doc["would_move_keys"].GetInt64() == 20);
  REQUIRE(doc["keys"].Size() == 20);
  for (const auto& key : doc["keys"].GetArray()) {
    CAPTURE(key["source"].GetString());
    CHECK_FALSE(key.HasMember("moved"));
    REQUIRE(key.HasMember("would_move"));
    CHECK(key["would_move"].GetInt64() == key["size"].GetInt64());
  }
  CHECK(doc["schema_written"].IsFalse());
  CHECK(Dump(target()).empty());
}

// The target's password and TLS have options of their own, the same as the
// source's global ones: a TLS target with a private CA, client
// certificates and a password kept out of the command line.
TEST_CASE_FIXTURE(MigrateFixture,
                  "migrate reaches a TLS target with --to-tls-* and a password file") {
  Populate();
  const std::map<std::string, std::string> before = SourceContents();
  const std::string secret = "to-s3cret";
  TlsRedisServer tls(/*require_client_certs=*/true);
  {
    auto admin = redis::Connection::Open(tls.server().Options());
    REQUIRE(admin.ok());
    REQUIRE((*admin)->Command({"CONFIG", "SET", "requirepass", secret}).ok());
  }
  const std::string password_file = tls.certs().dir() + "/to-password";
  {
    std::ofstream out(password_file);
    out << secret << "\n";
  }
  const TestCertificates& certs = tls.certs();
  const std::string bin = BuildPath("RELIABLEQ_BIN");
  auto migrate = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = {bin,    "--redis", Source().Url(), "migrate",
                                     "--to", tls.Url(), "--group",      "g"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunCommand(argv, std::chrono::seconds(60));
  };
  const std::vector<std::string> client = {"--to-tls-cert",    certs.client_cert(),  "--to-tls-key",
                                           certs.client_key(), "--to-password-file", password_file};

  // The global TLS options are the source's: its URL is not rediss://.
  CommandResult global = migrate({"--redis-tls-insecure"});
  CHECK(global.exit_code == 2);
  CHECK(global.err.find("--redis-tls-insecure needs a rediss:// URL (TLS); the Redis URL is not "
                        "one") != std::string::npos);
  // Without the target's CA its certificate is refused.
  CommandResult untrusted = migrate(client);
  CHECK(untrusted.exit_code == 1);
  CHECK(untrusted.err.find("certificate verify failed") != std::string::npos);
  // A target TLS option with a target that is not rediss://.
  CommandResult plain = RunCommand({bin, "--redis", Source().Url(), "migrate", "--to",
                                    Target().Url(), "--group", "g", "--to-tls-insecure"});
  CHECK(plain.exit_code == 2);
  CHECK(plain.err.find("--to-tls-insecure needs a rediss:// URL (TLS); the --to URL is not one") !=
        std::string::npos);
  CHECK(std::count(plain.err.begin(), plain.err.end(), '\n') == 1);

  std::vector<std::string> trusted = client;
  trusted.insert(trusted.end(), {"--to-tls-ca", certs.ca(), "--dry-run"});
  CommandResult dry = migrate(trusted);
  INFO(dry.err);
  CHECK(dry.exit_code == 0);
  // --to-tls-insecure: no CA needed; the move itself.
  std::vector<std::string> insecure = client;
  insecure.push_back("--to-tls-insecure");
  CommandResult run = migrate(insecure);
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  for (const CommandResult& result : {global, untrusted, plain, dry, run}) {
    CHECK(result.out.find(secret) == std::string::npos);
    CHECK(result.err.find(secret) == std::string::npos);
  }
  RedisOptions target = tls.server().Options();
  target.password = secret;
  auto moved = redis::Connection::Open(target);
  REQUIRE(moved.ok());
  for (const auto& [from, to] : MovedNames()) {
    CHECK_MESSAGE(Contents(**moved, to) == before.at(from), to);
    CHECK_MESSAGE(Integer(source(), {"EXISTS", from}) == 0, from);
  }
}

// The move into a real cluster, drained by a worker of the group, is in
// tests/cluster/cluster_worker_test.cc.

}  // namespace
}  // namespace reliableq::testing
