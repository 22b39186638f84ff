#include "support/cluster_servers.h"

#include <doctest/doctest.h>
#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <thread>

#include "redis/connection.h"
#include "redis/key_slot.h"
#include "redis/reply.h"
#include "support/testutil.h"

namespace reliableq::testing {

namespace {

using Clock = std::chrono::steady_clock;

// A reply of one node (error replies included), or null when it does not
// answer.
redis::ReplyPtr Ask(int port, const redis::Argv& command) {
  auto connection = redis::Connection::Open(RedisCluster::Direct(port));
  if (!connection.ok()) return nullptr;
  auto replies = (*connection)->Pipeline({command});
  return replies.ok() ? std::move(replies->front()) : nullptr;
}

std::string AskText(int port, const redis::Argv& command) {
  redis::ReplyPtr reply = Ask(port, command);
  if (reply == nullptr) return "";
  return std::string(reply->str == nullptr ? "" : std::string(reply->str, reply->len));
}

bool WaitFor(const std::function<bool()>& condition, std::chrono::seconds limit) {
  auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return condition();
}

std::string Program(const std::string& name) {
  std::string found = FindProgram(name);
  REQUIRE_MESSAGE(!found.empty(), name << " is not installed: run tools/setup");
  return found;
}

std::string Address(int port) { return "127.0.0.1:" + std::to_string(port); }

}  // namespace

RedisCluster& RedisCluster::Shared() {
  static RedisCluster cluster;
  return cluster;
}

RedisCluster::RedisCluster(bool tls) {
  if (tls) certs_ = std::make_unique<TestCertificates>();
  char pattern[] = "/tmp/reliableq-cluster-XXXXXX";
  REQUIRE(mkdtemp(pattern) != nullptr);
  dir_ = pattern;
  nodes_.resize(6);
  std::set<int> taken;
  for (Node& node : nodes_) {
    // The clients', the cluster bus's (cluster-port) and with TLS the TLS
    // clients' ports, all distinct.
    for (int* port : {&node.port, &node.bus_port, &node.tls_port}) {
      if (port == &node.tls_port && !tls) continue;
      do *port = FreeLoopbackPort();
      while (!taken.insert(*port).second);
    }
  }
  for (Node& node : nodes_) Start(&node);
  std::vector<std::string> create = {Program("redis-cli"), "--cluster", "create"};
  for (const Node& node : nodes_) create.push_back(Address(node.port));
  create.insert(create.end(), {"--cluster-replicas", "1", "--cluster-yes"});
  CommandResult created = RunCommand(create, std::chrono::seconds(60));
  REQUIRE_MESSAGE(created.exit_code == 0,
                  "redis-cli --cluster create failed: " << created.out << created.err);
  WaitAgreed();
  // The replicas are attached before a test relies on a failover.
  bool replicated = WaitFor(
      [&] {
        int replicas = 0;
        for (const Node& node : nodes_) {
          std::string info = AskText(node.port, {"INFO", "replication"});
          if (info.find("role:slave") != std::string::npos &&
              info.find("master_link_status:up") != std::string::npos) {
            ++replicas;
          }
        }
        return replicas == 3;
      },
      std::chrono::seconds(30));
  REQUIRE_MESSAGE(replicated, "the replicas did not sync within 30 s; see " << dir_);
}

RedisCluster::~RedisCluster() {
  for (Node& node : nodes_) {
    if (node.process != nullptr) node.process->Signal(SIGKILL);
  }
  nodes_.clear();  // waits for each by its PID
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void RedisCluster::Start(Node* node) {
  std::string port = std::to_string(node->port);
  std::string dir = dir_ + "/" + port;
  std::filesystem::create_directories(dir);
  std::vector<std::string> argv = {Program("redis-server"), "--port", port, "--bind", "127.0.0.1",
                                   "--dir", dir, "--cluster-enabled", "yes", "--cluster-port",
                                   std::to_string(node->bus_port), "--cluster-config-file",
                                   dir + "/nodes.conf", "--cluster-node-timeout", "1000", "--save",
                                   "", "--appendonly", "no", "--daemonize", "no",
                                   // A full sync starts at once, not after 5 s.
                                   "--repl-diskless-sync-delay", "0"};
  if (certs_ != nullptr) {
    argv.insert(argv.end(),
                {"--tls-port", std::to_string(node->tls_port), "--tls-cert-file",
                 certs_->server_cert(), "--tls-key-file", certs_->server_key(),
                 "--tls-ca-cert-file", certs_->ca(), "--tls-auth-clients", "optional",
                 // The bus and the replication connect as clients too.
                 "--tls-client-cert-file", certs_->client_cert(), "--tls-client-key-file",
                 certs_->client_key(), "--tls-cluster", "yes", "--tls-replication", "yes"});
  }
  node->process = std::make_unique<ChildProcess>(argv, std::vector<std::string>{},
                                                 dir_ + "/redis-" + port + ".log");
  bool up = WaitFor([&] { return Ask(node->port, {"PING"}) != nullptr; }, std::chrono::seconds(10));
  REQUIRE_MESSAGE(up, "redis-server on port " << port << " did not start; see " << dir_);
}

RedisOptions RedisCluster::Direct(int port) {
  RedisOptions options;
  options.host = "127.0.0.1";
  options.port = port;
  options.connect_timeout = std::chrono::milliseconds(500);
  options.command_timeout = std::chrono::milliseconds(5000);
  return options;
}

std::string RedisCluster::Url(const std::string& group) const {
  std::string url = certs_ != nullptr ? "rediss+cluster://" : "redis+cluster://";
  std::vector<int> seeds = LivePorts();
  for (int port : killed_) seeds.push_back(port);
  for (size_t i = 0; i < seeds.size(); ++i) {
    int port = certs_ != nullptr ? FindNode(seeds[i])->tls_port : seeds[i];
    url += (i > 0 ? "," : "") + Address(port);
  }
  return url + "/" + group;
}

RedisOptions RedisCluster::Options(const std::string& group) const {
  Result<RedisOptions> options = RedisOptions::FromUrl(Url(group));
  REQUIRE(options.ok());
  options->connect_timeout = std::chrono::milliseconds(500);
  if (certs_ != nullptr) options->tls.ca_file = certs_->ca();
  return *options;
}

std::vector<int> RedisCluster::ports() const {
  std::vector<int> ports;
  for (const Node& node : nodes_) ports.push_back(node.port);
  return ports;
}

std::vector<int> RedisCluster::LivePorts() const {
  std::vector<int> ports;
  for (const Node& node : nodes_) {
    if (killed_.count(node.port) == 0) ports.push_back(node.port);
  }
  return ports;
}

const RedisCluster::Node* RedisCluster::FindNode(int port) const {
  for (const Node& node : nodes_) {
    if (node.port == port) return &node;
  }
  return nullptr;
}

std::map<std::pair<int, int>, int> RedisCluster::SlotMap(int port) const {
  std::map<std::pair<int, int>, int> map;
  redis::ReplyPtr reply = Ask(port, {"CLUSTER", "SLOTS"});
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) return map;
  for (size_t i = 0; i < reply->elements; ++i) {
    const redisReply* range = reply->element[i];
    if (range->elements < 3) continue;
    map[{static_cast<int>(range->element[0]->integer),
         static_cast<int>(range->element[1]->integer)}] =
        static_cast<int>(range->element[2]->element[1]->integer);
  }
  return map;
}

void RedisCluster::WaitAgreed() const {
  std::string last;
  bool agreed = WaitFor(
      [&] {
        std::map<std::pair<int, int>, int> first;
        for (int port : LivePorts()) {
          std::string info = AskText(port, {"CLUSTER", "INFO"});
          if (info.find("cluster_state:ok") == std::string::npos) {
            last = Address(port) + " is not ok yet";
            return false;
          }
          std::map<std::pair<int, int>, int> map = SlotMap(port);
          int covered = 0;
          for (const auto& [range, owner] : map) covered += range.second - range.first + 1;
          if (covered != redis::kClusterSlots) {
            last = Address(port) + " covers " + std::to_string(covered) + " slots";
            return false;
          }
          for (const auto& [range, owner] : map) {
            if (killed_.count(owner) != 0) {
              last = Address(port) + " still names a killed node";
              return false;
            }
          }
          if (first.empty()) {
            first = map;
          } else if (map != first) {
            last = Address(port) + " disagrees on the slot map";
            return false;
          }
        }
        return true;
      },
      std::chrono::seconds(30));
  REQUIRE_MESSAGE(agreed, "the cluster did not agree within 30 s (" << last << "); see " << dir_);
}

std::vector<int> RedisCluster::PrimaryPorts() const {
  std::set<int> primaries;
  for (const auto& [range, owner] : SlotMap(LivePorts().front())) primaries.insert(owner);
  return {primaries.begin(), primaries.end()};
}

int RedisCluster::OwnerOf(int slot) const {
  for (int port : LivePorts()) {
    for (const auto& [range, owner] : SlotMap(port)) {
      if (range.first <= slot && slot <= range.second) return owner;
    }
  }
  FAIL("no live node knows the owner of slot " << slot);
  return 0;
}

int RedisCluster::LowestSlotOf(int port) const {
  int lowest = -1;
  for (const auto& [range, owner] : SlotMap(LivePorts().front())) {
    if (owner == port && (lowest < 0 || range.first < lowest)) lowest = range.first;
  }
  return lowest;
}

std::string RedisCluster::NodeId(int port) const {
  std::string id = AskText(port, {"CLUSTER", "MYID"});
  REQUIRE_MESSAGE(!id.empty(), "no CLUSTER MYID from " << Address(port));
  return id;
}

std::string RedisCluster::GroupInSlot(int slot) {
  for (int i = 0;; ++i) {
    std::string group = "g" + std::to_string(i);
    if (redis::KeySlot(group) == slot) return group;
  }
}

std::string RedisCluster::GroupOn(int port) const {
  int slot = LowestSlotOf(port);
  REQUIRE_MESSAGE(slot >= 0, Address(port) << " owns no slot");
  return GroupInSlot(slot);
}

void RedisCluster::Kill(int port) {
  const Node* node = FindNode(port);
  REQUIRE(node != nullptr);
  node->process->Signal(SIGKILL);
  REQUIRE(node->process->Wait(std::chrono::seconds(10)).has_value());
  killed_.insert(port);
}

int RedisCluster::WaitForPromotion(int old_port, int slot) {
  int owner = 0;
  bool promoted = WaitFor(
      [&] {
        for (int port : LivePorts()) {
          for (const auto& [range, primary] : SlotMap(port)) {
            if (range.first <= slot && slot <= range.second && primary != old_port) {
              owner = primary;
              return true;
            }
          }
        }
        return false;
      },
      std::chrono::seconds(30));
  REQUIRE_MESSAGE(promoted, "no replica took over slot " << slot << " within 30 s; see " << dir_);
  WaitAgreed();
  return OwnerOf(slot);
}

void RedisCluster::BeginMigration(int slot, int to_port) {
  int from = OwnerOf(slot);
  std::string s = std::to_string(slot);
  REQUIRE(AskText(to_port, {"CLUSTER", "SETSLOT", s, "IMPORTING", NodeId(from)}) == "OK");
  REQUIRE(AskText(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", NodeId(to_port)}) == "OK");
}

size_t RedisCluster::MigrateKeys(int slot, int to_port, size_t max_keys) {
  int from = OwnerOf(slot);
  redis::ReplyPtr keys =
      Ask(from, {"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), std::to_string(max_keys)});
  REQUIRE(keys != nullptr);
  REQUIRE(keys->type == REDIS_REPLY_ARRAY);
  if (keys->elements == 0) return 0;
  // With tls-cluster, MIGRATE speaks TLS: the target's TLS port.
  std::string port = std::to_string(certs_ != nullptr ? FindNode(to_port)->tls_port : to_port);
  redis::Argv migrate = {"MIGRATE", "127.0.0.1", port, "", "0", "5000", "KEYS"};
  for (size_t i = 0; i < keys->elements; ++i) {
    migrate.emplace_back(keys->element[i]->str, keys->element[i]->len);
  }
  std::string answer = AskText(from, migrate);
  REQUIRE_MESSAGE(answer == "OK", "MIGRATE: " << answer);
  return keys->elements;
}

void RedisCluster::FinishMigration(int slot, int to_port) {
  int from = OwnerOf(slot);
  std::string s = std::to_string(slot), id = NodeId(to_port);
  // As redis-cli: the target first (it stops answering ASK-only), then the
  // source (it starts answering MOVED), then everyone else.
  REQUIRE(AskText(to_port, {"CLUSTER", "SETSLOT", s, "NODE", id}) == "OK");
  if (from != to_port) REQUIRE(AskText(from, {"CLUSTER", "SETSLOT", s, "NODE", id}) == "OK");
  for (int port : PrimaryPorts()) {
    if (port != to_port && port != from) AskText(port, {"CLUSTER", "SETSLOT", s, "NODE", id});
  }
  WaitAgreed();
}

void RedisCluster::MoveSlot(int slot, int to_port, size_t batch,
                            const std::function<void()>& between) {
  BeginMigration(slot, to_port);
  while (MigrateKeys(slot, to_port, batch) > 0) {
    if (between) between();
  }
  FinishMigration(slot, to_port);
}

void RedisCluster::Reshard(int from_port, int to_port, int slots) {
  CommandResult resharded =
      RunCommand({Program("redis-cli"), "--cluster", "reshard", Address(LivePorts().front()),
                  "--cluster-from", NodeId(from_port), "--cluster-to", NodeId(to_port),
                  "--cluster-slots", std::to_string(slots), "--cluster-yes"},
                 std::chrono::seconds(60));
  REQUIRE_MESSAGE(resharded.exit_code == 0,
                  "redis-cli --cluster reshard failed: " << resharded.out << resharded.err);
  WaitAgreed();
}

}  // namespace reliableq::testing
