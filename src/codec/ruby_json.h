// JSON as Ruby reads and writes it, for the job codec: the parse flags and
// SAX entry point that read a text as the DOM parse does, and the pieces of
// the JSON.generate-compatible writer that other codec files build on. The
// whole-value writer (ToJson) and WideIntegers, declared in job_codec.h, are
// implemented in ruby_json.cc.
//
// Thread safety: pure functions; any thread.

#ifndef RELIABLEQ_CODEC_RUBY_JSON_H_
#define RELIABLEQ_CODEC_RUBY_JSON_H_

#include <rapidjson/encodedstream.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <charconv>
#include <string>
#include <string_view>

namespace reliableq::codec {

// Iterative parsing keeps a hostile, deeply nested payload from overflowing
// the stack before the depth check can refuse it.
inline constexpr unsigned kParseFlags =
    rapidjson::kParseFullPrecisionFlag | rapidjson::kParseIterativeFlag;

// The parse flags for a rewrite: those of the DOM parse it stands in for,
// with numbers handed over as their literals.
inline constexpr unsigned kRewriteFlags = kParseFlags | rapidjson::kParseNumbersAsStringsFlag;

// Parses `text` into `handler`, as Document::Parse<flags> would.
template <unsigned kFlags, typename Handler>
rapidjson::ParseResult ParseText(std::string_view text, Handler* handler) {
  rapidjson::MemoryStream stream(text.data(), text.size());
  rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> input(stream);
  rapidjson::Reader reader;
  return reader.Parse<kFlags>(input, *handler);
}

// Appends `text` as a JSON string: raw UTF-8, '/' not escaped, control
// characters as \n \t ... or \u00xx.
void AppendString(std::string_view text, std::string* out);

// Ruby's Float#to_s: the shortest digits that read back as the same double,
// in fixed notation when the decimal exponent is in [-4, 16), else as
// d.ddde+XX; there is always a '.'.
void AppendFloat(double value, std::string* out);

template <typename Int>
void AppendInteger(Int value, std::string* out) {
  char buf[24];
  auto result = std::to_chars(buf, buf + sizeof(buf), value);
  out->append(buf, result.ptr);
}

// A JSON number literal as Ruby writes what JSON.parse made of it: an
// integer literal, of any size, is an Integer and keeps its digits (-0 is
// 0); anything else is a Float.
void AppendNumberLiteral(std::string_view literal, std::string* out);

}  // namespace reliableq::codec

#endif  // RELIABLEQ_CODEC_RUBY_JSON_H_
