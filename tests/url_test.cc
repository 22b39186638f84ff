#include <doctest/doctest.h>
#include <stdlib.h>

#include "reliableq/redis_options.h"

using reliableq::RedisOptions;

TEST_CASE("redis:// URLs") {
  auto o = RedisOptions::FromUrl("redis://example.com:6380/3");
  REQUIRE(o.ok());
  CHECK(o->host == "example.com");
  CHECK(o->port == 6380);
  CHECK(o->db == 3);
  CHECK(o->unix_path.empty());
  CHECK(o->password.empty());

  auto defaults = RedisOptions::FromUrl("redis://localhost");
  REQUIRE(defaults.ok());
  CHECK(defaults->host == "localhost");
  CHECK(defaults->port == 6379);
  CHECK(defaults->db == 0);

  auto auth = RedisOptions::FromUrl("redis://al%40ce:p%3Ass@10.0.0.1:7000/0");
  REQUIRE(auth.ok());
  CHECK(auth->username == "al@ce");
  CHECK(auth->password == "p:ss");
  CHECK(auth->host == "10.0.0.1");

  auto password_only = RedisOptions::FromUrl("redis://:secret@h:1/2");
  REQUIRE(password_only.ok());
  CHECK(password_only->username.empty());
  CHECK(password_only->password == "secret");

  auto v6 = RedisOptions::FromUrl("redis://[::1]:6390/1");
  REQUIRE(v6.ok());
  CHECK(v6->host == "::1");
  CHECK(v6->port == 6390);
  CHECK(v6->Describe() == "[::1]:6390 db 1");
}

TEST_CASE("unix:// URLs") {
  auto o = RedisOptions::FromUrl("unix:///tmp/r.sock?db=5&password=pw");
  REQUIRE(o.ok());
  CHECK(o->unix_path == "/tmp/r.sock");
  CHECK(o->db == 5);
  CHECK(o->password == "pw");
  CHECK(o->Describe() == "unix:/tmp/r.sock db 5");
  CHECK(RedisOptions::FromUrl("unix:///tmp/r.sock")->db == 0);
}

TEST_CASE("bad URLs are rejected with a reason") {
  const char* bad[] = {"http://h:1",          "redis://h:0",       "redis://h:99999",
                       "redis://h:port",      "redis://h:1/x",     "redis://h:",
                       "unix://relative.sock", "unix:///s?db=-1",   "unix:///s?bogus=1",
                       "redis://[::1",        "redis://%zz@h",     ""};
  for (const char* url : bad) {
    CAPTURE(url);
    auto o = RedisOptions::FromUrl(url);
    CHECK_FALSE(o.ok());
    CHECK(o.status().IsInvalidArgument());
    CHECK(o.status().message().find("bad Redis URL") != std::string::npos);
  }
}

TEST_CASE("REDIS_URL is the default") {
  unsetenv("REDIS_URL");
  auto defaults = RedisOptions::FromEnvironment();
  REQUIRE(defaults.ok());
  CHECK(defaults->Describe() == "127.0.0.1:6379 db 0");
  setenv("REDIS_URL", "redis://envhost:1234/2", 1);
  auto env = RedisOptions::FromEnvironment();
  REQUIRE(env.ok());
  CHECK(env->host == "envhost");
  CHECK(env->port == 1234);
  setenv("REDIS_URL", "nonsense", 1);
  auto bad = RedisOptions::FromEnvironment();
  CHECK_FALSE(bad.ok());
  CHECK(bad.status().message().rfind("REDIS_URL", 0) == 0);
  unsetenv("REDIS_URL");
}
