// Admin's audit trail: the dashboard's record of the actions taken.

#include "admin/audit_trail.h"

namespace reliableq::admin {

AuditTrail::AuditTrail(AdminContext& context) : context_(context) {}

Status AuditTrail::Append(std::string_view entry_json) {
  std::string key = context_.keys.Audit();
  std::vector<redis::Argv> commands = {
      {"MULTI"}, {"LPUSH", key, entry_json}, {"LTRIM", key, "0", "999"}, {"EXEC"}};
  Result<std::vector<redis::ReplyPtr>> replies = context_.redis->Pipeline(commands);
  if (!replies.ok()) return replies.status().WithContext("writing the audit trail");
  Result<std::vector<redis::ReplyRef>> ran = redis::ExecReplies(replies->back());
  if (!ran.ok()) {
    for (const redis::ReplyPtr& r : *replies) {
      if (Status s = context_.CheckReply(r, "writing the audit trail"); !s.ok()) return s;
    }
    return ran.status().WithContext("writing the audit trail");
  }
  for (redis::ReplyRef r : *ran) {
    if (Status s = context_.CheckReply(r, "writing the audit trail"); !s.ok()) return s;
  }
  return Status::OK();
}

Result<std::vector<std::string>> AuditTrail::Read(int64_t limit) {
  if (limit < 1) return std::vector<std::string>{};
  Result<redis::ReplyPtr> reply =
      context_.redis->Command({"LRANGE", context_.keys.Audit(), "0", std::to_string(limit - 1)});
  if (!reply.ok()) return reply.status().WithContext("reading the audit trail");
  return redis::StringArray(*reply);
}

}  // namespace reliableq::admin
