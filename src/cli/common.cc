// What every verb shares: the global options, error reporting, output.

#include <cstdio>
#include <string>

#include "cli/commands.h"

namespace reliableq::cli {

const std::vector<OptionSpec>& GlobalOptions() {
  static const std::vector<OptionSpec> options = {
      {.name = "redis", .takes_value = true},
      {.name = "prefix", .takes_value = true},
      {.name = "help", .short_name = 'h'},
  };
  return options;
}

std::string_view GlobalOptionsHelp() {
  return "Global options (before or after the command):\n"
         "      --redis URL      Redis to use: redis://[[user]:password@]host[:port][/db] or\n"
         "                       unix:///path/redis.sock[?db=N] (default: $REDIS_URL, else\n"
         "                       redis://127.0.0.1:6379/0)\n"
         "      --prefix P       prefix of reliableq's own keys (default: reliableq:)\n"
         "  -h, --help           show this help\n";
}

int UsageError(std::string_view verb, std::string_view reason) {
  std::string see =
      verb.empty() ? "reliableq --help" : "reliableq " + std::string(verb) + " --help";
  std::fprintf(stderr, "reliableq: %.*s (see '%s')\n", static_cast<int>(reason.size()),
               reason.data(), see.c_str());
  return kExitUsage;
}

int RuntimeError(const Status& status) {
  std::fprintf(stderr, "reliableq: %s\n", status.ToString().c_str());
  return kExitRuntime;
}

Result<RedisOptions> RedisFromArgs(const ParsedArgs& args) {
  if (std::optional<std::string> url = args.Value("redis")) return RedisOptions::FromUrl(*url);
  return RedisOptions::FromEnvironment();
}

std::string PrefixFromArgs(const ParsedArgs& args) {
  return args.Value("prefix").value_or("reliableq:");
}

bool WriteOut(std::string_view text) {
  size_t written = std::fwrite(text.data(), 1, text.size(), stdout);
  return std::fflush(stdout) == 0 && written == text.size();
}

}  // namespace reliableq::cli
