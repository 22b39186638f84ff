// ProbeRedis: the worker's look at Redis before it starts, and the warnings
// it gives about a Redis that may lose jobs.

#include "server/redis_probe.h"

#include <doctest/doctest.h>

#include <mutex>
#include <string>
#include <vector>

#include "protocol/layout_version.h"
#include "redis/reply.h"
#include "support/testutil.h"

namespace reliableq {

using namespace reliableq::base;

using namespace reliableq::protocol;
using namespace reliableq::server;
namespace {

using testing::RedisServer;

// The warnings ProbeRedis logs against `server`.
std::vector<std::string> ProbeWarnings(const RedisServer& server) {
  auto mu = std::make_shared<std::mutex>();
  auto lines = std::make_shared<std::vector<std::string>>();
  Logger log(LogLevel::kInfo, [mu, lines](LogLevel level, std::string_view line) {
    std::lock_guard<std::mutex> lock(*mu);
    if (level == LogLevel::kWarn) lines->emplace_back(line);
  });
  Result<std::unique_ptr<redis::Connection>> probe = ProbeRedis(server.Options(), Keys(), log);
  REQUIRE_MESSAGE(probe.ok(), probe.status().ToString());
  return *lines;
}

size_t Count(const std::vector<std::string>& lines, const std::string& part) {
  size_t n = 0;
  for (const std::string& line : lines) n += line.find(part) != std::string::npos;
  return n;
}

TEST_CASE("a Redis without an append-only file gets one warning at start") {
  // The shared test server runs with Redis's default, appendonly no.
  std::vector<std::string> warnings = ProbeWarnings(RedisServer::Shared());
  CHECK(Count(warnings, "appendonly is 'no'") == 1);
  CHECK(Count(warnings, "a restart of Redis loses every job") == 1);
  CHECK(Count(warnings, "set appendonly yes") == 1);
  CHECK(Count(warnings, RedisServer::Shared().socket_path()) == 1);
  CHECK(Count(warnings, "maxmemory-policy") == 0);
}

TEST_CASE("the probe records this build's key layout, and refuses another one") {
  RedisServer server;
  Logger log(LogLevel::kError, [](LogLevel, std::string_view) {});
  const Keys keys("rq:");
  REQUIRE(ProbeRedis(server.Options(), keys, log).ok());
  auto redis = redis::Connection::Open(server.Options());
  REQUIRE(redis.ok());
  auto recorded = (*redis)->Command({"GET", "rq:schema"});
  REQUIRE(recorded.ok());
  CHECK(redis::View(recorded->get()) == "1");
  // Idempotent: the next process finds its own layout.
  CHECK(ProbeRedis(server.Options(), keys, log).ok());

  for (const char* other : {"2", "3", "0", "banana\nFAKE", ""}) {
    CAPTURE(other);
    REQUIRE((*redis)->Command({"SET", "rq:schema", other}).ok());
    auto refused = ProbeRedis(server.Options(), keys, log);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().code() == Status::Code::kInvalidArgument);
    const std::string& message = refused.status().message();
    CHECK(message.find("at rq:schema; this reliableq runs layout 1") != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
    CHECK((message.find("upgrade this process") != std::string::npos) ==
          (std::string(other) == "3"));
    CHECK((message.find("layout-2 deployment") != std::string::npos) ==
          (std::string(other) == "2"));
  }
  // Another prefix is another deployment, with its own record.
  CHECK(ProbeRedis(server.Options(), Keys("other:"), log).ok());
}

TEST_CASE("a group records layout 2 in its own keyspace, beside layout 1's record") {
  RedisServer server;
  Logger log(LogLevel::kError, [](LogLevel, std::string_view) {});
  auto redis = redis::Connection::Open(server.Options());
  REQUIRE(redis.ok());
  REQUIRE(ProbeRedis(server.Options(), Keys("rq:"), log).ok());
  REQUIRE(ProbeRedis(server.Options(), Keys("rq:", "eu"), log).ok());
  CHECK(redis::View((*redis)->Command({"GET", "rq:schema"})->get()) == "1");
  CHECK(redis::View((*redis)->Command({"GET", "rq:{eu}:schema"})->get()) == "2");
  // A layout-1 prefix that spells the group's keyspace meets a layout-2
  // record, and the other way round: both refused, naming the record.
  auto clash = ProbeRedis(server.Options(), Keys("rq:{eu}:"), log);
  REQUIRE_FALSE(clash.ok());
  CHECK(clash.status().message().find("at rq:{eu}:schema; this reliableq runs layout 1: these "
                                      "keys belong to a layout-2 deployment") != std::string::npos);
  REQUIRE((*redis)->Command({"SET", "rq:{us}:schema", "1"}).ok());
  auto other = ProbeRedis(server.Options(), Keys("rq:", "us"), log);
  REQUIRE_FALSE(other.ok());
  CHECK(other.status().message().find("this reliableq runs layout 2") != std::string::npos);
}

TEST_CASE("CheckLayout names what Redis holds, escaped and cut short") {
  CHECK(CheckLayout(std::string("1"), "k").ok());
  CHECK(CheckLayout(std::string("2"), "k", kLayoutGroups).ok());
  CHECK_FALSE(CheckLayout(std::string("1"), "k", kLayoutGroups).ok());
  // A group's record is written before anything else of the group: none is
  // layout 1 (or keys of a layout-1 prefix), not this group's.
  CHECK_FALSE(CheckLayout(std::nullopt, "k", kLayoutGroups).ok());
  CHECK(CheckLayout(std::nullopt, "k", kLayoutGroups).message() ==
        "k is missing: no worker of the group has recorded the layout of its keys (a worker "
        "records it at start); this reliableq runs layout 2");
  // No record: the data of releases before the record, layout 1.
  CHECK(CheckLayout(std::nullopt, "k").ok());
  Status long_one = CheckLayout(std::string(100, '9'), "k");
  CHECK(long_one.message().find(std::string(40, '9') + "...'") != std::string::npos);
  CHECK(long_one.message().find("no release of reliableq wrote that") != std::string::npos);
  CHECK(CheckLayout(std::string("\x1b[31m"), "k").message().find("\\x1b[31m") !=
        std::string::npos);
}

TEST_CASE("a Redis with an append-only file and noeviction gets no warning") {
  RedisServer durable({"--appendonly", "yes"});
  CHECK(ProbeWarnings(durable).empty());
}

TEST_CASE("a Redis that may evict keys gets its warning too") {
  RedisServer evicting({"--appendonly", "yes", "--maxmemory-policy", "allkeys-lru"});
  std::vector<std::string> warnings = ProbeWarnings(evicting);
  CHECK(warnings.size() == 1);
  CHECK(Count(warnings, "maxmemory-policy is 'allkeys-lru'") == 1);
}

}  // namespace
}  // namespace reliableq
