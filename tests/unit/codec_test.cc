// The pieces the job codec is built from (src/codec/): UTF-8 checks and
// String#scrub, Base64.encode64, Sidekiq's compress_backtrace and its
// `backtrace` option, and the payload rewriter. The codec as a whole, with
// its exact output bytes, is tested in job_codec_test.cc.

#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include <string>
#include <vector>

#include "support/backtrace_decode.h"
#include "codec/backtrace.h"
#include "codec/payload_rewriter.h"
#include "codec/ruby_json.h"
#include "base/utf8.h"

namespace reliableq::codec {
namespace {

using base::IsValidUtf8;
using base::Scrub;
using testing::Base64Decode;
using testing::Inflate;

const std::string kFffd = "\xEF\xBF\xBD";

TEST_CASE("IsValidUtf8 accepts well-formed UTF-8 only") {
  CHECK(IsValidUtf8(""));
  CHECK(IsValidUtf8("plain ASCII"));
  CHECK(IsValidUtf8("\xC3\xBC \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF"));
  CHECK_FALSE(IsValidUtf8("\xFF"));
  CHECK_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong '/'
  CHECK_FALSE(IsValidUtf8("\xE0\x80\xAF"));      // overlong '/'
  CHECK_FALSE(IsValidUtf8("\xED\xA0\x80"));      // a surrogate
  CHECK_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  CHECK_FALSE(IsValidUtf8("ok \xE2\x82"));       // cut short
}

TEST_CASE("Scrub replaces invalid UTF-8 as Ruby's String#scrub does") {
  CHECK(Scrub("caf\xC3\xA9") == "caf\xC3\xA9");
  // Ruby: "a\xffb\xe2\x82z\xed\xa0\x80\xf0\x9f\x98".scrub: one U+FFFD per
  // maximal invalid subpart, so a cut-short sequence is one and each byte of
  // a surrogate is one.
  CHECK(Scrub("a\xFF"
              "b\xE2\x82"
              "z\xED\xA0\x80\xF0\x9F\x98") ==
        "a" + kFffd + "b" + kFffd + "z" + kFffd + kFffd + kFffd + kFffd);
}

TEST_CASE("Scrub cuts after max_chars characters, never inside one") {
  CHECK(Scrub("a\xE2\x82\xAC"
              "b",
              2) == "a\xE2\x82\xAC");
  CHECK(Scrub("\xFF\xFFx", 1) == kFffd);
  CHECK(Scrub("abc", 0).empty());
  CHECK(Scrub("abc", 10) == "abc");
}

std::string Mime(const std::string& bytes) {
  return codec::Base64Mime(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

TEST_CASE("Base64Mime writes what Ruby's Base64.encode64 writes") {
  CHECK(Mime("").empty());
  CHECK(Mime("f") == "Zg==\n");
  CHECK(Mime("fo") == "Zm8=\n");
  CHECK(Mime("foo") == "Zm9v\n");
  CHECK(Mime("foobar") == "Zm9vYmFy\n");
  CHECK(Mime(std::string("\xFF\xFE\x00", 3)) == "//4A\n");
  // 45 bytes make one full line of 60 characters; the 46th starts another.
  std::string bytes;
  for (int i = 0; i < 46; ++i) bytes.push_back(static_cast<char>(i));
  const std::string line = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKiss\n";
  CHECK(Mime(bytes.substr(0, 45)) == line);
  CHECK(Mime(bytes) == line + "LQ==\n");
}

TEST_CASE("CompressBacktrace deflates the JSON array of the first lines") {
  std::vector<std::string> lines = {"a.rb:1:in `x'", "b\xFF.rb:2", "c.rb:3 \"q\""};
  auto all = CompressBacktrace(lines, 3);
  REQUIRE(all.ok());
  CHECK(Inflate(Base64Decode(*all)) ==
        "[\"a.rb:1:in `x'\",\"b" + kFffd + ".rb:2\",\"c.rb:3 \\\"q\\\"\"]");
  auto first = CompressBacktrace(lines, 1);
  REQUIRE(first.ok());
  CHECK(Inflate(Base64Decode(*first)) == "[\"a.rb:1:in `x'\"]");
  auto none = CompressBacktrace(lines, 0);
  REQUIRE(none.ok());
  CHECK(Inflate(Base64Decode(*none)) == "[]");
}

TEST_CASE("BacktraceLines reads the job's backtrace option as Sidekiq does") {
  auto lines = [](const char* json, size_t available) {
    rapidjson::Document field;
    field.Parse(json);
    REQUIRE_FALSE(field.HasParseError());
    return BacktraceLines(field, available);
  };
  CHECK(lines("true", 5) == 5u);
  CHECK(lines("2", 5) == 2u);
  CHECK(lines("0", 5) == 0u);
  CHECK(lines("9", 5) == 5u);
  CHECK(lines("-2", 5) == 3u);  // backtrace[0...-2]
  CHECK(lines("-9", 5) == 0u);
  CHECK(lines("2.7", 5) == 2u);
  CHECK(lines("18446744073709551615", 5) == 5u);
  CHECK_FALSE(lines("false", 5).has_value());
  CHECK_FALSE(lines("null", 5).has_value());
  CHECK_FALSE(lines("\"3\"", 5).has_value());
}

TEST_CASE("Rewriter replaces members in place, appends the rest, keeps literals") {
  Rewriter rewriter(3);
  rewriter.SetMember("b", "\"new\"");
  rewriter.SetMember("z", "7");
  rewriter.SetMember("y", "[]");
  auto parsed = ParseText<kParseFlags>(
      R"({"a": 123456789012345678901234567890, "b": {"deep": [1, 2]}, "c": -0, "d": 1E2,)"
      R"( "y": "old", "b": 1})",
      &rewriter);
  REQUIRE_FALSE(parsed.IsError());
  // "b" where it first stands, its later member dropped (Ruby's Hash keeps
  // one); "y" where it stands, "z" appended.
  CHECK(rewriter.json() ==
        R"({"a":123456789012345678901234567890,"b":"new","c":0,"d":100.0,"y":[],"z":7})");
  CHECK(rewriter.root_type() == rapidjson::kObjectType);
  CHECK_FALSE(rewriter.too_deep());
  REQUIRE(rewriter.members().size() == 6);
  CHECK(rewriter.members()[1].name == "b");
}

TEST_CASE("Rewriter reports the members that nest too deep") {
  Rewriter rewriter(2);
  REQUIRE_FALSE(ParseText<kParseFlags>(R"({"ok":[1],"deep":[[2]]})", &rewriter).IsError());
  CHECK(rewriter.json() == R"({"ok":[1],"deep":[[2]]})");
  CHECK(rewriter.too_deep());
  REQUIRE(rewriter.members().size() == 2);
  CHECK_FALSE(rewriter.members()[0].too_deep);
  CHECK(rewriter.members()[1].too_deep);
}

TEST_CASE("Rewriter writes a name given twice once, where it first stands, with its last value") {
  // Ruby: JSON.generate(JSON.parse(text)), at every level.
  Rewriter rewriter(10);
  REQUIRE_FALSE(ParseText<kParseFlags>(
                    R"({"a":1,"b":{"x":1,"y":[{"k":1,"k":2}],"x":{"z":[3]}},"c":"s","a":[4],)"
                    R"("\u0061":5,"d":[{}]})",
                    &rewriter)
                    .IsError());
  CHECK(rewriter.json() == R"({"a":5,"b":{"x":{"z":[3]},"y":[{"k":2}]},"c":"s","d":[{}]})");
  REQUIRE(rewriter.members().size() == 6);

  // A replaced name: the new value where the name first stands, no other.
  Rewriter replacing(10);
  replacing.SetMember("a", "0");
  REQUIRE_FALSE(
      ParseText<kParseFlags>(R"({"b":1,"a":1,"b":2,"a":{"deep":[1]},"c":3,"a":2})", &replacing)
          .IsError());
  CHECK(replacing.json() == R"({"b":2,"a":0,"c":3})");
}

TEST_CASE("ParseText refuses a raw NUL byte, which JSON text cannot hold") {
  const std::string nul(1, '\0');
  for (const std::string& text :
       {R"({"a":1})" + nul + R"({"b":2})", R"({"a":1})" + nul, "[\"x" + nul + "\"]", nul}) {
    Rewriter rewriter(10);
    rapidjson::ParseResult parsed = ParseText<kParseFlags>(text, &rewriter);
    CHECK(parsed.IsError());
    CHECK(parsed.Offset() == text.find('\0'));
  }
}

}  // namespace
}  // namespace reliableq::codec
