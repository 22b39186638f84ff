#include "redis/async_connection.h"

#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "redis/reply.h"
#include "testutil.h"

namespace reliableq::testing {
namespace {

// One AsyncConnection on its own loop, driven by the test thread.
class AsyncFixture : public RedisFixture {
 public:
  AsyncFixture() {
    uv_loop_init(&loop_);
    connection_.emplace(&loop_, options());
    std::optional<Status> ready;
    connection_->Connect([&](const Status& s) { ready = s; });
    RunUntil([&] { return ready.has_value(); });
    REQUIRE(ready.has_value());
    REQUIRE(ready->ok());
  }

  ~AsyncFixture() {
    connection_->Close();
    connection_.reset();
    // The connection's handles close on the next turns of the loop.
    for (int i = 0; i < 100 && uv_loop_alive(&loop_); ++i) uv_run(&loop_, UV_RUN_NOWAIT);
    uv_loop_close(&loop_);
  }

  // The transaction's status, and the integer replies of its commands.
  struct Outcome {
    Status status;
    std::vector<long long> integers;
  };

  // Sends `commands`; `*outcome` is set when the callback runs.
  void Send(const redis::CommandList& commands, std::optional<Outcome>* outcome) {
    Status sent = connection_->Transaction(commands, [outcome](const Status& s, redisReply* reply) {
      Outcome o{s, {}};
      if (s.ok()) {
        for (size_t i = 0; i < reply->elements; ++i) {
          o.integers.push_back(reply->element[i]->type == REDIS_REPLY_INTEGER
                                   ? reply->element[i]->integer
                                   : -1000);
        }
      }
      *outcome = o;
    });
    REQUIRE(sent.ok());
  }

  Outcome Transact(const redis::CommandList& commands) {
    std::optional<Outcome> outcome;
    Send(commands, &outcome);
    RunUntil([&] { return outcome.has_value(); });
    REQUIRE(outcome.has_value());
    return *outcome;
  }

  // Runs the loop until `done`; bounded, so a reply that never comes fails
  // the test instead of hanging it.
  void RunUntil(const std::function<bool()>& done) {
    WaitUntil([&] {
      uv_run(&loop_, UV_RUN_NOWAIT);
      return done();
    });
  }

 private:

  uv_loop_t loop_;
  std::optional<redis::AsyncConnection> connection_;
};

TEST_CASE_FIXTURE(AsyncFixture, "a transaction runs every command and returns their replies") {
  // Arguments with the protocol's own delimiters and a NUL byte arrive as
  // they were given.
  std::string odd("a\r\n$3\r\n*1\0z", 12);
  Run({"RPUSH", "list", "x", odd, "y", odd});
  redis::CommandList commands;
  commands.Add({"LREM", "list", "-1", odd});
  commands.Add({"INCRBY", "counter", "7"});
  commands.Add({"LREM", "list", "-1", "absent"});
  Outcome outcome = Transact(commands);
  REQUIRE(outcome.status.ok());
  CHECK(outcome.integers == std::vector<long long>{1, 7, 0});
  // LREM -1 took the copy nearest the tail.
  CHECK(LRange("list") == std::vector<std::string>{"x", odd, "y"});
  CHECK(Get("counter") == "7");
}

TEST_CASE_FIXTURE(AsyncFixture, "a command Redis will not queue fails the transaction whole") {
  Run({"RPUSH", "list", "x"});
  redis::CommandList commands;
  commands.Add({"LREM", "list", "-1", "x"});
  commands.Add({"INCRBY", "counter"});  // too few arguments
  Outcome outcome = Transact(commands);
  CHECK_FALSE(outcome.status.ok());
  CHECK(outcome.status.ToString().find("EXECABORT") != std::string::npos);
  CHECK(LRange("list") == std::vector<std::string>{"x"});
  CHECK_FALSE(Exists("counter"));
  // The connection goes on working.
  redis::CommandList next;
  next.Add({"INCRBY", "counter", "2"});
  CHECK(Transact(next).integers == std::vector<long long>{2});
}

TEST_CASE_FIXTURE(AsyncFixture, "a command failing inside the transaction is reported") {
  Run({"SET", "text", "not a list"});
  redis::CommandList commands;
  commands.Add({"LREM", "text", "-1", "x"});
  commands.Add({"INCRBY", "counter", "1"});
  Outcome outcome = Transact(commands);
  CHECK_FALSE(outcome.status.ok());
  CHECK(outcome.status.ToString().find("WRONGTYPE") != std::string::npos);
  // Redis does not undo the commands around the failed one.
  CHECK(Get("counter") == "1");
}

TEST_CASE_FIXTURE(AsyncFixture, "transactions sent back to back keep their order") {
  std::vector<redis::CommandList> batches(50);
  for (size_t i = 0; i < batches.size(); ++i) {
    batches[i].Add({"RPUSH", "order", std::to_string(i)});
    batches[i].Add({"INCRBY", "counter", "1"});
  }
  // All sent before any reply is read.
  std::vector<std::optional<Outcome>> outcomes(batches.size());
  for (size_t i = 0; i < batches.size(); ++i) Send(batches[i], &outcomes[i]);
  RunUntil([&] { return outcomes.back().has_value(); });
  for (size_t i = 0; i < batches.size(); ++i) {
    CAPTURE(i);
    REQUIRE(outcomes[i].has_value());
    long long n = static_cast<long long>(i) + 1;
    CHECK(outcomes[i]->integers == std::vector<long long>{n, n});
  }
  std::vector<std::string> expected;
  for (size_t i = 0; i < batches.size(); ++i) expected.push_back(std::to_string(i));
  CHECK(LRange("order") == expected);
}

}  // namespace
}  // namespace reliableq::testing
