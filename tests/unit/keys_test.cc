#include "protocol/keys.h"

#include <doctest/doctest.h>

using reliableq::protocol::Keys;

TEST_CASE("Sidekiq key names follow the data contract") {
  Keys keys;
  CHECK(keys.Queues() == "queues");
  CHECK(keys.Schedule() == "schedule");
  CHECK(keys.Retry() == "retry");
  CHECK(keys.Dead() == "dead");
  CHECK(keys.Processes() == "processes");
  CHECK(keys.Processed() == "stat:processed");
  CHECK(keys.Processed("2023-11-14") == "stat:processed:2023-11-14");
  CHECK(keys.Failed() == "stat:failed");
  CHECK(keys.Failed("2023-11-14") == "stat:failed:2023-11-14");
  CHECK(keys.Queue("default") == "queue:default");
  CHECK(keys.QueueName("queue:critical") == "critical");
  CHECK(keys.QueueName("retry").empty());
  CHECK(keys.Process("h:1:abc") == "h:1:abc");
  CHECK(keys.Work("h:1:abc") == "h:1:abc:work");
  CHECK(keys.Workers("h:1:abc") == "h:1:abc:workers");
  CHECK(keys.Signals("h:1:abc") == "h:1:abc-signals");
  // The prefix never reaches Sidekiq's keys in layout 1.
  CHECK(Keys("app1:").Queue("q") == "queue:q");
  CHECK(Keys("app1:").Retry() == "retry");
  CHECK(keys.layout() == 1);
}

TEST_CASE("reliableq's own keys carry the prefix") {
  Keys keys;
  CHECK(keys.Working("h:1:abc", "default") == "reliableq:working:h:1:abc:default");
  CHECK(keys.Heartbeat("h:1:abc") == "reliableq:heartbeat:h:1:abc");
  CHECK(keys.Registry() == "reliableq:registry");
  CHECK(keys.JanitorLease() == "reliableq:janitor");
  CHECK(keys.Paused() == "reliableq:paused");
  CHECK(keys.Limit("api") == "reliableq:limit:api");
  CHECK(keys.Unique("k") == "reliableq:unique:k");
  CHECK(keys.Pushed("j1") == "reliableq:pushed:j1");
  CHECK(keys.PeriodicTicks("n") == "reliableq:periodic:n:ticks");
  CHECK(keys.Schema() == "reliableq:schema");
  CHECK(keys.WakeQueue("q") == "reliableq:wake:queue:q");
  CHECK(keys.WakePaused() == "reliableq:wake:paused");
  CHECK(keys.ClientName("h 1") == "reliableq:h_1");
  CHECK(keys.prefix() == "reliableq:");
  CHECK(Keys("app1:").Registry() == "app1:registry");
}

TEST_CASE("layout 2 puts every key of a group, Sidekiq's included, under P{G}:") {
  Keys keys("rq:", "eu-1");
  CHECK(keys.layout() == 2);
  CHECK(keys.prefix() == "rq:{eu-1}:");
  CHECK(keys.root_prefix() == "rq:");
  CHECK(keys.group() == "eu-1");
  CHECK(keys.Queues() == "rq:{eu-1}:queues");
  CHECK(keys.Queue("default") == "rq:{eu-1}:queue:default");
  CHECK(keys.QueueName("rq:{eu-1}:queue:default") == "default");
  CHECK(keys.QueueName("queue:default").empty());
  CHECK(keys.QueueName("rq:{eu-2}:queue:default").empty());
  CHECK(keys.Schedule() == "rq:{eu-1}:schedule");
  CHECK(keys.Retry() == "rq:{eu-1}:retry");
  CHECK(keys.Dead() == "rq:{eu-1}:dead");
  CHECK(keys.Processes() == "rq:{eu-1}:processes");
  CHECK(keys.Processed("2023-11-14") == "rq:{eu-1}:stat:processed:2023-11-14");
  CHECK(keys.Failed() == "rq:{eu-1}:stat:failed");
  CHECK(keys.Process("h:1:abc") == "rq:{eu-1}:h:1:abc");
  CHECK(keys.Work("h:1:abc") == "rq:{eu-1}:h:1:abc:work");
  CHECK(keys.Workers("h:1:abc") == "rq:{eu-1}:h:1:abc:workers");
  CHECK(keys.Signals("h:1:abc") == "rq:{eu-1}:h:1:abc-signals");
  CHECK(keys.Working("h:1:abc", "q") == "rq:{eu-1}:working:h:1:abc:q");
  CHECK(keys.Heartbeat("h:1:abc") == "rq:{eu-1}:heartbeat:h:1:abc");
  CHECK(keys.Registry() == "rq:{eu-1}:registry");
  CHECK(keys.Unique("k") == "rq:{eu-1}:unique:k");
  CHECK(keys.Pushed("j1") == "rq:{eu-1}:pushed:j1");
  CHECK(keys.WakeQueue("q") == "rq:{eu-1}:wake:queue:q");
  CHECK(keys.WakeScheduled() == "rq:{eu-1}:wake:scheduled");
  CHECK(keys.WakePaused() == "rq:{eu-1}:wake:paused");
  CHECK(keys.Schema() == "rq:{eu-1}:schema");
  // The directory is the one key outside the group (its own slot).
  CHECK(keys.Groups() == "rq:groups");
  CHECK(Keys("rq:").Groups() == "rq:groups");
}

TEST_CASE("Keys::For takes the group from the Redis options") {
  reliableq::RedisOptions redis;
  CHECK(Keys::For("p:", redis).Queue("q") == "queue:q");
  redis.group = "g";
  CHECK(Keys::For("p:", redis).Queue("q") == "p:{g}:queue:q");
}

TEST_CASE("a group and the prefix beside it are checked at the boundary") {
  using reliableq::protocol::CheckGroup;
  using reliableq::protocol::CheckKeyLayout;
  CHECK(CheckGroup("a-Z_0.9").ok());
  CHECK(CheckGroup(std::string(64, 'g')).ok());
  CHECK(CheckGroup(std::string(65, 'g')).IsInvalidArgument());
  CHECK(CheckGroup("").IsInvalidArgument());
  CHECK(CheckGroup("a}b").IsInvalidArgument());
  CHECK(CheckGroup("a b").IsInvalidArgument());
  CHECK(CheckGroup("a:b").IsInvalidArgument());
  CHECK(CheckKeyLayout("rq:", "g").ok());
  CHECK(CheckKeyLayout("rq{x}:", "").ok());  // layout 1: the prefix is free
  CHECK(CheckKeyLayout("rq{x}:", "g").IsInvalidArgument());
  CHECK(CheckKeyLayout("rq}:", "g").IsInvalidArgument());
  CHECK(CheckKeyLayout("rq:", "a/b").IsInvalidArgument());
}

TEST_CASE("dated stat keys use the UTC date") {
  CHECK(reliableq::protocol::UtcDate(0) == "1970-01-01");
  CHECK(reliableq::protocol::UtcDate(1700000000.5) == "2023-11-14");
}
