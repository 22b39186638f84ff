#include "protocol/layout_version.h"

#include <vector>

#include "base/text_escape.h"

namespace reliableq::protocol {

namespace {

// A record longer than this is shown cut short: it is not a version anyway.
constexpr size_t kShownChars = 40;

}  // namespace

Status CheckLayout(const std::optional<std::string>& recorded, std::string_view key,
                   int layout) {
  const std::string ours = std::to_string(layout);
  std::string held = recorded.value_or("1");
  if (held == ours) return Status::OK();
  bool cut = held.size() > kShownChars;
  if (cut) held.resize(kShownChars);
  std::string message = "Redis records reliableq key layout '" + base::Escaped(held) +
                        (cut ? "...'" : "'") + " at " + std::string(key) +
                        "; this reliableq runs layout " + ours;
  if (!recorded) {
    // Only a group's keys (layout 2) get here: no record there is not layout
    // 1, it is a group no worker of which has recorded its layout.
    message = std::string(key) +
              " is missing: no worker of the group has recorded the layout of its keys (a "
              "worker records it at start); this reliableq runs layout " +
              ours;
  } else if (!held.empty() && held.size() <= 18 &&
             held.find_first_not_of("0123456789") == std::string::npos &&
             std::stoll(held) > kNewestLayout) {
    message += ": the data was migrated for a newer release; upgrade this process";
  } else if (held == std::to_string(kLayoutSidekiq) || held == std::to_string(kLayoutGroups)) {
    // Both layouts are this build's: the keys of one deployment were met by
    // the prefix and group of another (a layout-1 prefix with braces).
    message += ": these keys belong to a layout-" + held +
               " deployment; check the prefix and the queue group";
  } else {
    message += ": no release of reliableq wrote that; restore the key or ask who changed it";
  }
  return Status::InvalidArgument(message);
}

Status VerifyLayout(redis::Connection& redis, const Keys& keys, bool record) {
  const std::string key = keys.Schema();
  const std::string ours = std::to_string(keys.layout());
  const std::string registry = keys.Registry();
  std::vector<redis::Argv> commands;
  if (record) commands.push_back({"SET", key, ours, "NX"});
  commands.push_back({"GET", key});
  const bool group = keys.layout() == kLayoutGroups;
  if (group) commands.push_back({"EXISTS", registry});
  Result<std::vector<redis::ReplyPtr>> replies = redis.Pipeline(commands);
  if (!replies.ok()) return replies.status().WithContext("reading " + key);
  const redisReply* got = (*replies)[record ? 1 : 0].get();
  if (got->type == REDIS_REPLY_ERROR) return redis.ErrorOf(got).WithContext("GET " + key);
  std::optional<std::string> recorded;
  if (got->type == REDIS_REPLY_STRING) recorded = std::string(redis::View(got));
  if (group && !recorded) {
    // Every process of a group records its layout before it writes
    // anything, so a group without a record was never worked. Without a
    // registry either, a reader (a recovery pass) has nothing it could
    // move the wrong way: nothing to refuse. With one, someone else wrote
    // the group's keys (a release that knew no record, a layout-1 prefix
    // with braces): refused, as any record not ours.
    const redisReply* exists = replies->back().get();
    if (exists->type == REDIS_REPLY_INTEGER && exists->integer == 0) return Status::OK();
    return Status::InvalidArgument(
        key + " is missing, yet " + registry + " exists: no worker of group '" + keys.group() +
        "' has recorded the layout of these keys (a worker records it at start), so they may "
        "follow another; this reliableq runs layout " +
        ours);
  }
  return CheckLayout(recorded, key, keys.layout());
}

}  // namespace reliableq::protocol
