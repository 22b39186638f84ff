// Fuzz target: DecodeJob and what a handler reads through JobView.
//
// Properties: DecodeJob accepts exactly the payloads a reference model
// accepts (a JSON object without raw NUL bytes, nesting at most
// kMaxJsonDepth, whose last "class" is a string and last "args" an array);
// a refusal is kCorruption with a one-line reason, naming the offset of a
// NUL byte; the document holds what Ruby's JSON.parse holds (a name once,
// where it first stands, with its last value, at every level), and the
// JobView accessors read it.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "reliableq/handler.h"

using namespace reliableq;
using namespace reliableq::codec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view raw(reinterpret_cast<const char*>(data), size);
  Result<DecodedJob> decoded = DecodeJob(raw);

  // The reference: a plain DOM parse, then Ruby's view of it.
  rapidjson::Document reference;
  bool expect = fuzz::ReferenceParse(raw, &reference) && reference.IsObject() &&
                fuzz::ReferenceRubyMembers(reference, kMaxJsonDepth);
  if (expect) {
    auto job_class = reference.FindMember("class");
    auto args = reference.FindMember("args");
    expect = job_class != reference.MemberEnd() && job_class->value.IsString() &&
             args != reference.MemberEnd() && args->value.IsArray();
  }
  FUZZ_CHECK(decoded.ok() == expect, decoded.status().ToString() + " for " + fuzz::Quote(raw));

  if (!decoded.ok()) {
    const Status& status = decoded.status();
    FUZZ_CHECK(status.IsCorruption(), status.ToString());
    FUZZ_CHECK(!status.message().empty());
    FUZZ_CHECK(status.message().find('\n') == std::string::npos, status.ToString());
    size_t nul = raw.find('\0');
    if (nul != std::string_view::npos) {
      FUZZ_CHECK(status.message().find("NUL byte at offset " + std::to_string(nul)) !=
                     std::string::npos,
                 status.ToString());
    }
    return 0;
  }

  const rapidjson::Document& doc = decoded->document;
  FUZZ_CHECK(fuzz::NoDuplicateNames(doc), fuzz::Quote(raw));
  std::string json = ToJson(doc);
  FUZZ_CHECK(json == ToJson(reference), "codec " + json + "\nreference " + ToJson(reference));

  JobView job(raw, "fuzz", doc);
  FUZZ_CHECK(job.raw() == raw);
  FUZZ_CHECK(job.queue() == "fuzz");
  const rapidjson::Value& job_class = reference["class"];
  FUZZ_CHECK(job.job_class() ==
             std::string_view(job_class.GetString(), job_class.GetStringLength()));
  FUZZ_CHECK(job.args().IsArray());
  FUZZ_CHECK(ToJson(job.args()) == ToJson(reference["args"]));
  auto jid = reference.FindMember("jid");
  if (jid != reference.MemberEnd() && jid->value.IsString()) {
    FUZZ_CHECK(job.jid() == std::string_view(jid->value.GetString(), jid->value.GetStringLength()));
  } else {
    FUZZ_CHECK(job.jid().empty());
  }
  auto count = reference.FindMember("retry_count");
  if (count != reference.MemberEnd() && count->value.IsInt()) {
    FUZZ_CHECK(job.retry_count() == count->value.GetInt());
  } else {
    FUZZ_CHECK(!job.retry_count().has_value());
  }
  FUZZ_CHECK(&job.payload() == &doc);
  return 0;
}
