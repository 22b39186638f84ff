// Fuzz target: WideIntegers::Find on any JSON text, not only jobs.
//
// Properties: none are found in a text that does not parse (a raw NUL byte
// included); for one that does, nests at most kMaxJsonDepth and is read as
// Ruby reads it (ReferenceRubyMembers), ToJson with the literals found gives
// the payload rewriter's text: every integer beyond 64 bits, wherever it
// stands, keeps its digits, and nothing else changes.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.h"

using namespace reliableq;
using namespace reliableq::codec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  WideIntegers wide = WideIntegers::Find(text);

  rapidjson::Document doc;
  if (!fuzz::ReferenceParse(text, &doc)) {
    FUZZ_CHECK(wide.empty(), fuzz::Quote(text));
    return 0;
  }
  if (!fuzz::ReferenceRubyMembers(doc, kMaxJsonDepth)) return 0;
  std::string exact = ToJson(doc, wide);
  std::optional<std::string> rewritten = fuzz::Rewrite(text);
  FUZZ_CHECK(rewritten.has_value());
  FUZZ_CHECK(exact == *rewritten, "DOM " + exact + "\nrewriter " + *rewritten);
  return 0;
}
