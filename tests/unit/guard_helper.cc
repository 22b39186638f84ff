// A stand-in for a worker, for command_runner_test.cc: starts a
// ProcessGuard, writes its supervisor's pid to <pid file>.guard, then runs a
// command handler that starts a grandchild and writes "<handler pid>
// <grandchild pid>" to <pid file>, and waits for the SIGKILL the test sends.
//
// Usage: guard_helper <pid file>

#include <cstdio>
#include <stop_token>
#include <string>

#include "exec/command_runner.h"
#include "exec/process_guard.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: guard_helper <pid file>\n");
    return 2;
  }
  const std::string pid_file = argv[1];
  auto guard = reliableq::exec::ProcessGuard::Start();
  if (!guard.ok()) {
    std::fprintf(stderr, "guard_helper: %s\n", guard.status().ToString().c_str());
    return 1;
  }
  std::FILE* guard_file = std::fopen((pid_file + ".guard").c_str(), "w");
  if (guard_file == nullptr) return 1;
  std::fprintf(guard_file, "%d\n", static_cast<int>((*guard)->supervisor_pid()));
  std::fclose(guard_file);

  reliableq::exec::CommandRequest request;
  // The pids are written to a temporary name first, so that the test never
  // reads half a line.
  request.argv = {"/bin/sh", "-c",
                  "sleep 3600 & echo \"$$ $!\" > \"$0.tmp\" && mv \"$0.tmp\" \"$0\"; wait",
                  pid_file};
  request.environment = {"PATH=/usr/bin:/bin"};
  request.job = "{}";
  reliableq::exec::CommandOutcome outcome =
      reliableq::exec::RunCommand(request, guard->get(), std::stop_token());
  std::fprintf(stderr, "guard_helper: the handler %s\n", outcome.Describe().c_str());
  return 1;
}
