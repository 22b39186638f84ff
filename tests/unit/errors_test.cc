#include "redis/errors.h"

#include <doctest/doctest.h>
#include <hiredis/hiredis.h>

using namespace reliableq;
using namespace reliableq::redis;

TEST_CASE("transport errors map to retryable codes and say where") {
  Status refused = FromTransportError(REDIS_ERR_IO, "Connection refused", "127.0.0.1:1 db 0");
  CHECK(refused.IsIoError());
  CHECK(refused.message() == "Connection refused (Redis at 127.0.0.1:1 db 0)");
  CHECK(FromTransportError(REDIS_ERR_IO, "Resource temporarily unavailable", "x").IsTimeout());
  CHECK(FromTransportError(REDIS_ERR_EOF, "Server closed the connection", "x").IsIoError());
  CHECK(FromTransportError(REDIS_ERR_PROTOCOL, "bad", "x").code() == Status::Code::kProtocol);
  CHECK(FromTransportError(REDIS_ERR_OTHER, "", "x").message().find("unknown error") == 0);
}

TEST_CASE("error replies map by their first word") {
  CHECK(IsNoScript(FromErrorReply("NOSCRIPT No matching script. Please use EVAL.")));
  CHECK_FALSE(IsNoScript(FromErrorReply("ERR unknown command")));
  Status missing = FromErrorReply("RQ_NOTFOUND no job with jid abc");
  CHECK(missing.IsNotFound());
  CHECK(missing.message() == "no job with jid abc");
  CHECK(FromErrorReply("RQ_INVALID queue is empty").IsInvalidArgument());
  CHECK(FromErrorReply("LOADING Redis is loading the dataset in memory").IsRetryable());
  CHECK(FromErrorReply("READONLY You can't write against a read only replica.").IsIoError());
  CHECK(FromErrorReply("NOREPLICAS Not enough good replicas to write.").IsIoError());
  CHECK(FromErrorReply("BUSY Redis is busy running a script.").IsTimeout());
  CHECK(FromErrorReply("WRONGPASS invalid username-password pair").IsInvalidArgument());
  Status script = FromErrorReply("ERR user_script:3: attempt to index a nil value");
  CHECK(script.IsScript());
  CHECK(script.message() == "ERR user_script:3: attempt to index a nil value");
}

TEST_CASE("MOVED and ASK on a connection without cluster options name a cluster node") {
  for (const char* reply : {"MOVED 13519 127.0.0.1:25003", "ASK 13519 127.0.0.1:25003"}) {
    CAPTURE(reply);
    Status plain = FromErrorReply(reply, /*plain=*/true);
    CHECK(plain.IsIoError());
    CHECK(plain.message() == std::string("Redis answered ") + reply +
                                 ": it is a node of a Redis Cluster, which a redis:// URL does "
                                 "not follow; use a redis+cluster:// URL (and a queue group)");
    // Through cluster options the redirection is the slot's business.
    CHECK(FromErrorReply(reply).message() == std::string("Redis cannot serve now: ") + reply);
  }
  CHECK(FromErrorReply("TRYAGAIN Multiple keys request during rehashing of slot", true)
            .message()
            .starts_with("Redis cannot serve now: TRYAGAIN"));
  CHECK(FromErrorReply("WRONGTYPE Operation against a key", true).IsScript());
}
