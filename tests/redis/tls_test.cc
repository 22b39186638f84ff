// TLS to Redis: both connections, the client and the program against a
// redis-server with a TLS port and certificates made for the test
// (TlsRedisServer in testutil.h).

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "protocol/keys.h"
#include "support/log_capture.h"
#include "support/process.h"
#include "redis/async_connection.h"
#include "redis/connection.h"
#include "redis/reply.h"
#include "reliableq/client.h"
#include "server/redis_probe.h"
#include "support/testutil.h"

namespace reliableq::testing {

using namespace reliableq::base;

using namespace reliableq::protocol;
using namespace reliableq::server;
namespace {

using std::chrono::milliseconds;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

// A plain connection to the shared TLS server's unix socket, for checks.
std::unique_ptr<redis::Connection> Admin(TlsRedisServer& tls) {
  auto connection = redis::Connection::Open(tls.server().Options());
  REQUIRE(connection.ok());
  return std::move(connection.value());
}

// The first failure of opening a connection with `options` and sending a
// PING on it: with TLS 1.3 a server that refuses the client's certificate
// says so only after the client's side of the handshake is done.
Status OpenAndPing(const RedisOptions& options) {
  auto connection = redis::Connection::Open(options);
  if (!connection.ok()) return connection.status();
  auto pong = (*connection)->Command({"PING"});
  return pong.ok() ? Status::OK() : pong.status();
}

TEST_CASE("a blocking connection over TLS: commands, a pipeline, scripts") {
  TlsRedisServer& tls = TlsRedisServer::Shared();
  auto connection = redis::Connection::Open(tls.Options(2));
  REQUIRE_MESSAGE(connection.ok(), connection.status().ToString());
  redis::Connection& c = **connection;
  REQUIRE(c.Command({"FLUSHDB"}).ok());
  REQUIRE(c.Command({"SET", "greeting", "hello over TLS"}).ok());
  auto got = c.Command({"GET", "greeting"});
  REQUIRE(got.ok());
  CHECK(redis::View(got->get()) == "hello over TLS");

  auto replies = c.Pipeline({{"INCR", "n"}, {"INCR", "n"}, {"LPUSH", "n", "x"}, {"GET", "n"}});
  REQUIRE(replies.ok());
  REQUIRE(replies->size() == 4);
  CHECK((*replies)[1]->integer == 2);
  CHECK((*replies)[2]->type == REDIS_REPLY_ERROR);  // in place, as on a plain socket
  CHECK(redis::View((*replies)[3].get()) == "2");

  // Every script (tens of KB) goes over TLS and comes back with its SHA1.
  REQUIRE(c.LoadScripts().ok());
  auto evaluated = c.Command({"EVAL", "return ARGV[1] .. redis.call('GET', KEYS[1])", "1",
                              "greeting", ">> "});
  REQUIRE(evaluated.ok());
  CHECK(redis::View(evaluated->get()) == ">> hello over TLS");

  // A reply far larger than one TLS record or one read.
  std::string big(300 * 1024, 'b');
  REQUIRE(c.Command({"SET", "big", big}).ok());
  auto big_reply = c.Command({"GET", "big"});
  REQUIRE(big_reply.ok());
  CHECK(redis::View(big_reply->get()) == big);
}

TEST_CASE("Client pushes over rediss://") {
  TlsRedisServer& tls = TlsRedisServer::Shared();
  auto admin = Admin(tls);
  REQUIRE(admin->Command({"FLUSHALL"}).ok());
  auto url = RedisOptions::FromUrl(tls.Url());
  REQUIRE(url.ok());
  CHECK(url->tls.enabled);
  RedisOptions options = *url;
  options.tls.ca_file = tls.certs().ca();
  CHECK(options.Describe() == "rediss://127.0.0.1:" + std::to_string(tls.port()) + " db 0");
  auto client = Client::Open(options);
  REQUIRE_MESSAGE(client.ok(), client.status().ToString());
  Job job;
  job.job_class = "TlsJob";
  job.args = R"([1,"two"])";
  job.queue = "default";
  auto pushed = (*client)->Push(job);
  REQUIRE_MESSAGE(pushed.ok(), pushed.status().ToString());
  auto length = admin->Command({"LLEN", "queue:default"});
  REQUIRE(length.ok());
  CHECK((*length)->integer == 1);
}

TEST_CASE("the server's certificate is checked: CA and name; and can be left unchecked") {
  TlsRedisServer& tls = TlsRedisServer::Shared();
  std::string where = "127.0.0.1:" + std::to_string(tls.port());

  RedisOptions wrong_ca = tls.Options();
  wrong_ca.tls.ca_file = tls.certs().other_ca();
  auto refused = redis::Connection::Open(wrong_ca);
  REQUIRE_FALSE(refused.ok());
  CAPTURE(refused.status().ToString());
  CHECK(refused.status().IsIoError());
  CHECK(Contains(refused.status().message(), "TLS handshake with " + where + " failed"));
  // The server sends its CA along: "self-signed certificate in certificate
  // chain"; without it, "unable to get local issuer certificate".
  CHECK(Contains(refused.status().message(), "certificate verify failed ("));

  RedisOptions other_name = tls.Options();
  other_name.tls.server_name = "other.example";
  auto mismatch = redis::Connection::Open(other_name);
  REQUIRE_FALSE(mismatch.ok());
  CAPTURE(mismatch.status().ToString());
  CHECK(Contains(mismatch.status().message(), "hostname mismatch"));
  CHECK(Contains(mismatch.status().message(), "other.example"));

  // The certificate is for localhost and 127.0.0.1: both names pass.
  RedisOptions by_name = tls.Options();
  by_name.host = "localhost";
  CHECK(OpenAndPing(by_name).ok());
  RedisOptions named = tls.Options();
  named.tls.server_name = "localhost";
  CHECK(OpenAndPing(named).ok());

  RedisOptions insecure = wrong_ca;
  insecure.tls.verify_peer = false;
  insecure.tls.server_name = "other.example";
  Status unverified = OpenAndPing(insecure);
  CHECK_MESSAGE(unverified.ok(), unverified.ToString());
}

TEST_CASE("a worker started without checking the server's certificate says so once") {
  TlsRedisServer& tls = TlsRedisServer::Shared();
  RedisOptions insecure = tls.Options();
  insecure.tls.ca_file = tls.certs().other_ca();
  insecure.tls.verify_peer = false;
  for (bool verify : {false, true}) {
    CAPTURE(verify);
    RedisOptions options = verify ? tls.Options() : insecure;
    LogCapture log;
    Logger logger(LogLevel::kInfo, log.Sink());
    auto probe = ProbeRedis(options, Keys(), logger);
    REQUIRE_MESSAGE(probe.ok(), probe.status().ToString());
    CHECK(log.Count("the server's certificate is not verified (--redis-tls-insecure)") ==
          (verify ? 0 : 1));
  }
}

TEST_CASE("missing or unusable TLS files are named, their content never shown") {
  TlsRedisServer& tls = TlsRedisServer::Shared();
  RedisOptions missing = tls.Options();
  missing.tls.ca_file = tls.certs().dir() + "/no-such-ca.crt";
  auto no_ca = redis::Connection::Open(missing);
  REQUIRE_FALSE(no_ca.ok());
  CHECK(no_ca.status().IsInvalidArgument());
  CHECK(Contains(no_ca.status().message(), "no-such-ca.crt"));
  CHECK(Contains(no_ca.status().message(), "No such file"));

  // A key that is not the certificate's; a key file that is not a key.
  RedisOptions mismatched = tls.Options();
  mismatched.tls.cert_file = tls.certs().client_cert();
  mismatched.tls.key_file = tls.certs().server_key();
  auto wrong_key = redis::Connection::Open(mismatched);
  REQUIRE_FALSE(wrong_key.ok());
  CHECK(Contains(wrong_key.status().message(), tls.certs().server_key()));
  std::string key_text = ReadFile(tls.certs().server_key());
  REQUIRE(key_text.size() > 100);

  std::string garbage_key = tls.certs().dir() + "/garbage.key";
  std::string secret_body = "c2VjcmV0LWtleS1tYXRlcmlhbC1uZXZlci1zaG93bg==";
  std::ofstream(garbage_key) << "-----BEGIN PRIVATE KEY-----\n"
                             << secret_body << "\n-----END PRIVATE KEY-----\n";
  RedisOptions garbage = tls.Options();
  garbage.tls.cert_file = tls.certs().client_cert();
  garbage.tls.key_file = garbage_key;
  auto bad_key = redis::Connection::Open(garbage);
  REQUIRE_FALSE(bad_key.ok());
  CHECK(Contains(bad_key.status().message(), garbage_key));

  // A password the server refuses, over TLS, with a CA it does not trust.
  RedisOptions with_password = tls.Options();
  with_password.password = "pa55-never-in-messages";
  with_password.username = "nobody";
  Status wrong_password = OpenAndPing(with_password);
  RedisOptions untrusted = with_password;
  untrusted.tls.ca_file = tls.certs().other_ca();
  Status untrusted_status = OpenAndPing(untrusted);

  for (const Status& s : {no_ca.status(), wrong_key.status(), bad_key.status(), wrong_password,
                          untrusted_status}) {
    CAPTURE(s.ToString());
    CHECK_FALSE(s.ok());
    CHECK_FALSE(Contains(s.ToString(), "pa55-never-in-messages"));
    CHECK_FALSE(Contains(s.ToString(), secret_body));
    // No line of the key's PEM (other than its armor) shows up.
    std::istringstream lines(key_text);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("-----", 0) == 0 || line.empty()) continue;
      CHECK_FALSE(Contains(s.ToString(), line));
    }
  }
}

TEST_CASE("TLS over a unix socket is refused") {
  RedisOptions options = RedisServer::Shared().Options();
  options.tls.enabled = true;
  auto connection = redis::Connection::Open(options);
  REQUIRE_FALSE(connection.ok());
  CHECK(connection.status().IsInvalidArgument());
  CHECK(Contains(connection.status().message(), "unix socket"));
}

TEST_CASE("a server that requires client certificates takes ours and refuses none") {
  TlsRedisServer tls(/*require_client_certs=*/true);
  RedisOptions with_cert = tls.Options();
  with_cert.tls.cert_file = tls.certs().client_cert();
  with_cert.tls.key_file = tls.certs().client_key();
  Status accepted = OpenAndPing(with_cert);
  CHECK_MESSAGE(accepted.ok(), accepted.ToString());

  Status refused = OpenAndPing(tls.Options());
  CAPTURE(refused.ToString());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.IsIoError());
  CHECK(Contains(refused.message(), "127.0.0.1:" + std::to_string(tls.port())));
  CHECK((Contains(refused.message(), "certificate required") ||
         Contains(refused.message(), "asked for a client certificate")));
}

TEST_CASE("a blocking TLS connection comes back after the server restarts on its port") {
  TlsRedisServer tls;
  auto connection = redis::Connection::Open(tls.Options());
  REQUIRE(connection.ok());
  REQUIRE((*connection)->Command({"SET", "k", "v"}).ok());
  tls.server().KillAndRestart();
  auto broken = (*connection)->Command({"PING"});
  CHECK_FALSE(broken.ok());
  CHECK(broken.status().IsRetryable());
  auto pong = (*connection)->Command({"PING"});  // reconnects on this call
  CHECK_MESSAGE(pong.ok(), pong.status().ToString());
}

// One AsyncConnection to a TLS server on a loop of its own.
class AsyncTls {
 public:
  explicit AsyncTls(RedisOptions options) {
    REQUIRE(uv_loop_init(&loop_) == 0);
    connection_.emplace(&loop_, std::move(options));
    connection_->SetOnDisconnect([this](const Status& s) {
      ++disconnects_;
      disconnected_ = s;
    });
  }
  ~AsyncTls() {
    connection_.reset();
    for (int i = 0; i < 100 && uv_loop_alive(&loop_); ++i) uv_run(&loop_, UV_RUN_NOWAIT);
    CHECK(uv_loop_close(&loop_) == 0);
  }

  Status Connect() {
    std::optional<Status> ready;
    connection_->Connect([&](const Status& s) { ready = s; });
    REQUIRE(RunUntil([&] { return ready.has_value(); }));
    return *ready;
  }

  bool RunUntil(const std::function<bool()>& done) {
    return WaitUntil([&] {
      uv_run(&loop_, UV_RUN_NOWAIT);
      return done();
    });
  }

  redis::AsyncConnection& c() { return *connection_; }
  int disconnects() const { return disconnects_; }
  const Status& disconnected() const { return disconnected_; }

 private:
  uv_loop_t loop_;
  std::optional<redis::AsyncConnection> connection_;
  int disconnects_ = 0;
  Status disconnected_;
};

TEST_CASE("an async connection over TLS: commands, pipelines, large replies") {
  TlsRedisServer& tls = TlsRedisServer::Shared();
  AsyncTls async(tls.Options(3));
  async.c().set_client_name("tls-test");
  Status ready = async.Connect();
  REQUIRE_MESSAGE(ready.ok(), ready.ToString());
  CHECK(async.c().client_id() > 0);

  std::string big(200 * 1024, 'x');
  for (size_t i = 0; i < big.size(); i += 97) big[i] = static_cast<char>('a' + i % 26);
  int done = 0;
  std::string got;
  REQUIRE(async.c().Command({"SET", "big", big}, [&](const Status& s, redis::ReplyRef) {
    CHECK(s.ok());
    ++done;
  }).ok());
  REQUIRE(async.c().Command({"GET", "big"}, [&](const Status& s, redis::ReplyRef reply) {
    REQUIRE(s.ok());
    got = std::string(redis::View(reply.raw()));
    ++done;
  }).ok());
  REQUIRE(async.RunUntil([&] { return done == 2; }));
  CHECK(got == big);

  // Many commands in one loop turn, and one pipeline of many.
  constexpr int kCommands = 2000;
  int answered = 0;
  int64_t last = 0;
  for (int i = 0; i < kCommands; ++i) {
    REQUIRE(async.c().Command({"INCR", "counter"}, [&](const Status& s, redis::ReplyRef ref) {
      const redisReply* reply = ref.raw();
      REQUIRE(s.ok());
      CHECK(reply->integer == last + 1);  // in order
      last = reply->integer;
      ++answered;
    }).ok());
  }
  redis::CommandList commands;
  for (int i = 0; i < 5000; ++i) commands.Add({"RPUSH", "list", std::to_string(i)});
  std::optional<std::vector<int64_t>> integers;
  REQUIRE(async.c().Pipeline(commands, [&](std::vector<Status> statuses,
                                           std::vector<int64_t> values) {
    for (const Status& s : statuses) CHECK(s.ok());
    integers = std::move(values);
  }).ok());
  REQUIRE(async.RunUntil([&] { return answered == kCommands && integers.has_value(); }));
  REQUIRE(integers->size() == 5000);
  CHECK(integers->back() == 5000);

  // A reply of many elements, > 64 KB in all.
  std::optional<size_t> elements;
  REQUIRE(async.c().Command({"LRANGE", "list", "0", "-1"}, [&](const Status& s, redis::ReplyRef r) {
    REQUIRE(s.ok());
    elements = r.raw()->elements;
  }).ok());
  REQUIRE(async.RunUntil([&] { return elements.has_value(); }));
  CHECK(*elements == 5000);
  CHECK(async.disconnects() == 0);
  async.c().Close();
}

TEST_CASE("an async TLS connection reports a bad certificate, and a restart, then connects") {
  SUBCASE("wrong CA") {
    TlsRedisServer& tls = TlsRedisServer::Shared();
    RedisOptions options = tls.Options();
    options.tls.ca_file = tls.certs().other_ca();
    AsyncTls async(options);
    Status ready = async.Connect();
    CAPTURE(ready.ToString());
    CHECK(ready.IsIoError());
    CHECK(Contains(ready.message(), "certificate verify failed"));
    CHECK(async.disconnects() == 0);
  }
  SUBCASE("restart") {
    TlsRedisServer tls;
    AsyncTls async(tls.Options());
    REQUIRE(async.Connect().ok());
    tls.server().KillAndRestart();
    REQUIRE(async.RunUntil([&] { return async.disconnects() == 1; }));
    CHECK(async.disconnected().IsIoError());
    CHECK_FALSE(async.c().ready());
    Status again = async.Connect();
    REQUIRE_MESSAGE(again.ok(), again.ToString());
    std::string pong;
    REQUIRE(async.c().Command({"PING"}, [&](const Status& s, redis::ReplyRef r) {
      if (s.ok()) pong = std::string(redis::View(r.raw()));
    }).ok());
    REQUIRE(async.RunUntil([&] { return !pong.empty(); }));
    CHECK(pong == "PONG");
  }
}

TEST_CASE("the reliableq program over rediss://") {
  TlsRedisServer& tls = TlsRedisServer::Shared();
  auto admin = Admin(tls);
  REQUIRE(admin->Command({"FLUSHALL"}).ok());
  std::string bin = BuildPath("RELIABLEQ_BIN");
  const TestCertificates& certs = tls.certs();

  CommandResult pushed = RunCommand({bin, "push", "TlsJob", "[1]", "--redis", tls.Url(),
                                     "--redis-tls-ca", certs.ca()});
  CAPTURE(pushed.err);
  CHECK(pushed.exit_code == 0);
  CHECK(pushed.out.size() == 25);  // a jid and a newline
  CHECK(admin->Command({"LLEN", "queue:default"}).value()->integer == 1);

  CommandResult with_cert =
      RunCommand({bin, "push", "TlsJob", "[2]", "--redis", tls.Url(), "--redis-tls-ca",
                  certs.ca(), "--redis-tls-cert", certs.client_cert(), "--redis-tls-key",
                  certs.client_key(), "--redis-tls-server-name", "localhost"});
  CAPTURE(with_cert.err);
  CHECK(with_cert.exit_code == 0);

  CommandResult insecure = RunCommand({bin, "push", "TlsJob", "[3]", "--redis", tls.Url(),
                                       "--redis-tls-ca", certs.other_ca(),
                                       "--redis-tls-insecure"});
  CAPTURE(insecure.err);
  CHECK(insecure.exit_code == 0);

  CommandResult wrong_ca = RunCommand({bin, "push", "TlsJob", "[4]", "--redis", tls.Url(),
                                       "--redis-tls-ca", certs.other_ca()});
  CHECK(wrong_ca.exit_code == 1);
  CHECK(Contains(wrong_ca.err, "certificate verify failed"));
  CHECK(std::count(wrong_ca.err.begin(), wrong_ca.err.end(), '\n') == 1);

  CommandResult no_file = RunCommand({bin, "stats", "--redis", tls.Url(), "--redis-tls-ca",
                                      certs.dir() + "/missing.crt"});
  CHECK(no_file.exit_code == 1);
  CHECK(Contains(no_file.err, certs.dir() + "/missing.crt"));
  CHECK(std::count(no_file.err.begin(), no_file.err.end(), '\n') == 1);

  std::string plain_url = "redis://127.0.0.1:" + std::to_string(tls.port());
  CommandResult not_tls =
      RunCommand({bin, "push", "TlsJob", "[5]", "--redis", plain_url, "--redis-tls-insecure"});
  CHECK(not_tls.exit_code == 2);
  CHECK(Contains(not_tls.err, "rediss://"));
  CHECK(std::count(not_tls.err.begin(), not_tls.err.end(), '\n') == 1);

  CHECK(admin->Command({"LLEN", "queue:default"}).value()->integer == 3);
}

}  // namespace
}  // namespace reliableq::testing
