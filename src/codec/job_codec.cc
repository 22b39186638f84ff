// job_codec.h: EncodeJob, DecodeJob, RecordFailure and FormatEpoch, built
// from the other parts of src/codec/.

#include "codec/job_codec.h"

#include <rapidjson/error/en.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include "base/utf8.h"
#include "codec/backtrace.h"
#include "codec/payload_rewriter.h"
#include "codec/ruby_json.h"

namespace reliableq::codec {

namespace {

using codec::AppendFloat;
using codec::AppendInteger;
using codec::AppendString;
using codec::BacktraceLines;
using codec::CompressBacktrace;
using base::IsValidUtf8;
using codec::KeepRubyMembers;
using codec::kParseFlags;
using codec::ParseDocument;
using codec::ParseText;
using codec::Rewriter;
using base::Scrub;

// True when `value` has at most `levels` levels of arrays and objects; its
// objects then hold the members Ruby reads (KeepRubyMembers). Recursion
// stops at the limit, so this is safe on any input.
bool WithinDepthAsRuby(rapidjson::Value& value, int levels) {
  if (value.IsArray()) {
    if (levels <= 0) return false;
    for (auto& element : value.GetArray()) {
      if (!WithinDepthAsRuby(element, levels - 1)) return false;
    }
  } else if (value.IsObject()) {
    if (levels <= 0) return false;
    if (value.MemberCount() > 1) KeepRubyMembers(&value);
    for (auto& member : value.GetObject()) {
      if (!WithinDepthAsRuby(member.value, levels - 1)) return false;
    }
  }
  return true;
}

// Timestamps inside payloads: microsecond precision as FormatEpoch, written
// as Ruby writes the float, so that Sidekiq's re-dump gives the same bytes.
double RoundToMicros(double seconds) { return std::strtod(FormatEpoch(seconds).c_str(), nullptr); }

void AppendTimestamp(double seconds, std::string* out) {
  // Formatting a float exactly as Ruby does costs more than the rest of a
  // job's JSON; the jobs of one PushBulk share their timestamps, so the
  // last text is kept (per thread: encoding runs on callers' threads).
  thread_local double last_seconds = std::numeric_limits<double>::quiet_NaN();
  thread_local std::string last_text;
  if (seconds != last_seconds) {
    last_text.clear();
    AppendFloat(RoundToMicros(seconds), &last_text);
    last_seconds = seconds;
  }
  out->append(last_text);
}

constexpr std::string_view kReservedFields[] = {"class", "args",       "queue",       "retry",
                                                "jid",   "created_at", "enqueued_at", "at"};

std::string NulByteText(size_t offset) {
  return "a NUL byte at offset " + std::to_string(offset) +
         ", which JSON text cannot hold (a string holds one as \\u0000)";
}

// Why `json` does not parse: "Invalid value at offset 3" (RapidJSON's
// message without its full stop) or NulByteText (see codec::ParseText).
std::string ParseErrorText(std::string_view json, rapidjson::ParseResult result) {
  if (result.Offset() < json.size() && json[result.Offset()] == '\0') {
    return NulByteText(result.Offset());
  }
  std::string text = rapidjson::GetParseError_En(result.Code());
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text + " at offset " + std::to_string(result.Offset());
}

const char* TypeWord(rapidjson::Type type) {
  switch (type) {
    case rapidjson::kNullType: return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType: return "a boolean";
    case rapidjson::kObjectType: return "an object";
    case rapidjson::kArrayType: return "an array";
    case rapidjson::kStringType: return "a string";
    case rapidjson::kNumberType: return "a number";
  }
  return "something else";
}

const char* TypeWord(const rapidjson::Value& value) { return TypeWord(value.GetType()); }

// Rewrites one field of a Job given as JSON text (args, extra) into
// `rewriter`. Invalid UTF-8 is refused here, and so is an escape of a lone
// surrogate, which is no character: Sidekiq could not write the job again.
Status RewriteField(std::string_view name, const std::string& text, Rewriter* rewriter) {
  rapidjson::ParseResult parsed =
      ParseText<kParseFlags | rapidjson::kParseValidateEncodingFlag>(text, rewriter);
  if (parsed.IsError()) {
    return Status::InvalidArgument(std::string(name) + " is not valid JSON: " +
                                   ParseErrorText(text, parsed));
  }
  if (rewriter->lone_surrogate()) {
    return Status::InvalidArgument(std::string(name) +
                                   " holds a \\u escape of a lone UTF-16 surrogate, which is"
                                   " no character");
  }
  return Status::OK();
}

bool IsPrintableAscii(std::string_view text) {
  for (char c : text) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace

std::string FormatEpoch(double seconds) {
  // As printf's "%.6f" (to_chars with a precision is specified so), several
  // times faster: every record and failure writes a few of these. The
  // largest double has 309 digits before the point.
  char buf[400];
  auto [end, error] = std::to_chars(buf, buf + sizeof(buf), seconds, std::chars_format::fixed, 6);
  return error == std::errc() ? std::string(buf, end) : std::string();
}

Result<std::string> EncodeJob(const Job& job, double created_at, std::optional<double> enqueued_at,
                              std::string* jid) {
  if (job.job_class.empty()) return Status::InvalidArgument("the job class is empty");
  if (!IsValidUtf8(job.job_class)) return Status::InvalidArgument("the job class is not UTF-8");
  if (Status queue = CheckQueueName(job.queue); !queue.ok()) return queue;
  if (!job.jid.empty() && !IsPrintableAscii(job.jid)) {
    return Status::InvalidArgument("the jid must be printable ASCII");
  }
  std::string retry = job.retry.ToJson();
  if (!Retry::Parse(retry).ok()) {
    return Status::InvalidArgument("retry must be true, false or a non-negative count, not " +
                                   retry);
  }
  if (!std::isfinite(created_at) || (enqueued_at && !std::isfinite(*enqueued_at))) {
    return Status::InvalidArgument("the job's timestamps must be finite");
  }

  // The job object is the first level, args the second.
  Rewriter args(kMaxJsonDepth - 1);
  Status s = RewriteField("args", job.args, &args);
  if (!s.ok()) return s;
  if (args.root_type() != rapidjson::kArrayType) {
    return Status::InvalidArgument(std::string("args must be a JSON array, not ") +
                                   TypeWord(args.root_type()));
  }
  if (args.too_deep()) {
    return Status::InvalidArgument("args nest deeper than " + std::to_string(kMaxJsonDepth) +
                                   " levels");
  }
  // Its members become members of the job object: the same depth limit.
  Rewriter extra(kMaxJsonDepth);
  s = RewriteField("extra", job.extra, &extra);
  if (!s.ok()) return s;
  if (extra.root_type() != rapidjson::kObjectType) {
    return Status::InvalidArgument(std::string("extra must be a JSON object, not ") +
                                   TypeWord(extra.root_type()));
  }
  for (const Rewriter::Member& member : extra.members()) {
    for (std::string_view reserved : kReservedFields) {
      if (member.name == reserved) {
        return Status::InvalidArgument("extra may not set \"" + member.name +
                                       "\": the client sets it");
      }
    }
    if (member.too_deep) {
      return Status::InvalidArgument("extra field \"" + member.name + "\" nests deeper than " +
                                     std::to_string(kMaxJsonDepth) + " levels");
    }
  }

  std::string out;
  out.reserve(96 + job.job_class.size() + job.args.size() + job.queue.size() + job.extra.size());
  out += "{\"class\":";
  AppendString(job.job_class, &out);
  out += ",\"args\":";
  out += args.json();
  out += ",\"queue\":";
  AppendString(job.queue, &out);
  out += ",\"retry\":";
  out += retry;
  out += ",\"jid\":";
  std::string new_jid = job.jid.empty() ? NewJid() : job.jid;
  AppendString(new_jid, &out);
  out += ",\"created_at\":";
  AppendTimestamp(created_at, &out);
  if (enqueued_at) {
    out += ",\"enqueued_at\":";
    AppendTimestamp(*enqueued_at, &out);
  }
  // The members of extra, without its braces.
  const std::string& members = extra.json();
  if (members.size() > 2) {
    out.push_back(',');
    out.append(members, 1, members.size() - 2);
  }
  out.push_back('}');
  if (jid != nullptr) *jid = std::move(new_jid);
  return out;
}

Result<DecodedJob> DecodeJob(std::string_view raw) {
  // Room for the DOM of a typical payload in one chunk: a few nodes per
  // value and a copy of every string.
  DecodedJob job(std::max<size_t>(1024, 2 * raw.size()));
  rapidjson::Document& doc = job.document;
  rapidjson::ParseResult parsed = ParseDocument<kParseFlags>(raw, &doc);
  if (parsed.IsError()) {
    return Status::Corruption("job JSON does not parse: " + ParseErrorText(raw, parsed));
  }
  if (!doc.IsObject()) {
    return Status::Corruption(std::string("job JSON is ") + TypeWord(doc) + ", not an object");
  }
  // Each name once, with its last value, as Sidekiq reads the job; nested
  // objects below.
  KeepRubyMembers(&doc);
  auto job_class = doc.FindMember("class");
  if (job_class == doc.MemberEnd() || !job_class->value.IsString()) {
    return Status::Corruption("job JSON has no string \"class\"");
  }
  auto args = doc.FindMember("args");
  if (args == doc.MemberEnd() || !args->value.IsArray()) {
    return Status::Corruption("job JSON has no array \"args\"");
  }
  for (auto& member : doc.GetObject()) {
    if (!WithinDepthAsRuby(member.value, kMaxJsonDepth - 1)) {
      return Status::Corruption("job JSON nests deeper than " + std::to_string(kMaxJsonDepth) +
                                " levels");
    }
  }
  return job;
}

std::string QueueOf(const rapidjson::Value& job) {
  auto it = job.FindMember("queue");
  if (it == job.MemberEnd() || !it->value.IsString() || it->value.GetStringLength() == 0) {
    return "default";
  }
  return {it->value.GetString(), it->value.GetStringLength()};
}

Result<std::string> RecordFailure(std::string_view raw, const FailureInfo& info) {
  Result<DecodedJob> decoded = DecodeJob(raw);
  if (!decoded.ok()) return decoded.status();
  const rapidjson::Document& doc = decoded->document;

  // Checked first, so that a bad retry_count changes nothing.
  std::optional<int64_t> retry_count;
  auto count = doc.FindMember("retry_count");
  if (count != doc.MemberEnd() && !count->value.IsNull() && !count->value.IsFalse()) {
    const rapidjson::Value& v = count->value;
    if (v.IsInt64() && v.GetInt64() == INT64_MAX) {
      return Status::Corruption("job's retry_count is too large to count one more failure");
    } else if (v.IsInt64()) {
      retry_count = v.GetInt64();
    } else if (v.IsDouble() && std::trunc(v.GetDouble()) == v.GetDouble() &&
               std::fabs(v.GetDouble()) < 9.0e15) {
      retry_count = static_cast<int64_t>(v.GetDouble());
    } else {
      return Status::Corruption(std::string("job's retry_count is ") + TypeWord(v) +
                                ", not an integer");
    }
  }

  // The DOM only answers questions; the payload is written again from its
  // text, so that every value it does not set keeps its literal.
  Rewriter rewriter(kMaxJsonDepth);
  auto set_string = [&rewriter](const char* name, std::string_view text) {
    std::string json;
    AppendString(text, &json);
    rewriter.SetMember(name, std::move(json));
  };
  std::string_view queue = info.fetched_queue;
  auto retry_queue = doc.FindMember("retry_queue");
  if (retry_queue != doc.MemberEnd() && retry_queue->value.IsString() &&
      retry_queue->value.GetStringLength() > 0) {
    queue = {retry_queue->value.GetString(), retry_queue->value.GetStringLength()};
  }
  set_string("queue", queue);
  set_string("error_message", Scrub(info.error_message, kMaxErrorMessageChars));
  set_string("error_class", Scrub(info.error_class));
  std::string now;
  AppendTimestamp(info.now, &now);
  std::string next_count;
  AppendInteger(retry_count ? *retry_count + 1 : int64_t{0}, &next_count);
  if (info.discarded) rewriter.SetMember("discarded_at", now);
  rewriter.SetMember(retry_count ? "retried_at" : "failed_at", std::move(now));
  rewriter.SetMember("retry_count", std::move(next_count));

  auto backtrace = doc.FindMember("backtrace");
  if (backtrace != doc.MemberEnd() && !info.backtrace.empty()) {
    std::optional<size_t> lines = BacktraceLines(backtrace->value, info.backtrace.size());
    if (lines) {
      Result<std::string> compressed = CompressBacktrace(info.backtrace, *lines);
      if (!compressed.ok()) return compressed.status();
      set_string("error_backtrace", *compressed);
    }
  }

  rapidjson::ParseResult parsed = ParseText<kParseFlags>(raw, &rewriter);
  if (parsed.IsError()) {  // DecodeJob read the same text with the same flags
    return Status::Corruption("job JSON does not parse: " + ParseErrorText(raw, parsed));
  }
  return std::move(rewriter.json());
}

Result<std::string> RecordSnooze(std::string_view raw, int64_t snooze_count) {
  Rewriter rewriter(kMaxJsonDepth);
  std::string count;
  AppendInteger(snooze_count, &count);
  rewriter.SetMember("snooze_count", std::move(count));
  rapidjson::ParseResult parsed = ParseText<kParseFlags>(raw, &rewriter);
  if (parsed.IsError()) {
    return Status::Corruption("job JSON does not parse: " + ParseErrorText(raw, parsed));
  }
  return std::move(rewriter.json());
}

}  // namespace reliableq::codec
