// Helpers shared by the interop tests (tests/interop/*_test.cc), which run
// Ruby Sidekiq, its API and the scripts in tests/interop against reliableq on
// the fixture's redis-server.
//
// A missing ruby, sidekiq or gem is a test failure, never a skip: tools/setup
// installs them. Every helper that fails does so through doctest's REQUIRE or
// CHECK, so it must be called from inside a test case.

#ifndef RELIABLEQ_TESTS_INTEROP_INTEROP_UTIL_H_
#define RELIABLEQ_TESTS_INTEROP_INTEROP_UTIL_H_

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/process.h"
#include "reliableq/redis_options.h"
#include "reliableq/server.h"
#include "reliableq/status.h"
#include "support/testutil.h"

namespace reliableq::testing {

// FindProgram(name) (testutil.h); fails the test (REQUIRE) with a message that points to
// tools/setup when the program is not installed.
std::string RequireProgram(const std::string& name);

// The path of `name` in tests/interop, which tests/interop/meson.build passes as
// $RELIABLEQ_INTEROP_DIR; fails the test binary when that is unset.
std::string InteropFile(const std::string& name);

// Everything in the file at `path`; "" when it cannot be read (a file that a
// process has not written yet reads as empty).
std::string ReadFile(const std::string& path);

// Replaces the file at `path` with `text`; fails the test (REQUIRE) when it
// cannot be written.
void WriteFile(const std::string& path, const std::string& text);

// A fresh directory under /tmp for one test's files; it is removed, with
// everything in it, when the object is destroyed. Fails the test (REQUIRE)
// when it cannot be made.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  // The path of `name` in the directory.
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Runs `ruby args...` to completion (bounded by `limit`) for a script that
// prepares or pushes something the test goes on with; fails the test
// (REQUIRE) unless ruby is installed and the script exits 0, showing its
// output. Returns what it printed.
CommandResult RunRuby(std::vector<std::string> args,
                      std::chrono::milliseconds limit = std::chrono::seconds(60));

// Runs `ruby args...` (bounded by `limit`) for a script that checks what it
// finds and reports as tests/interop/check_helper.rb does: on success it
// exits 0 and its stdout begins with `summary_prefix` (such as
// "jobs_compare: ") and holds "<N> checks passed"; otherwise it names every
// failed check on stderr and exits 1. CHECKs both, so that the test's own
// checks after it still run, and shows the script's output in the test log.
// Fails the test (REQUIRE) when ruby is not installed.
void RunRubyChecks(std::vector<std::string> args, const std::string& summary_prefix,
                   std::chrono::milliseconds limit = std::chrono::seconds(60));

// Options for a Server in these tests: the given queues and concurrency,
// errors-only logging, a 2 s shutdown timeout and heartbeat ttl and a 500 ms
// beat, so that a stopped or dead worker is noticed within seconds. Tests
// change what their scenario needs on the result.
ServerOptions InteropServerOptions(const RedisOptions& redis, std::vector<QueueSpec> queues,
                                   int concurrency);

// A reliableq Server running on its own thread from construction until Stop
// or destruction. The constructor fails the test (REQUIRE) when Server::Open
// fails. Not thread-safe: one test thread owns it.
class RunningServer {
 public:
  RunningServer(const ServerOptions& options, HandlerRegistry registry);
  ~RunningServer() { Stop(); }
  RunningServer(const RunningServer&) = delete;
  RunningServer& operator=(const RunningServer&) = delete;

  // Stops the server and waits for its thread; returns what Server::Run
  // returned. Later calls return the same status without waiting again.
  Status Stop();
  // The process identity the server registered (Server::identity).
  const std::string& identity() const { return server_->identity(); }

 private:
  std::unique_ptr<Server> server_;
  std::thread thread_;
  Status result_;
};

}  // namespace reliableq::testing

#endif  // RELIABLEQ_TESTS_INTEROP_INTEROP_UTIL_H_
