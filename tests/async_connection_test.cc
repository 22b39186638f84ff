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

  // Sends `commands`; `*statuses` is set when the callback runs (it must
  // run once).
  void Send(const redis::CommandList& commands, std::optional<std::vector<Status>>* statuses) {
    Status sent = connection_->Pipeline(commands, [statuses](std::vector<Status> got) {
      CHECK_FALSE(statuses->has_value());
      *statuses = std::move(got);
    });
    REQUIRE(sent.ok());
  }

  std::vector<Status> RunPipeline(const redis::CommandList& commands) {
    std::optional<std::vector<Status>> statuses;
    Send(commands, &statuses);
    RunUntil([&] { return statuses.has_value(); });
    REQUIRE(statuses.has_value());
    REQUIRE(statuses->size() == commands.size());
    return *statuses;
  }

  redis::AsyncConnection& connection() { return *connection_; }

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

bool AllOk(const std::vector<Status>& statuses) {
  for (const Status& s : statuses) {
    if (!s.ok()) return false;
  }
  return true;
}

TEST_CASE_FIXTURE(AsyncFixture, "a pipeline runs every command and reports each one") {
  // Arguments with the protocol's own delimiters and a NUL byte arrive as
  // they were given.
  std::string odd("a\r\n$3\r\n*1\0z", 12);
  Run({"RPUSH", "list", "x", odd, "y", odd});
  redis::CommandList commands;
  commands.Add({"LREM", "list", "-1", odd});
  commands.Add({"INCRBY", "counter", "7"});
  commands.Add({"LREM", "list", "-1", "absent"});
  CHECK(AllOk(RunPipeline(commands)));
  // LREM -1 took the copy nearest the tail.
  CHECK(LRange("list") == std::vector<std::string>{"x", odd, "y"});
  CHECK(Get("counter") == "7");
}

TEST_CASE_FIXTURE(AsyncFixture, "a command Redis refuses fails alone") {
  Run({"RPUSH", "list", "x", "y"});
  Run({"SET", "text", "not a list"});
  redis::CommandList commands;
  commands.Add({"LREM", "list", "-1", "x"});
  commands.Add({"LREM", "text", "-1", "x"});  // WRONGTYPE
  commands.Add({"INCRBY", "counter"});        // too few arguments
  commands.Add({"LREM", "list", "-1", "y"});
  std::vector<Status> statuses = RunPipeline(commands);
  CHECK(statuses[0].ok());
  CHECK(statuses[1].ToString().find("WRONGTYPE") != std::string::npos);
  CHECK_FALSE(statuses[2].ok());
  CHECK(statuses[3].ok());
  CHECK_FALSE(Exists("list"));
  CHECK_FALSE(Exists("counter"));
}

TEST_CASE_FIXTURE(AsyncFixture, "out of memory, LREM still runs while INCRBY is refused") {
  // Why acks are not a MULTI: Redis out of memory refuses every command
  // queued in a transaction, but runs one that cannot grow memory, as LREM.
  Run({"RPUSH", "list", "x"});
  struct Unlimited {  // the shared server gets its memory back however this ends
    RedisFixture* fixture;
    ~Unlimited() { fixture->Run({"CONFIG", "SET", "maxmemory", "0"}); }
  } unlimited{this};
  Run({"CONFIG", "SET", "maxmemory", "1"});
  redis::CommandList commands;
  commands.Add({"LREM", "list", "-1", "x"});
  commands.Add({"INCRBY", "counter", "1"});
  std::vector<Status> statuses = RunPipeline(commands);
  CHECK(statuses[0].ok());
  CHECK(statuses[1].ToString().find("OOM") != std::string::npos);
  Run({"CONFIG", "SET", "maxmemory", "0"});
  CHECK_FALSE(Exists("list"));
  CHECK_FALSE(Exists("counter"));
}

TEST_CASE_FIXTURE(AsyncFixture, "pipelines sent back to back keep their order") {
  std::vector<redis::CommandList> batches(50);
  for (size_t i = 0; i < batches.size(); ++i) {
    batches[i].Add({"RPUSH", "order", std::to_string(i)});
    batches[i].Add({"INCRBY", "counter", "1"});
  }
  // All sent before any reply is read.
  std::vector<std::optional<std::vector<Status>>> statuses(batches.size());
  for (size_t i = 0; i < batches.size(); ++i) Send(batches[i], &statuses[i]);
  RunUntil([&] { return statuses.back().has_value(); });
  for (size_t i = 0; i < batches.size(); ++i) {
    CAPTURE(i);
    REQUIRE(statuses[i].has_value());
    CHECK(AllOk(*statuses[i]));
  }
  std::vector<std::string> expected;
  for (size_t i = 0; i < batches.size(); ++i) expected.push_back(std::to_string(i));
  CHECK(LRange("order") == expected);
  CHECK(Get("counter") == "50");
}

TEST_CASE_FIXTURE(AsyncFixture, "a broken connection fails every command of a pipeline, once") {
  Run({"CLIENT", "KILL", "ID", std::to_string(connection().client_id())});
  redis::CommandList commands;
  for (int i = 0; i < 5; ++i) commands.Add({"INCRBY", "counter", "1"});
  std::vector<Status> statuses = RunPipeline(commands);
  for (const Status& s : statuses) CHECK(s.IsIoError());
  CHECK_FALSE(Exists("counter"));
}

}  // namespace
}  // namespace reliableq::testing
