// The embedded Lua scripts without Redis: they compile under Lua 5.4, they
// document their interface, and the payload helpers edit job JSON as text
// without touching a byte outside the edited field. The same helpers run
// under Redis's Lua 5.1 in scripts_test.cc.

#include <doctest/doctest.h>
#include <lua.hpp>
#include <rapidjson/document.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "lua_scripts.h"

using reliableq::GetScript;
using reliableq::kScriptCount;
using reliableq::kScripts;
using reliableq::ScriptId;

namespace {

constexpr std::string_view kLibBegin = "-- lib/payload.lua: begin";
constexpr std::string_view kLibEnd = "-- lib/payload.lua: end";
constexpr std::string_view kArgsBegin = "-- lib/args.lua: begin";
constexpr std::string_view kArgsEnd = "-- lib/args.lua: end";

// The text from `begin` to the end of `end` in `script`.
std::string Between(std::string_view script, std::string_view begin_mark,
                    std::string_view end_mark) {
  size_t begin = script.find(begin_mark);
  size_t end = script.find(end_mark);
  REQUIRE(begin != std::string_view::npos);
  REQUIRE(end != std::string_view::npos);
  return std::string(script.substr(begin, end + end_mark.size() - begin));
}

// The text of lib/payload.lua as it was inlined into `script`.
std::string LibText(std::string_view script) { return Between(script, kLibBegin, kLibEnd); }

// The leading block of comment lines of a script.
std::string Header(std::string_view source) {
  std::string header;
  while (!source.empty()) {
    size_t eol = source.find('\n');
    std::string_view line = source.substr(0, eol);
    if (line.substr(0, 2) != "--") break;
    header += std::string(line) + "\n";
    if (eol == std::string_view::npos) break;
    source.remove_prefix(eol + 1);
  }
  return header;
}

// Lua 5.4 with lib/payload.lua loaded and its functions in a table.
class PayloadLib {
 public:
  PayloadLib() : lua_(luaL_newstate()) {
    luaL_openlibs(lua_);
    std::string chunk = LibText(GetScript(ScriptId::kRecover).source) +
                        "\nreturn {json_field_span = json_field_span,"
                        " json_set_field = json_set_field, json_get_number = json_get_number,"
                        " json_string = json_string, interrupt = interrupt}\n";
    REQUIRE(luaL_loadbuffer(lua_, chunk.data(), chunk.size(), "payload.lua") == LUA_OK);
    REQUIRE(lua_pcall(lua_, 0, 1, 0) == LUA_OK);
    lua_setglobal(lua_, "lib");
  }
  ~PayloadLib() { lua_close(lua_); }
  PayloadLib(const PayloadLib&) = delete;
  PayloadLib& operator=(const PayloadLib&) = delete;

  // json_field_span as the substring it designates.
  std::optional<std::string> FieldText(std::string_view json, std::string_view key) {
    Call("json_field_span", {json, key}, 2);
    std::optional<std::string> out;
    if (!lua_isnil(lua_, -2)) {
      lua_Integer start = lua_tointeger(lua_, -2);
      lua_Integer stop = lua_tointeger(lua_, -1);
      out = std::string(json.substr(start - 1, stop - start + 1));
    }
    lua_pop(lua_, 2);
    return out;
  }

  std::optional<std::string> SetField(std::string_view json, std::string_view key,
                                      std::string_view raw) {
    Call("json_set_field", {json, key, raw}, 1);
    return PopString();
  }

  std::optional<double> GetNumber(std::string_view json, std::string_view key) {
    Call("json_get_number", {json, key}, 1);
    std::optional<double> out;
    if (!lua_isnil(lua_, -1)) out = lua_tonumber(lua_, -1);
    lua_pop(lua_, 1);
    return out;
  }

  std::string JsonString(std::string_view s) {
    Call("json_string", {s}, 1);
    return PopString().value();
  }

  std::pair<std::string, bool> Interrupt(std::string_view payload, int max,
                                         std::string_view now) {
    std::string max_text = std::to_string(max);
    Call("interrupt", {payload, max_text, now}, 2);
    bool dead = lua_toboolean(lua_, -1);
    lua_pop(lua_, 1);
    return {PopString().value(), dead};
  }

 private:
  void Call(const char* name, std::initializer_list<std::string_view> args, int results) {
    lua_getglobal(lua_, "lib");
    lua_getfield(lua_, -1, name);
    lua_remove(lua_, -2);
    for (std::string_view arg : args) lua_pushlstring(lua_, arg.data(), arg.size());
    int rc = lua_pcall(lua_, static_cast<int>(args.size()), results, 0);
    REQUIRE_MESSAGE(rc == LUA_OK, name << ": " << lua_tostring(lua_, -1));
  }

  std::optional<std::string> PopString() {
    std::optional<std::string> out;
    if (lua_type(lua_, -1) == LUA_TSTRING) {
      size_t len = 0;
      const char* s = lua_tolstring(lua_, -1, &len);
      out = std::string(s, len);
    }
    lua_pop(lua_, 1);
    return out;
  }

  lua_State* lua_;
};

bool IsJsonObject(const std::string& text) {
  rapidjson::Document doc;
  doc.Parse(text.data(), text.size());
  return !doc.HasParseError() && doc.IsObject();
}

// A Sidekiq payload whose strings and nested objects hold look-alikes of the
// fields the helpers edit.
const std::string kTricky =
    R"({"class":"HardJob","args":[{"interrupted_count":9},"\"interrupted_count\":7",)"
    R"("back\\slash\\",{"error_class":{"interrupted_count":[1,{"x":"}"}]}}],)"
    R"("queue":"default","note":"caf\u00e9 \u2603 ☃ é","created_at":1700000000.1234567,)"
    R"("enqueued_at":1.7000000007654321e9,"retry":true})";

}  // namespace

TEST_CASE("every embedded script compiles under Lua 5.4") {
  REQUIRE(kScriptCount == 24);  // every file of lua/ (not lib/), embedded
  for (size_t i = 0; i < kScriptCount; ++i) {
    std::string name = kScripts[i].name;
    CAPTURE(name);
    lua_State* lua = luaL_newstate();
    int rc = luaL_loadbuffer(lua, kScripts[i].source.data(), kScripts[i].source.size(),
                             kScripts[i].name);
    CHECK_MESSAGE(rc == LUA_OK, lua_tostring(lua, -1));
    lua_close(lua);
  }
}

TEST_CASE("every script opens with a header naming KEYS, ARGV and its return value") {
  for (size_t i = 0; i < kScriptCount; ++i) {
    std::string name = kScripts[i].name;
    CAPTURE(name);
    std::string header = Header(kScripts[i].source);
    CHECK(header.find(kScripts[i].name) != std::string::npos);
    CHECK(header.find("KEYS[") != std::string::npos);
    CHECK(header.find("ARGV[") != std::string::npos);
    CHECK(header.find("Returns") != std::string::npos);
  }
}

TEST_CASE("includes are expanded and no script spells a key itself") {
  std::string lib = LibText(GetScript(ScriptId::kRecover).source);
  std::string args_lib = Between(lib, kArgsBegin, kArgsEnd);
  for (size_t i = 0; i < kScriptCount; ++i) {
    std::string name = kScripts[i].name;
    CAPTURE(name);
    std::string_view source = kScripts[i].source;
    CHECK(source.find("-- @include") == std::string_view::npos);
    CHECK(Between(source, kArgsBegin, kArgsEnd) == args_lib);
    // The scripts every job passes through (fetch, push, schedule, and a
    // spooling client's push_once) carry only the argument helpers: the
    // payload library would cost Redis time on each call. clear.lua, the
    // periodic scripts and those of unique jobs and expiry need nothing more
    // either (lib/unique.lua stands on its own).
    bool hot = name == "fetch.lua" || name == "push.lua" || name == "schedule.lua" ||
               name == "push_once.lua" || name == "clear.lua" || name == "limit_acquire.lua" ||
               name == "push_unique.lua" || name == "release_unique.lua" || name == "finish.lua" ||
               name == "periodic.lua" || name == "periodic_declare.lua" || name == "ack.lua";
    if (hot) {
      CHECK(source.find(kLibBegin) == std::string_view::npos);
    } else {
      CHECK(LibText(source) == lib);
    }
    // Key names reach scripts only through KEYS: no code line (comments may
    // name keys) holds a literal key prefix.
    size_t pos = 0;
    while (pos < source.size()) {
      size_t eol = source.find('\n', pos);
      if (eol == std::string_view::npos) eol = source.size();
      std::string_view line = source.substr(pos, eol - pos);
      size_t code_end = line.find("--");
      std::string_view code = line.substr(0, code_end);
      bool clean = true;
      for (std::string_view bad :
           {"'queue:", "\"queue:", "'stat:", "\"stat:", "reliableq:", "'working:",
            "'heartbeat:", "-signals'", ":work'", "'queues'", "'processes'", "'schedule'"}) {
        clean = clean && code.find(bad) == std::string_view::npos;
      }
      CHECK_MESSAGE(clean, line);
      pos = eol + 1;
    }
  }
}

TEST_CASE("json_field_span finds top-level keys only") {
  PayloadLib lib;
  // Absent at the top level: every occurrence is nested or inside a string.
  CHECK_FALSE(lib.FieldText(kTricky, "interrupted_count").has_value());
  CHECK_FALSE(lib.FieldText(kTricky, "error_class").has_value());
  CHECK_FALSE(lib.FieldText(kTricky, "x").has_value());
  CHECK(lib.FieldText(kTricky, "class") == "\"HardJob\"");
  CHECK(lib.FieldText(kTricky, "note") == R"("caf\u00e9 \u2603 ☃ é")");
  CHECK(lib.FieldText(kTricky, "enqueued_at") == "1.7000000007654321e9");
  CHECK(lib.FieldText(kTricky, "retry") == "true");
  CHECK(lib.FieldText(kTricky, "args")->substr(0, 24) == R"([{"interrupted_count":9})");

  std::string present = R"({"args":[{"interrupted_count":9}],"interrupted_count":2,"z":null})";
  CHECK(lib.FieldText(present, "interrupted_count") == "2");
  // A value that spells the key is a value, not a key.
  CHECK(lib.FieldText(R"({"k":"interrupted_count","interrupted_count":4})",
                      "interrupted_count") == "4");
  // Escaped quotes and backslashes end strings where JSON says.
  CHECK(lib.FieldText(R"({"a":"x\\","interrupted_count":1})", "interrupted_count") == "1");
  CHECK_FALSE(lib.FieldText(R"({"a":"\\\"interrupted_count\\\":5","b":1})",
                            "interrupted_count")
                  .has_value());
  CHECK_FALSE(lib.FieldText(R"({"a":"\"interrupted_count\":5","b":1})", "interrupted_count")
                  .has_value());
  // Whitespace anywhere JSON allows it.
  CHECK(lib.FieldText(" {\n \"a\" : [ 1 , 2 ] ,\t\"interrupted_count\" : 7 } \n",
                      "interrupted_count") == "7");
  // Duplicate keys: the last one, which is what JSON parsers keep.
  CHECK(lib.FieldText(R"({"n":1,"n":2})", "n") == "2");
  CHECK_FALSE(lib.FieldText("{}", "n").has_value());
}

TEST_CASE("json_field_span refuses what is not one JSON object") {
  PayloadLib lib;
  for (std::string_view bad :
       {"", "[]", "\"x\"", "3", R"({"a":1)", R"({"a":})", R"({"a":1}x)", R"({"a" 1})",
        R"({"a":1,})", R"({a:1})", R"({"a":"unterminated})", R"({"a":[1,2})", "not json"}) {
    CAPTURE(bad);
    CHECK_FALSE(lib.FieldText(bad, "a").has_value());
    CHECK_FALSE(lib.SetField(bad, "a", "1").has_value());
  }
}

TEST_CASE("json_set_field changes the field and no other byte") {
  PayloadLib lib;
  SUBCASE("insert before the closing brace when absent") {
    std::optional<std::string> out = lib.SetField(kTricky, "interrupted_count", "1");
    REQUIRE(out.has_value());
    CHECK(*out == kTricky.substr(0, kTricky.size() - 1) + R"(,"interrupted_count":1})");
    CHECK(IsJsonObject(*out));
    CHECK(lib.FieldText(*out, "interrupted_count") == "1");
  }
  SUBCASE("replace in place when present, whatever the old value's length") {
    std::string json = R"({"a":[{"interrupted_count":9}],"interrupted_count":12345,"b":"é"})";
    std::optional<std::string> out = lib.SetField(json, "interrupted_count", "7");
    REQUIRE(out.has_value());
    CHECK(*out == R"({"a":[{"interrupted_count":9}],"interrupted_count":7,"b":"é"})");
    out = lib.SetField(json, "a", R"("str")");
    CHECK(*out == R"({"a":"str","interrupted_count":12345,"b":"é"})");
  }
  SUBCASE("values of every JSON type are replaced whole") {
    std::string json =
        R"({"s":"a\"}b","o":{"k":[1,"]"]},"n":-1.5E+3,"t":true,"z":null,"e":[]})";
    for (std::string_view key : {"s", "o", "n", "t", "z", "e"}) {
      CAPTURE(key);
      std::optional<std::string> out = lib.SetField(json, key, "0");
      REQUIRE(out.has_value());
      CHECK(IsJsonObject(*out));
      CHECK(lib.FieldText(*out, key) == "0");
      CHECK(out->size() < json.size());
    }
  }
  SUBCASE("whitespace around the value is kept") {
    std::string json = "{ \"interrupted_count\" : 7 , \"a\" : 1 }";
    CHECK(lib.SetField(json, "interrupted_count", "8") ==
          "{ \"interrupted_count\" : 8 , \"a\" : 1 }");
  }
  SUBCASE("empty objects get no comma") {
    CHECK(lib.SetField("{}", "k", "1") == R"({"k":1})");
    CHECK(lib.SetField(" { } ", "k", "1") == R"( { "k":1} )");
  }
  SUBCASE("the last of duplicate keys is the one set") {
    CHECK(lib.SetField(R"({"n":1,"n":2})", "n", "3") == R"({"n":1,"n":3})");
  }
}

TEST_CASE("json_get_number reads numbers only") {
  PayloadLib lib;
  CHECK(lib.GetNumber(R"({"a":2})", "a") == 2);
  CHECK(lib.GetNumber(R"({"a":-0.5})", "a") == -0.5);
  CHECK(lib.GetNumber(R"({"a":1.5e3})", "a") == 1500);
  CHECK(lib.GetNumber(R"({"a":2E0})", "a") == 2);
  CHECK(lib.GetNumber(R"({"a":1E-2})", "a") == doctest::Approx(0.01));
  CHECK(lib.GetNumber(R"({"a":1700000000.1234567})", "a") == 1700000000.1234567);
  CHECK_FALSE(lib.GetNumber(R"({"a":"3"})", "a").has_value());
  CHECK_FALSE(lib.GetNumber(R"({"a":null})", "a").has_value());
  CHECK_FALSE(lib.GetNumber(R"({"a":true})", "a").has_value());
  CHECK_FALSE(lib.GetNumber(R"({"a":[3]})", "a").has_value());
  CHECK_FALSE(lib.GetNumber(R"({"a":0x10})", "a").has_value());
  CHECK_FALSE(lib.GetNumber(R"({"b":[{"a":3}]})", "a").has_value());
}

TEST_CASE("json_string escapes what JSON requires and keeps UTF-8") {
  PayloadLib lib;
  CHECK(lib.JsonString("plain") == R"("plain")");
  CHECK(lib.JsonString(R"(a"b\c)") == R"("a\"b\\c")");
  CHECK(lib.JsonString("l1\nl2\t\r\b\f") == R"("l1\nl2\t\r\b\f")");
  CHECK(lib.JsonString(std::string("\x01\x1f\0z", 4)) == R"("\u0001\u001f\u0000z")");
  CHECK(lib.JsonString("café ☃") == "\"café ☃\"");
  std::string round = "{\"s\":" + lib.JsonString("q\"\\\n\x02é") + "}";
  rapidjson::Document doc;
  doc.Parse(round.data(), round.size());
  REQUIRE_FALSE(doc.HasParseError());
  CHECK(std::string(doc["s"].GetString(), doc["s"].GetStringLength()) == "q\"\\\n\x02é");
}

TEST_CASE("interrupt counts, and sends a job dead past max_interruptions") {
  PayloadLib lib;
  const std::string now = "1700000100.250000";
  std::string body = kTricky.substr(0, kTricky.size() - 1);

  SUBCASE("an absent counter counts as 0") {
    auto [out, dead] = lib.Interrupt(kTricky, 3, now);
    CHECK_FALSE(dead);
    CHECK(out == body + R"(,"interrupted_count":1})");
  }
  SUBCASE("a present counter is incremented in place, printed as an integer") {
    std::string json = body + R"(,"interrupted_count":2,"after":1})";
    auto [out, dead] = lib.Interrupt(json, 3, now);
    CHECK_FALSE(dead);
    CHECK(out == body + R"(,"interrupted_count":3,"after":1})");
  }
  SUBCASE("over the limit: dead with error fields and failed_at = now") {
    std::string json = body + R"(,"interrupted_count":3})";
    auto [out, dead] = lib.Interrupt(json, 3, now);
    CHECK(dead);
    CHECK(out == body +
                     R"(,"interrupted_count":4,"error_class":"Reliableq::Interrupted",)"
                     R"("error_message":"interrupted 4 times: its worker process stopped )"
                     R"j(while running it (max_interruptions 3)","failed_at":1700000100.250000})j");
    CHECK(IsJsonObject(out));
  }
  SUBCASE("an earlier failure's fields are replaced, its failed_at kept") {
    std::string json = R"({"class":"A","args":[],"error_class":"Boom","error_message":"x",)"
                       R"("failed_at":1690000000.5,"retry_count":2,"interrupted_count":0})";
    auto [out, dead] = lib.Interrupt(json, 0, now);
    CHECK(dead);
    CHECK(out == R"({"class":"A","args":[],"error_class":"Reliableq::Interrupted",)"
                 R"("error_message":"interrupted 1 times: its worker process stopped while )"
                 R"j(running it (max_interruptions 0)","failed_at":1690000000.5,)j"
                 R"("retry_count":2,"interrupted_count":1})");
  }
  SUBCASE("a negative limit never sends a job dead") {
    std::string json = R"({"interrupted_count":1000})";
    auto [out, dead] = lib.Interrupt(json, -1, now);
    CHECK_FALSE(dead);
    CHECK(out == R"({"interrupted_count":1001})");
  }
  SUBCASE("a fractional or negative counter is read as a whole count") {
    CHECK(lib.Interrupt(R"({"interrupted_count":2.7})", 3, now).first ==
          R"({"interrupted_count":3})");
    CHECK(lib.Interrupt(R"({"interrupted_count":-4})", 3, now).first ==
          R"({"interrupted_count":1})");
    CHECK(lib.Interrupt(R"({"interrupted_count":1e300})", -1, now).first ==
          R"({"interrupted_count":1000000001})");
  }
  SUBCASE("a non-numeric counter restarts at 1") {
    auto [out, dead] = lib.Interrupt(R"({"interrupted_count":"x"})", 3, now);
    CHECK_FALSE(dead);
    CHECK(out == R"({"interrupted_count":1})");
  }
  SUBCASE("a payload that is not a JSON object is kept as is") {
    auto [out, dead] = lib.Interrupt("not json {", 3, now);
    CHECK(dead);
    CHECK(out == "not json {");
    auto [out2, dead2] = lib.Interrupt("not json {", -1, now);
    CHECK_FALSE(dead2);
    CHECK(out2 == "not json {");
  }
}
