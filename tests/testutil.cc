#include "testutil.h"

#include <signal.h>
#include <sys/prctl.h>
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

std::string FindRedisServer() {
  if (const char* env = std::getenv("RELIABLEQ_REDIS_SERVER"); env != nullptr && *env) {
    return env;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  dirs += ":/usr/bin:/usr/local/bin:/usr/sbin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = dirs.substr(start, end - start) + "/redis-server";
    if (end > start && access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  Die("redis-server is not installed; run tools/setup (tests never skip for lack of it)");
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
  std::string binary = FindRedisServer();
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

void RedisServer::KillAndRestart() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  unlink(socket_path_.c_str());
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

FakeClock::FakeClock() : start_wall_(NowSeconds()), start_steady_(std::chrono::steady_clock::now()) {}

double FakeClock::Now() const {
  return start_wall_ + static_cast<double>(offset_ms_.load()) / 1000.0;
}

std::chrono::steady_clock::time_point FakeClock::Monotonic() const {
  return start_steady_ + std::chrono::milliseconds(offset_ms_.load());
}

void FakeClock::Advance(std::chrono::milliseconds by) { offset_ms_ += by.count(); }

}  // namespace reliableq::testing
