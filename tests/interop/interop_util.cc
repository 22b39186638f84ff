#include "interop_util.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include <doctest/doctest.h>

namespace reliableq::testing {

std::string RequireProgram(const std::string& name) {
  std::string found = FindProgram(name);
  REQUIRE_MESSAGE(!found.empty(), name << " is not installed: run tools/setup (installs ruby, "
                                          "ruby-sidekiq, ruby-gitlab-sidekiq-fetcher)");
  return found;
}

std::string InteropFile(const std::string& name) {
  return BuildPath("RELIABLEQ_INTEROP_DIR") + "/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  REQUIRE_MESSAGE(out.good(), "could not write " << path);
}

ScratchDir::ScratchDir() {
  char templ[] = "/tmp/reliableq-interop-XXXXXX";
  REQUIRE(mkdtemp(templ) != nullptr);
  path_ = templ;
}

ScratchDir::~ScratchDir() {
  // A destructor must not fail the test; a leftover directory in /tmp is
  // harmless.
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

namespace {

std::string CommandLine(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& arg : argv) line += (line.empty() ? "" : " ") + arg;
  return line;
}

}  // namespace

CommandResult RunRuby(std::vector<std::string> args, std::chrono::milliseconds limit) {
  args.insert(args.begin(), RequireProgram("ruby"));
  CommandResult result = RunCommand(args, limit);
  INFO(CommandLine(args) << "\nstdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(result.exit_code == 0);
  return result;
}

void RunRubyChecks(std::vector<std::string> args, const std::string& summary_prefix,
                   std::chrono::milliseconds limit) {
  args.insert(args.begin(), RequireProgram("ruby"));
  CommandResult result = RunCommand(args, limit);
  INFO(CommandLine(args) << "\nstdout: " << result.out << "\nstderr: " << result.err);
  // The count of checks belongs in the log of a passing run too: a script
  // that silently checked nothing would show 0 there.
  MESSAGE(result.out);
  CHECK(result.exit_code == 0);
  CHECK(result.out.rfind(summary_prefix, 0) == 0);
  CHECK(result.out.find(" checks passed\n") != std::string::npos);
}

ServerOptions InteropServerOptions(const RedisOptions& redis, std::vector<QueueSpec> queues,
                                   int concurrency) {
  ServerOptions options;
  options.redis = redis;
  options.queues = std::move(queues);
  options.concurrency = concurrency;
  options.shutdown_timeout = std::chrono::milliseconds(2000);
  options.heartbeat_ttl = std::chrono::milliseconds(2000);
  options.heartbeat_interval = std::chrono::milliseconds(500);
  options.log_level = LogLevel::kError;
  return options;
}

RunningServer::RunningServer(const ServerOptions& options, HandlerRegistry registry) {
  auto server = Server::Open(options, std::move(registry));
  REQUIRE_MESSAGE(server.ok(), server.status().ToString());
  server_ = std::move(server.value());
  thread_ = std::thread([this] { result_ = server_->Run(); });
}

Status RunningServer::Stop() {
  if (thread_.joinable()) {
    server_->Stop();
    thread_.join();
  }
  return result_;
}

}  // namespace reliableq::testing
