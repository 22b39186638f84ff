#include "server/unique_starts.h"

#include <rapidjson/document.h>

#include "protocol/script_calls.h"
#include "base/text_escape.h"

namespace reliableq::server {

namespace {

// What marks a job unique until it starts. The search begins at '_', rare in
// payloads, so it skips ahead quickly where a leading '"' would stop at
// every quote.
constexpr std::string_view kStartMarker = R"(_until":"start")";

std::optional<std::string> TopLevelString(const rapidjson::Document& job, const char* name) {
  auto field = job.FindMember(name);
  if (field == job.MemberEnd() || !field->value.IsString() || field->value.GetStringLength() == 0) {
    return std::nullopt;
  }
  return std::string(field->value.GetString(), field->value.GetStringLength());
}

}  // namespace

std::optional<std::pair<std::string, std::string>> UniqueUntilStart(
    std::string_view payload, std::string_view unique_prefix) {
  if (payload.find(kStartMarker) == std::string_view::npos) return std::nullopt;
  rapidjson::Document job;
  job.Parse(payload.data(), payload.size());
  if (job.HasParseError() || !job.IsObject()) return std::nullopt;
  // The marker may sit inside args: only the top-level field counts.
  if (TopLevelString(job, "unique_until") != "start") return std::nullopt;
  std::optional<std::string> key = TopLevelString(job, "unique_key");
  std::optional<std::string> jid = TopLevelString(job, "jid");
  if (!key || !jid || !key->starts_with(unique_prefix)) return std::nullopt;
  return std::make_pair(std::move(*key), std::move(*jid));
}

void UniqueStarts::OnFetched(const std::vector<FetchedJob>& jobs) {
  for (const FetchedJob& fetched : jobs) {
    std::optional<std::pair<std::string, std::string>> unique =
        UniqueUntilStart(fetched.payload, unique_prefix_);
    if (!unique) continue;
    Status sent = command_.Eval(protocol::ReleaseUniqueCall(unique->first, unique->second),
                                [this, key = unique->first](const Status& s, redis::ReplyRef) {
                                  if (!s.ok() && !s.IsShutdown()) LogFailure(key, s);
                                });
    if (!sent.ok()) LogFailure(unique->first, sent);
  }
}

void UniqueStarts::LogFailure(const std::string& key, const Status& why) const {
  log_.Log(LogLevel::kWarn, base::LogEvent("unique_release_failed").WithError(why.ToString()),
           "could not release unique key %s as its job started: %s; its success releases it",
           base::Escaped(key).c_str(), why.ToString().c_str());
}

}  // namespace reliableq::server
