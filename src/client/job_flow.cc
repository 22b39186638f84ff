#include "client/job_flow.h"

#include <openssl/evp.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cmath>

#include "base/utf8.h"
#include "codec/job_codec.h"

namespace reliableq::client {

namespace {

constexpr size_t kMaxUniqueKeyBytes = 512;

// The payload's fields are written as raw text, so a key must need no JSON
// escape, and the scripts read it back without unescaping (lib/unique.lua).
bool PlainKeyText(const std::string& key) {
  for (unsigned char c : key) {
    if (c < 0x20 || c == 0x7f || c == '"' || c == '\\' || c >= 0x80) return false;
  }
  return true;
}

Result<std::string> Sha256Hex(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha256(), nullptr) != 1) {
    return Status::Corruption("SHA-256 of the job's args failed");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  return hex;
}

}  // namespace

Result<std::string> UniqueRedisKey(const protocol::Keys& keys, const Job& job) {
  std::string key = job.unique->key;
  if (key.empty()) {
    // The args as the payload holds them: written compactly, so that
    // spacing does not make two pushes of the same job distinct.
    rapidjson::Document args;
    args.Parse<rapidjson::kParseFullPrecisionFlag>(job.args.data(), job.args.size());
    if (args.HasParseError() || !args.IsArray()) {
      return Status::InvalidArgument("args is not a JSON array");
    }
    Result<std::string> digest =
        Sha256Hex(codec::ToJson(args, codec::WideIntegers::Find(job.args)));
    if (!digest.ok()) return digest.status();
    key = job.job_class + ":" + *digest;
  }
  if (!PlainKeyText(key) || key.size() > kMaxUniqueKeyBytes) {
    return Status::InvalidArgument(
        "the unique key must be printable ASCII without '\"' or '\\', at most 512 bytes");
  }
  return keys.Unique(key);
}

namespace {

// `text` as a JSON string literal.
std::string JsonString(std::string_view text) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
  return std::string(buffer.GetString(), buffer.GetSize());
}

Status CheckNoUniqueFields(const rapidjson::Document& extra) {
  for (const char* name : {"unique_key", "unique_until"}) {
    if (extra.HasMember(name)) {
      return Status::InvalidArgument(std::string("extra names ") + name +
                                     ", which only a unique push sets (Job::unique)");
    }
  }
  return Status::OK();
}

}  // namespace

Status CheckNoUniqueFields(std::string_view extra_json) {
  if (extra_json.find("\"unique_") == std::string_view::npos) return Status::OK();
  rapidjson::Document extra;
  extra.Parse(extra_json.data(), extra_json.size());
  // Not an object: EncodeJob reports it.
  if (extra.HasParseError() || !extra.IsObject()) return Status::OK();
  return CheckNoUniqueFields(extra);
}

Result<std::string> ExtraWithFlowFields(const Job& job, double created_at,
                                        const std::string& unique_key) {
  rapidjson::Document extra;
  extra.Parse(job.extra.data(), job.extra.size());
  if (extra.HasParseError() || !extra.IsObject()) {
    return Status::InvalidArgument("extra is not a JSON object");
  }
  std::string fields;
  auto add = [&](const char* name, const std::string& raw) -> Status {
    if (extra.HasMember(name)) {
      return Status::InvalidArgument(std::string("extra names ") + name +
                                     ", which the job's options set");
    }
    fields += ",\"" + std::string(name) + "\":" + raw;
    return Status::OK();
  };
  if (job.expires_at && job.expires_in) {
    return Status::InvalidArgument("give expires_at or expires_in, not both");
  }
  if (Status s = CheckNoUniqueFields(extra); !s.ok()) return s;
  if (job.expires_at || job.expires_in) {
    double value = job.expires_at ? *job.expires_at : *job.expires_in;
    if (!std::isfinite(value) || value <= 0) {
      return Status::InvalidArgument("the expiry must be a finite number > 0");
    }
    double at = job.expires_at ? value : created_at + value;
    if (Status s = add("expires_at", codec::FormatEpoch(at)); !s.ok()) return s;
  }
  if (job.unique) {
    if (Status s = add("unique_key", "\"" + unique_key + "\""); !s.ok()) return s;
    const char* until = job.unique->until == UniqueUntil::kStart ? "\"start\"" : "\"success\"";
    if (Status s = add("unique_until", until); !s.ok()) return s;
    if (job.unique->ttl.count() < 0) {
      return Status::InvalidArgument("the unique key's ttl must be >= 0");
    }
  }
  if (job.sequence) {
    if (Status s = CheckSequenceKey(job.sequence->key); !s.ok()) return s;
    if (Status s = add("sequence", JsonString(job.sequence->key)); !s.ok()) return s;
    if (job.sequence->release_on_retry) {
      if (Status s = add("sequence_release_on_retry", "true"); !s.ok()) return s;
    }
  }
  // Appended before the closing brace of extra's own text.
  std::string out = job.extra;
  size_t close = out.rfind('}');
  bool empty = extra.MemberCount() == 0;
  out.replace(close, 1, (empty ? fields.substr(1) : fields) + "}");
  return out;
}

Result<Job> JobWithFlowFields(const protocol::Keys& keys, const Job& job, double created_at,
                              std::string* unique_key) {
  if (job.unique) {
    Result<std::string> key = UniqueRedisKey(keys, job);
    if (!key.ok()) return key.status();
    *unique_key = std::move(key.value());
  }
  Result<std::string> extra = ExtraWithFlowFields(job, created_at, *unique_key);
  if (!extra.ok()) return extra.status();
  Job copy = job;
  copy.extra = std::move(extra.value());
  copy.expires_at.reset();
  copy.expires_in.reset();
  copy.unique.reset();
  copy.sequence.reset();
  return copy;
}

std::optional<Job> SwitchedSequence(const ClientOptions& options, const Job& job) {
  if (job.sequence) return std::nullopt;
  auto named = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  std::string key;
  if (named(options.sequence_classes, job.job_class)) {
    key = "class:" + job.job_class;
  } else if (named(options.sequence_queues, job.queue)) {
    key = "queue:" + job.queue;
  } else {
    return std::nullopt;
  }
  Job copy = job;
  copy.sequence = Sequence{std::move(key)};
  return copy;
}

std::optional<PushResult> UniquePushRefusal(const Result<protocol::PushUniqueReply>& reply,
                                            const std::string& jid, const std::string& key) {
  if (reply.ok() && reply->pushed) return std::nullopt;
  PushResult result;
  result.jid = jid;
  if (reply.ok()) {
    result.outcome = PushOutcome::kDuplicate;
    result.duplicate_of = reply->holder;
    result.reason = Status::Refused("unique key " + key + " is held by job " + result.duplicate_of);
    return result;
  }
  // Redis ran something and answered oddly: the job may be stored.
  result.outcome = PushOutcome::kNotConfirmed;
  result.reason = reply.status();
  return result;
}

}  // namespace reliableq::client

// Public (reliableq/job.h): the client's own checks, without Redis.
namespace reliableq {

Status CheckSequenceKey(std::string_view key) {
  if (key.empty() || key.size() > kMaxSequenceKeyBytes || !base::IsValidUtf8(key)) {
    return Status::InvalidArgument("the sequence key must be 1 to 512 bytes of UTF-8");
  }
  for (unsigned char c : key) {
    if (c < 0x20 || c == 0x7f) {
      return Status::InvalidArgument("the sequence key must not hold control characters");
    }
  }
  return Status::OK();
}

Status CheckJob(const Job& job) {
  // No rule depends on the time or on the key prefix.
  constexpr double kAnyTime = 1700000000;
  Job with_fields;
  const Job* encoded = &job;
  if (client::HasFlowFields(job)) {
    std::string unique_key;
    Result<Job> copy =
        client::JobWithFlowFields(protocol::Keys(), job, kAnyTime, &unique_key);
    if (!copy.ok()) return copy.status();
    with_fields = std::move(copy.value());
    encoded = &with_fields;
  } else if (Status s = client::CheckNoUniqueFields(job.extra); !s.ok()) {
    return s;
  }
  return codec::EncodeJob(*encoded, kAnyTime, kAnyTime).status();
}

}  // namespace reliableq
