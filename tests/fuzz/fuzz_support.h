// What the codec's fuzz targets share: a check that stops the run with a
// message (libFuzzer then keeps the input as a crash file), and reference
// models of what the codec must do, written plainly, for differential
// checks. Built by tools/fuzz with clang's libFuzzer; see tests/fuzz/README.md.

#ifndef RELIABLEQ_TESTS_FUZZ_FUZZ_SUPPORT_H_
#define RELIABLEQ_TESTS_FUZZ_FUZZ_SUPPORT_H_

#include <locale.h>
#include <rapidjson/document.h>
#include <stdlib.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "codec/payload_rewriter.h"
#include "codec/ruby_json.h"
#include "codec/job_codec.h"

namespace reliableq::fuzz {

[[noreturn]] inline void Fail(const char* file, int line, const char* what,
                              const std::string& detail) {
  std::fprintf(stderr, "\n%s:%d: property failed: %s\n%s\n", file, line, what, detail.c_str());
  std::abort();
}

// FUZZ_CHECK(condition) or FUZZ_CHECK(condition, detail): detail is a
// std::string, built only when the check fails.
#define FUZZ_CHECK(condition, ...)                                                      \
  do {                                                                                  \
    if (!(condition)) ::reliableq::fuzz::Fail(__FILE__, __LINE__, #condition,           \
                                              ::reliableq::fuzz::Detail(__VA_ARGS__)); \
  } while (0)

inline std::string Detail() { return {}; }
inline std::string Detail(const std::string& detail) { return detail; }

// A byte string as a C string literal, for messages.
inline std::string Quote(std::string_view bytes) {
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  return out + "\"";
}

// The JSON text DecodeJob reads, written again by the payload rewriter with
// nothing replaced: the codec's text-to-text path. nullopt when it does not
// parse.
inline std::optional<std::string> Rewrite(std::string_view text) {
  codec::Rewriter rewriter(1 << 30);
  if (codec::ParseText<codec::kParseFlags>(text, &rewriter).IsError()) return std::nullopt;
  return std::move(rewriter.json());
}

// Reference model of Ruby's Hash for a parsed object, the plain way: a name
// seen before takes the new value where it first stood, and the later
// member goes. At every level; false (and the DOM partly done) when `value`
// nests deeper than `levels`.
inline bool ReferenceRubyMembers(rapidjson::Value& value, int levels) {
  if (value.IsArray()) {
    if (levels <= 0) return false;
    for (auto& element : value.GetArray()) {
      if (!ReferenceRubyMembers(element, levels - 1)) return false;
    }
  } else if (value.IsObject()) {
    if (levels <= 0) return false;
    for (auto it = value.MemberBegin(); it != value.MemberEnd();) {
      auto earlier = value.MemberBegin();
      while (earlier != it && earlier->name != it->name) ++earlier;
      if (earlier != it) {
        earlier->value = it->value;  // moves
        it = value.EraseMember(it);  // keeps the order of the rest
      } else {
        ++it;
      }
    }
    for (auto& member : value.GetObject()) {
      if (!ReferenceRubyMembers(member.value, levels - 1)) return false;
    }
  }
  return true;
}

// True when no object at any level gives a name twice.
inline bool NoDuplicateNames(const rapidjson::Value& value) {
  if (value.IsArray()) {
    for (const auto& element : value.GetArray()) {
      if (!NoDuplicateNames(element)) return false;
    }
  } else if (value.IsObject()) {
    for (auto a = value.MemberBegin(); a != value.MemberEnd(); ++a) {
      for (auto b = value.MemberBegin(); b != a; ++b) {
        if (a->name == b->name) return false;
      }
      if (!NoDuplicateNames(a->value)) return false;
    }
  }
  return true;
}

// Reference parse: RapidJSON's reader and DOM, numbers converted with
// glibc's strtod (not the codec's from_chars, nor RapidJSON's own
// conversion, which 1.1.0 gets wrong for some literals). `kFlags` as for
// Reader::Parse. False, the document null, when it does not parse, holds a
// NUL byte or a number beyond the double range.
template <unsigned kFlags = 0>
bool ReferenceParse(std::string_view text, rapidjson::Document* document) {
  if (text.find('\0') != std::string_view::npos) return false;
  struct Numbers : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, Numbers> {
    rapidjson::Document* out;
    bool Null() { return out->Null(); }
    bool Bool(bool b) { return out->Bool(b); }
    bool RawNumber(const char* text, rapidjson::SizeType length, bool) {
      static const locale_t c_locale = newlocale(LC_ALL_MASK, "C", locale_t{});
      std::string literal(text, length);
      bool integer = literal.find_first_of(".eE") == std::string::npos;
      errno = 0;
      if (integer && literal[0] == '-') {
        long long value = std::strtoll(literal.c_str(), nullptr, 10);
        if (errno == 0) return out->Int64(value);
      } else if (integer) {
        unsigned long long value = std::strtoull(literal.c_str(), nullptr, 10);
        if (errno == 0) return out->Uint64(value);
      }
      double value = strtod_l(literal.c_str(), nullptr, c_locale);
      if (std::isinf(value)) return false;
      return out->Double(value);
    }
    bool String(const char* s, rapidjson::SizeType n, bool copy) { return out->String(s, n, copy); }
    bool StartObject() { return out->StartObject(); }
    bool Key(const char* s, rapidjson::SizeType n, bool copy) { return out->Key(s, n, copy); }
    bool EndObject(rapidjson::SizeType n) { return out->EndObject(n); }
    bool StartArray() { return out->StartArray(); }
    bool EndArray(rapidjson::SizeType n) { return out->EndArray(n); }
  };
  bool ok = false;
  auto generate = [&](rapidjson::Document& handler) {
    Numbers numbers;
    numbers.out = &handler;
    rapidjson::MemoryStream stream(text.data(), text.size());
    rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> input(stream);
    rapidjson::Reader reader;
    ok = !reader
              .Parse<kFlags | rapidjson::kParseIterativeFlag |
                     rapidjson::kParseNumbersAsStringsFlag>(input, numbers)
              .IsError();
    return ok;
  };
  document->Populate(generate);
  return ok;
}

}  // namespace reliableq::fuzz

#endif  // RELIABLEQ_TESTS_FUZZ_FUZZ_SUPPORT_H_
