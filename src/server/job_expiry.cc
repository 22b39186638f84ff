#include "server/job_expiry.h"

#include <cmath>
#include <string_view>

#include "codec/job_codec.h"

namespace reliableq::server {

namespace {

bool Named(const rapidjson::Value& name, std::string_view want) {
  return std::string_view(name.GetString(), name.GetStringLength()) == want;
}

// A sequence key as lib/sequence.lua reads it: a non-empty string as it
// is, an integral number below 2^53 in size (what Lua's doubles hold
// exactly) as its decimal text; "" for anything else.
std::string SequenceKeyText(const rapidjson::Value& value) {
  if (value.IsString()) return std::string(value.GetString(), value.GetStringLength());
  if (value.IsInt64()) {
    int64_t n = value.GetInt64();
    return n > -(int64_t{1} << 53) && n < (int64_t{1} << 53) ? std::to_string(n) : "";
  }
  if (value.IsDouble()) {
    double d = value.GetDouble();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9007199254740992.0) {
      return std::to_string(static_cast<int64_t>(d));
    }
  }
  return "";
}

}  // namespace

JobFlow ReadJobFlow(const rapidjson::Value& job) {
  JobFlow flow;
  const rapidjson::Value* expires_at = nullptr;
  const rapidjson::Value* expires_in = nullptr;
  const rapidjson::Value* created_at = nullptr;
  for (auto it = job.MemberBegin(); it != job.MemberEnd(); ++it) {
    const rapidjson::Value& name = it->name;
    // The first byte sorts out almost every member of a plain job.
    char first = name.GetStringLength() > 0 ? name.GetString()[0] : '\0';
    if (first == 'e') {
      if (Named(name, "expires_at")) expires_at = &it->value;
      if (Named(name, "expires_in")) expires_in = &it->value;
    } else if (first == 'c') {
      if (Named(name, "created_at")) created_at = &it->value;
    } else if (first == 'j') {
      // The last of duplicate members, as the scripts' cjson reads it.
      if (Named(name, "jid") && it->value.IsString()) {
        flow.jid.assign(it->value.GetString(), it->value.GetStringLength());
      }
    } else if (first == 'u') {
      if (Named(name, "unique_key")) flow.unique = true;
    } else if (first == 's') {
      if (Named(name, "sequence")) {
        flow.sequence = true;
        flow.sequence_key = SequenceKeyText(it->value);
      }
    }
  }
  if (expires_at != nullptr) {
    if (expires_at->IsNumber() && std::isfinite(expires_at->GetDouble())) {
      flow.expires_at = expires_at->GetDouble();
    } else {
      flow.ignored = "expires_at is not a number";
    }
    return flow;
  }
  if (expires_in == nullptr) return flow;
  if (!expires_in->IsNumber() || !std::isfinite(expires_in->GetDouble())) {
    flow.ignored = "expires_in is not a number";
  } else if (created_at == nullptr || !created_at->IsNumber()) {
    flow.ignored = "expires_in without a numeric created_at";
  } else {
    double created = created_at->GetDouble();
    if (created > 1e11) created /= 1000;
    flow.expires_at = created + expires_in->GetDouble();
  }
  return flow;
}

bool DiscardIfExpired(const rapidjson::Value& document, std::string_view job_class,
                      std::string_view queue, double now, const base::Logger& log, metrics::WorkerMetrics* metrics,
                      FinishedJob* done) {
  JobFlow flow = ReadJobFlow(document);
  done->feature_marked = flow.unique || flow.sequence;
  auto jid = document.FindMember("jid");
  std::string_view jid_text =
      jid != document.MemberEnd() && jid->value.IsString()
          ? std::string_view(jid->value.GetString(), jid->value.GetStringLength())
          : std::string_view();
  if (!flow.sequence_key.empty() && !flow.jid.empty()) {
    done->sequence_key = std::move(flow.sequence_key);
    done->jid = flow.jid;
  }
  if (!flow.expires_at && flow.ignored.empty()) return false;
  base::JobLogContext context(job_class, jid_text, queue);
  if (!flow.ignored.empty()) {
    log.Log(LogLevel::kWarn, base::LogEvent("job_expiry_ignored").WithError(flow.ignored),
            "expiry ignored, the job runs: %s", flow.ignored.c_str());
    return false;
  }
  if (!Expired(flow, now)) return false;
  done->outcome = Outcome::kExpired;
  log.Log(LogLevel::kInfo, "job_expired", "expired at %s, %.3f s before its start: discarded unrun",
          codec::FormatEpoch(*flow.expires_at).c_str(), now - *flow.expires_at);
  if (metrics != nullptr) metrics->JobExpired(job_class);
  return true;
}

}  // namespace reliableq::server
