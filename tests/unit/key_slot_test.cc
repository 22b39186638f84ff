// The cluster routing's pure parts: the slot hash (with Redis's documented
// values; cluster_test.cc compares it with a real CLUSTER KEYSLOT), the
// MOVED/ASK parser and the CLUSTER SLOTS parser.

#include "redis/key_slot.h"

#include <doctest/doctest.h>
#include <hiredis/hiredis.h>

#include <string>
#include <vector>

#include "redis/cluster_lookup.h"
#include "redis/errors.h"
#include "redis/reply.h"

namespace reliableq::redis {

TEST_CASE("KeySlot gives Redis's documented slots") {
  // The cluster specification's CRC16 check value.
  CHECK(Crc16("123456789") == 0x31C3);
  // CLUSTER KEYSLOT's documentation and the cluster tutorial.
  CHECK(KeySlot("somekey") == 11058);
  CHECK(KeySlot("foo{hash_tag}") == 2515);
  CHECK(KeySlot("bar{hash_tag}") == 2515);
  CHECK(KeySlot("foo") == 12182);
  CHECK(KeySlot("bar") == 5061);
  CHECK(KeySlot("hello") == 866);
}

TEST_CASE("KeySlot follows the hash-tag rule") {
  // The tag: between the first '{' and the first '}' after it.
  CHECK(KeySlot("{user1000}.following") == KeySlot("user1000"));
  CHECK(KeySlot("reliableq:{orders}:queue:default") == KeySlot("orders"));
  CHECK(KeySlot("a}{b}") == KeySlot("b"));
  CHECK(KeySlot("{a}{b}") == KeySlot("a"));
  CHECK(KeySlot("{{a}}") == KeySlot("{a"));
  // An empty or unclosed tag: the whole key.
  CHECK(KeySlot("{}") == (Crc16("{}") & 16383));
  CHECK(KeySlot("foo{}{bar}") == (Crc16("foo{}{bar}") & 16383));
  CHECK(KeySlot("{a") == (Crc16("{a") & 16383));
  CHECK(KeySlot("") == 0);
  std::string binary("\0{\xff}\x01", 5);
  CHECK(KeySlot(binary) == KeySlot(std::string("\xff")));
}

TEST_CASE("a cluster connection's slot is its group's unless route_key names a key") {
  RedisOptions o;
  o.group = "orders";
  CHECK(ClusterRouteKey(o) == "{orders}");
  CHECK(ClusterSlot(o) == KeySlot("orders"));
  o.cluster.route_key = "reliableq:groups";
  CHECK(ClusterSlot(o) == KeySlot("reliableq:groups"));
}

TEST_CASE("ParseRedirect reads MOVED and ASK") {
  auto moved = ParseRedirect("MOVED 3999 127.0.0.1:6381");
  REQUIRE(moved.has_value());
  CHECK_FALSE(moved->ask);
  CHECK(moved->slot == 3999);
  CHECK(moved->host == "127.0.0.1");
  CHECK(moved->port == 6381);
  auto ask = ParseRedirect("ASK 0 [::1]:7000");
  REQUIRE(ask.has_value());
  CHECK(ask->ask);
  CHECK(ask->host == "::1");
  auto unknown_host = ParseRedirect("MOVED 16383 :7001");
  REQUIRE(unknown_host.has_value());
  CHECK(unknown_host->host.empty());
  CHECK(unknown_host->slot == 16383);
  for (const char* text : {"MOVED", "MOVED 1", "MOVED x h:1", "MOVED 16384 h:1", "MOVED 1 h",
                           "MOVED 1 h:0", "MOVED 1 h:70000", "ERR MOVED 1 h:1", "TRYAGAIN x"}) {
    CAPTURE(text);
    CHECK_FALSE(ParseRedirect(text).has_value());
  }
  CHECK(IsTryAgainReply("TRYAGAIN Multiple keys request during rehashing of slot"));
  CHECK_FALSE(IsTryAgainReply("ERR TRYAGAIN"));
  // Both are "cannot serve now": retried, never a script error.
  CHECK(FromErrorReply("MOVED 1 h:1").IsIoError());
  CHECK(FromErrorReply("ASK 1 h:1").IsIoError());
}

namespace {

// A reply built by hiredis's own parser from RESP text.
ReplyPtr Parse(const std::string& resp) {
  ReaderPtr reader = NewReader();
  redisReaderFeed(reader.get(), resp.data(), resp.size());
  void* raw = nullptr;
  REQUIRE(redisReaderGetReply(reader.get(), &raw) == REDIS_OK);
  REQUIRE(raw != nullptr);
  return ReplyPtr(static_cast<redisReply*>(raw));
}

std::string Node(const std::string& host, int port) {
  return "*3\r\n$" + std::to_string(host.size()) + "\r\n" + host + "\r\n:" + std::to_string(port) +
         "\r\n$2\r\nid\r\n";
}

}  // namespace

TEST_CASE("ParseClusterSlots finds the primary of a slot and learns every node") {
  std::string resp =
      "*2\r\n"
      "*4\r\n:0\r\n:8191\r\n" +
      Node("127.0.0.1", 7000) + Node("127.0.0.1", 7003) + "*3\r\n:8192\r\n:16383\r\n" +
      Node("", 7001);
  ReplyPtr reply = Parse(resp);
  Endpoint asked{"10.0.0.9", 7005, {}};
  std::vector<Endpoint> nodes;
  auto low = ParseClusterSlots(reply.get(), 8191, asked, &nodes);
  REQUIRE(low.ok());
  CHECK(low->Describe() == "127.0.0.1:7000");
  REQUIRE(nodes.size() == 3);
  CHECK(nodes[1].port == 7003);
  // A node without an address is where the question went.
  CHECK(nodes[2].host == "10.0.0.9");
  auto high = ParseClusterSlots(reply.get(), 8192, asked, &nodes);
  REQUIRE(high.ok());
  CHECK(high->Describe() == "10.0.0.9:7001");

  ReplyPtr partial = Parse("*1\r\n*3\r\n:0\r\n:100\r\n" + Node("h", 1));
  auto uncovered = ParseClusterSlots(partial.get(), 101, asked, &nodes);
  CHECK(uncovered.status().IsNotFound());
  CHECK(uncovered.status().message().find("no node serves slot 101") != std::string::npos);
  ReplyPtr wrong = Parse("+OK\r\n");
  CHECK_FALSE(ParseClusterSlots(wrong.get(), 1, asked, &nodes).ok());
}

}  // namespace reliableq::redis
