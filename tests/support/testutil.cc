#include "support/testutil.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include <doctest/doctest.h>

namespace reliableq::testing {

namespace {

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "\nFATAL (test harness): %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(2);
}

}  // namespace

std::string FindProgram(const std::string& name) {
  if (name == "redis-server") {
    if (const char* env = std::getenv("RELIABLEQ_REDIS_SERVER"); env != nullptr && *env) {
      return env;
    }
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  dirs += ":/usr/bin:/usr/local/bin:/usr/sbin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = dirs.substr(start, end - start) + "/" + name;
    if (end > start && access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

namespace {

std::string RedisServerProgram() {
  std::string found = FindProgram("redis-server");
  if (found.empty()) {
    Die("redis-server is not installed; run tools/setup (tests never skip for lack of it)");
  }
  return found;
}

}  // namespace

RedisServer::RedisServer(std::vector<std::string> extra_args) : extra_args_(std::move(extra_args)) {
  char templ[] = "/tmp/reliableq-test-XXXXXX";
  if (mkdtemp(templ) == nullptr) Die(std::string("mkdtemp: ") + std::strerror(errno));
  dir_ = templ;
  socket_path_ = dir_ + "/redis.sock";
  Start();
}

RedisServer::~RedisServer() {
  Stop();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

RedisServer& RedisServer::Shared() {
  static RedisServer server;
  return server;
}

void RedisServer::Start() {
  std::string binary = RedisServerProgram();
  std::vector<std::string> args = {binary,
                                   "--port", "0",
                                   "--unixsocket", socket_path_,
                                   "--unixsocketperm", "700",
                                   "--dir", dir_,
                                   "--save", "",
                                   "--daemonize", "no",
                                   "--logfile", dir_ + "/redis.log"};
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) Die(std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    // The server must not outlive a test binary that crashes.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      Die("redis-server exited at start; see " + dir_ + "/redis.log");
    }
    RedisOptions options = Options();
    options.connect_timeout = std::chrono::milliseconds(200);
    auto connection = redis::Connection::Open(options);
    if (connection.ok()) {
      auto pong = (*connection)->Command({"PING"});
      if (pong.ok()) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Die("redis-server did not answer PING within 10 s on " + socket_path_);
}

void RedisServer::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  for (int i = 0; i < 500; ++i) {  // up to 5 s, then SIGKILL
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void RedisServer::KillAndRestart(std::chrono::milliseconds down) {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  unlink(socket_path_.c_str());
  std::this_thread::sleep_for(down);
  Start();
}

std::string RedisServer::Url(int db) const {
  return "unix://" + socket_path_ + "?db=" + std::to_string(db);
}

RedisOptions RedisServer::Options(int db) const {
  RedisOptions options;
  options.unix_path = socket_path_;
  options.db = db;
  return options;
}

TestCertificates::TestCertificates() {
  char templ[] = "/tmp/reliableq-tls-XXXXXX";
  if (mkdtemp(templ) == nullptr) Die(std::string("mkdtemp: ") + std::strerror(errno));
  dir_ = templ;
  // EC keys: quick to make. Each certificate lives two days.
  const char* script = R"(set -e
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }
ca() {
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -out "$1.crt" -days 2 -subj "/CN=$2"
}
leaf() {  # name, subject CN, extensions
  key "$1.key"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$2"
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
    -out "$1.crt" -days 2 -extfile "$1.ext"
}
ca ca "reliableq test CA"
ca other-ca "unrelated test CA"
leaf server localhost "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
leaf client "reliableq test client" "extendedKeyUsage=clientAuth"
)";
  std::string script_path = dir_ + "/make-certs.sh";
  FILE* file = std::fopen(script_path.c_str(), "we");
  if (file == nullptr) Die("cannot write " + script_path);
  std::fputs(script, file);
  std::fclose(file);
  std::string command = "cd '" + dir_ + "' && sh make-certs.sh > make-certs.log 2>&1";
  if (std::system(command.c_str()) != 0) {
    Die("openssl could not make the test certificates; see " + dir_ + "/make-certs.log");
  }
}

TestCertificates::~TestCertificates() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) Die(std::string("socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  auto* raw = reinterpret_cast<sockaddr*>(&address);
  if (bind(fd, raw, sizeof address) != 0 || getsockname(fd, raw, &length) != 0) {
    Die(std::string("cannot find a free port: ") + std::strerror(errno));
  }
  close(fd);
  return ntohs(address.sin_port);
}

TlsRedisServer::TlsRedisServer(bool require_client_certs, std::vector<std::string> extra_args)
    : port_(FreeLoopbackPort()) {
  std::vector<std::string> args = {"--tls-port", std::to_string(port_),
                                   "--bind", "127.0.0.1",
                                   "--tls-cert-file", certs_.server_cert(),
                                   "--tls-key-file", certs_.server_key(),
                                   "--tls-ca-cert-file", certs_.ca(),
                                   "--tls-auth-clients", require_client_certs ? "yes" : "optional",
                                   "--appendonly", "no"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  server_ = std::make_unique<RedisServer>(std::move(args));
}

TlsRedisServer& TlsRedisServer::Shared() {
  static TlsRedisServer server;
  return server;
}

RedisOptions TlsRedisServer::Options(int db) const {
  RedisOptions options;
  options.host = "127.0.0.1";
  options.port = port_;
  options.db = db;
  options.tls.enabled = true;
  options.tls.ca_file = certs_.ca();
  return options;
}

std::string TlsRedisServer::Url(int db) const {
  return "rediss://127.0.0.1:" + std::to_string(port_) + "/" + std::to_string(db);
}

RedisFixture::RedisFixture() {
  auto connection = redis::Connection::Open(RedisServer::Shared().Options());
  if (!connection.ok()) Die("cannot connect to the test server: " + connection.status().ToString());
  connection_ = std::move(connection.value());
  auto flushed = connection_->Command({"FLUSHALL"});
  if (!flushed.ok()) Die("FLUSHALL failed: " + flushed.status().ToString());
  connection_->Command({"SCRIPT", "FLUSH"});
}

namespace {

redis::ReplyPtr Must(Result<redis::ReplyPtr> reply, const redis::Argv& command) {
  if (!reply.ok()) {
    std::string text;
    for (auto part : command) text += std::string(part) + " ";
    FAIL("Redis command failed: " << text << "-> " << reply.status().ToString());
  }
  return std::move(reply.value());
}

std::vector<std::string> Strings(const redisReply* reply) {
  std::vector<std::string> out;
  for (size_t i = 0; i < reply->elements; ++i) {
    out.emplace_back(reply->element[i]->str, reply->element[i]->len);
  }
  return out;
}

}  // namespace

void RedisFixture::Run(const redis::Argv& command) { Must(redis().Command(command), command); }

std::vector<std::string> RedisFixture::LRange(const std::string& key) {
  redis::Argv command = {"LRANGE", key, "0", "-1"};
  return Strings(Must(redis().Command(command), command).get());
}

std::vector<std::string> RedisFixture::ZRange(const std::string& key) {
  redis::Argv command = {"ZRANGE", key, "0", "-1"};
  return Strings(Must(redis().Command(command), command).get());
}

std::vector<std::pair<std::string, double>> RedisFixture::ZRangeWithScores(
    const std::string& key) {
  redis::Argv command = {"ZRANGE", key, "0", "-1", "WITHSCORES"};
  std::vector<std::string> flat = Strings(Must(redis().Command(command), command).get());
  std::vector<std::pair<std::string, double>> out;
  for (size_t i = 0; i + 1 < flat.size(); i += 2) {
    out.emplace_back(flat[i], std::strtod(flat[i + 1].c_str(), nullptr));
  }
  return out;
}

std::vector<std::string> RedisFixture::SMembers(const std::string& key) {
  redis::Argv command = {"SMEMBERS", key};
  std::vector<std::string> out = Strings(Must(redis().Command(command), command).get());
  std::sort(out.begin(), out.end());
  return out;
}

std::string RedisFixture::Get(const std::string& key) {
  redis::Argv command = {"GET", key};
  redis::ReplyPtr reply = Must(redis().Command(command), command);
  return reply->type == REDIS_REPLY_STRING ? std::string(reply->str, reply->len) : "";
}

std::string RedisFixture::HGet(const std::string& key, const std::string& field) {
  redis::Argv command = {"HGET", key, field};
  redis::ReplyPtr reply = Must(redis().Command(command), command);
  return reply->type == REDIS_REPLY_STRING ? std::string(reply->str, reply->len) : "";
}

long long RedisFixture::Integer(const redis::Argv& command) {
  redis::ReplyPtr reply = Must(redis().Command(command), command);
  auto value = redis::ToInteger(reply.get());
  if (!value.ok()) FAIL("expected an integer from " << command[0]);
  return *value;
}

bool RedisFixture::Exists(const std::string& key) { return Integer({"EXISTS", key}) == 1; }

std::map<std::string, std::string> RedisFixture::Snapshot() {
  std::map<std::string, std::string> out;
  auto all = redis().Command({"KEYS", "*"});
  REQUIRE(all.ok());
  for (size_t i = 0; i < (*all)->elements; ++i) {
    std::string key((*all)->element[i]->str, (*all)->element[i]->len);
    auto dump = redis().Command({"DUMP", key});
    REQUIRE(dump.ok());
    out[key] = std::string((*dump)->str, (*dump)->len);
  }
  return out;
}

Subscription::Subscription(const std::string& socket_path, const std::string& name, Kind kind) {
  context_ = redisConnectUnix(socket_path.c_str());
  REQUIRE(context_ != nullptr);
  REQUIRE(context_->err == 0);
  redisSetTimeout(context_, timeval{5, 0});  // a missing message fails, never hangs
  const char* verb = kind == Kind::kPattern ? "PSUBSCRIBE" : "SUBSCRIBE";
  auto* reply = static_cast<redisReply*>(
      redisCommand(context_, "%s %b", verb, name.data(), name.size()));
  REQUIRE(reply != nullptr);
  freeReplyObject(reply);
}

Subscription::~Subscription() { redisFree(context_); }

std::vector<Subscription::Message> Subscription::Until(const std::string& marker) {
  std::vector<Message> got;
  while (true) {
    void* raw = nullptr;
    REQUIRE(redisGetReply(context_, &raw) == REDIS_OK);
    auto* reply = static_cast<redisReply*>(raw);
    REQUIRE(reply->type == REDIS_REPLY_ARRAY);
    // message, channel, payload; or pmessage, pattern, channel, payload.
    REQUIRE((reply->elements == 3 || reply->elements == 4));
    const redisReply* channel = reply->element[reply->elements - 2];
    const redisReply* payload = reply->element[reply->elements - 1];
    Message m{std::string(channel->str, channel->len), std::string(payload->str, payload->len)};
    freeReplyObject(reply);
    if (m.payload == marker) return got;
    got.push_back(std::move(m));
  }
}

std::string AcceptedJid(const Result<PushResult>& pushed) {
  REQUIRE_MESSAGE(pushed.ok(), pushed.status().ToString());
  REQUIRE_MESSAGE(pushed->outcome == PushOutcome::kAccepted,
                  (std::string(PushOutcomeName(pushed->outcome)) + ": " +
                   pushed->reason.ToString()));
  REQUIRE(!pushed->jid.empty());
  return pushed->jid;
}

std::vector<std::string> AcceptedJids(const Result<std::vector<PushResult>>& pushed) {
  REQUIRE_MESSAGE(pushed.ok(), pushed.status().ToString());
  std::vector<std::string> jids;
  jids.reserve(pushed->size());
  for (size_t i = 0; i < pushed->size(); ++i) {
    const PushResult& one = (*pushed)[i];
    REQUIRE_MESSAGE(one.outcome == PushOutcome::kAccepted,
                    ("job " + std::to_string(i) + ": " + PushOutcomeName(one.outcome) + ": " +
                     one.reason.ToString()));
    jids.push_back(one.jid);
  }
  return jids;
}

bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

double NowSeconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

}  // namespace reliableq::testing
