#include "keys.h"

#include <doctest/doctest.h>

using reliableq::Keys;

TEST_CASE("Sidekiq key names follow the data contract") {
  CHECK(Keys::Queue("default") == "queue:default");
  CHECK(Keys::QueueName("queue:critical") == "critical");
  CHECK(Keys::QueueName("retry").empty());
  CHECK(Keys::Work("h:1:abc") == "h:1:abc:work");
  CHECK(Keys::Workers("h:1:abc") == "h:1:abc:workers");
  CHECK(Keys::Signals("h:1:abc") == "h:1:abc-signals");
}

TEST_CASE("reliableq's own keys carry the prefix") {
  Keys keys;
  CHECK(keys.Working("h:1:abc", "default") == "reliableq:working:h:1:abc:default");
  CHECK(keys.Heartbeat("h:1:abc") == "reliableq:heartbeat:h:1:abc");
  CHECK(keys.Registry() == "reliableq:registry");
  CHECK(Keys("app1:").Registry() == "app1:registry");
}

TEST_CASE("dated stat keys use the UTC date") {
  CHECK(reliableq::UtcDate(0) == "1970-01-01");
  CHECK(reliableq::UtcDate(1700000000.5) == "2023-11-14");
}
