// JSON as Ruby reads and writes it, for the job codec: the parse flags, the
// SAX and DOM entry points with the codec's own number conversion, what
// Ruby makes of a member name given twice, and the pieces of the
// JSON.generate-compatible writer that other codec files build on (the
// whole-value writer, ToJson, is json_writer.h's).
//
// Thread safety: pure functions; any thread.

#ifndef RELIABLEQ_CODEC_RUBY_JSON_H_
#define RELIABLEQ_CODEC_RUBY_JSON_H_

#include <rapidjson/document.h>
#include <rapidjson/encodedstream.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <system_error>
#include <type_traits>
#include <string>
#include <string_view>
#include <vector>

namespace reliableq::codec {

// Iterative parsing keeps a hostile, deeply nested payload from overflowing
// the stack before the depth check can refuse it. Numbers need no flag:
// ParseText and ParseDocument hand them over as the codec reads them (see
// NumberFilter).
inline constexpr unsigned kParseFlags = rapidjson::kParseIterativeFlag;

// The offset of the first NUL byte in `text`, or npos. JSON text never
// holds one (a string holds it as \u0000), but RapidJSON's streams take one
// for the end of the text, so that `{...}\0anything` would read as `{...}`:
// every parse in the codec refuses such a text first.
inline size_t NulOffset(std::string_view text) { return text.find('\0'); }

// Numbers. RapidJSON 1.1.0 converts some literals wrongly: with
// kParseFullPrecisionFlag a zero written with 23 or more decimals
// (0.00000000000000000000000) reads as a tiny nonzero number, its DiyFp path
// passing 0 to clz. So the codec converts every literal that is not a
// 64-bit integer itself, with std::from_chars: correctly rounded, as Ruby
// reads it (and faster than RapidJSON's full precision).

// True when the JSON number literal has no fraction and no exponent: Ruby
// reads it as an Integer, of any size.
inline bool IsIntegerLiteral(std::string_view literal) {
  // Not find_first_of, which calls memchr once per character.
  for (char c : literal) {
    if (c == '.' || c == 'e' || c == 'E') return false;
  }
  return true;
}

// The double the JSON number literal `literal` reads as: the nearest one
// (an integer too large for 64 bits as well), ±0 when it is too small for
// any. nullopt when it is beyond the largest double: such a literal is
// refused as kParseErrorNumberTooBig, as RapidJSON refuses some itself.
std::optional<double> NumberValue(std::string_view literal);

// Forwards the SAX events of a parse of `text` to `handler`, numbers as
// the codec reads them: as RawNumber literals when the parse takes numbers
// as strings, else as RapidJSON's integer events (exact) or as Double with
// the codec's value (see NumberValue), whatever RapidJSON made of the
// literal. A number beyond the double range stops the parse; too_big() then
// has its offset.
template <typename Handler, typename Stream>
class NumberFilter
    : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, NumberFilter<Handler, Stream>> {
 public:
  NumberFilter(std::string_view text, const Stream* stream, Handler* handler)
      : text_(text), stream_(stream), handler_(handler) {}

  std::optional<size_t> too_big() const { return too_big_; }

  bool Double(double) {
    // The stream stands just after the literal, and before it stands a
    // character no number has: ':', ',', '[', white space, or nothing.
    size_t end = stream_->Tell();
    size_t begin = end;
    while (begin > 0 && IsNumberCharacter(text_[begin - 1])) --begin;
    std::optional<double> value = NumberValue(text_.substr(begin, end - begin));
    if (!value) {
      too_big_ = begin;
      return false;
    }
    return handler_->Double(*value);
  }
  bool Int(int i) { return handler_->Int(i); }
  bool Uint(unsigned u) { return handler_->Uint(u); }
  bool Int64(int64_t i) { return handler_->Int64(i); }
  bool Uint64(uint64_t u) { return handler_->Uint64(u); }
  bool RawNumber(const char* text, rapidjson::SizeType length, bool copy) {
    std::string_view literal(text, length);
    if (!FitsInteger(literal) && !NumberValue(literal)) {
      too_big_ = stream_->Tell() - length;
      return false;
    }
    return handler_->RawNumber(text, length, copy);
  }
  bool Null() { return handler_->Null(); }
  bool Bool(bool b) { return handler_->Bool(b); }
  bool String(const char* text, rapidjson::SizeType length, bool copy) {
    return handler_->String(text, length, copy);
  }
  bool StartObject() { return handler_->StartObject(); }
  bool Key(const char* text, rapidjson::SizeType length, bool copy) {
    return handler_->Key(text, length, copy);
  }
  bool EndObject(rapidjson::SizeType members) { return handler_->EndObject(members); }
  bool StartArray() { return handler_->StartArray(); }
  bool EndArray(rapidjson::SizeType elements) { return handler_->EndArray(elements); }

 private:
  static bool IsNumberCharacter(char c) {
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
  }

  // True for an integer literal within int64 (negative) or uint64: one
  // RapidJSON sends as an integer event.
  static bool FitsInteger(std::string_view literal) {
    if (!IsIntegerLiteral(literal)) return false;
    const char* end = literal.data() + literal.size();
    if (literal.front() == '-') {
      int64_t value;
      auto [ptr, ec] = std::from_chars(literal.data(), end, value);
      return ec == std::errc() && ptr == end;
    }
    uint64_t value;
    auto [ptr, ec] = std::from_chars(literal.data(), end, value);
    return ec == std::errc() && ptr == end;
  }

  std::string_view text_;
  const Stream* stream_;
  Handler* handler_;
  std::optional<size_t> too_big_;
};

// Parses `text` with `kFlags` (kParseFlags, maybe with more) into a SAX
// `handler` that takes numbers as literals (RawNumber), as
// Reader::Parse<kFlags | kParseNumbersAsStringsFlag> would, except that a
// text with a NUL byte is refused before any event, with
// kParseErrorTermination at the offset of the first (see NulOffset), and a
// number beyond the double range with kParseErrorNumberTooBig at its
// offset.
template <unsigned kFlags, typename Handler>
rapidjson::ParseResult ParseText(std::string_view text, Handler* handler) {
  if (size_t nul = NulOffset(text); nul != std::string_view::npos) {
    return rapidjson::ParseResult(rapidjson::kParseErrorTermination, nul);
  }
  using Input = rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream>;
  rapidjson::MemoryStream stream(text.data(), text.size());
  Input input(stream);
  NumberFilter<Handler, Input> filter(text, &input, handler);
  rapidjson::Reader reader;
  rapidjson::ParseResult result =
      reader.Parse<kFlags | rapidjson::kParseNumbersAsStringsFlag>(input, filter);
  if (filter.too_big()) {
    return rapidjson::ParseResult(rapidjson::kParseErrorNumberTooBig, *filter.too_big());
  }
  return result;
}

// Parses `text` into `document`, refusing the texts ParseText refuses, for
// the same reasons; numbers as the codec reads them. On an error the
// document is left null.
template <unsigned kFlags>
rapidjson::ParseResult ParseDocument(std::string_view text, rapidjson::Document* document) {
  if (size_t nul = NulOffset(text); nul != std::string_view::npos) {
    return rapidjson::ParseResult(rapidjson::kParseErrorTermination, nul);
  }
  rapidjson::ParseResult result;
  auto generate = [text, &result](rapidjson::Document& handler) {
    using Input = rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream>;
    rapidjson::MemoryStream stream(text.data(), text.size());
    Input input(stream);
    NumberFilter<rapidjson::Document, Input> filter(text, &input, &handler);
    rapidjson::Reader reader;
    // Without kParseFullPrecisionFlag: RapidJSON's quick approximation,
    // which NumberFilter::Double replaces.
    result = reader.Parse<kFlags>(input, filter);
    if (filter.too_big()) {
      result = rapidjson::ParseResult(rapidjson::kParseErrorNumberTooBig, *filter.too_big());
    }
    return !result.IsError();
  };
  document->Populate(generate);
  return result;
}

// Ruby's JSON.parse makes each object a Hash, so a member name given again
// keeps the place where it first stood and takes the value it has last;
// JSON.generate then writes it once. Sidekiq reads every job that way.

// A member Ruby keeps: the index of the first member with its name, and of
// the last, whose value it has.
struct KeptMember {
  size_t first;
  size_t last;
};

// For the member names of one object, in order: false, and *kept left
// alone, when no name is given twice (the common case, checked without
// allocating for small objects); otherwise true, with *kept the members
// Ruby keeps, in its order.
bool RubyMembers(std::span<const std::string_view> names, std::vector<KeptMember>* kept);

// Makes the members of `object` (a JSON object) those Ruby's Hash would
// hold, in its order; the members of its values are left alone. No
// allocation when no name is given twice.
void KeepRubyMembers(rapidjson::Value* object);

// Appends `text` as a JSON string: raw UTF-8, '/' not escaped, control
// characters as \n \t ... or \u00xx. An encoded UTF-16 low surrogate (the
// three bytes ED B0..BF 80..BF) is written as its escape \udc00 ... \udfff:
// RapidJSON and Ruby read such an escape, alone, as those bytes, which are
// no UTF-8, and read the escape and the bytes as the same string; written
// as the escape, a text that was UTF-8 stays so.
void AppendString(std::string_view text, std::string* out);

// The code point (0xDC00 to 0xDFFF) of the encoded low surrogate that
// `text` starts with, or 0.
size_t EncodedLowSurrogate(std::string_view text);

// True when `text` holds an encoded low surrogate anywhere: what a \u
// escape of a lone low surrogate reads as.
bool HasEncodedLowSurrogate(std::string_view text);

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
