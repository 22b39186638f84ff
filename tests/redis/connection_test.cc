#include "redis/connection.h"

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::testing;

TEST_CASE_FIXTURE(RedisFixture, "commands, pipelines and error replies") {
  auto set = redis().Command({"SET", "k", std::string_view("a\0b", 3)});
  REQUIRE(set.ok());
  CHECK(Get("k") == std::string("a\0b", 3));

  auto pipeline = redis().Pipeline({{"INCR", "n"}, {"INCR", "n"}, {"LPUSH", "k", "x"}});
  REQUIRE(pipeline.ok());
  REQUIRE(pipeline->size() == 3);
  CHECK((*pipeline)[1]->integer == 2);
  CHECK((*pipeline)[2]->type == REDIS_REPLY_ERROR);  // WRONGTYPE, returned in place

  auto wrong = redis().Command({"LPUSH", "k", "x"});
  CHECK(wrong.status().IsScript());
  CHECK(wrong.status().message().rfind("WRONGTYPE", 0) == 0);
}

TEST_CASE_FIXTURE(RedisFixture, "scripts load once and come back after SCRIPT FLUSH") {
  REQUIRE(redis().LoadScripts().ok());
  Run({"SCRIPT", "FLUSH"});
  auto cached = [&](const char* sha1) {
    auto reply = redis().Command({"SCRIPT", "EXISTS", sha1});
    REQUIRE(reply.ok());
    REQUIRE((*reply)->elements == 1);
    return (*reply)->element[0]->integer == 1;
  };
  for (size_t i = 0; i < kScriptCount; ++i) CHECK_FALSE(cached(kScripts[i].sha1));
  REQUIRE(redis().LoadScripts().ok());
  for (size_t i = 0; i < kScriptCount; ++i) CHECK(cached(kScripts[i].sha1));
}

TEST_CASE_FIXTURE(RedisFixture, "a database in the URL is selected") {
  Run({"SET", "where", "db0"});
  auto db3 = redis::Connection::Open(server().Options(3));
  REQUIRE(db3.ok());
  REQUIRE((*db3)->Command({"SET", "where", "db3"}).ok());
  CHECK(Get("where") == "db0");
  Run({"SELECT", "3"});
  CHECK(Get("where") == "db3");
  Run({"SELECT", "0"});
}

TEST_CASE("an unreachable Redis fails fast and says where it tried") {
  RedisOptions options;
  options.unix_path = "/nonexistent/redis.sock";
  auto connection = redis::Connection::Open(options);
  CHECK_FALSE(connection.ok());
  CHECK(connection.status().IsIoError());
  CHECK(connection.status().message().find("unix:/nonexistent/redis.sock") != std::string::npos);

}

TEST_CASE("a server that accepts but never answers times out instead of hanging") {
  // A loopback listener that never reads: the connect succeeds, SELECT gets
  // no reply, and the command timeout must end the wait.
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(listener >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(listen(listener, 4) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0);

  RedisOptions silent;
  silent.host = "127.0.0.1";
  silent.port = ntohs(addr.sin_port);
  silent.db = 1;
  silent.command_timeout = std::chrono::milliseconds(300);
  auto start = std::chrono::steady_clock::now();
  auto connection = redis::Connection::Open(silent);
  auto elapsed = std::chrono::steady_clock::now() - start;
  close(listener);
  CHECK_FALSE(connection.ok());
  CHECK(connection.status().IsTimeout());
  CHECK(connection.status().message().find("127.0.0.1:") != std::string::npos);
  CHECK(elapsed < std::chrono::seconds(3));
}

TEST_CASE("a connection comes back after the server restarts") {
  RedisServer own;
  auto connection = redis::Connection::Open(own.Options());
  REQUIRE(connection.ok());
  REQUIRE((*connection)->Command({"PING"}).ok());
  own.KillAndRestart();
  auto broken = (*connection)->Command({"PING"});
  CHECK_FALSE(broken.ok());
  CHECK(broken.status().IsRetryable());
  CHECK((*connection)->Command({"PING"}).ok());  // reconnected on this call
}

namespace {

// Commands encoded back to back, as Connection::Send takes them.
struct Wire {
  std::string bytes;
  std::vector<size_t> ends;
  void Add(const redis::Argv& argv) {
    redis::AppendCommand(&bytes, argv.data(), argv.size());
    ends.push_back(bytes.size());
  }
};

}  // namespace

TEST_CASE_FIXTURE(RedisFixture, "Send writes many commands at once and keeps each reply") {
  Wire wire;
  wire.Add({"SET", "k", "v"});
  wire.Add({"LPUSH", "k", "x"});  // WRONGTYPE, in place
  wire.Add({"INCR", "n"});
  std::vector<redis::ReplyPtr> replies;
  size_t written = 99;
  REQUIRE(redis().Send(wire.bytes, wire.ends, &replies, &written).ok());
  CHECK(written == 3);
  REQUIRE(replies.size() == 3);
  CHECK(replies[0]->type == REDIS_REPLY_STATUS);
  CHECK(replies[1]->type == REDIS_REPLY_ERROR);
  CHECK(replies[2]->integer == 1);
  CHECK(redis().last_progress() == redis::Connection::Progress::kAnswered);
}

TEST_CASE("Send keeps the replies read before the connection broke") {
  RedisServer own;
  auto connection = redis::Connection::Open(own.Options());
  REQUIRE(connection.ok());
  // Redis answers QUIT, then closes the connection without running what
  // follows it.
  Wire wire;
  wire.Add({"SET", "a", "1"});
  wire.Add({"QUIT"});
  wire.Add({"SET", "c", "1"});
  std::vector<redis::ReplyPtr> replies;
  size_t written = 0;
  Status sent = (*connection)->Send(wire.bytes, wire.ends, &replies, &written);
  CHECK_FALSE(sent.ok());
  CHECK(sent.IsIoError());
  CHECK(written == 3);
  CHECK(replies.size() == 2);
  CHECK((*connection)->last_progress() == redis::Connection::Progress::kSent);
  // The next call reconnects.
  auto c = (*connection)->Command({"EXISTS", "a", "c"});
  REQUIRE(c.ok());
  CHECK((*c)->integer == 1);
}

TEST_CASE("Send counts only the commands written whole") {
  // A listener that never reads: the socket buffers fill, and the write of
  // the large second command cannot finish within the command timeout.
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(listener >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(listen(listener, 4) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  RedisOptions silent;
  silent.host = "127.0.0.1";
  silent.port = ntohs(addr.sin_port);
  silent.command_timeout = std::chrono::milliseconds(300);
  auto connection = redis::Connection::Open(silent);  // db 0, no password: sends nothing
  REQUIRE(connection.ok());

  std::string big(64 << 20, 'x');
  Wire wire;
  wire.Add({"SET", "a", "1"});
  wire.Add({"SET", "b", big});
  wire.Add({"SET", "c", "1"});
  std::vector<redis::ReplyPtr> replies;
  size_t written = 99;
  auto start = std::chrono::steady_clock::now();
  Status sent = (*connection)->Send(wire.bytes, wire.ends, &replies, &written);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(3));
  CHECK(sent.IsTimeout());
  CHECK(written == 1);  // the first whole, the second cut short, the third never
  CHECK(replies.empty());
  CHECK((*connection)->last_progress() == redis::Connection::Progress::kSent);

  // Small commands are written whole and wait for replies that never come.
  Wire small;
  small.Add({"SET", "a", "1"});
  small.Add({"SET", "c", "1"});
  sent = (*connection)->Send(small.bytes, small.ends, &replies, &written);
  CHECK(sent.IsTimeout());
  CHECK(written == 2);
  CHECK(replies.empty());
  close(listener);
}
