#include "reliableq/status.h"

#include <doctest/doctest.h>

#include <memory>
#include <string>

using reliableq::Result;
using reliableq::Status;

TEST_CASE("an OK status has no message and prints OK") {
  Status s;
  CHECK(s.ok());
  CHECK(s.message().empty());
  CHECK(s.ToString() == "OK");
  CHECK(Status::OK().ok());
}

TEST_CASE("an error status keeps its code and message") {
  Status s = Status::NotFound("no job abc");
  CHECK_FALSE(s.ok());
  CHECK(s.IsNotFound());
  CHECK_FALSE(s.IsIoError());
  CHECK(s.ToString() == "Not found: no job abc");
  CHECK(Status::IoError("x").IsRetryable());
  CHECK(Status::Timeout("x").IsRetryable());
  CHECK_FALSE(Status::Script("x").IsRetryable());
  CHECK(Status::Timeout("no reply").WithContext("EVALSHA").ToString() ==
        "Timeout: EVALSHA: no reply");
  CHECK(Status::OK().WithContext("ignored").ok());
}

TEST_CASE("a Result holds a value or an error") {
  Result<std::string> value = std::string("jid");
  REQUIRE(value.ok());
  CHECK(*value == "jid");
  CHECK(value->size() == 3);

  Result<std::string> error = Status::InvalidArgument("empty class");
  CHECK_FALSE(error.ok());
  CHECK(error.status().IsInvalidArgument());

  Result<std::unique_ptr<int>> moved = std::make_unique<int>(7);
  std::unique_ptr<int> owned = std::move(moved).value();
  CHECK(*owned == 7);
}
