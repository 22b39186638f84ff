// A Redis Cluster for tests: three primaries and three replicas, all real
// `redis-server --cluster-enabled yes` processes on free loopback ports
// (each with a free cluster-bus port of its own), created with `redis-cli
// --cluster create --cluster-replicas 1`, their files in a fresh temporary
// directory (removed with the object). cluster-node-timeout is 1000 ms, so
// a SIGKILLed primary's replica takes over within a few seconds. Every
// process is a ChildProcess: stopped by its PID when the object goes, and
// SIGKILLed if the test binary dies. Every wait is bounded and fails the
// test (REQUIRE) when it runs out, naming the directory with the logs.
//
// Thread safety: one thread at a time.

#ifndef RELIABLEQ_TESTS_CLUSTER_SERVERS_H_
#define RELIABLEQ_TESTS_CLUSTER_SERVERS_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "support/process.h"
#include "reliableq/redis_options.h"
#include "support/testutil.h"

namespace reliableq::testing {

class RedisCluster {
 public:
  // Starts the six servers, creates the cluster, and waits (bounded) until
  // WaitAgreed(). With `tls`, every node also takes TLS on a port of its
  // own (TestCertificates: signed for 127.0.0.1), the cluster bus and the
  // replication go over TLS, and Url/Options name the TLS ports; the plain
  // ports stay for the fixture's own commands.
  explicit RedisCluster(bool tls = false);
  ~RedisCluster();
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  // One cluster per test binary, made on first use and stopped at exit.
  static RedisCluster& Shared();

  // "redis+cluster://127.0.0.1:P1,...,127.0.0.1:P6/GROUP": every node as
  // a seed (the live ones first, so a killed node costs a lookup nothing);
  // with TLS "rediss+cluster://" and the TLS ports (Options trusts the
  // test CA).
  std::string Url(const std::string& group) const;
  RedisOptions Options(const std::string& group) const;
  // A plain connection to one node.
  static RedisOptions Direct(int port);

  // Every node's port, killed ones included, in the order started.
  std::vector<int> ports() const;
  // The ports of the nodes still running.
  std::vector<int> LivePorts() const;
  // The primaries that own slots now, lowest port first.
  std::vector<int> PrimaryPorts() const;
  // The port of the primary that owns `slot` now, as the first live node
  // that answers says.
  int OwnerOf(int slot) const;
  // The lowest slot the primary on `port` owns (-1: none).
  int LowestSlotOf(int port) const;
  std::string NodeId(int port) const;
  // A queue group (letters and digits) whose "{group}" is in `slot`.
  static std::string GroupInSlot(int slot);
  // A group whose slot the primary on `port` owns.
  std::string GroupOn(int port) const;

  // Until every live node says cluster_state:ok and every live node
  // reports the same primaries for the same slot ranges (bounded).
  void WaitAgreed() const;

  // SIGKILL the node on `port` by its PID.
  void Kill(int port);
  // After Kill(old_port) of a primary: waits until a replica owns `slot`
  // and the live nodes agree; the new owner's port.
  int WaitForPromotion(int old_port, int slot);

  // Moves `slot` to the primary on `to_port` the way redis-cli does:
  // SETSLOT IMPORTING on the target, MIGRATING on the source, MIGRATE of
  // its keys in batches of `batch`, then SETSLOT NODE on the target, the
  // source and every other primary. `between`, when given, runs after
  // every batch (a test issues commands mid-migration there). Waits until
  // the live nodes agree.
  void MoveSlot(int slot, int to_port, size_t batch = 10,
                const std::function<void()>& between = nullptr);
  // The steps of MoveSlot, for a test that looks at the middle:
  void BeginMigration(int slot, int to_port);
  // MIGRATEs at most `max_keys` of the slot's keys still at the source;
  // how many it moved.
  size_t MigrateKeys(int slot, int to_port, size_t max_keys);
  void FinishMigration(int slot, int to_port);
  // `redis-cli --cluster reshard` of `slots` slots from the primary on
  // `from_port` to the one on `to_port` (it takes the source's lowest
  // slots first); waits until the live nodes agree.
  void Reshard(int from_port, int to_port, int slots);

  const std::string& dir() const { return dir_; }

 private:
  struct Node {
    int port = 0;
    int bus_port = 0;
    int tls_port = 0;  // with TLS only
    std::unique_ptr<ChildProcess> process;
  };
  void Start(Node* node);
  const Node* FindNode(int port) const;
  // slot range -> primary port, as the node on `port` sees it; empty when
  // it does not answer.
  std::map<std::pair<int, int>, int> SlotMap(int port) const;

  std::unique_ptr<TestCertificates> certs_;  // with TLS only
  std::string dir_;
  std::vector<Node> nodes_;
  std::set<int> killed_;
};

}  // namespace reliableq::testing

#endif  // RELIABLEQ_TESTS_CLUSTER_SERVERS_H_
