// reliableq web: the dashboard and its JSON API (src/web/), until SIGINT or
// SIGTERM.

#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <string_view>

#include "cli/commands.h"
#include "web/web_server.h"

namespace reliableq::cli {

// Named as well, so that the verbs' kVerb, kHelp and Run stay apart in a
// unity build (tools/quickstart).
namespace web_command {
namespace {

constexpr std::string_view kVerb = "web";

constexpr std::string_view kHelp =
    "usage: reliableq web [--http ADDR:PORT] [--read-only] [--basic-auth-file FILE]\n"
    "                     [--token-file FILE] [--insecure-no-auth] [--threads N]\n"
    "                     [--log-format text|json]\n"
    "\n"
    "Serves the dashboard (queues, busy processes, retries, scheduled and dead\n"
    "jobs, recovery of dead processes, the audit trail), its JSON API under /api/,\n"
    "the cluster's gauges on /metrics (Prometheus' text format) and /healthz, until\n"
    "SIGINT or SIGTERM. Every action (retry, delete, kill, quiet, stop, recover,\n"
    "clear) is logged and kept in <prefix>audit with who did it.\n"
    "\n"
    "Options:\n"
    "      --http ADDR:PORT PORT, HOST:PORT or [IPV6]:PORT to listen on\n"
    "                       (default: 127.0.0.1:7480)\n"
    "      --read-only      refuse every action (POST): 403\n"
    "      --basic-auth-file FILE\n"
    "                       users for HTTP basic authentication, one user:password\n"
    "                       a line (# comments and empty lines are skipped)\n"
    "      --token-file FILE\n"
    "                       a bearer token (the file's content less one final\n"
    "                       newline) for scripts and Prometheus:\n"
    "                       Authorization: Bearer TOKEN\n"
    "      --insecure-no-auth\n"
    "                       serve a non-loopback address without authentication\n"
    "                       (refused otherwise, exit status 2)\n"
    "      --threads N      requests served at once, and Redis connections at most\n"
    "                       (default: 8)\n"
    "      --log-format text|json\n"
    "                       log lines as text (default) or as one JSON object a\n"
    "                       line (see LOGS in reliableq(1))\n";

// More than any list of users; a larger file is a mistake.
constexpr size_t kMaxSecretFileBytes = 1024 * 1024;

Result<std::map<std::string, std::string>> ReadUsers(const std::string& path) {
  Result<std::string> content = ReadSecretFile("basic-auth-file", path, kMaxSecretFileBytes);
  if (!content.ok()) return content.status();
  std::map<std::string, std::string> users;
  size_t start = 0;
  int line_number = 0;
  while (start < content->size()) {
    size_t end = content->find('\n', start);
    if (end == std::string::npos) end = content->size();
    std::string line = content->substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    size_t colon = line.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == line.size()) {
      // The line number only: the line may hold a password.
      return Status::InvalidArgument("--basic-auth-file '" + path + "': line " +
                                     std::to_string(line_number) +
                                     " is not user:password (both non-empty)");
    }
    users[line.substr(0, colon)] = line.substr(colon + 1);
  }
  if (users.empty()) {
    return Status::InvalidArgument("--basic-auth-file '" + path + "' names no user");
  }
  return users;
}

Result<std::string> ReadToken(const std::string& path) {
  Result<std::string> content = ReadSecretFile("token-file", path, kMaxSecretFileBytes);
  if (!content.ok()) return content.status();
  std::string token = std::move(content.value());
  if (!token.empty() && token.back() == '\n') token.pop_back();
  if (!token.empty() && token.back() == '\r') token.pop_back();
  if (token.empty()) return Status::InvalidArgument("--token-file '" + path + "' is empty");
  if (token.find_first_of(" \t\r\n") != std::string::npos) {
    return Status::InvalidArgument("--token-file '" + path + "': the token has blanks in it");
  }
  return token;
}

int Run(const ParsedArgs& args) {
  if (!args.positionals().empty()) {
    return UsageError(kVerb, "unexpected argument '" + args.positionals()[0] + "'");
  }
  web::WebOptions options;
  Result<RedisOptions> redis = RedisFromArgs(args);
  if (!redis.ok()) return UsageError(kVerb, redis.status().message());
  options.redis = std::move(redis.value());
  options.prefix = PrefixFromArgs(args);
  if (std::optional<std::string> http = args.Value("http")) {
    Result<http::HttpAddress> address = http::HttpAddress::Parse(*http);
    if (!address.ok()) return UsageError(kVerb, "--http: " + address.status().message());
    options.address = *address;
  }
  options.read_only = args.Has("read-only");
  options.insecure_no_auth = args.Has("insecure-no-auth");
  if (std::optional<std::string> path = args.Value("basic-auth-file")) {
    Result<std::map<std::string, std::string>> users = ReadUsers(*path);
    if (!users.ok()) return UsageError(kVerb, users.status().message());
    options.users = std::move(users.value());
  }
  if (std::optional<std::string> path = args.Value("token-file")) {
    Result<std::string> token = ReadToken(*path);
    if (!token.ok()) return UsageError(kVerb, token.status().message());
    options.token = std::move(token.value());
  }
  if (std::optional<std::string> threads = args.Value("threads")) {
    std::optional<int> n = ParseCount(*threads);
    if (!n || *n < 1 || *n > 256) {
      return UsageError(kVerb, "--threads must be a number from 1 to 256");
    }
    options.threads = *n;
  }
  if (auto problem = ReadLogFormat(args, &options.log_format)) return UsageError(kVerb, *problem);
  const bool auth = !options.users.empty() || !options.token.empty();
  if (!auth && !options.insecure_no_auth && !web::IsLoopback(options.address.host)) {
    return UsageError(kVerb, "refusing to listen on " + options.address.ToString() +
                                 " without authentication (--basic-auth-file, --token-file, "
                                 "or --insecure-no-auth)");
  }

  WarnReadableSecrets(args, options.log_format);

  // SIGINT and SIGTERM wait for sigwait below: blocked before the
  // listener's threads start, which inherit the mask.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  Result<std::unique_ptr<web::WebServer>> server = web::WebServer::Start(std::move(options));
  if (!server.ok()) {
    if (server.status().IsInvalidArgument()) return UsageError(kVerb, server.status().message());
    return RuntimeError(server.status());
  }
  int signal_number = 0;
  sigwait(&stop, &signal_number);
  server->reset();
  return kExitOk;
}

}  // namespace
}  // namespace web_command

const Command& WebCommand() {
  static const Command command = {
      .name = web_command::kVerb,
      .summary = "serve the dashboard, its JSON API and cluster metrics",
      .help = web_command::kHelp,
      .options =
          {
              {.name = "http", .takes_value = true},
              {.name = "read-only"},
              {.name = "basic-auth-file", .takes_value = true},
              {.name = "token-file", .takes_value = true},
              {.name = "insecure-no-auth"},
              {.name = "threads", .takes_value = true},
              {.name = "log-format", .takes_value = true},
          },
      .run = web_command::Run,
  };
  return command;
}

}  // namespace reliableq::cli
