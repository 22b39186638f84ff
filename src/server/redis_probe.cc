#include "server/redis_probe.h"

#include <cstdio>
#include <string>

#include "redis/reply.h"

namespace reliableq {

Result<std::unique_ptr<redis::Connection>> ProbeRedis(const RedisOptions& options,
                                                      const Logger& log) {
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
  if (major < 6 || (major == 6 && minor < 2)) {
    return Status::InvalidArgument("Redis at " + options.Describe() + " is version " +
                                   std::to_string(major) + "." + std::to_string(minor) +
                                   "; reliable fetch needs LMOVE, Redis 6.2 or later");
  }
  Status loaded = (*probe)->LoadScripts();
  if (!loaded.ok()) return loaded;
  Result<redis::ReplyPtr> policy = (*probe)->Command({"CONFIG", "GET", "maxmemory-policy"});
  if (policy.ok() && (*policy)->type == REDIS_REPLY_ARRAY && (*policy)->elements == 2) {
    Result<std::string> value = redis::ToString((*policy)->element[1]);
    if (value.ok() && *value != "noeviction") {
      log.Log(LogLevel::kWarn,
              "Redis maxmemory-policy is '%s': Redis may evict jobs; set it to noeviction",
              value->c_str());
    }
  }
  return probe;
}

}  // namespace reliableq
