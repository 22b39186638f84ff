#include "admin/admin_context.h"

#include <algorithm>
#include <charconv>
#include <system_error>

namespace reliableq::admin {

// Pipelined replies carry error replies in place; a figure is never built
// on a key of the wrong type. The connection maps the error: it knows
// whether a MOVED means a cluster node met without cluster options.
Status AdminContext::CheckReply(redis::ReplyRef reply, std::string_view what) const {
  if (!redis::IsErrorReply(reply)) return Status::OK();
  return redis->ErrorOf(reply).WithContext(std::string(what));
}

Status AdminContext::Failed(const Result<std::vector<redis::ReplyPtr>>& replies,
                            const std::vector<redis::Argv>& commands, std::string_view what) const {
  if (!replies.ok()) return replies.status().WithContext(std::string(what));
  return redis->FirstError(*replies, commands);
}

Result<std::vector<std::string>> AdminContext::SortedMembers(const std::string& key,
                                                             std::string_view what) const {
  Result<redis::ReplyPtr> members = redis->Command({"SMEMBERS", key});
  if (!members.ok()) return members.status().WithContext(std::string(what));
  std::vector<std::string> sorted = redis::StringArray(*members);
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

Result<protocol::ClearReply> AdminContext::Clear(std::string_view key, std::string_view queue) const {
  Result<redis::ReplyPtr> reply = redis->Eval(protocol::ClearCall(keys, key, queue));
  if (!reply.ok()) return reply.status().WithContext("clearing " + std::string(key));
  return protocol::ReadClearReply(*reply);
}

Status CheckDeadLimits(const DeadSetLimits& limits) {
  if (limits.max_jobs < 1) return Status::InvalidArgument("dead max jobs must be at least 1");
  if (limits.timeout.count() < 0) {
    return Status::InvalidArgument("the dead timeout must not be negative");
  }
  return Status::OK();
}

std::string ScoreText(double score) {
  // Fixed notation, the shortest that reads back as the same double: Redis
  // parses it with strtod, so ZRANGEBYSCORE meets the member's exact score.
  char buf[400];
  auto [end, error] = std::to_chars(buf, buf + sizeof buf, score, std::chars_format::fixed);
  if (error != std::errc()) return "0";
  return std::string(buf, end);
}

}  // namespace reliableq::admin
