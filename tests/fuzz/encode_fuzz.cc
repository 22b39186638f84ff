// Fuzz target: EncodeJob from fuzzed fields.
//
// An input that decodes as a job gives the fields of a Job (class, queue,
// jid, retry, args and the other fields as extra); any other input is cut
// into fields, args and extra as arbitrary text. Properties: EncodeJob
// accepts exactly the jobs a reference model accepts; its output is valid
// UTF-8, decodes, holds the fields given (args and extra as Ruby reads
// them), and is what Ruby would write again: a fixed point of the payload
// rewriter and of ToJson with its wide integers.

#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/utf8.h"
#include "fuzz_support.h"

using namespace reliableq;
using namespace reliableq::codec;
using namespace reliableq::base;

namespace {

struct Input {
  Job job;
  double created_at = 1700000000.5;
  std::optional<double> enqueued_at;
};

std::string Text(const rapidjson::Value& value) {
  return {value.GetString(), value.GetStringLength()};
}

// Fields taken from a payload that decodes.
Input FromPayload(const rapidjson::Document& doc) {
  Input in;
  in.job.job_class = Text(doc["class"]);
  in.job.args = ToJson(doc["args"]);
  auto queue = doc.FindMember("queue");
  if (queue != doc.MemberEnd() && queue->value.IsString()) in.job.queue = Text(queue->value);
  auto jid = doc.FindMember("jid");
  if (jid != doc.MemberEnd() && jid->value.IsString()) in.job.jid = Text(jid->value);
  auto retry = doc.FindMember("retry");
  if (retry != doc.MemberEnd()) {
    if (retry->value.IsFalse()) in.job.retry = Retry::Disabled();
    if (retry->value.IsInt()) in.job.retry = Retry::Times(retry->value.GetInt());
  }
  auto created_at = doc.FindMember("created_at");
  if (created_at != doc.MemberEnd() && created_at->value.IsNumber()) {
    in.created_at = created_at->value.GetDouble();
  }
  auto enqueued_at = doc.FindMember("enqueued_at");
  if (enqueued_at != doc.MemberEnd() && enqueued_at->value.IsNumber()) {
    in.enqueued_at = enqueued_at->value.GetDouble();
  }
  std::string extra = "{";
  for (const auto& member : doc.GetObject()) {
    std::string_view name(member.name.GetString(), member.name.GetStringLength());
    if (name == "class" || name == "args" || name == "queue" || name == "jid" ||
        name == "retry" || name == "created_at" || name == "enqueued_at" || name == "at") {
      continue;
    }
    if (extra.size() > 1) extra += ',';
    extra += ToJson(member.name) + ":" + ToJson(member.value);
  }
  in.job.extra = extra + "}";
  return in;
}

// Fields cut from any bytes.
Input FromBytes(const uint8_t* data, size_t size) {
  FuzzedDataProvider provider(data, size);
  Input in;
  in.job.job_class = provider.ConsumeRandomLengthString(40);
  in.job.queue = provider.ConsumeRandomLengthString(20);
  in.job.jid = provider.ConsumeRandomLengthString(30);
  switch (provider.ConsumeIntegralInRange(0, 2)) {
    case 0: in.job.retry = Retry::Enabled(); break;
    case 1: in.job.retry = Retry::Disabled(); break;
    default: in.job.retry = Retry::Times(provider.ConsumeIntegral<int>());
  }
  in.created_at = provider.ConsumeFloatingPoint<double>();
  if (provider.ConsumeBool()) in.enqueued_at = provider.ConsumeFloatingPoint<double>();
  in.job.args = provider.ConsumeRandomLengthString(size);
  in.job.extra = provider.ConsumeRemainingBytesAsString();
  return in;
}

bool WithinDepth(const rapidjson::Value& value, int levels) {
  if (!value.IsArray() && !value.IsObject()) return true;
  if (levels <= 0) return false;
  if (value.IsArray()) {
    for (const auto& element : value.GetArray()) {
      if (!WithinDepth(element, levels - 1)) return false;
    }
  } else {
    for (const auto& member : value.GetObject()) {
      if (!WithinDepth(member.value, levels - 1)) return false;
    }
  }
  return true;
}

// True when every string and member name in `value` (which nests within
// the limit) is UTF-8.
bool StringsAreUtf8(const rapidjson::Value& value) {
  if (value.IsString()) return base::IsValidUtf8({value.GetString(), value.GetStringLength()});
  if (value.IsArray()) {
    for (const auto& element : value.GetArray()) {
      if (!StringsAreUtf8(element)) return false;
    }
  } else if (value.IsObject()) {
    for (const auto& member : value.GetObject()) {
      if (!StringsAreUtf8(member.name) || !StringsAreUtf8(member.value)) return false;
    }
  }
  return true;
}

// Parses a field given as JSON text as EncodeJob must accept it (raw
// UTF-8 only, escapes of lone surrogates refused as not characters), read
// as Ruby reads it; false when it must be refused.
bool ParseField(const std::string& text, int levels, rapidjson::Document* doc) {
  if (!fuzz::ReferenceParse<rapidjson::kParseValidateEncodingFlag>(text, doc) ||
      !WithinDepth(*doc, levels)) {
    return false;
  }
  // Strings whose \u escapes made something that is not UTF-8.
  if (!StringsAreUtf8(*doc)) return false;
  return fuzz::ReferenceRubyMembers(*doc, levels);
}

bool IsPrintableAscii(std::string_view text) {
  for (char c : text) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view raw(reinterpret_cast<const char*>(data), size);
  Result<DecodedJob> payload = DecodeJob(raw);
  Input in = payload.ok() ? FromPayload(payload->document) : FromBytes(data, size);
  const Job& job = in.job;

  std::string jid;
  Result<std::string> out = EncodeJob(job, in.created_at, in.enqueued_at, &jid);

  // The reference.
  rapidjson::Document args, extra;
  bool expect = !job.job_class.empty() && base::IsValidUtf8(job.job_class) &&
                !job.queue.empty() && base::IsValidUtf8(job.queue) &&
                IsPrintableAscii(job.jid) && Retry::Parse(job.retry.ToJson()).ok() &&
                std::isfinite(in.created_at) &&
                (!in.enqueued_at || std::isfinite(*in.enqueued_at)) &&
                ParseField(job.args, kMaxJsonDepth - 1, &args) && args.IsArray() &&
                ParseField(job.extra, kMaxJsonDepth, &extra) && extra.IsObject();
  if (expect) {
    for (const char* reserved :
         {"class", "args", "queue", "retry", "jid", "created_at", "enqueued_at", "at"}) {
      if (extra.HasMember(reserved)) expect = false;
    }
  }
  FUZZ_CHECK(out.ok() == expect, out.status().ToString() + " for class " +
                                     fuzz::Quote(job.job_class) + " queue " +
                                     fuzz::Quote(job.queue) + " jid " + fuzz::Quote(job.jid) +
                                     " args " + fuzz::Quote(job.args) + " extra " +
                                     fuzz::Quote(job.extra));
  if (!out.ok()) {
    FUZZ_CHECK(out.status().IsInvalidArgument(), out.status().ToString());
    FUZZ_CHECK(!out.status().message().empty());
    FUZZ_CHECK(out.status().message().find('\n') == std::string::npos, out.status().ToString());
    return 0;
  }

  FUZZ_CHECK(base::IsValidUtf8(*out), fuzz::Quote(*out));
  Result<DecodedJob> decoded = DecodeJob(*out);
  FUZZ_CHECK(decoded.ok(), decoded.status().ToString() + " for " + fuzz::Quote(*out));
  const rapidjson::Document& doc = decoded->document;
  FUZZ_CHECK(Text(doc["class"]) == job.job_class);
  FUZZ_CHECK(Text(doc["queue"]) == job.queue);
  FUZZ_CHECK(Text(doc["jid"]) == jid);
  if (!job.jid.empty()) FUZZ_CHECK(jid == job.jid);
  FUZZ_CHECK(ToJson(doc["retry"]) == job.retry.ToJson());
  FUZZ_CHECK(ToJson(doc["args"]) == ToJson(args), ToJson(doc["args"]) + " vs " + ToJson(args));
  FUZZ_CHECK(doc["created_at"].IsDouble());
  FUZZ_CHECK(doc.HasMember("enqueued_at") == in.enqueued_at.has_value());
  for (const auto& member : extra.GetObject()) {
    auto it = doc.FindMember(member.name);
    FUZZ_CHECK(it != doc.MemberEnd());
    FUZZ_CHECK(ToJson(it->value) == ToJson(member.value));
  }
  FUZZ_CHECK(fuzz::Rewrite(*out) == *out, "not a fixed point: " + *out);
  FUZZ_CHECK(ToJson(doc, WideIntegers::Find(*out)) == *out);
  return 0;
}
