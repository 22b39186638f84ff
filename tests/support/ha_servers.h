// A replication group for high-availability tests: one master, replicas and
// redis-sentinel processes, all real, on free loopback TCP ports, with their
// files in a fresh temporary directory (removed with the object). Every
// process is a ChildProcess: stopped by its PID when the object goes, and
// SIGKILLed if the test binary dies. The sentinels monitor the master as
// "mymaster" with a quorum of a majority, down-after 1000 ms.

#ifndef RELIABLEQ_TESTS_HA_SERVERS_H_
#define RELIABLEQ_TESTS_HA_SERVERS_H_

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "support/process.h"
#include "reliableq/client.h"
#include "reliableq/redis_options.h"

namespace reliableq::testing {

class ReplicationGroup {
 public:
  // Starts the servers and waits (bounded) until every replica is in sync
  // and every sentinel knows the master and the others.
  explicit ReplicationGroup(int replicas = 2, int sentinels = 3);
  ~ReplicationGroup();
  ReplicationGroup(const ReplicationGroup&) = delete;
  ReplicationGroup& operator=(const ReplicationGroup&) = delete;

  static constexpr const char* kMasterName = "mymaster";

  // "redis+sentinel://127.0.0.1:P1,127.0.0.1:P2,.../mymaster/<db>"
  std::string SentinelUrl(int db = 0) const;
  RedisOptions SentinelOptions(int db = 0) const;
  // A plain connection to one server of the group.
  static RedisOptions Direct(int port);

  // The port of the master as the first sentinel that answers names it.
  int MasterPort() const;
  std::vector<int> DataPorts() const;
  std::vector<int> sentinel_ports() const { return sentinel_ports_; }

  // SENTINEL FAILOVER: the sentinels promote a replica at once (no vote).
  // Returns the new master's port once every sentinel names it and it says
  // it is a master (bounded; fails the test otherwise).
  int Failover();
  // SIGKILLs the master, waits as Failover does, and starts the killed one
  // again as a replica of the new master (never as an empty master).
  int KillMaster();
  // SIGSTOP / SIGCONT a data server.
  void Pause(int port);
  void Resume(int port);
  // SIGSTOP / SIGCONT sentinel `i` (of sentinel_ports()).
  void PauseSentinel(size_t i);
  void ResumeSentinel(size_t i);
  // Starts one more sentinel that monitors the server on `port` as
  // "mymaster" with a quorum of 1 (whatever its role); returns its port.
  int AddSentinel(int port);
  // Waits until every replica acknowledged the master's offset.
  void WaitInSync() const;

 private:
  struct Server {
    int port = 0;
    std::unique_ptr<ChildProcess> process;
  };
  void StartData(Server* server, int replica_of);
  void StartSentinel(int port, int master_port);
  int WaitForNewMaster(int old_port);
  Server* Find(int port);

  std::string dir_;
  std::vector<Server> data_;
  std::vector<std::unique_ptr<ChildProcess>> sentinels_;
  std::vector<int> sentinel_ports_;
};

// Pushes until a push is stored (a failover refuses, or leaves
// unconfirmed, the pushes that meet it), at most `limit`; the jid is kept
// across attempts, so a push that landed unconfirmed is the same job.
PushResult PushUntilStored(Client& client, Job job, std::chrono::seconds limit);

// The jids the demo plugin's RecordJob wrote to `path` ($RELIABLEQ_DEMO_LOG).
std::set<std::string> RecordedJids(const std::string& path);

}  // namespace reliableq::testing

#endif  // RELIABLEQ_TESTS_HA_SERVERS_H_
