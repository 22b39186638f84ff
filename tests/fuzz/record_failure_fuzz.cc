// Fuzz target: RecordFailure with a fixed failure.
//
// Properties: RecordFailure accepts exactly the payloads DecodeJob accepts
// whose last retry_count is absent, null, false or an integer; its output
// is, byte for byte, the decoded document with Sidekiq's retry bookkeeping
// applied the DOM way (each field set where its name first stands, or
// appended) and written with the payload's wide integers: so every other
// field keeps its bytes. The output decodes, is valid UTF-8 when the
// payload was, and takes a second failure.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "codec/backtrace.h"
#include "base/utf8.h"
#include "fuzz_support.h"

using namespace reliableq;
using namespace reliableq::codec;
using namespace reliableq::base;

namespace {

FailureInfo Failure() {
  FailureInfo info;
  info.error_class = "Net::ReadTimeout\xff";
  info.error_message = std::string("read timed out \"\\ caf\xc3\xa9 \xe2\x82 \0 \n", 30);
  info.fetched_queue = "fetched";
  info.now = 1700000000.25;
  info.backtrace = {"app/jobs/hard_job.rb:12:in `perform'", "lib/x\xff.rb:1", "c.rb:3"};
  return info;
}

void Set(rapidjson::Document* doc, const char* name, rapidjson::Value value) {
  auto it = doc->FindMember(name);
  if (it != doc->MemberEnd()) {
    it->value = value;
  } else {
    doc->AddMember(rapidjson::Value(name, doc->GetAllocator()), value, doc->GetAllocator());
  }
}

void SetString(rapidjson::Document* doc, const char* name, const std::string& text) {
  Set(doc, name, rapidjson::Value(text.data(), static_cast<rapidjson::SizeType>(text.size()),
                                  doc->GetAllocator()));
}

// What RecordFailure must write for `raw`, or nullopt when it must refuse.
std::optional<std::string> Expected(std::string_view raw, const rapidjson::Document& decoded,
                                    const FailureInfo& info) {
  rapidjson::Document doc;
  doc.CopyFrom(decoded, doc.GetAllocator());
  std::optional<int64_t> count;
  auto it = doc.FindMember("retry_count");
  if (it != doc.MemberEnd() && !it->value.IsNull() && !it->value.IsFalse()) {
    const rapidjson::Value& v = it->value;
    if (v.IsInt64() && v.GetInt64() < INT64_MAX) {
      count = v.GetInt64();
    } else if (v.IsDouble() && std::trunc(v.GetDouble()) == v.GetDouble() &&
               std::fabs(v.GetDouble()) < 9.0e15) {
      count = static_cast<int64_t>(v.GetDouble());
    } else {
      return std::nullopt;
    }
  }
  std::string queue = info.fetched_queue;
  auto retry_queue = doc.FindMember("retry_queue");
  if (retry_queue != doc.MemberEnd() && retry_queue->value.IsString() &&
      retry_queue->value.GetStringLength() > 0) {
    queue.assign(retry_queue->value.GetString(), retry_queue->value.GetStringLength());
  }
  SetString(&doc, "queue", queue);
  SetString(&doc, "error_message", base::Scrub(info.error_message, kMaxErrorMessageChars));
  SetString(&doc, "error_class", base::Scrub(info.error_class));
  Set(&doc, count ? "retried_at" : "failed_at", rapidjson::Value(info.now));
  Set(&doc, "retry_count", rapidjson::Value(static_cast<int64_t>(count ? *count + 1 : 0)));
  auto backtrace = doc.FindMember("backtrace");
  if (backtrace != doc.MemberEnd()) {
    std::optional<size_t> lines = codec::BacktraceLines(backtrace->value, info.backtrace.size());
    if (lines) {
      SetString(&doc, "error_backtrace", *codec::CompressBacktrace(info.backtrace, *lines));
    }
  }
  return ToJson(doc, WideIntegers::Find(raw));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const FailureInfo info = Failure();
  std::string_view raw(reinterpret_cast<const char*>(data), size);
  Result<std::string> out = RecordFailure(raw, info);
  Result<DecodedJob> decoded = DecodeJob(raw);
  if (!decoded.ok()) {
    FUZZ_CHECK(!out.ok(), "accepted what DecodeJob refuses: " + fuzz::Quote(raw));
    FUZZ_CHECK(out.status().IsCorruption(), out.status().ToString());
    return 0;
  }
  std::optional<std::string> expected = Expected(raw, decoded->document, info);
  if (!expected) {
    FUZZ_CHECK(!out.ok(), "accepted a bad retry_count: " + fuzz::Quote(raw));
    FUZZ_CHECK(out.status().IsCorruption(), out.status().ToString());
    FUZZ_CHECK(out.status().message().find("retry_count") != std::string::npos,
               out.status().ToString());
    return 0;
  }
  FUZZ_CHECK(out.ok(), out.status().ToString() + " for " + fuzz::Quote(raw));
  FUZZ_CHECK(*out == *expected, "got      " + *out + "\nexpected " + *expected);

  Result<DecodedJob> failed = DecodeJob(*out);
  FUZZ_CHECK(failed.ok(), failed.status().ToString());
  if (base::IsValidUtf8(raw)) {
    FUZZ_CHECK(base::IsValidUtf8(*out), fuzz::Quote(raw) + " became " + fuzz::Quote(*out));
  }
  FUZZ_CHECK(fuzz::Rewrite(*out) == *out, "not a fixed point: " + *out);

  int64_t count = failed->document["retry_count"].GetInt64();
  Result<std::string> twice = RecordFailure(*out, info);
  if (count < INT64_MAX) {
    FUZZ_CHECK(twice.ok(), twice.status().ToString());
    Result<DecodedJob> again = DecodeJob(*twice);
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(again->document["retry_count"].GetInt64() == count + 1);
  }
  return 0;
}
