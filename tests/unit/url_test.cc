#include <doctest/doctest.h>
#include <stdlib.h>

#include <chrono>
#include <string>
#include <utility>

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

TEST_CASE("rediss:// URLs are redis:// over TLS") {
  auto o = RedisOptions::FromUrl("rediss://al:p%40ss@cache.example.com:6380/4");
  REQUIRE(o.ok());
  CHECK(o->tls.enabled);
  CHECK(o->tls.verify_peer);  // on unless turned off
  CHECK(o->tls.ca_file.empty());
  CHECK(o->tls.server_name.empty());
  CHECK(o->host == "cache.example.com");
  CHECK(o->port == 6380);
  CHECK(o->db == 4);
  CHECK(o->username == "al");
  CHECK(o->password == "p@ss");
  CHECK(o->Describe() == "rediss://cache.example.com:6380 db 4");

  auto defaults = RedisOptions::FromUrl("rediss://localhost");
  REQUIRE(defaults.ok());
  CHECK(defaults->port == 6379);
  CHECK(defaults->db == 0);
  auto v6 = RedisOptions::FromUrl("rediss://[::1]:6390/1");
  REQUIRE(v6.ok());
  CHECK(v6->Describe() == "rediss://[::1]:6390 db 1");

  CHECK_FALSE(RedisOptions::FromUrl("redis://h")->tls.enabled);
  CHECK_FALSE(RedisOptions::FromUrl("unix:///tmp/r.sock")->tls.enabled);
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

namespace {

// FromUrl(url) fails with kInvalidArgument, saying `reason`.
void CheckRefused(const char* url, const std::string& reason) {
  CAPTURE(url);
  auto o = RedisOptions::FromUrl(url);
  REQUIRE_FALSE(o.ok());
  CHECK(o.status().IsInvalidArgument());
  CHECK(o.status().message().find(reason) != std::string::npos);
}

}  // namespace

TEST_CASE("bad URLs are rejected with a reason") {
  const char* bad[] = {"http://h:1",          "redis://h:0",       "redis://h:99999",
                       "redis://h:port",      "redis://h:1/x",     "redis://h:",
                       "unix://relative.sock", "unix:///s?db=-1",   "unix:///s?bogus=1",
                       "redis://[::1",        "redis://%zz@h",     "",
                       "rediss://h:0",        "rediss:///tmp/s",   "redisss://h"};
  for (const char* url : bad) CheckRefused(url, "bad Redis URL");
}

TEST_CASE("a redis:// URL without a host is refused") {
  for (const char* url : {"redis://", "redis:///0", "redis://:6380", "redis://:6380/1",
                          "redis://:pw@", "redis://:pw@:6380/0", "redis://[]:6380", "rediss://",
                          "rediss://:pw@:6380/0"}) {
    CheckRefused(url, "no host");
  }
}

TEST_CASE("a bad URL's error masks its password") {
  // Each URL fails for a reason other than its password, which must not
  // appear in the message; the rest of the URL still does.
  const std::pair<const char*, const char*> cases[] = {
      {"redis://:s3cret@h:port", "redis://:***@h:port"},
      {"redis://al:s3cret@h:0", "redis://al:***@h:0"},
      {"rediss://al:s3cret@h:0", "rediss://al:***@h:0"},
      {"redis://s3cret@h:1/x", "redis://***@h:1/x"},
      {"redis://:s3cret@", "redis://:***@"},
      {"redis://:pa/s3cret@h:1", "redis://:***@h:1"},        // an unescaped '/' in it
      {"redis://:pa@s3cret@h:port", "redis://:***@h:port"},  // an unescaped '@' in it
      {"redis://:%zzs3cret@h", "redis://:***@h"},            // the bad escape itself
      {"http://u:s3cret@h", "http://u:***@h"},               // an unknown scheme
      {":s3cret@h:6379", ":***@h:6379"},                     // no scheme at all
      {"unix:///s?password=s3cret&bogus=1", "unix:///s?password=***&bogus=***"},
      {"unix:///s?db=x&password=s3cret", "unix:///s?db=***&password=***"},
      {"unix:///s?password=%zs3cret", "unix:///s?password=***"},
  };
  for (const auto& [url, shown] : cases) {
    CAPTURE(url);
    auto o = RedisOptions::FromUrl(url);
    REQUIRE_FALSE(o.ok());
    const std::string message = o.status().ToString();
    CHECK_MESSAGE(message.find("s3cret") == std::string::npos, message);
    CHECK_MESSAGE(message.find(std::string("'") + shown + "'") != std::string::npos, message);
  }
  setenv("REDIS_URL", "redis://:s3cret@h:port", 1);
  auto from_env = RedisOptions::FromEnvironment();
  REQUIRE_FALSE(from_env.ok());
  CHECK(from_env.status().message().find("s3cret") == std::string::npos);
  unsetenv("REDIS_URL");
}

TEST_CASE("Describe never shows the password") {
  auto tcp = RedisOptions::FromUrl("redis://al:s3cret@h:7000/2");
  REQUIRE(tcp.ok());
  CHECK(tcp->Describe() == "h:7000 db 2");
  auto tls = RedisOptions::FromUrl("rediss://al:s3cret@h:7000/2");
  REQUIRE(tls.ok());
  tls->tls.key_file = "/keys/client.key";
  CHECK(tls->Describe() == "rediss://h:7000 db 2");
  auto unix_socket = RedisOptions::FromUrl("unix:///tmp/r.sock?password=s3cret");
  REQUIRE(unix_socket.ok());
  CHECK(unix_socket->Describe() == "unix:/tmp/r.sock db 0");
}

TEST_CASE("RedactUrls masks the password of every URL in a text") {
  using reliableq::RedactUrls;
  CHECK(RedactUrls("unexpected argument 'redis://u:s3cret@h:1/0'") ==
        "unexpected argument 'redis://u:***@h:1/0'");
  CHECK(RedactUrls("unknown command 'rediss://:s3cret@h'") == "unknown command 'rediss://:***@h'");
  CHECK(RedactUrls("a redis://:one@a and unix:///s?password=two&db=1 too") ==
        "a redis://:***@a and unix:///s?password=***&db=*** too");
  CHECK(RedactUrls("x redis://:s3cret@h\nredis://h:1 y") == "x redis://:***@h\nredis://h:1 y");
  // Text without a URL, or a URL without secrets, is kept.
  for (const char* kept : {"", "plain text", "mail me@example.com", "redis://h:6379/0",
                           "unix:///tmp/r.sock", "see 'reliableq --help'", "http://h/x?a=&b="}) {
    CHECK(RedactUrls(kept) == kept);
  }
}

TEST_CASE("RedactUrls masks the value of every query parameter, up to the URL's end") {
  using reliableq::RedactUrls;
  CHECK(RedactUrls("handler Hook: POST https://h/jobs?token=s3cret") ==
        "handler Hook: POST https://h/jobs?token=***");
  CHECK(RedactUrls("handler URL 'https://h/j?sig=abc&key=def#frag': no host") ==
        "handler URL 'https://h/j?sig=***&key=***#frag': no host");
  CHECK(RedactUrls("see http://h/?s3cret and then") == "see http://h/?*** and then");
  CHECK(RedactUrls("<http://u:pw@h/x?t=1>") == "<http://u:***@h/x?t=***>");
  CHECK(RedactUrls("a http://h/?t=1\nb http://h/?u=2") == "a http://h/?t=***\nb http://h/?u=***");
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

TEST_CASE("redis+sentinel:// URLs name the master and its sentinels") {
  auto o = RedisOptions::FromUrl(
      "redis+sentinel://al:pw@10.0.0.1:26380,sentinel-b,[::1]:5000/mymaster/3"
      "?sentinel_password=sp&sentinel_username=su&sentinel_timeout=250");
  REQUIRE(o.ok());
  CHECK(o->sentinel.master_name == "mymaster");
  REQUIRE(o->sentinel.sentinels.size() == 3);
  CHECK(o->sentinel.sentinels[0].host == "10.0.0.1");
  CHECK(o->sentinel.sentinels[0].port == 26380);
  CHECK(o->sentinel.sentinels[1].host == "sentinel-b");
  CHECK(o->sentinel.sentinels[1].port == 26379);  // Sentinel's default port
  CHECK(o->sentinel.sentinels[2].host == "::1");
  CHECK(o->sentinel.sentinels[2].port == 5000);
  CHECK(o->db == 3);
  CHECK(o->username == "al");  // the master's credentials
  CHECK(o->password == "pw");
  CHECK(o->sentinel.username == "su");  // the sentinels' own
  CHECK(o->sentinel.password == "sp");
  CHECK(o->sentinel.timeout == std::chrono::milliseconds(250));
  CHECK_FALSE(o->tls.enabled);
  CHECK(o->Describe() ==
        "master 'mymaster' of sentinels 10.0.0.1:26380, sentinel-b:26379, [::1]:5000 db 3");

  auto tls = RedisOptions::FromUrl("rediss+sentinel://h/m");
  REQUIRE(tls.ok());
  CHECK(tls->tls.enabled);
  CHECK(tls->db == 0);
  CHECK(tls->Describe() == "master 'm' of sentinels h:26379 (TLS) db 0");

  // A plain redis:// URL has no sentinel.
  auto plain = RedisOptions::FromUrl("redis://h:1/0");
  REQUIRE(plain.ok());
  CHECK(plain->sentinel.master_name.empty());
}

TEST_CASE("bad redis+sentinel:// URLs are rejected with a reason, passwords masked") {
  const std::pair<const char*, const char*> cases[] = {
      {"redis+sentinel://h:1", "no master name"},
      {"redis+sentinel://h:1/", "no master name"},
      {"redis+sentinel://h:1,/m", "no host"},
      {"redis+sentinel://h:x/m", "port must be"},
      {"redis+sentinel://h/m/x", "database must be"},
      {"redis+sentinel://h/m?bogus=1", "unknown parameter 'bogus'"},
      {"redis+sentinel://h/m?sentinel_timeout=0", "sentinel_timeout must be"},
      {"redis+sentinel://:s3cret@h:x/m", "redis+sentinel://:***@h:x/m"},
      {"redis+sentinel://h/m?sentinel_password=s3cret&x=1", "sentinel_password=***&x=***"},
  };
  for (const auto& [url, expected] : cases) {
    CAPTURE(url);
    auto o = RedisOptions::FromUrl(url);
    REQUIRE_FALSE(o.ok());
    const std::string message = o.status().ToString();
    CHECK_MESSAGE(message.find(expected) != std::string::npos, message);
    CHECK_MESSAGE(message.find("s3cret") == std::string::npos, message);
  }
  CHECK(reliableq::RedactUrls("x redis+sentinel://h/m?sentinel_password=s3cret&db=1") ==
        "x redis+sentinel://h/m?sentinel_password=***&db=***");
}

TEST_CASE("redis+cluster:// URLs name seed nodes and the group") {
  auto o =
      RedisOptions::FromUrl("redis+cluster://al:p%40w@127.0.0.1:7000,node-b,[::1]:7002/orders");
  REQUIRE(o.ok());
  REQUIRE(o->cluster.seeds.size() == 3);
  CHECK(o->cluster.seeds[0].host == "127.0.0.1");
  CHECK(o->cluster.seeds[0].port == 7000);
  CHECK(o->cluster.seeds[1].host == "node-b");
  CHECK(o->cluster.seeds[1].port == 6379);  // Redis's default port
  CHECK(o->cluster.seeds[2].host == "::1");
  CHECK(o->cluster.seeds[2].port == 7002);
  CHECK(o->cluster.route_key.empty());
  CHECK(o->group == "orders");
  CHECK(o->db == 0);
  CHECK(o->username == "al");  // every node's credentials
  CHECK(o->password == "p@w");
  CHECK_FALSE(o->tls.enabled);
  CHECK(o->sentinel.master_name.empty());
  CHECK(o->Describe() == "cluster 127.0.0.1:7000, node-b:6379, [::1]:7002 group 'orders'");

  auto query = RedisOptions::FromUrl("redis+cluster://127.0.0.1:7000,127.0.0.1:7001?group=a_b-c.9");
  REQUIRE(query.ok());
  CHECK(query->group == "a_b-c.9");
  CHECK(query->Describe() == "cluster 127.0.0.1:7000, 127.0.0.1:7001 group 'a_b-c.9'");
  // The path and the parameter may both say it, if they agree.
  auto both = RedisOptions::FromUrl("redis+cluster://h/g?group=g");
  REQUIRE(both.ok());
  CHECK(both->group == "g");

  auto tls = RedisOptions::FromUrl("rediss+cluster://h:7000/orders");
  REQUIRE(tls.ok());
  CHECK(tls->tls.enabled);
  CHECK(tls->Describe() == "cluster h:7000 (TLS) group 'orders'");
}

TEST_CASE("group= is accepted on every URL form and shown by Describe") {
  auto tcp = RedisOptions::FromUrl("redis://h:7000/2?group=orders");
  REQUIRE(tcp.ok());
  CHECK(tcp->group == "orders");
  CHECK(tcp->db == 2);
  CHECK(tcp->Describe() == "h:7000 db 2 group 'orders'");
  auto tls = RedisOptions::FromUrl("rediss://h?group=g1");
  REQUIRE(tls.ok());
  CHECK(tls->Describe() == "rediss://h:6379 db 0 group 'g1'");
  auto unix_socket = RedisOptions::FromUrl("unix:///tmp/r.sock?db=1&group=g2");
  REQUIRE(unix_socket.ok());
  CHECK(unix_socket->Describe() == "unix:/tmp/r.sock db 1 group 'g2'");
  auto sentinel = RedisOptions::FromUrl("redis+sentinel://h/m/1?group=g3");
  REQUIRE(sentinel.ok());
  CHECK(sentinel->Describe() == "master 'm' of sentinels h:26379 db 1 group 'g3'");
  // Without one, layout 1: nothing shown.
  auto plain = RedisOptions::FromUrl("redis://h");
  REQUIRE(plain.ok());
  CHECK(plain->group.empty());
  CHECK(plain->Describe() == "h:6379 db 0");
}

TEST_CASE("bad cluster URLs and groups are rejected with a one-line reason") {
  std::string long_group(65, 'g');
  const std::pair<std::string, const char*> cases[] = {
      {"redis+cluster://h:7000/orders/1", "names a group, not a database"},
      {"redis+cluster://h:7000,/g", "no host"},
      {"redis+cluster://h:x/g", "port must be"},
      {"redis+cluster://h/g?bogus=1", "unknown parameter 'bogus'"},
      {"redis+cluster://h/a?group=b", "two different groups"},
      {"redis+cluster://h/a{b}", "the group must be"},
      {"redis+cluster://h/a:b", "the group must be"},
      {"redis+cluster://h/" + long_group, "the group must be 1 to 64"},
      {"redis://h?group=a%20b", "the group must be"},
      {"redis://h?group=", "the group must be"},
      {"redis://h?db=1", "unknown parameter 'db'"},
      {"unix:///s?group=a}", "the group must be"},
      {"redis+cluster://:s3cret@h:x/g", "redis+cluster://:***@h:x/g"},
      // A database number copied from a Sidekiq-style URL is not a group.
      {"redis+cluster://h:7000/0", "the path of a cluster URL is its queue group, not a database"},
      {"redis+cluster://:s3cret@h:7000/15?group=15", "can still be named with --group or ?group="},
      // A missing node is shown in the cluster form.
      {"redis+cluster://", "no host (redis[s]+cluster://HOST[:PORT][,HOST[:PORT]...][/GROUP])"},
      {"redis+cluster:///g", "no host (redis[s]+cluster://"},
      {"rediss+cluster://u:s3cret@/g", "no host (redis[s]+cluster://"},
      {"redis+cluster://h:1,,h:2/g", "no host (redis[s]+cluster://"},
      {"redis+sentinel://:s3cret@/m", "no host (redis[s]+sentinel://"},
      {"rediss+cluster://u:s3cret@h/a?group=b", "rediss+cluster://u:***@h/a?group=***"},
  };
  for (const auto& [url, expected] : cases) {
    CAPTURE(url);
    auto o = RedisOptions::FromUrl(url);
    REQUIRE_FALSE(o.ok());
    CHECK(o.status().IsInvalidArgument());
    const std::string message = o.status().ToString();
    CHECK_MESSAGE(message.find(expected) != std::string::npos, message);
    CHECK_MESSAGE(message.find("s3cret") == std::string::npos, message);
    CHECK(message.find('\n') == std::string::npos);
  }
  // A cluster URL may leave the group to the program (migrate --group);
  // a connection without one is refused (Validate).
  auto groupless = RedisOptions::FromUrl("redis+cluster://h:7000/");
  REQUIRE(groupless.ok());
  CHECK(groupless->group.empty());
  CHECK(groupless->Describe() == "cluster h:7000");
  CHECK(groupless->Validate().message().find("needs a queue group") != std::string::npos);
  // A group of digits is named with group= (or --group).
  auto digits = RedisOptions::FromUrl("redis+cluster://h:7000?group=0");
  REQUIRE(digits.ok());
  CHECK(digits->group == "0");
  // A group with digits in it is a group.
  CHECK(RedisOptions::FromUrl("redis+cluster://h:7000/g0").ok());
  CHECK(RedisOptions::FromUrl("redis+cluster://h:7000/2024-q1").ok());
  // A group of exactly 64 is fine.
  CHECK(RedisOptions::FromUrl("redis+cluster://h/" + std::string(64, 'g')).ok());
  CHECK(reliableq::RedactUrls("x redis+cluster://u:s3cret@h:1,h:2/g y") ==
        "x redis+cluster://u:***@h:1,h:2/g y");
}

TEST_CASE("Validate refuses options a cluster connection cannot use") {
  RedisOptions o;
  o.cluster.seeds.push_back({"127.0.0.1", 7000});
  CHECK(o.Validate().message().find("needs a queue group") != std::string::npos);
  // A connection routed by a key of its own (the directory of groups)
  // needs no group.
  RedisOptions routed = o;
  routed.cluster.route_key = "reliableq:groups";
  CHECK(routed.Validate().ok());
  o.group = "orders";
  CHECK(o.Validate().ok());
  RedisOptions with_db = o;
  with_db.db = 3;
  CHECK(with_db.Validate().message().find("database 0 only") != std::string::npos);
  RedisOptions with_unix = o;
  with_unix.unix_path = "/tmp/r.sock";
  CHECK(with_unix.Validate().message().find("not a unix socket") != std::string::npos);
  RedisOptions with_sentinel = o;
  with_sentinel.sentinel.master_name = "m";
  CHECK(with_sentinel.Validate().message().find("exclude each other") != std::string::npos);
  RedisOptions bad_seed = o;
  bad_seed.cluster.seeds.push_back({"", 7001});
  CHECK(bad_seed.Validate().IsInvalidArgument());
  RedisOptions bad_group;
  bad_group.group = "a b";
  CHECK(bad_group.Validate().IsInvalidArgument());
  CHECK(RedisOptions().Validate().ok());
}
