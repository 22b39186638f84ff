// The audit trail: every action of the dashboard's API becomes a log line
// and an entry of <prefix>audit (newest first, at most 1000), with who did
// it (reliableq-schema(7), "Audit trail").


#include "web/json_out.h"
#include "web/web_context.h"

namespace reliableq::web {

void Audit(Call& call, Admin& admin, std::string_view action, std::string_view target,
           std::string_view result) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("at");
  w.Double(call.context.clock->Now());
  w.Key("who");
  WriteString(w, call.who);
  w.Key("action");
  WriteString(w, action);
  w.Key("target");
  WriteString(w, target);
  w.Key("result");
  WriteString(w, result);
  w.EndObject();
  std::string_view entry(buffer.GetString(), buffer.GetSize());
  // The entry is JSON (quotes and controls escaped), and the logger escapes
  // the line again: a job id cannot forge a line of its own.
  call.context.logger.Log(LogLevel::kInfo, "audit", "audit %.*s", static_cast<int>(entry.size()),
                          entry.data());
  Status s = admin.AppendAudit(entry);
  if (!s.ok()) {
    std::string error = s.ToString();
    call.context.logger.Log(LogLevel::kWarn, base::LogEvent("audit_write_failed").WithError(error),
                            "audit: cannot write %s: %s", call.context.options.prefix.c_str(),
                            error.c_str());
  }
}

}  // namespace reliableq::web
