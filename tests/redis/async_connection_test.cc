#include "redis/async_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "redis/connection.h"
#include "redis/reply.h"
#include "support/testutil.h"

namespace reliableq::testing {
namespace {

// One AsyncConnection on its own loop, driven by the test thread.
class AsyncFixture : public RedisFixture {
 public:
  AsyncFixture() {
    uv_loop_init(&loop_);
    connection_.emplace(&loop_, options());
    std::optional<Status> ready;
    connection_->Connect([&](const Status& s) { ready = s; });
    RunUntil([&] { return ready.has_value(); });
    REQUIRE(ready.has_value());
    REQUIRE(ready->ok());
  }

  ~AsyncFixture() {
    connection_->Close();
    connection_.reset();
    // The connection's handles close on the next turns of the loop.
    for (int i = 0; i < 100 && uv_loop_alive(&loop_); ++i) uv_run(&loop_, UV_RUN_NOWAIT);
    uv_loop_close(&loop_);
  }

  // Sends `commands`; `*statuses` is set when the callback runs (it must
  // run once).
  void Send(const redis::CommandList& commands, std::optional<std::vector<Status>>* statuses) {
    Status sent = connection_->Pipeline(commands, [statuses](std::vector<Status> got, std::vector<int64_t>) {
      CHECK_FALSE(statuses->has_value());
      *statuses = std::move(got);
    });
    REQUIRE(sent.ok());
  }

  std::vector<Status> RunPipeline(const redis::CommandList& commands) {
    std::optional<std::vector<Status>> statuses;
    Send(commands, &statuses);
    RunUntil([&] { return statuses.has_value(); });
    REQUIRE(statuses.has_value());
    REQUIRE(statuses->size() == commands.size());
    return *statuses;
  }

  redis::AsyncConnection& connection() { return *connection_; }

  // Runs the loop until `done`; bounded, so a reply that never comes fails
  // the test instead of hanging it.
  void RunUntil(const std::function<bool()>& done) {
    WaitUntil([&] {
      uv_run(&loop_, UV_RUN_NOWAIT);
      return done();
    });
  }

 private:

  uv_loop_t loop_;
  std::optional<redis::AsyncConnection> connection_;
};

bool AllOk(const std::vector<Status>& statuses) {
  for (const Status& s : statuses) {
    if (!s.ok()) return false;
  }
  return true;
}

TEST_CASE_FIXTURE(AsyncFixture, "a pipeline runs every command and reports each one") {
  // Arguments with the protocol's own delimiters and a NUL byte arrive as
  // they were given.
  std::string odd("a\r\n$3\r\n*1\0z", 12);
  Run({"RPUSH", "list", "x", odd, "y", odd});
  redis::CommandList commands;
  commands.Add({"LREM", "list", "-1", odd});
  commands.Add({"INCRBY", "counter", "7"});
  commands.Add({"LREM", "list", "-1", "absent"});
  CHECK(AllOk(RunPipeline(commands)));
  // LREM -1 took the copy nearest the tail.
  CHECK(LRange("list") == std::vector<std::string>{"x", odd, "y"});
  CHECK(Get("counter") == "7");
}

TEST_CASE_FIXTURE(AsyncFixture, "a command Redis refuses fails alone") {
  Run({"RPUSH", "list", "x", "y"});
  Run({"SET", "text", "not a list"});
  redis::CommandList commands;
  commands.Add({"LREM", "list", "-1", "x"});
  commands.Add({"LREM", "text", "-1", "x"});  // WRONGTYPE
  commands.Add({"INCRBY", "counter"});        // too few arguments
  commands.Add({"LREM", "list", "-1", "y"});
  std::vector<Status> statuses = RunPipeline(commands);
  CHECK(statuses[0].ok());
  CHECK(statuses[1].ToString().find("WRONGTYPE") != std::string::npos);
  CHECK_FALSE(statuses[2].ok());
  CHECK(statuses[3].ok());
  CHECK_FALSE(Exists("list"));
  CHECK_FALSE(Exists("counter"));
}

TEST_CASE_FIXTURE(AsyncFixture, "out of memory, LREM still runs while INCRBY is refused") {
  // Why acks are not a MULTI: Redis out of memory refuses every command
  // queued in a transaction, but runs one that cannot grow memory, as LREM.
  Run({"RPUSH", "list", "x"});
  struct Unlimited {  // the shared server gets its memory back however this ends
    RedisFixture* fixture;
    ~Unlimited() { fixture->Run({"CONFIG", "SET", "maxmemory", "0"}); }
  } unlimited{this};
  Run({"CONFIG", "SET", "maxmemory", "1"});
  redis::CommandList commands;
  commands.Add({"LREM", "list", "-1", "x"});
  commands.Add({"INCRBY", "counter", "1"});
  std::vector<Status> statuses = RunPipeline(commands);
  CHECK(statuses[0].ok());
  CHECK(statuses[1].ToString().find("OOM") != std::string::npos);
  Run({"CONFIG", "SET", "maxmemory", "0"});
  CHECK_FALSE(Exists("list"));
  CHECK_FALSE(Exists("counter"));
}

TEST_CASE_FIXTURE(AsyncFixture, "pipelines sent back to back keep their order") {
  std::vector<redis::CommandList> batches(50);
  for (size_t i = 0; i < batches.size(); ++i) {
    batches[i].Add({"RPUSH", "order", std::to_string(i)});
    batches[i].Add({"INCRBY", "counter", "1"});
  }
  // All sent before any reply is read.
  std::vector<std::optional<std::vector<Status>>> statuses(batches.size());
  for (size_t i = 0; i < batches.size(); ++i) Send(batches[i], &statuses[i]);
  RunUntil([&] { return statuses.back().has_value(); });
  for (size_t i = 0; i < batches.size(); ++i) {
    CAPTURE(i);
    REQUIRE(statuses[i].has_value());
    CHECK(AllOk(*statuses[i]));
  }
  std::vector<std::string> expected;
  for (size_t i = 0; i < batches.size(); ++i) expected.push_back(std::to_string(i));
  CHECK(LRange("order") == expected);
  CHECK(Get("counter") == "50");
}

TEST_CASE_FIXTURE(AsyncFixture, "a broken connection fails every command of a pipeline, once") {
  Run({"CLIENT", "KILL", "ID", std::to_string(connection().client_id())});
  redis::CommandList commands;
  for (int i = 0; i < 5; ++i) commands.Add({"INCRBY", "counter", "1"});
  std::vector<Status> statuses = RunPipeline(commands);
  for (const Status& s : statuses) CHECK(s.IsIoError());
  CHECK_FALSE(Exists("counter"));
}

// A libuv loop of its own, for tests that need no connection up front.
class Loop {
 public:
  Loop() { REQUIRE(uv_loop_init(&loop_) == 0); }
  ~Loop() {
    if (!closed_) Close();
  }
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  uv_loop_t* get() { return &loop_; }

  // Runs the loop until `done`, for at most `limit`; returns whether `done`.
  bool RunUntil(const std::function<bool()>& done,
                std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    return WaitUntil(
        [&] {
          uv_run(&loop_, UV_RUN_NOWAIT);
          return done();
        },
        limit);
  }

  // Runs the loop for `duration`, so that a callback that should not come
  // again (from a later watchdog tick, say) has its chance to.
  void RunFor(std::chrono::milliseconds duration) {
    auto end = std::chrono::steady_clock::now() + duration;
    RunUntil([&] { return std::chrono::steady_clock::now() >= end; },
             duration + std::chrono::seconds(1));
  }

  // Sends PING on `connection` and runs the loop until its callback ran:
  // how many times it ran, and the reply's text ("" when it failed).
  std::pair<int, std::string> Ping(redis::AsyncConnection& connection) {
    int calls = 0;
    std::string reply_text;
    REQUIRE(connection
                .Command({"PING"},
                         [&](const Status& status, redis::ReplyRef reply) {
                           ++calls;
                           if (status.ok()) reply_text = std::string(redis::View(reply.raw()));
                         })
                .ok());
    REQUIRE(RunUntil([&] { return calls > 0; }));
    return {calls, reply_text};
  }

  // Lets closing handles finish, then closes the loop. Returns
  // uv_loop_close's result: UV_EBUSY when a handle was left open.
  int Close() {
    for (int i = 0; i < 100 && uv_loop_alive(&loop_); ++i) uv_run(&loop_, UV_RUN_NOWAIT);
    closed_ = true;
    return uv_loop_close(&loop_);
  }

 private:
  uv_loop_t loop_;
  bool closed_ = false;
};

// A TCP listener on 127.0.0.1 (a free port) that never accepts: the kernel
// completes a client's TCP handshake from the backlog, so the client is
// connected and its commands are written, but nothing ever answers them.
class SilentListener {
 public:
  SilentListener() : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    REQUIRE(fd_ >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    socklen_t length = sizeof address;
    auto* raw = reinterpret_cast<sockaddr*>(&address);
    if (bind(fd_, raw, sizeof address) != 0 || listen(fd_, 8) != 0 ||
        getsockname(fd_, raw, &length) != 0) {
      int error = errno;
      close(fd_);  // the destructor does not run when the constructor throws
      FAIL("cannot listen on 127.0.0.1: " << std::strerror(error));
    }
    port_ = ntohs(address.sin_port);
  }
  ~SilentListener() { close(fd_); }
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;

  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

// SIGSTOPs a redis-server (a child of this process) for the guard's life: it
// keeps its sockets and takes in what is written to it, but answers nothing
// until SIGCONT, which the destructor sends on every way out of a test.
class PausedServer {
 public:
  explicit PausedServer(pid_t pid) : pid_(pid) { kill(pid_, SIGSTOP); }
  ~PausedServer() { Resume(); }
  PausedServer(const PausedServer&) = delete;
  PausedServer& operator=(const PausedServer&) = delete;

  // Waits until the server has stopped, so nothing sent after this is
  // answered; false when it did not (it died instead).
  bool Stopped() {
    int status = 0;
    return waitpid(pid_, &status, WUNTRACED) == pid_ && WIFSTOPPED(status);
  }

  void Resume() {
    if (pid_ > 0) kill(pid_, SIGCONT);
    pid_ = -1;
  }

 private:
  pid_t pid_;
};

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

TEST_CASE("Connect to a server that never answers fails once, within connect_timeout") {
  SilentListener listener;
  RedisOptions options;
  options.host = "127.0.0.1";
  options.port = listener.port();
  options.connect_timeout = milliseconds(300);
  // Far off, so that only the connect timeout can end the wait in time.
  options.command_timeout = std::chrono::seconds(30);
  Loop loop;
  std::optional<redis::AsyncConnection> connection;
  connection.emplace(loop.get(), options);
  int disconnect_calls = 0;
  connection->SetOnDisconnect([&](const Status&) { ++disconnect_calls; });
  int ready_calls = 0;
  Status ready;
  Clock::duration took{};
  Clock::time_point start = Clock::now();
  connection->Connect([&](const Status& status) {
    if (ready_calls++ == 0) took = Clock::now() - start;
    ready = status;
  });
  REQUIRE(loop.RunUntil([&] { return ready_calls > 0; }, std::chrono::seconds(5)));
  loop.RunFor(milliseconds(300));

  CHECK(ready_calls == 1);
  CHECK(ready.IsTimeout());
  CHECK(ready.message().find("within 300 ms") != std::string::npos);
  CAPTURE(std::chrono::duration_cast<milliseconds>(took).count());
  CHECK(took >= options.connect_timeout);
  CHECK(took < 3 * options.connect_timeout);
  // It never was established, so it never broke.
  CHECK(disconnect_calls == 0);
  CHECK_FALSE(connection->ready());
  CHECK(connection->pending() == 0);

  connection.reset();
  CHECK(loop.Close() == 0);
}

TEST_CASE("a command unanswered past command_timeout breaks the connection, once") {
  // A server of its own: the shared one must keep answering other tests.
  RedisServer server;
  RedisOptions options = server.Options();
  options.command_timeout = milliseconds(400);
  Loop loop;
  std::optional<redis::AsyncConnection> connection;
  connection.emplace(loop.get(), options);
  int disconnect_calls = 0;
  Status disconnected;
  Clock::time_point disconnected_at;
  connection->SetOnDisconnect([&](const Status& status) {
    if (disconnect_calls++ == 0) disconnected_at = Clock::now();
    disconnected = status;
  });
  int ready_calls = 0;
  Status ready;
  auto on_ready = [&](const Status& status) {
    ++ready_calls;
    ready = status;
  };
  connection->Connect(on_ready);
  REQUIRE(loop.RunUntil([&] { return ready_calls == 1; }));
  REQUIRE(ready.ok());
  int64_t first_id = connection->client_id();

  // Idle is not late: with nothing pending, the watchdog breaks nothing.
  loop.RunFor(options.command_timeout + milliseconds(100));
  CHECK(disconnect_calls == 0);
  CHECK(connection->ready());

  int ping_calls = 0;
  int incr_calls = 0;
  int pipeline_calls = 0;
  Status ping;
  Status incr;
  std::vector<Status> pipeline;
  Clock::time_point start;
  {
    PausedServer paused(server.pid());
    REQUIRE(paused.Stopped());
    start = Clock::now();
    REQUIRE(connection
                ->Command({"PING"},
                          [&](const Status& status, redis::ReplyRef) {
                            ++ping_calls;
                            ping = status;
                          })
                .ok());
    REQUIRE(connection
                ->Command({"INCR", "counter"},
                          [&](const Status& status, redis::ReplyRef) {
                            ++incr_calls;
                            incr = status;
                          })
                .ok());
    redis::CommandList commands;
    commands.Add({"INCR", "counter"});
    commands.Add({"INCR", "counter"});
    REQUIRE(connection
                ->Pipeline(commands,
                           [&](std::vector<Status> statuses, std::vector<int64_t>) {
                             ++pipeline_calls;
                             pipeline = std::move(statuses);
                           })
                .ok());
    REQUIRE(connection->pending() == 3);
    REQUIRE(loop.RunUntil(
        [&] {
          return disconnect_calls > 0 && ping_calls > 0 && incr_calls > 0 && pipeline_calls > 0;
        },
        std::chrono::seconds(5)));
    loop.RunFor(milliseconds(300));
    paused.Resume();
  }

  CHECK(ping_calls == 1);
  CHECK(incr_calls == 1);
  CHECK(pipeline_calls == 1);
  CHECK(disconnect_calls == 1);
  CHECK(ping.IsTimeout());
  CHECK(incr.IsTimeout());
  REQUIRE(pipeline.size() == 2);
  CHECK(pipeline[0].IsTimeout());
  CHECK(pipeline[1].IsTimeout());
  CHECK(disconnected.IsTimeout());
  CHECK(disconnected.message().find("did not answer in time") != std::string::npos);
  Clock::duration took = disconnected_at - start;
  CAPTURE(std::chrono::duration_cast<milliseconds>(took).count());
  CHECK(took >= options.command_timeout);
  CHECK(took < 3 * options.command_timeout);
  CHECK_FALSE(connection->ready());
  CHECK(connection->pending() == 0);
  CHECK(ready_calls == 1);  // a break is not reported through on_ready

  // Once the server answers again, the same object connects again.
  connection->Connect(on_ready);
  REQUIRE(loop.RunUntil([&] { return ready_calls == 2; }));
  CHECK(ready.ok());
  CHECK(connection->ready());
  CHECK(connection->client_id() != first_id);
  auto [pong_calls, pong] = loop.Ping(*connection);
  CHECK(pong_calls == 1);
  CHECK(pong == "PONG");
  CHECK(disconnect_calls == 1);

  connection.reset();
  CHECK(loop.Close() == 0);
}

TEST_CASE("credentials refused on a reconnect fail that connect alone; the right ones connect") {
  // A server of its own: its password changes under the connection.
  RedisServer server;
  Result<std::unique_ptr<redis::Connection>> admin = redis::Connection::Open(server.Options());
  REQUIRE(admin.ok());
  // The admin connection stays authenticated across the changes below.
  REQUIRE((*admin)->Command({"CONFIG", "SET", "requirepass", "pw1"}).ok());
  RedisOptions options = server.Options(4);  // SELECT and CLIENT ID follow AUTH
  options.password = "pw1";
  Loop loop;
  std::optional<redis::AsyncConnection> connection;
  connection.emplace(loop.get(), options);
  connection->set_client_name("rq-auth-test");
  int disconnect_calls = 0;
  connection->SetOnDisconnect([&](const Status&) { ++disconnect_calls; });
  int ready_calls = 0;
  Status ready;
  auto on_ready = [&](const Status& status) {
    ++ready_calls;
    ready = status;
  };
  connection->Connect(on_ready);
  REQUIRE(loop.RunUntil([&] { return ready_calls == 1; }));
  REQUIRE(ready.ok());

  REQUIRE((*admin)->Command({"CONFIG", "SET", "requirepass", "pw2"}).ok());
  REQUIRE(
      (*admin)->Command({"CLIENT", "KILL", "ID", std::to_string(connection->client_id())}).ok());
  REQUIRE(loop.RunUntil([&] { return disconnect_calls == 1; }));

  // Twice: each attempt reports the refusal once and leaves the object
  // idle, so that it may Connect again (a step after AUTH once took the
  // refusal for its own and marked the dead connection ready).
  for (int attempt = 2; attempt <= 3; ++attempt) {
    CAPTURE(attempt);
    connection->Connect(on_ready);
    REQUIRE(loop.RunUntil([&] { return ready_calls == attempt; }));
    loop.RunFor(milliseconds(100));
    CHECK(ready_calls == attempt);
    CHECK_MESSAGE(ready.IsInvalidArgument(), ready.ToString());
    CHECK(ready.message().find("WRONGPASS") != std::string::npos);
    CHECK(ready.message().find("pw1") == std::string::npos);
    REQUIRE_FALSE(connection->ready());
    CHECK(connection->client_id() == 0);
    CHECK(connection->pending() == 0);
  }
  CHECK(disconnect_calls == 1);  // a connect that failed never broke

  REQUIRE((*admin)->Command({"CONFIG", "SET", "requirepass", "pw1"}).ok());
  connection->Connect(on_ready);
  REQUIRE(loop.RunUntil([&] { return ready_calls == 4; }));
  CHECK(ready.ok());
  CHECK(connection->ready());
  CHECK(connection->client_id() != 0);
  CHECK(loop.Ping(*connection).second == "PONG");

  connection.reset();
  CHECK(loop.Close() == 0);
}

}  // namespace
}  // namespace reliableq::testing
