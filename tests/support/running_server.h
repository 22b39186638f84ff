// RunningServer: a Server running on a thread of its own in a test, stopped
// and joined when it goes out of scope.

#ifndef RELIABLEQ_TESTS_RUNNING_SERVER_H_
#define RELIABLEQ_TESTS_RUNNING_SERVER_H_

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "reliableq/server.h"
#include "support/testutil.h"

namespace reliableq::testing {

// Runs a server on its own thread; stops it (and joins) on destruction.
class RunningServer {
 public:
  RunningServer(ServerOptions options, HandlerRegistry registry) {
    auto server = Server::Open(options, std::move(registry));
    REQUIRE_MESSAGE(server.ok(), server.status().ToString());
    server_ = std::move(server.value());
    thread_ = std::thread([this] {
      result_ = server_->Run();
      done_ = true;
    });
  }
  ~RunningServer() { StopAndWait(); }

  Server& server() { return *server_; }
  const std::string& identity() const { return server_->identity(); }

  // Stops and waits for Run to return (bounded); true if it returned OK.
  bool StopAndWait(std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    if (!thread_.joinable()) return result_.ok();
    server_->Stop();
    return Wait(limit);
  }
  // Waits for Run to return (bounded) without asking it to; true if it
  // returned OK.
  bool Wait(std::chrono::milliseconds limit) {
    if (!thread_.joinable()) return result_.ok();
    bool finished = WaitUntil([this] { return done_.load(); }, limit);
    REQUIRE_MESSAGE(finished, "Server::Run did not return");
    thread_.join();
    return result_.ok();
  }
  bool done() const { return done_.load(); }

 private:
  std::unique_ptr<Server> server_;
  std::thread thread_;
  std::atomic<bool> done_{false};
  Status result_;
};

}  // namespace reliableq::testing

#endif  // RELIABLEQ_TESTS_RUNNING_SERVER_H_
