// Test support: a private redis-server per test binary, and a fixture that
// gives every test case a clean database on it.
//
// The server listens only on a unix socket in a fresh temporary directory
// (TCP port 0: no TCP listener at all), runs with --save '' and is stopped by
// its PID when the test binary exits, whether tests passed or not. If the
// binary dies, the server gets SIGTERM too (PR_SET_PDEATHSIG). A missing
// redis-server is a loud failure, never a skip: tools/test installs it.

#ifndef RELIABLEQ_TESTS_TESTUTIL_H_
#define RELIABLEQ_TESTS_TESTUTIL_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "redis/connection.h"
#include "reliableq/clock.h"
#include "reliableq/push_result.h"
#include "reliableq/redis_options.h"

namespace reliableq::testing {

class RedisServer {
 public:
  // Starts a server with `extra_args` added to its command line (for example
  // {"--appendonly", "yes"}) and waits until it answers PING. Aborts the test
  // binary with a message when it cannot.
  explicit RedisServer(std::vector<std::string> extra_args = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // The server every RedisFixture uses, started on first use.
  static RedisServer& Shared();

  const std::string& socket_path() const { return socket_path_; }
  const std::string& dir() const { return dir_; }
  pid_t pid() const { return pid_; }
  // "unix://<socket>?db=<db>"
  std::string Url(int db = 0) const;
  RedisOptions Options(int db = 0) const;

  // SIGKILLs the server and starts it again on the same socket and dir (so
  // an AOF, when enabled, is reloaded), `down` after the kill.
  void KillAndRestart(std::chrono::milliseconds down = std::chrono::milliseconds(0));

 private:
  void Start();
  void Stop();

  std::vector<std::string> extra_args_;
  std::string dir_;
  std::string socket_path_;
  pid_t pid_ = -1;
};

// Certificates for TLS tests, made with the openssl program in a fresh
// temporary directory (removed with the object): a CA; a server certificate
// it signed for "localhost" and 127.0.0.1; a client certificate it signed;
// and a second CA that signed none of them. Keys are unencrypted PEM.
class TestCertificates {
 public:
  TestCertificates();
  ~TestCertificates();
  TestCertificates(const TestCertificates&) = delete;
  TestCertificates& operator=(const TestCertificates&) = delete;

  const std::string& dir() const { return dir_; }
  std::string ca() const { return dir_ + "/ca.crt"; }
  std::string server_cert() const { return dir_ + "/server.crt"; }
  std::string server_key() const { return dir_ + "/server.key"; }
  std::string client_cert() const { return dir_ + "/client.crt"; }
  std::string client_key() const { return dir_ + "/client.key"; }
  std::string other_ca() const { return dir_ + "/other-ca.crt"; }

 private:
  std::string dir_;
};

// A private redis-server that also takes TLS on 127.0.0.1:port() (a free
// port, kept across KillAndRestart), with the certificates above; its
// unix socket still answers in plain text. With `require_client_certs`,
// TLS clients must show a certificate the CA signed (tls-auth-clients
// yes); otherwise one is optional.
class TlsRedisServer {
 public:
  explicit TlsRedisServer(bool require_client_certs = false,
                          std::vector<std::string> extra_args = {});

  // The one without client certificates, started on first use.
  static TlsRedisServer& Shared();

  RedisServer& server() { return *server_; }
  const TestCertificates& certs() const { return certs_; }
  int port() const { return port_; }
  // TLS to 127.0.0.1:port(), trusting the test CA.
  RedisOptions Options(int db = 0) const;
  // "rediss://127.0.0.1:<port>/<db>"
  std::string Url(int db = 0) const;

 private:
  TestCertificates certs_;
  int port_;
  std::unique_ptr<RedisServer> server_;
};

// The path of an installed program, looked up in $PATH and the system's
// directories (a test runner's $PATH may lack them); for redis-server,
// $RELIABLEQ_REDIS_SERVER first. Empty when it is missing: the caller
// fails loudly (tools/setup installs every program a test needs).
std::string FindProgram(const std::string& name);

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreeLoopbackPort();

// Each test case that derives from this starts with an empty database 0 on
// the shared server, and a connection to it.
class RedisFixture {
 public:
  RedisFixture();
  RedisServer& server() { return RedisServer::Shared(); }
  redis::Connection& redis() { return *connection_; }
  RedisOptions options() const { return RedisServer::Shared().Options(); }

  // Small readers for assertions. They fail the test on a Redis error.
  std::vector<std::string> LRange(const std::string& key);
  std::vector<std::string> ZRange(const std::string& key);  // members, by score
  std::vector<std::pair<std::string, double>> ZRangeWithScores(const std::string& key);
  std::vector<std::string> SMembers(const std::string& key);  // sorted
  std::string Get(const std::string& key);                    // "" when absent
  std::string HGet(const std::string& key, const std::string& field);  // "" when absent
  long long Integer(const redis::Argv& command);
  bool Exists(const std::string& key);
  void Run(const redis::Argv& command);
  // DUMP of every key: equal snapshots mean nothing was written.
  std::map<std::string, std::string> Snapshot();

 private:
  std::unique_ptr<redis::Connection> connection_;
};

// A second connection subscribed to a channel (or, kPattern, to a pattern),
// in raw hiredis: the project's synchronous Connection reads only the
// replies to its own commands.
class Subscription {
 public:
  enum class Kind { kChannel, kPattern };
  struct Message {
    std::string channel;
    std::string payload;
  };
  Subscription(const std::string& socket_path, const std::string& name, Kind kind);
  ~Subscription();
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

  // The messages before the one whose payload is `marker`, which the test
  // publishes after the call it checks: Redis delivers messages in order,
  // so this needs no guess at how long to wait for a message that must
  // not come. A missing marker fails within 5 s.
  std::vector<Message> Until(const std::string& marker);

 private:
  redisContext* context_;
};

// The jid of a push that must have been accepted: fails the test (REQUIRE)
// with the outcome and reason otherwise. For Push, PushAt and PushIn:
//   std::string jid = AcceptedJid(client->Push(job));
std::string AcceptedJid(const Result<PushResult>& pushed);

// The same for PushBulk: every job accepted; their jids in input order.
std::vector<std::string> AcceptedJids(const Result<std::vector<PushResult>>& pushed);

// Polls `condition` every 5 ms until it is true or `limit` passes; returns
// whether it became true.
bool WaitUntil(const std::function<bool()>& condition,
               std::chrono::milliseconds limit = std::chrono::seconds(10));

// Seconds since the epoch, with sub-second precision.
double NowSeconds();

}  // namespace reliableq::testing

#endif  // RELIABLEQ_TESTS_TESTUTIL_H_
