// Fuzz target: a decoded payload written again, by both writers.
//
// Properties, for a payload DecodeJob accepts:
// - ToJson of the document decodes again to the same ToJson text (the
//   writer's output is a fixed point), and is valid UTF-8 when the payload
//   was;
// - written with its wide integers (ToJson with WideIntegers::Find), the
//   document gives the same text as the payload rewriter, which works on
//   the text without a DOM; that text is a fixed point of the rewriter and
//   decodes to the same document.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/utf8.h"
#include "fuzz_support.h"

using namespace reliableq;
using namespace reliableq::codec;
using namespace reliableq::base;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view raw(reinterpret_cast<const char*>(data), size);
  Result<DecodedJob> decoded = DecodeJob(raw);
  if (!decoded.ok()) return 0;
  const rapidjson::Document& doc = decoded->document;

  std::string json = ToJson(doc);
  Result<DecodedJob> again = DecodeJob(json);
  FUZZ_CHECK(again.ok(), again.status().ToString() + " for " + fuzz::Quote(json));
  FUZZ_CHECK(ToJson(again->document) == json,
             "first " + json + "\nsecond " + ToJson(again->document));
  if (base::IsValidUtf8(raw)) {
    FUZZ_CHECK(base::IsValidUtf8(json), fuzz::Quote(raw) + " became " + fuzz::Quote(json));
  }

  std::string exact = ToJson(doc, WideIntegers::Find(raw));
  std::optional<std::string> rewritten = fuzz::Rewrite(raw);
  FUZZ_CHECK(rewritten.has_value());
  FUZZ_CHECK(exact == *rewritten, "DOM " + exact + "\nrewriter " + *rewritten);
  FUZZ_CHECK(fuzz::Rewrite(exact) == exact);
  Result<DecodedJob> exact_decoded = DecodeJob(exact);
  FUZZ_CHECK(exact_decoded.ok(), exact_decoded.status().ToString());
  FUZZ_CHECK(ToJson(exact_decoded->document) == json);
  return 0;
}
