#include "server/redis_probe.h"

#include <cstdio>
#include <optional>
#include <string>

#include "protocol/layout_version.h"
#include "version.h"
#include "redis/reply.h"

namespace reliableq::server {

namespace {

// The value of one Redis setting (CONFIG GET), or nullopt when Redis does
// not say.
std::optional<std::string> ConfigValue(redis::Connection& connection, const char* name) {
  Result<redis::ReplyPtr> reply = connection.Command({"CONFIG", "GET", name});
  if (!reply.ok()) return std::nullopt;
  Result<std::string> value = redis::ReadConfigValue(*reply);
  if (!value.ok()) return std::nullopt;
  return *value;
}

}  // namespace

Status AddToGroups(const RedisOptions& options, const protocol::Keys& keys) {
  if (keys.layout() != 2) return Status::OK();
  // The directory hashes to its own slot: in a cluster the group's
  // connection cannot reach it, so it gets a connection routed to it (on a
  // single Redis the route key changes nothing).
  RedisOptions routed = options;
  routed.cluster.route_key = keys.Groups();
  Result<std::unique_ptr<redis::Connection>> connection = redis::Connection::Open(routed);
  if (!connection.ok()) return connection.status().WithContext("listing the group");
  const std::string directory = keys.Groups();
  Result<redis::ReplyPtr> added = (*connection)->Command({"SADD", directory, keys.group()});
  // An error reply (WRONGTYPE) comes back as the Status (connection.h).
  if (!added.ok()) return added.status().WithContext("SADD " + directory);
  return Status::OK();
}

Result<std::unique_ptr<redis::Connection>> ProbeRedis(const RedisOptions& options,
                                                      const protocol::Keys& keys, const base::Logger& log) {
  Result<std::unique_ptr<redis::Connection>> probe = redis::Connection::Open(options);
  if (!probe.ok()) return probe.status();
  Result<redis::ReplyPtr> info = (*probe)->Command({"INFO", "server"});
  if (!info.ok()) return info.status().WithContext("INFO server");
  std::string_view text = redis::View(info->get());
  size_t at = text.find("redis_version:");
  int major = 0, minor = 0;
  if (at == std::string_view::npos ||
      std::sscanf(std::string(text.substr(at + 14, 16)).c_str(), "%d.%d", &major, &minor) != 2) {
    return Status::Protocol("cannot read redis_version from INFO at " + options.Describe());
  }
  if (major < RELIABLEQ_MIN_REDIS_MAJOR ||
      (major == RELIABLEQ_MIN_REDIS_MAJOR && minor < RELIABLEQ_MIN_REDIS_MINOR)) {
    return Status::InvalidArgument("Redis at " + options.Describe() + " is version " +
                                   std::to_string(major) + "." + std::to_string(minor) +
                                   "; reliable fetch needs LMOVE, Redis " RELIABLEQ_MIN_REDIS
                                   " or later");
  }
  if (options.cluster.seeds.empty()) {
    // A cluster node reached without cluster options serves the slots it
    // owns and answers MOVED for the others, now or after a resharding: a
    // worker would run, then fail every command forever. Refused before
    // anything is written. A server whose ACL refuses INFO cluster passes.
    Result<redis::ReplyPtr> cluster = (*probe)->Command({"INFO", "cluster"});
    Result<std::string> info = cluster.ok() ? redis::ToString(*cluster) : cluster.status();
    if (info.ok() && redis::InfoField(*info, "cluster_enabled") == "1") {
      return Status::InvalidArgument(
          "Redis at " + options.Describe() +
          " is a node of a Redis Cluster (cluster_enabled:1), which a redis:// URL does not "
          "follow; use a redis+cluster:// URL and a queue group");
    }
  }
  Status claimed = protocol::VerifyLayout(**probe, keys, /*record=*/true);
  if (!claimed.ok()) return claimed;
  if (Status listed = AddToGroups(options, keys); !listed.ok()) return listed;
  Status loaded = (*probe)->LoadScripts();
  if (!loaded.ok()) return loaded;
  if (options.tls.enabled && !options.tls.verify_peer) {
    log.Log(LogLevel::kWarn, "redis_tls_unverified",
            "TLS to Redis at %s: the server's certificate is not verified "
            "(--redis-tls-insecure): anyone on the path can read and change every job",
            options.Describe().c_str());
  }
  // Warnings only: a Redis that refuses CONFIG (a managed service may) is
  // not a reason to stop.
  std::optional<std::string> policy = ConfigValue(**probe, "maxmemory-policy");
  if (policy && *policy != "noeviction") {
    log.Log(LogLevel::kWarn, "redis_may_evict",
            "Redis maxmemory-policy is '%s': Redis may evict jobs; set it to noeviction",
            policy->c_str());
  }
  std::optional<std::string> appendonly = ConfigValue(**probe, "appendonly");
  if (appendonly && *appendonly == "no") {
    log.Log(LogLevel::kWarn, "redis_no_aof",
            "Redis at %s keeps no append-only file (appendonly is 'no'): a restart of Redis "
            "loses every job written since its last snapshot (every job, if it saves none); "
            "set appendonly yes",
            options.Describe().c_str());
  }
  return probe;
}

}  // namespace reliableq::server
