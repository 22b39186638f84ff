// The worker as a systemd service: a real `reliableq worker -C FILE` process
// with NOTIFY_SOCKET pointing at a datagram socket this test reads, as
// systemd's would be (systemd itself does not run here). READY=1 must come
// after the first heartbeat is in Redis, WATCHDOG=1 from the loop when
// WATCHDOG_USEC asks for it, STOPPING=1 when TERM begins the stop.

#include <doctest/doctest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "support/process.h"
#include "reliableq/client.h"
#include "support/testutil.h"

namespace reliableq::testing {
namespace {

using namespace std::chrono_literals;

// The service manager's end: a datagram socket bound in a fresh directory.
class NotifySocket {
 public:
  NotifySocket() {
    char templ[] = "/tmp/reliableq-notify-XXXXXX";
    REQUIRE(mkdtemp(templ) != nullptr);
    dir_ = templ;
    path_ = dir_ + "/notify.sock";
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    REQUIRE(path_.size() < sizeof(address.sun_path));
    path_.copy(address.sun_path, path_.size());
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  }
  ~NotifySocket() {
    close(fd_);
    std::string cmd = "rm -rf '" + dir_ + "'";
    CHECK(std::system(cmd.c_str()) == 0);
  }

  const std::string& path() const { return path_; }
  const std::string& dir() const { return dir_; }

  // The next message, or "" when none came within `limit`.
  std::string Receive(std::chrono::milliseconds limit) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(limit.count())) != 1) return "";
    char buffer[4096];
    ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
    return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : "";
  }

  // The first message that is not a watchdog ping, within `limit`; the
  // pings on the way are counted in `pings`.
  std::string ReceiveNotPing(std::chrono::milliseconds limit, int* pings) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      std::string message = Receive(std::max(left, 1ms));
      if (message != "WATCHDOG=1") return message;
      ++*pings;
    }
    return "";
  }

 private:
  std::string dir_;
  std::string path_;
  int fd_ = -1;
};

std::vector<std::string> WorkerArgv(const std::string& config) {
  return {BuildPath("RELIABLEQ_BIN"), "worker", "-C", config, "--tag", "from-the-flag"};
}

// A config file that names everything the worker needs, the Redis URL
// through an environment variable.
std::string WriteConfig(const std::string& dir) {
  std::string path = dir + "/worker.yml";
  std::ofstream out(path);
  out << "# a reliableq worker\n"
      << ":concurrency: 3\n"
      << "queues:\n  - [mail, 2]\n  - [other, 1]\n"
      << "redis: ${TEST_REDIS_URL}\n"
      << "require: [" << BuildPath("RELIABLEQ_DEMO_PLUGIN") << "]\n"
      << "tag: from-the-file\n"
      << "heartbeat_interval: 0.25\nheartbeat_ttl: 1\ntimeout: 3\n";
  return path;
}

TEST_CASE("under systemd: READY after the first heartbeat, watchdog pings, STOPPING on TERM") {
  RedisServer redis;
  auto admin_opened = redis::Connection::Open(redis.Options());
  REQUIRE(admin_opened.ok());
  redis::Connection& admin = **admin_opened;
  NotifySocket manager;
  const std::string record_log = manager.dir() + "/executions.log";
  std::string config = WriteConfig(manager.dir());

  ChildProcess worker(WorkerArgv(config),
                      {"NOTIFY_SOCKET=" + manager.path(), "WATCHDOG_USEC=200000",
                       "TEST_REDIS_URL=" + redis.Url(), "RELIABLEQ_DEMO_LOG=" + record_log},
                      manager.dir() + "/worker.log");
  int pings = 0;
  std::string ready = manager.ReceiveNotPing(20s, &pings);
  REQUIRE_MESSAGE(ready.find("READY=1") != std::string::npos, ready, "\n", worker.Log());
  CHECK(ready.find("STATUS=running ") != std::string::npos);
  // The heartbeat is in Redis by then: Sidekiq's process record, with what
  // the file set and the flag's tag over the file's.
  auto processes = admin.Command({"SMEMBERS", "processes"});
  REQUIRE(processes.ok());
  REQUIRE((*processes)->elements == 1);
  std::string identity((*processes)->element[0]->str, (*processes)->element[0]->len);
  auto info = admin.Command({"HGET", identity, "info"});
  REQUIRE(info.ok());
  REQUIRE((*info)->type == REDIS_REPLY_STRING);
  std::string info_json((*info)->str, (*info)->len);
  CHECK(info_json.find("\"tag\":\"from-the-flag\"") != std::string::npos);
  CHECK(info_json.find("\"concurrency\":3") != std::string::npos);
  CHECK(info_json.find("\"queues\":[\"mail\",\"other\"]") != std::string::npos);

  // The file's queues are worked.
  auto client = Client::Open(redis.Options());
  REQUIRE(client.ok());
  Job job;
  job.job_class = "RecordJob";
  job.queue = "mail";
  job.args = R"(["x", 1])";
  std::string jid = AcceptedJid((*client)->Push(job));
  CHECK_MESSAGE(WaitUntil(
                    [&] {
                      std::ifstream in(record_log);
                      std::string line;
                      return std::getline(in, line) && line == jid;
                    },
                    10s),
                worker.Log());

  // Pings every 0.1 s: a second brings several.
  pings = 0;
  std::string other = manager.ReceiveNotPing(1s, &pings);
  CHECK_MESSAGE(other == "", other);
  CHECK(pings >= 3);

  worker.Signal(SIGTERM);
  std::string stopping = manager.ReceiveNotPing(10s, &pings);
  CHECK_MESSAGE(stopping.find("STOPPING=1") != std::string::npos, stopping);
  auto status = worker.Wait(15s);
  REQUIRE(status);
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
}

TEST_CASE("no pings for another process's watchdog; a manager that is gone is logged once") {
  RedisServer redis;
  NotifySocket manager;
  std::string config = WriteConfig(manager.dir());
  std::vector<std::string> environment = {"TEST_REDIS_URL=" + redis.Url(),
                                          "RELIABLEQ_DEMO_LOG=" + manager.dir() + "/x.log"};

  // WATCHDOG_PID names another process: its watchdog, not ours.
  {
    std::vector<std::string> env = environment;
    env.push_back("NOTIFY_SOCKET=" + manager.path());
    env.push_back("WATCHDOG_USEC=100000");
    env.push_back("WATCHDOG_PID=1");
    ChildProcess worker(WorkerArgv(config), env, manager.dir() + "/worker1.log");
    int pings = 0;
    std::string ready = manager.ReceiveNotPing(20s, &pings);
    REQUIRE_MESSAGE(ready.find("READY=1") != std::string::npos, ready, "\n", worker.Log());
    CHECK(manager.ReceiveNotPing(500ms, &pings) == "");
    CHECK(pings == 0);
    worker.Signal(SIGTERM);
    CHECK(manager.ReceiveNotPing(10s, &pings).find("STOPPING=1") != std::string::npos);
    CHECK(worker.Wait(15s));
  }

  // A socket nobody listens on: the worker runs and says so once, though
  // every ping fails.
  std::vector<std::string> env = environment;
  env.push_back("NOTIFY_SOCKET=" + manager.dir() + "/nobody.sock");
  env.push_back("WATCHDOG_USEC=50000");
  ChildProcess worker(WorkerArgv(config), env, manager.dir() + "/worker2.log");
  REQUIRE_MESSAGE(
      WaitUntil([&] { return worker.Log().find("started ") != std::string::npos; }, 20s),
      worker.Log());
  std::this_thread::sleep_for(300ms);
  CHECK(worker.running());
  std::string log = worker.Log();
  size_t first = log.find("systemd notification failed");
  CHECK_MESSAGE(first != std::string::npos, log);
  CHECK(log.find("systemd notification failed", first + 1) == std::string::npos);
  worker.Signal(SIGTERM);
  CHECK(worker.Wait(15s));
}

}  // namespace
}  // namespace reliableq::testing
