// text_escape.h: what untrusted text looks like once escaped for a log line
// or a terminal, and the JSON that stays valid whatever its strings held.

#include "base/text_escape.h"

#include <doctest/doctest.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <string>

namespace reliableq {

using namespace reliableq::base;
namespace {

TEST_CASE("Escaped makes every control character visible") {
  CHECK(Escaped("a\nb") == "a\\nb");
  CHECK(Escaped("a\r\tb") == "a\\r\\tb");
  CHECK(Escaped("\x1b[31mred\x1b[0m") == "\\x1b[31mred\\x1b[0m");
  CHECK(Escaped(std::string("nul\0byte", 8)) == "nul\\x00byte");
  CHECK(Escaped("\x01\x1f\x7f") == "\\x01\\x1f\\x7f");
  // A forged log line stays on the line it was written in.
  std::string forged = Escaped("Job\n2026-01-01T00:00:00.000Z pid=1 tid=loop INFO: forged");
  CHECK(forged.find('\n') == std::string::npos);
  CHECK(forged.rfind("Job\\n2026-", 0) == 0);
}

TEST_CASE("Escaped keeps printable ASCII, the backslash and well-formed UTF-8") {
  CHECK(Escaped("plain text ~!@#$%^&*()") == "plain text ~!@#$%^&*()");
  CHECK(Escaped("a\\nb") == "a\\nb");  // a literal backslash-n is kept as it is
  CHECK(Escaped("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80") ==
        "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  CHECK(Escaped("\xC2\xA0") == "\xC2\xA0");  // U+00A0, the first after the C1 block
  CHECK(Escaped("") == "");
}

TEST_CASE("Escaped escapes the C1 controls and every byte that is not UTF-8") {
  CHECK(Escaped("\xC2\x80") == "\\u0080");
  CHECK(Escaped("a\xC2\x9B"
                "31mb") == "a\\u009b31mb");  // CSI, the one-byte ESC [
  CHECK(Escaped("\xC2\x85") == "\\u0085");   // NEL, a line break to some
  CHECK(Escaped("\xFF") == "\\xff");
  CHECK(Escaped("\xC3") == "\\xc3");                             // cut short
  CHECK(Escaped("\xC3(") == "\\xc3(");                           // bad continuation
  CHECK(Escaped("\xC0\xAF") == "\\xc0\\xaf");                    // overlong '/'
  CHECK(Escaped("\xED\xA0\x80") == "\\xed\\xa0\\x80");           // a surrogate
  CHECK(Escaped("\xF4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  CHECK(Escaped("\x9B") == "\\x9b");                             // a raw C1 byte is not UTF-8
}

TEST_CASE("NeedsEscaping is true exactly when Escaped changes the text") {
  for (std::string text : {"plain", "caf\xC3\xA9", "a\nb", "\x7f", "\xC2\x85", "\xFF", "",
                           "\xE2\x82", "\xF0\x9F\x98\x80!"}) {
    CAPTURE(text);
    CHECK(NeedsEscaping(text) == (Escaped(text) != text));
  }
}

std::string WriteString(const std::string& value) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.StartArray();
  writer.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
  writer.EndArray();
  return std::string(buffer.GetString(), buffer.GetSize());
}

TEST_CASE("TerminalSafeJson leaves valid JSON whatever bytes its strings held") {
  std::string raw = "bad\xFF\xC3 esc\x1b nel\xC2\x85 del\x7f caf\xC3\xA9";
  std::string json = TerminalSafeJson(WriteString(raw));
  CHECK(json == "[\"bad\\ufffd\\ufffd esc\\u001B nel\\u0085 del\\u007f caf\xC3\xA9\"]");
  rapidjson::Document document;
  document.Parse<rapidjson::kParseValidateEncodingFlag>(json.c_str());
  REQUIRE(!document.HasParseError());
  CHECK(std::string(document[0].GetString()) ==
        "bad\xEF\xBF\xBD\xEF\xBF\xBD esc\x1b nel\xC2\x85 del\x7f caf\xC3\xA9");
  // Nothing a terminal acts on is left raw.
  for (char c : json) CHECK((static_cast<unsigned char>(c) >= 0x20 && c != 0x7f));
  CHECK(json.find("\xC2\x85") == std::string::npos);
  // JSON with nothing to replace is unchanged.
  CHECK(TerminalSafeJson(WriteString("caf\xC3\xA9 \\ \"")) == WriteString("caf\xC3\xA9 \\ \""));
}

}  // namespace
}  // namespace reliableq
