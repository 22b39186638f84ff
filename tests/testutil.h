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
#include <memory>
#include <string>
#include <vector>

#include "redis/connection.h"
#include "reliableq/clock.h"
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
  // an AOF, when enabled, is reloaded).
  void KillAndRestart();

 private:
  void Start();
  void Stop();

  std::vector<std::string> extra_args_;
  std::string dir_;
  std::string socket_path_;
  pid_t pid_ = -1;
};

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

 private:
  std::unique_ptr<redis::Connection> connection_;
};

// Polls `condition` every 5 ms until it is true or `limit` passes; returns
// whether it became true.
bool WaitUntil(const std::function<bool()>& condition,
               std::chrono::milliseconds limit = std::chrono::seconds(10));

// Seconds since the epoch, with sub-second precision.
double NowSeconds();

// A clock that moves only when the test moves it: Now() starts at the real
// time of construction (so Redis's own TTLs and Sidekiq's readers still see
// plausible times), Monotonic() at the real steady time; Advance moves both.
// Safe to read from every thread.
class FakeClock final : public Clock {
 public:
  FakeClock();
  double Now() const override;
  std::chrono::steady_clock::time_point Monotonic() const override;
  void Advance(std::chrono::milliseconds by);

 private:
  const double start_wall_;
  const std::chrono::steady_clock::time_point start_steady_;
  std::atomic<int64_t> offset_ms_{0};
};

}  // namespace reliableq::testing

#endif  // RELIABLEQ_TESTS_TESTUTIL_H_
