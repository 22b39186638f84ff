// The HTTP layer's pure parts: addresses and route patterns.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "http/listener.h"

using namespace reliableq;

TEST_CASE("HttpAddress::Parse takes PORT, HOST:PORT and [IPV6]:PORT, loopback by default") {
  CHECK(HttpAddress::Parse("9100")->ToString() == "127.0.0.1:9100");
  CHECK(HttpAddress::Parse("0.0.0.0:80")->ToString() == "0.0.0.0:80");
  CHECK(HttpAddress::Parse("[::1]:7480")->ToString() == "[::1]:7480");
  for (const char* bad : {"", ":80", "host:", "host:65536", "::1:80", "[::1]80", "[::1", "x:-1"}) {
    CAPTURE(bad);
    CHECK(HttpAddress::Parse(bad).status().code() == Status::Code::kInvalidArgument);
  }
}

TEST_CASE("MatchPath matches literal segments and captures each *") {
  std::vector<std::string> captures;
  CHECK(MatchPath("/", "/", &captures));
  CHECK(MatchPath("/api/busy", "/api/busy", &captures));
  CHECK_FALSE(MatchPath("/api/busy", "/api/busy/", &captures));
  CHECK_FALSE(MatchPath("/api/busy", "/api/bus", &captures));
  CHECK_FALSE(MatchPath("/", "/api", &captures));
  REQUIRE(MatchPath("/api/sets/*/*", "/api/sets/dead/retry", &captures));
  CHECK(captures == std::vector<std::string>{"/api/sets/dead/retry", "dead", "retry"});
  CHECK_FALSE(MatchPath("/api/sets/*", "/api/sets/", &captures));  // an empty segment
  CHECK_FALSE(MatchPath("/api/sets/*", "/api/sets/dead/retry", &captures));
  CHECK_FALSE(MatchPath("/api/sets/*/*", "/api/sets/dead", &captures));
  // No recursion per character: a path far longer than any route is fine.
  std::string long_path = "/assets/" + std::string(1 << 20, 'A');
  REQUIRE(MatchPath("/assets/*", long_path, &captures));
  CHECK(captures[1].size() == size_t{1} << 20);
}
