#include "redis/reply.h"

#include <doctest/doctest.h>
#include <hiredis/hiredis.h>
#include <hiredis/read.h>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

using namespace reliableq;
using namespace reliableq::redis;

namespace {

// The one reply `resp` (Redis's wire format) holds, parsed by hiredis's own
// reader, so that the replies are the ones a connection hands over.
ReplyPtr Parse(std::string_view resp) {
  redisReader* reader = redisReaderCreate();
  REQUIRE(reader != nullptr);
  void* reply = nullptr;
  int fed = redisReaderFeed(reader, resp.data(), resp.size());
  int got = redisReaderGetReply(reader, &reply);
  redisReaderFree(reader);
  REQUIRE(fed == REDIS_OK);
  REQUIRE(got == REDIS_OK);
  REQUIRE(reply != nullptr);  // null: `resp` holds no complete reply
  return ReplyPtr(static_cast<redisReply*>(reply));
}

// A bulk string reply holding `text`, in the wire format.
std::string Bulk(std::string_view text) {
  return "$" + std::to_string(text.size()) + "\r\n" + std::string(text) + "\r\n";
}

// Checks that `result` is a kProtocol error that says exactly `message`.
template <typename T>
void CheckProtocolError(const Result<T>& result, const std::string& message) {
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == Status::Code::kProtocol);
  CHECK(result.status().message() == message);
}

// A reply a reader refuses, and the message it must refuse it with.
struct Refused {
  const char* resp;
  const char* message;
};

}  // namespace

TEST_CASE("TypeName names every reply type, a missing reply and an unknown one") {
  CHECK(std::string(TypeName(Parse("$3\r\nabc\r\n").get())) == "string");
  CHECK(std::string(TypeName(Parse("*1\r\n:1\r\n").get())) == "array");
  CHECK(std::string(TypeName(Parse(":7\r\n").get())) == "integer");
  CHECK(std::string(TypeName(Parse("$-1\r\n").get())) == "nil");
  CHECK(std::string(TypeName(Parse("*-1\r\n").get())) == "nil");
  CHECK(std::string(TypeName(Parse("+OK\r\n").get())) == "status");
  CHECK(std::string(TypeName(Parse("-ERR no\r\n").get())) == "error");
  CHECK(std::string(TypeName(nullptr)) == "no reply");
  // A type hiredis does not have (a newer RESP3 one, say) is still named.
  redisReply odd{};
  odd.type = 99;
  CHECK(std::string(TypeName(&odd)) == "unknown");
}

TEST_CASE("View spans the whole string, NUL bytes and CRLF included") {
  ReplyPtr reply = Parse(std::string("$7\r\na\0b\r\ncd\r\n", 13));
  CHECK(View(reply.get()) == std::string_view("a\0b\r\ncd", 7));
  CHECK(View(Parse("$0\r\n\r\n").get()).empty());
  CHECK(View(Parse("+PONG\r\n").get()) == "PONG");
  CHECK(View(Parse("-ERR nope\r\n").get()) == "ERR nope");
}

TEST_CASE("ToInteger reads an integer reply") {
  Result<int64_t> value = ToInteger(Parse(":42\r\n").get());
  REQUIRE(value.ok());
  CHECK(*value == 42);
  value = ToInteger(Parse(":-3\r\n").get());
  REQUIRE(value.ok());
  CHECK(*value == -3);
  value = ToInteger(Parse(":0\r\n").get());
  REQUIRE(value.ok());
  CHECK(*value == 0);
}

TEST_CASE("ToInteger reads a string reply that holds a whole number, to both limits") {
  Result<int64_t> value = ToInteger(Parse("$5\r\n12345\r\n").get());
  REQUIRE(value.ok());
  CHECK(*value == 12345);
  value = ToInteger(Parse("$2\r\n-7\r\n").get());
  REQUIRE(value.ok());
  CHECK(*value == -7);
  value = ToInteger(Parse("$19\r\n9223372036854775807\r\n").get());
  REQUIRE(value.ok());
  CHECK(*value == std::numeric_limits<int64_t>::max());
  value = ToInteger(Parse("$20\r\n-9223372036854775808\r\n").get());
  REQUIRE(value.ok());
  CHECK(*value == std::numeric_limits<int64_t>::min());
}

TEST_CASE("ToInteger refuses a string that is not exactly a whole number") {
  // Each one is kProtocol; none is read as its numeric prefix or as 0.
  for (const char* text : {"", "abc", "12abc", " 12", "12 ", "+12", "1.5", "1e3", "0x10", "-"}) {
    CAPTURE(text);
    CheckProtocolError(ToInteger(Parse(Bulk(text)).get()), "expected an integer reply, got string");
  }
}

TEST_CASE("ToInteger refuses a string number that does not fit in 64 bits") {
  for (const char* text : {"9223372036854775808", "-9223372036854775809",
                           "99999999999999999999999999"}) {
    CAPTURE(text);
    CheckProtocolError(ToInteger(Parse(Bulk(text)).get()), "expected an integer reply, got string");
  }
}

TEST_CASE("ToInteger refuses every other reply type and names it") {
  // A status or error reply is refused even when its text is a number, and
  // nil is a protocol error here, not kNotFound: a count is never absent.
  for (const Refused& c : {Refused{"+42\r\n", "expected an integer reply, got status"},
                           Refused{"-42\r\n", "expected an integer reply, got error"},
                           Refused{"$-1\r\n", "expected an integer reply, got nil"},
                           Refused{"*1\r\n:42\r\n", "expected an integer reply, got array"}}) {
    CAPTURE(c.resp);
    CheckProtocolError(ToInteger(Parse(c.resp).get()), c.message);
  }
  CheckProtocolError(ToInteger(nullptr), "expected an integer reply, got no reply");
}

TEST_CASE("ToString reads bulk and status strings, binary-safe") {
  Result<std::string> text = ToString(Parse(std::string("$5\r\na\0b\r\n\r\n", 12)).get());
  REQUIRE(text.ok());
  CHECK(*text == std::string("a\0b\r\n", 5));
  text = ToString(Parse("$0\r\n\r\n").get());
  REQUIRE(text.ok());
  CHECK(text->empty());
  text = ToString(Parse("+OK\r\n").get());
  REQUIRE(text.ok());
  CHECK(*text == "OK");
}

TEST_CASE("ToString turns nil into kNotFound") {
  for (const char* resp : {"$-1\r\n", "*-1\r\n"}) {
    CAPTURE(resp);
    Result<std::string> text = ToString(Parse(resp).get());
    REQUIRE_FALSE(text.ok());
    CHECK(text.status().IsNotFound());
  }
}

TEST_CASE("ToString refuses integer, error and array replies and names the type") {
  // An error reply is not a string, however string-like its text.
  for (const Refused& c : {Refused{":42\r\n", "expected a string reply, got integer"},
                           Refused{"-ERR boom\r\n", "expected a string reply, got error"},
                           Refused{"*1\r\n$1\r\nx\r\n", "expected a string reply, got array"},
                           Refused{"*0\r\n", "expected a string reply, got array"}}) {
    CAPTURE(c.resp);
    CheckProtocolError(ToString(Parse(c.resp).get()), c.message);
  }
  CheckProtocolError(ToString(nullptr), "expected a string reply, got no reply");
}
