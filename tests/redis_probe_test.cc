// ProbeRedis: the worker's look at Redis before it starts, and the warnings
// it gives about a Redis that may lose jobs.

#include "server/redis_probe.h"

#include <doctest/doctest.h>

#include <mutex>
#include <string>
#include <vector>

#include "testutil.h"

namespace reliableq {
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
  Result<std::unique_ptr<redis::Connection>> probe = ProbeRedis(server.Options(), log);
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
