#include "support/ha_servers.h"

#include <signal.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <doctest/doctest.h>

#include "redis/connection.h"
#include "redis/reply.h"
#include "support/testutil.h"

namespace reliableq::testing {

namespace {

using Clock = std::chrono::steady_clock;

// A reply of one server, or null when it does not answer.
redis::ReplyPtr Ask(const RedisOptions& options, const redis::Argv& command) {
  auto connection = redis::Connection::Open(options);
  if (!connection.ok()) return nullptr;
  auto reply = (*connection)->Command(command);
  return reply.ok() ? std::move(*reply) : nullptr;
}

std::string Info(int port, const char* section) {
  redis::ReplyPtr reply = Ask(ReplicationGroup::Direct(port), {"INFO", section});
  return reply != nullptr && reply->type == REDIS_REPLY_STRING ? reply->str : "";
}

// The value of `field` in INFO text ("role" -> "master").
std::string InfoField(const std::string& info, const std::string& field) {
  size_t at = info.find(field + ":");
  if (at == std::string::npos) return "";
  size_t start = at + field.size() + 1;
  return info.substr(start, info.find('\r', start) - start);
}

std::string Program(const std::string& name) {
  std::string found = FindProgram(name);
  REQUIRE_MESSAGE(!found.empty(), name << " is not installed: run tools/setup");
  return found;
}

bool WaitFor(const std::function<bool()>& condition, std::chrono::seconds limit) {
  auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return condition();
}

}  // namespace

ReplicationGroup::ReplicationGroup(int replicas, int sentinels) {
  char pattern[] = "/tmp/reliableq-ha-XXXXXX";
  REQUIRE(mkdtemp(pattern) != nullptr);
  dir_ = pattern;
  data_.resize(static_cast<size_t>(1 + replicas));
  for (Server& s : data_) s.port = FreeLoopbackPort();
  StartData(&data_[0], 0);
  for (size_t i = 1; i < data_.size(); ++i) StartData(&data_[i], data_[0].port);
  WaitInSync();
  for (int i = 0; i < sentinels; ++i) sentinel_ports_.push_back(FreeLoopbackPort());
  for (int port : sentinel_ports_) StartSentinel(port, data_[0].port);
  // Every sentinel sees the master, every replica and the other sentinels
  // before a test relies on a failover.
  bool known = WaitFor(
      [&] {
        for (int port : sentinel_ports_) {
          redis::ReplyPtr master = Ask(Direct(port), {"SENTINEL", "master", kMasterName});
          if (master == nullptr || master->type != REDIS_REPLY_ARRAY) return false;
          std::string slaves, others;
          for (size_t i = 0; i + 1 < master->elements; i += 2) {
            std::string key = master->element[i]->str;
            if (key == "num-slaves") slaves = master->element[i + 1]->str;
            if (key == "num-other-sentinels") others = master->element[i + 1]->str;
          }
          if (slaves != std::to_string(replicas) || others != std::to_string(sentinels - 1)) {
            return false;
          }
        }
        return true;
      },
      std::chrono::seconds(30));
  REQUIRE_MESSAGE(known, "the sentinels did not find the group within 30 s; see " << dir_);
}

ReplicationGroup::~ReplicationGroup() {
  for (auto& s : sentinels_) {
    s->Signal(SIGCONT);
    s->Signal(SIGKILL);
  }
  for (Server& s : data_) {
    if (s.process != nullptr) s.process->Signal(SIGCONT);
  }
  sentinels_.clear();
  data_.clear();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

RedisOptions ReplicationGroup::Direct(int port) {
  RedisOptions options;
  options.host = "127.0.0.1";
  options.port = port;
  options.connect_timeout = std::chrono::milliseconds(500);
  options.command_timeout = std::chrono::milliseconds(2000);
  return options;
}

void ReplicationGroup::StartData(Server* server, int replica_of) {
  std::string port = std::to_string(server->port);
  std::string dir = dir_ + "/" + port;
  std::filesystem::create_directories(dir);
  std::vector<std::string> argv = {Program("redis-server"), "--port", port, "--bind",
                                   "127.0.0.1", "--dir", dir, "--save", "", "--appendonly",
                                   "yes", "--appendfsync", "always", "--daemonize", "no",
                                   // A full sync starts at once, not after 5 s.
                                   "--repl-diskless-sync-delay", "0"};
  if (replica_of != 0) {
    argv.insert(argv.end(), {"--replicaof", "127.0.0.1", std::to_string(replica_of)});
  }
  server->process = std::make_unique<ChildProcess>(argv, std::vector<std::string>{},
                                                   dir_ + "/redis-" + port + ".log");
  bool up = WaitFor([&] { return Ask(Direct(server->port), {"PING"}) != nullptr; },
                    std::chrono::seconds(10));
  REQUIRE_MESSAGE(up, "redis-server on port " << port << " did not start; see " << dir_);
}

void ReplicationGroup::StartSentinel(int port, int master_port) {
  std::string conf = dir_ + "/sentinel-" + std::to_string(port) + ".conf";
  std::ofstream out(conf);
  size_t quorum = sentinel_ports_.size() / 2 + 1;  // this one is in the list
  out << "port " << port << "\nbind 127.0.0.1\ndaemonize no\ndir " << dir_ << "\n"
      << "sentinel monitor " << kMasterName << " 127.0.0.1 " << master_port << " " << quorum
      << "\nsentinel down-after-milliseconds " << kMasterName << " 1000\n"
      << "sentinel failover-timeout " << kMasterName << " 5000\n"
      << "sentinel parallel-syncs " << kMasterName << " 2\n";
  out.close();
  sentinels_.push_back(std::make_unique<ChildProcess>(
      std::vector<std::string>{Program("redis-sentinel"), conf},
      std::vector<std::string>{}, dir_ + "/sentinel-" + std::to_string(port) + ".log"));
  bool up = WaitFor([&] { return Ask(Direct(port), {"PING"}) != nullptr; },
                    std::chrono::seconds(10));
  REQUIRE_MESSAGE(up, "redis-sentinel on port " << port << " did not start; see " << dir_);
}

std::string ReplicationGroup::SentinelUrl(int db) const {
  std::string url = "redis+sentinel://";
  for (size_t i = 0; i < sentinel_ports_.size(); ++i) {
    url += (i > 0 ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(sentinel_ports_[i]);
  }
  return url + "/" + kMasterName + "/" + std::to_string(db);
}

RedisOptions ReplicationGroup::SentinelOptions(int db) const {
  Result<RedisOptions> options = RedisOptions::FromUrl(SentinelUrl(db));
  REQUIRE(options.ok());
  return *options;
}

int ReplicationGroup::MasterPort() const {
  for (int port : sentinel_ports_) {
    redis::ReplyPtr reply =
        Ask(Direct(port), {"SENTINEL", "get-master-addr-by-name", kMasterName});
    if (reply != nullptr && reply->type == REDIS_REPLY_ARRAY && reply->elements == 2) {
      return std::atoi(reply->element[1]->str);
    }
  }
  FAIL("no sentinel names the master");
  return 0;
}

std::vector<int> ReplicationGroup::DataPorts() const {
  std::vector<int> ports;
  for (const Server& s : data_) ports.push_back(s.port);
  return ports;
}

ReplicationGroup::Server* ReplicationGroup::Find(int port) {
  for (Server& s : data_) {
    if (s.port == port) return &s;
  }
  FAIL("no server of the group on port " << port);
  return nullptr;
}

void ReplicationGroup::WaitInSync() const {
  // The master's offset when it was first seen: every replica must reach
  // it. Not the offset of each look: the sentinels' hello messages move it
  // every 2 s, and a replica acknowledges once a second, so on a busy
  // machine a replica could trail the moving offset look after look.
  long long target = -1;
  int target_master = 0;
  bool synced = WaitFor(
      [&] {
        int master = 0;
        for (const Server& s : data_) {
          if (InfoField(Info(s.port, "replication"), "role") == "master") master = s.port;
        }
        if (master == 0) return false;
        std::string info = Info(master, "replication");
        std::string offset = InfoField(info, "master_repl_offset");
        if (offset.empty()) return false;
        if (master != target_master) {
          target_master = master;
          target = std::stoll(offset);
        }
        size_t online = 0;
        for (size_t i = 0; i < data_.size(); ++i) {
          std::string slave = InfoField(info, "slave" + std::to_string(i));
          size_t at = slave.find("offset=");
          if (slave.find("state=online") != std::string::npos && at != std::string::npos &&
              std::stoll(slave.substr(at + 7)) >= target) {
            ++online;
          }
        }
        return online + 1 == data_.size();
      },
      std::chrono::seconds(30));
  REQUIRE_MESSAGE(synced, "the replicas did not catch up within 30 s; see " << dir_);
}

int ReplicationGroup::WaitForNewMaster(int old_port) {
  int found = 0;
  bool moved = WaitFor(
      [&] {
        int named = 0;
        for (int port : sentinel_ports_) {
          redis::ReplyPtr reply =
              Ask(Direct(port), {"SENTINEL", "get-master-addr-by-name", kMasterName});
          if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) return false;
          int p = std::atoi(reply->element[1]->str);
          if (p == old_port || (named != 0 && p != named)) return false;
          named = p;
        }
        if (InfoField(Info(named, "replication"), "role") != "master") return false;
        // A live old master accepts writes until the sentinels turn it into
        // a replica (and drop its clients): wait for that too.
        std::string old_role = InfoField(Info(old_port, "replication"), "role");
        if (!old_role.empty() && old_role != "slave") return false;
        found = named;
        return true;
      },
      std::chrono::seconds(30));
  REQUIRE_MESSAGE(moved, "no failover from port " << old_port << " within 30 s; see " << dir_);
  return found;
}

int ReplicationGroup::Failover() {
  int old_port = MasterPort();
  redis::ReplyPtr reply =
      Ask(Direct(sentinel_ports_[0]), {"SENTINEL", "FAILOVER", kMasterName});
  REQUIRE_MESSAGE(reply != nullptr, "SENTINEL FAILOVER was refused");
  return WaitForNewMaster(old_port);
}

int ReplicationGroup::KillMaster() {
  int old_port = MasterPort();
  Server* old = Find(old_port);
  old->process->Signal(SIGKILL);
  old->process->Wait(std::chrono::seconds(5));
  int new_port = WaitForNewMaster(old_port);
  StartData(old, new_port);
  return new_port;
}

int ReplicationGroup::AddSentinel(int port) {
  int sentinel = FreeLoopbackPort();
  sentinel_ports_.push_back(sentinel);
  StartSentinel(sentinel, port);
  return sentinel;
}

PushResult PushUntilStored(Client& client, Job job, std::chrono::seconds limit) {
  auto deadline = Clock::now() + limit;
  while (true) {
    Result<PushResult> pushed = client.Push(job);
    REQUIRE(pushed.ok());
    if (pushed->stored() || Clock::now() >= deadline) return *pushed;
    job.jid = pushed->jid;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::set<std::string> RecordedJids(const std::string& path) {
  std::ifstream in(path);
  std::set<std::string> jids;
  for (std::string line; std::getline(in, line);) jids.insert(line);
  return jids;
}

void ReplicationGroup::Pause(int port) { Find(port)->process->Signal(SIGSTOP); }
void ReplicationGroup::PauseSentinel(size_t i) { sentinels_.at(i)->Signal(SIGSTOP); }
void ReplicationGroup::ResumeSentinel(size_t i) { sentinels_.at(i)->Signal(SIGCONT); }
void ReplicationGroup::Resume(int port) { Find(port)->process->Signal(SIGCONT); }

}  // namespace reliableq::testing
