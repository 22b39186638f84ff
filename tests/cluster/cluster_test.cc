// The cluster connection layer against a real Redis Cluster (three
// primaries, three replicas; cluster_servers.h), one per run of this
// binary, shared by the test cases. The last case kills a primary: the
// cases before it must not rely on which node owns what beyond what they
// look up themselves.

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/cluster_servers.h"
#include "redis/async_connection.h"
#include "redis/connection.h"
#include "redis/key_slot.h"
#include "redis/reply.h"
#include "support/testutil.h"

namespace reliableq::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string Text(const redis::ReplyPtr& reply) {
  return reply->str == nullptr ? "" : std::string(reply->str, reply->len);
}

std::unique_ptr<redis::Connection> OpenGroup(const RedisCluster& cluster,
                                             const std::string& group) {
  auto connection = redis::Connection::Open(cluster.Options(group));
  REQUIRE_MESSAGE(connection.ok(), connection.status().ToString());
  return std::move(*connection);
}

// The id of the node a connection is on.
std::string NodeOf(redis::Connection& connection) {
  auto id = connection.Command({"CLUSTER", "MYID"});
  REQUIRE_MESSAGE(id.ok(), id.status().ToString());
  return Text(*id);
}

std::string GetOn(int port, const std::string& key) {
  auto direct = redis::Connection::Open(RedisCluster::Direct(port));
  REQUIRE(direct.ok());
  auto value = (*direct)->Command({"GET", key});
  REQUIRE_MESSAGE(value.ok(), value.status().ToString());
  return (*value)->type == REDIS_REPLY_NIL ? "(nil)" : Text(*value);
}

// One AsyncConnection on its own loop, driven by the test thread.
class AsyncOnLoop {
 public:
  explicit AsyncOnLoop(RedisOptions options) {
    uv_loop_init(&loop_);
    connection_.emplace(&loop_, std::move(options));
    connection_->SetOnDisconnect([this](const Status&) { ++disconnects_; });
  }
  ~AsyncOnLoop() {
    connection_->Close();
    connection_.reset();
    for (int i = 0; i < 100 && uv_loop_alive(&loop_); ++i) uv_run(&loop_, UV_RUN_NOWAIT);
    uv_loop_close(&loop_);
  }
  Status Connect() {
    std::optional<Status> ready;
    connection_->Connect([&](const Status& s) { ready = s; });
    RunUntil([&] { return ready.has_value(); });
    REQUIRE(ready.has_value());
    return *ready;
  }
  // The command's status and text reply.
  std::pair<Status, std::string> Run(const std::vector<std::string_view>& argv) {
    std::optional<std::pair<Status, std::string>> got;
    Status sent = connection_->Command(argv, [&](const Status& s, redis::ReplyRef ref) {
      const redisReply* reply = ref.raw();
      got.emplace(
          s, reply != nullptr && reply->str != nullptr ? std::string(reply->str, reply->len) : "");
    });
    if (!sent.ok()) return {sent, ""};
    RunUntil([&] { return got.has_value(); });
    REQUIRE(got.has_value());
    return *got;
  }
  void RunUntil(const std::function<bool()>& done,
                std::chrono::seconds limit = std::chrono::seconds(10)) {
    WaitUntil(
        [&] {
          uv_run(&loop_, UV_RUN_NOWAIT);
          return done();
        },
        limit);
  }
  // Connects again until it works (a failover takes a few seconds).
  void Reconnect(std::chrono::seconds limit) {
    auto deadline = Clock::now() + limit;
    Status last = Status::OK();
    while (Clock::now() < deadline) {
      if (connection_->ready()) return;
      last = Connect();
      if (last.ok()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL("no connection within the limit: " << last.ToString());
  }
  redis::AsyncConnection& connection() { return *connection_; }
  int disconnects() const { return disconnects_; }

 private:
  uv_loop_t loop_;
  std::optional<redis::AsyncConnection> connection_;
  int disconnects_ = 0;
};

}  // namespace

TEST_CASE("KeySlot agrees with CLUSTER KEYSLOT") {
  RedisCluster& cluster = RedisCluster::Shared();
  std::vector<std::string> keys = {"",         "{}",     "{a",        "a}",    "a}{b}",
                                   "{{a}}",    "{a}{b}", "}{a}",      "{}{a}", "{ }",
                                   "x{y}z{w}", "{a}}",   "foo{}{bar}"};
  std::mt19937 random(2121);
  // Bytes heavy with braces, and every byte value.
  const std::string alphabet = std::string("{{{}}}ab:") + std::string("\0\xff\x80", 3);
  for (int i = 0; i < 4000; ++i) {
    std::string key(random() % 24, '\0');
    for (char& c : key) {
      c = (i % 2 == 0) ? alphabet[random() % alphabet.size()] : static_cast<char>(random() % 256);
    }
    keys.push_back(key);
  }
  auto node = redis::Connection::Open(RedisCluster::Direct(cluster.ports().front()));
  REQUIRE(node.ok());
  std::vector<redis::Argv> commands;
  for (const std::string& key : keys) commands.push_back({"CLUSTER", "KEYSLOT", key});
  auto replies = (*node)->Pipeline(commands);
  REQUIRE(replies.ok());
  int differ = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    REQUIRE((*replies)[i]->type == REDIS_REPLY_INTEGER);
    if ((*replies)[i]->integer != redis::KeySlot(keys[i])) {
      ++differ;
      CAPTURE(keys[i]);
      CHECK((*replies)[i]->integer == redis::KeySlot(keys[i]));
    }
  }
  CHECK(differ == 0);
}

TEST_CASE("a cluster Connection goes to the primary of its group's slot, on each primary") {
  RedisCluster& cluster = RedisCluster::Shared();
  std::vector<int> primaries = cluster.PrimaryPorts();
  REQUIRE(primaries.size() == 3);
  for (size_t i = 0; i < primaries.size(); ++i) {
    const int port = primaries[i];
    std::string group = cluster.GroupOn(port);
    CAPTURE(group);
    auto connection = OpenGroup(cluster, group);
    CHECK(NodeOf(*connection) == cluster.NodeId(port));
    std::string key = "reliableq:{" + group + "}:queue:default";
    REQUIRE(connection->Command({"SET", key, "on-" + std::to_string(port)}).ok());
    CHECK(GetOn(port, key) == "on-" + std::to_string(port));
    // Eval's path (EVALSHA, NOSCRIPT, EVAL) on the same node.
    auto eval = connection->Command({"EVAL", "return redis.call('GET', KEYS[1])", "1", key});
    REQUIRE(eval.ok());
    CHECK(Text(*eval) == "on-" + std::to_string(port));
    // A key another primary serves is refused, never followed. (A key of
    // another slot on the same primary is served: Redis redirects only to
    // another node, so the key is taken from the next primary's group.)
    int elsewhere = primaries[(i + 1) % primaries.size()];
    std::string other_key = "reliableq:{" + cluster.GroupOn(elsewhere) + "}:queue:default";
    REQUIRE(cluster.OwnerOf(redis::KeySlot(cluster.GroupOn(elsewhere))) != port);
    auto other = connection->Command({"GET", other_key});
    CHECK(other.status().IsInvalidArgument());
    CHECK(other.status().message().find("a key of slot") != std::string::npos);
    CHECK(NodeOf(*connection) == cluster.NodeId(port));
  }
  // The slot just below each primary's first one belongs to another
  // primary: a connection for it must not land on its neighbour's.
  for (int port : primaries) {
    int below = cluster.LowestSlotOf(port) - 1;
    if (below < 0) continue;
    std::string group = RedisCluster::GroupInSlot(below);
    CAPTURE(group);
    int owner = cluster.OwnerOf(below);
    REQUIRE(owner != port);
    auto connection = OpenGroup(cluster, group);
    CHECK(redis::Discovery::For(cluster.Options(group))->slot() == below);
    CHECK(NodeOf(*connection) == cluster.NodeId(owner));
  }
  // Connections of one slot share one Discovery; of two slots, two.
  std::string group = cluster.GroupOn(primaries[0]);
  CHECK(redis::Discovery::For(cluster.Options(group)) ==
        redis::Discovery::For(cluster.Options(group)));
  CHECK(redis::Discovery::For(cluster.Options(group)) !=
        redis::Discovery::For(cluster.Options(cluster.GroupOn(primaries[1]))));
}

// Options for the same group with a Discovery of their own (the connect
// timeout is part of a Discovery's identity): a connection made with them
// meets a move by itself rather than through another connection's epoch.
RedisOptions OwnDiscovery(const RedisCluster& cluster, const std::string& group, int ms) {
  RedisOptions options = cluster.Options(group);
  options.connect_timeout = std::chrono::milliseconds(ms);
  return options;
}

TEST_CASE("a slot moved under a Connection: every command answered, MOVED followed") {
  RedisCluster& cluster = RedisCluster::Shared();
  std::vector<int> primaries = cluster.PrimaryPorts();
  int from = primaries[0], to = primaries[1];
  std::string group = cluster.GroupOn(from);
  int slot = redis::KeySlot(group);
  auto connection = OpenGroup(cluster, group);
  auto pipelined = redis::Connection::Open(OwnDiscovery(cluster, group, 701));
  REQUIRE(pipelined.ok());
  auto transacted = redis::Connection::Open(OwnDiscovery(cluster, group, 706));
  REQUIRE(transacted.ok());
  AsyncOnLoop async(OwnDiscovery(cluster, group, 702));
  REQUIRE(async.Connect().ok());
  AsyncOnLoop batched(OwnDiscovery(cluster, group, 705));
  REQUIRE(batched.Connect().ok());
  // Shares `connection`'s Discovery, and stays idle.
  AsyncOnLoop idle(cluster.Options(group));
  REQUIRE(idle.Connect().ok());
  std::string prefix = "reliableq:{" + group + "}:";
  for (int i = 0; i < 60; ++i) {
    REQUIRE(connection->Command({"SET", prefix + "k" + std::to_string(i), std::to_string(i)}).ok());
  }
  // Between batches of MIGRATE: the moved keys answer through ASK, the
  // others on the source, the counter wherever it is; every command
  // answered.
  int answered = 0, issued = 0;
  cluster.MoveSlot(slot, to, 10, [&] {
    for (int i = 0; i < 60; i += 7) {
      ++issued;
      auto value = connection->Command({"GET", prefix + "k" + std::to_string(i)});
      CHECK_MESSAGE(value.ok(), value.status().ToString());
      if (value.ok() && Text(*value) == std::to_string(i)) ++answered;
    }
    ++issued;
    auto counted = connection->Command({"INCR", prefix + "counter"});
    CHECK_MESSAGE(counted.ok(), counted.status().ToString());
    if (counted.ok()) ++answered;
  });
  // The slot is at `to` now; the connection, still on `from`, meets MOVED
  // and follows it.
  CHECK(NodeOf(*connection) == cluster.NodeId(from));
  for (int i = 0; i < 60; ++i) {
    ++issued;
    auto value = connection->Command({"GET", prefix + "k" + std::to_string(i)});
    REQUIRE_MESSAGE(value.ok(), value.status().ToString());
    if (Text(*value) == std::to_string(i)) ++answered;
  }
  CHECK(issued > 60);
  CHECK(answered == issued);
  CHECK(NodeOf(*connection) == cluster.NodeId(to));
  CHECK(GetOn(to, prefix + "k59") == "59");
  // The idle AsyncConnection of the same slot drops within a watchdog
  // tick once `connection` moved the epoch, and reconnects to `to`.
  idle.RunUntil([&] { return !idle.connection().ready(); }, std::chrono::seconds(2));
  CHECK_FALSE(idle.connection().ready());
  idle.Reconnect(std::chrono::seconds(10));
  CHECK(idle.Run({"CLUSTER", "MYID"}).second == cluster.NodeId(to));

  // Pipeline: the MOVED command goes again at the owner, as Command's;
  // in a transaction it stays in place (EXEC aborts), and the next call
  // is at the owner.
  auto first = (*pipelined)->Pipeline({{"GET", prefix + "k1"}});
  REQUIRE(first.ok());
  REQUIRE((*first)[0]->type == REDIS_REPLY_STRING);
  CHECK(Text((*first)[0]) == "1");
  CHECK(NodeOf(**pipelined) == cluster.NodeId(to));
  auto transaction = (*transacted)->Pipeline(
      {{"MULTI"}, {"SET", prefix + "in-multi", "x"}, {"EXEC"}});
  REQUIRE(transaction.ok());
  CHECK(Text((*transaction)[1]).rfind("MOVED " + std::to_string(slot), 0) == 0);
  CHECK((*transaction)[2]->type == REDIS_REPLY_ERROR);  // EXECABORT
  auto second = (*transacted)->Pipeline({{"GET", prefix + "k1"}});
  REQUIRE(second.ok());
  REQUIRE((*second)[0]->type == REDIS_REPLY_STRING);
  CHECK(Text((*second)[0]) == "1");
  CHECK(GetOn(to, prefix + "in-multi") == "(nil)");

  // The AsyncConnection meets MOVED as an error reply and drops; its
  // owner reconnects, to `to`.
  auto moved = async.Run({"GET", prefix + "k2"});
  CHECK(moved.first.IsIoError());
  CHECK_MESSAGE(moved.first.message().find("MOVED") != std::string::npos, moved.first.ToString());
  // Dropped at once, not a watchdog tick later through the epoch.
  CHECK_FALSE(async.connection().ready());
  CHECK(async.disconnects() == 1);
  async.Reconnect(std::chrono::seconds(10));
  auto id = async.Run({"CLUSTER", "MYID"});
  REQUIRE(id.first.ok());
  CHECK(id.second == cluster.NodeId(to));
  CHECK(async.Run({"GET", prefix + "k2"}).second == "2");

  // The same for a batch: its statuses arrive (the MOVED in place), then
  // the connection drops.
  redis::CommandList batch;
  batch.Add({"INCR", prefix + "batched"});
  batch.Add({"INCR", prefix + "batched"});
  std::optional<std::vector<Status>> statuses;
  REQUIRE(batched.connection()
              .Pipeline(batch, [&](std::vector<Status> got,
                                   std::vector<int64_t>) { statuses = std::move(got); })
              .ok());
  batched.RunUntil([&] { return statuses.has_value(); });
  REQUIRE(statuses.has_value());
  REQUIRE(statuses->size() == 2);
  CHECK((*statuses)[0].message().find("MOVED") != std::string::npos);
  // Dropped at once, not a watchdog tick later through the epoch.
  CHECK_FALSE(batched.connection().ready());
  batched.Reconnect(std::chrono::seconds(10));
  CHECK(batched.Run({"CLUSTER", "MYID"}).second == cluster.NodeId(to));
}

TEST_CASE("during a migration: ASK for a new key, TRYAGAIN for a split script, right at the end") {
  RedisCluster& cluster = RedisCluster::Shared();
  std::vector<int> primaries = cluster.PrimaryPorts();
  int from = primaries[2], to = primaries[0];
  std::string group = cluster.GroupOn(from);
  int slot = redis::KeySlot(group);
  std::string prefix = "reliableq:{" + group + "}:";
  std::string a = prefix + "a", b = prefix + "b";
  auto connection = OpenGroup(cluster, group);
  REQUIRE(connection->Command({"SET", a, "A"}).ok());
  REQUIRE(connection->Command({"SET", b, "B"}).ok());
  AsyncOnLoop async(OwnDiscovery(cluster, group, 703));
  REQUIRE(async.Connect().ok());
  cluster.BeginMigration(slot, to);
  REQUIRE(cluster.MigrateKeys(slot, to, 1) == 1);  // one of a, b is at `to` now

  // The AsyncConnection: ASK and TRYAGAIN are error replies, and it stays.
  auto got_a = async.Run({"GET", a}), got_b = async.Run({"GET", b});
  CHECK(got_a.first.ok() != got_b.first.ok());
  const Status& asked = got_a.first.ok() ? got_b.first : got_a.first;
  CHECK(asked.IsIoError());
  CHECK_MESSAGE(asked.message().find("ASK " + std::to_string(slot)) != std::string::npos,
                asked.ToString());
  auto split = async.Run({"MGET", a, b});
  CHECK(split.first.IsIoError());
  CHECK_MESSAGE(split.first.message().find("TRYAGAIN") != std::string::npos,
                split.first.ToString());
  CHECK(async.connection().ready());

  // The blocking Connection: a new key goes to the target through ASK
  // (the connection stays on the source), both migrated and not.
  REQUIRE(connection->Command({"SET", prefix + "new", "N"}).ok());
  CHECK(NodeOf(*connection) == cluster.NodeId(from));
  auto moved_one = connection->Command({"GET", got_a.first.ok() ? b : a});
  REQUIRE(moved_one.ok());
  CHECK(Text(*moved_one) == (got_a.first.ok() ? "B" : "A"));
  // A Pipeline follows too, each command on its own (an admin verb's reads).
  auto both = connection->Pipeline({{"GET", a}, {"GET", b}});
  REQUIRE_MESSAGE(both.ok(), both.status().ToString());
  CHECK(Text((*both)[0]) == "A");
  CHECK(Text((*both)[1]) == "B");

  // A TRYAGAIN that lasts past the command timeout ends the call then,
  // naming the slot and the node; another error reply is the command's
  // answer, as it is without a cluster.
  RedisOptions short_timeout = cluster.Options(group);
  short_timeout.command_timeout = std::chrono::milliseconds(300);
  auto impatient = redis::Connection::Open(short_timeout);
  REQUIRE(impatient.ok());
  Clock::time_point asked_at = Clock::now();
  auto gave_up = (*impatient)->Command({"MGET", a, b});
  auto waited = Clock::now() - asked_at;
  CHECK(gave_up.status().IsIoError());
  CHECK_MESSAGE(gave_up.status().message().find("slot " + std::to_string(slot) + " at 127.0.0.1:" +
                                                std::to_string(from)) != std::string::npos,
                gave_up.status().ToString());
  CHECK(gave_up.status().message().find("TRYAGAIN") != std::string::npos);
  CHECK(waited >= std::chrono::milliseconds(300));
  CHECK(waited < std::chrono::milliseconds(1500));
  auto script_error =
      (*impatient)->Command({"EVAL", "return redis.error_reply('RQ_NOTFOUND x')", "0"});
  CHECK(script_error.status().IsNotFound());
  CHECK(script_error.status().message() == "x");

  // A script over both keys waits out the TRYAGAINs while the migration
  // completes, then runs once.
  std::optional<Result<redis::ReplyPtr>> script;
  std::atomic<bool> answered{false};
  Clock::time_point started = Clock::now();
  std::thread caller([&] {
    script = connection->Command({"EVAL",
                                  "redis.call('INCR', KEYS[1] .. ':runs') "
                                  "return redis.call('MGET', KEYS[1], KEYS[2])",
                                  "2", a, b});
    answered = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK_FALSE(answered.load());  // still waiting: TRYAGAIN
  while (cluster.MigrateKeys(slot, to, 10) > 0) {
  }
  cluster.FinishMigration(slot, to);
  caller.join();
  REQUIRE(script.has_value());
  REQUIRE_MESSAGE(script->ok(), script->status().ToString());
  const redisReply* values = script->value().get();
  REQUIRE(values->type == REDIS_REPLY_ARRAY);
  REQUIRE(values->elements == 2);
  CHECK(std::string(values->element[0]->str) == "A");
  CHECK(std::string(values->element[1]->str) == "B");
  CHECK(Clock::now() - started < cluster.Options(group).command_timeout);
  CHECK(GetOn(to, prefix + "new") == "N");
  CHECK(GetOn(to, a + ":runs") == "1");  // ran once
}

TEST_CASE("pub/sub on the slot's primary hears PUBLISH from any node") {
  RedisCluster& cluster = RedisCluster::Shared();
  std::vector<int> primaries = cluster.PrimaryPorts();
  std::string group = cluster.GroupOn(primaries[1]);
  std::string channel = "reliableq:{" + group + "}:wake:queue:default";
  AsyncOnLoop async(cluster.Options(group));
  std::vector<std::string> heard;
  async.connection().SetOnMessage([&](redis::ReplyRef ref) {
    const redisReply& message = *ref.raw();
    const redisReply* payload = message.element[message.elements - 1];
    if (payload->type == REDIS_REPLY_STRING) heard.emplace_back(payload->str, payload->len);
  });
  REQUIRE(async.Connect().ok());
  REQUIRE(async.Run({"SUBSCRIBE", channel}).first.ok());
  // From every node, the replicas included: a cluster broadcasts PUBLISH.
  std::vector<int> ports = cluster.LivePorts();
  for (int port : ports) {
    auto direct = redis::Connection::Open(RedisCluster::Direct(port));
    REQUIRE(direct.ok());
    REQUIRE((*direct)->Command({"PUBLISH", channel, std::to_string(port)}).ok());
  }
  async.RunUntil([&] { return heard.size() == ports.size(); });
  CHECK(heard.size() == ports.size());
}

TEST_CASE("redis-cli --cluster reshard under a Connection that keeps writing") {
  RedisCluster& cluster = RedisCluster::Shared();
  std::vector<int> primaries = cluster.PrimaryPorts();
  int from = primaries[1], to = primaries[2];
  std::string group = cluster.GroupOn(from);  // its lowest slot: the one reshard moves first
  auto connection = OpenGroup(cluster, group);
  std::string list = "reliableq:{" + group + "}:queue:reshard";
  std::atomic<bool> stop{false};
  int pushed = 0, failed = 0;
  std::thread writer([&] {
    while (!stop) {
      auto pushed_now = connection->Command({"LPUSH", list, std::to_string(pushed)});
      if (pushed_now.ok()) {
        ++pushed;
      } else {
        ++failed;
      }
    }
  });
  cluster.Reshard(from, to, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  stop = true;
  writer.join();
  CHECK(failed == 0);
  CHECK(pushed > 0);
  CHECK(cluster.OwnerOf(redis::KeySlot(group)) == to);
  auto length = connection->Command({"LLEN", list});
  REQUIRE(length.ok());
  CHECK((*length)->integer == pushed);
  CHECK(NodeOf(*connection) == cluster.NodeId(to));
}

TEST_CASE("cluster options a connection cannot use are refused before connecting") {
  RedisOptions options;
  options.cluster.seeds.push_back({"127.0.0.1", 1});
  auto no_group = redis::Connection::Open(options);
  CHECK(no_group.status().IsInvalidArgument());
  CHECK(no_group.status().message().find("needs a queue group") != std::string::npos);
  options.group = "g";
  options.db = 1;
  CHECK(redis::Connection::Open(options).status().IsInvalidArgument());
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    redis::AsyncConnection async(&loop, options);
    std::optional<Status> ready;
    async.Connect([&](const Status& s) { ready = s; });
    for (int i = 0; i < 100 && !ready; ++i) uv_run(&loop, UV_RUN_NOWAIT);
    REQUIRE(ready.has_value());
    CHECK(ready->IsInvalidArgument());
    CHECK(ready->message().find("database 0 only") != std::string::npos);
  }
  for (int i = 0; i < 100 && uv_loop_alive(&loop); ++i) uv_run(&loop, UV_RUN_NOWAIT);
  uv_loop_close(&loop);
}

TEST_CASE("unreachable seeds fail within the bound, naming every seed and what it said") {
  RedisCluster& cluster = RedisCluster::Shared();
  RedisOptions options;
  options.group = "orders";
  options.password = "s3cret";
  options.connect_timeout = std::chrono::milliseconds(300);
  std::vector<int> ports = {FreeLoopbackPort(), FreeLoopbackPort()};
  for (int port : ports) options.cluster.seeds.push_back({"127.0.0.1", port});
  // A seed that takes the connection and never answers: it costs its
  // timeout, no more.
  int silent = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(silent >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  REQUIRE(bind(silent, reinterpret_cast<sockaddr*>(&address), length) == 0);
  REQUIRE(listen(silent, 8) == 0);
  REQUIRE(getsockname(silent, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  int plain = ntohs(address.sin_port);
  options.cluster.seeds.push_back({"127.0.0.1", plain});
  (void)cluster;
  Clock::time_point started = Clock::now();
  auto connection = redis::Connection::Open(options);
  auto took = Clock::now() - started;
  REQUIRE_FALSE(connection.ok());
  std::string message = connection.status().ToString();
  CAPTURE(message);
  CHECK(connection.status().IsRetryable());
  // Each seed with what it said ("HOST:PORT: why"), not only in the list
  // of seeds the description gives.
  for (int port : ports) {
    CHECK(message.find("127.0.0.1:" + std::to_string(port) + ": ") != std::string::npos);
  }
  CHECK(message.find("127.0.0.1:" + std::to_string(plain) + ": ") != std::string::npos);
  CHECK(message.find("slot " + std::to_string(redis::KeySlot("orders"))) != std::string::npos);
  CHECK(message.find("s3cret") == std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
  CHECK(message.find("no answer in time") != std::string::npos);
  CHECK(took < std::chrono::seconds(3));
  close(silent);
}

TEST_CASE("rediss+cluster:// goes over TLS to the slot's primary and follows a MOVED there") {
  RedisCluster cluster(/*tls=*/true);
  std::vector<int> primaries = cluster.PrimaryPorts();
  REQUIRE(primaries.size() == 3);
  std::string group = cluster.GroupOn(primaries[1]);
  std::string key = "reliableq:{" + group + "}:queue:tls";
  RedisOptions options = cluster.Options(group);
  REQUIRE(options.tls.enabled);
  auto connection = OpenGroup(cluster, group);
  REQUIRE(connection->Command({"SET", key, "over-tls"}).ok());
  CHECK(NodeOf(*connection) == cluster.NodeId(primaries[1]));
  CHECK(GetOn(primaries[1], key) == "over-tls");
  // The map and the MOVED a TLS client gets name TLS ports.
  cluster.MoveSlot(redis::KeySlot(group), primaries[2]);
  auto value = connection->Command({"GET", key});
  REQUIRE_MESSAGE(value.ok(), value.status().ToString());
  CHECK(Text(*value) == "over-tls");
  CHECK(NodeOf(*connection) == cluster.NodeId(primaries[2]));
  // Without the test CA the certificates are refused: it is TLS.
  options.tls.ca_file.clear();
  options.connect_timeout = std::chrono::milliseconds(501);  // a Discovery of its own
  auto untrusted = redis::Connection::Open(options);
  CHECK_FALSE(untrusted.ok());
}

// Last: it kills a primary, and the cluster stays with one replica less.
TEST_CASE("a primary SIGKILLed: a Connection and an AsyncConnection follow the promoted replica") {
  RedisCluster& cluster = RedisCluster::Shared();
  std::vector<int> primaries = cluster.PrimaryPorts();
  int victim = primaries[0];
  std::string group = cluster.GroupOn(victim);
  int slot = redis::KeySlot(group);
  std::string key = "reliableq:{" + group + "}:acked";
  auto connection = OpenGroup(cluster, group);
  AsyncOnLoop async(OwnDiscovery(cluster, group, 704));
  REQUIRE(async.Connect().ok());
  REQUIRE(connection->Command({"SET", key, "before"}).ok());
  // Acknowledged by the replica before the kill: it must survive.
  auto waited = connection->Command({"WAIT", "1", "2000"});
  REQUIRE(waited.ok());
  REQUIRE((*waited)->integer == 1);
  cluster.Kill(victim);
  async.RunUntil([&] { return !async.connection().ready(); }, std::chrono::seconds(5));
  CHECK_FALSE(async.connection().ready());

  // The blocking connection fails until the replica is promoted, then
  // works, on the new primary; bounded.
  Clock::time_point deadline = Clock::now() + std::chrono::seconds(30);
  Result<redis::ReplyPtr> got = Status::IoError("not tried");
  while (Clock::now() < deadline) {
    got = connection->Command({"GET", key});
    if (got.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  REQUIRE_MESSAGE(got.ok(), got.status().ToString());
  CHECK(Text(*got) == "before");
  int promoted = cluster.WaitForPromotion(victim, slot);
  CHECK(promoted != victim);
  CHECK(NodeOf(*connection) == cluster.NodeId(promoted));

  async.Reconnect(std::chrono::seconds(30));
  auto id = async.Run({"CLUSTER", "MYID"});
  REQUIRE(id.first.ok());
  CHECK(id.second == cluster.NodeId(promoted));
  CHECK(async.Run({"GET", key}).second == "before");
}

}  // namespace reliableq::testing
