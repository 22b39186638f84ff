// The worker's config file (`reliableq worker -C FILE`): YAML in the shape of
// Sidekiq's sidekiq.yml, where each key stands for one command-line option
// (`heartbeat_ttl: 10` for `--heartbeat-ttl 10`; Sidekiq's `:concurrency:`
// spelling with colons works too):
//
//   concurrency: 20
//   queues:
//     - [critical, 3]      # Sidekiq's [name, weight]
//     - default
//   redis: redis://:${REDIS_PASSWORD}@redis.internal:6379/0
//   require: [/usr/lib/myapp/jobs.so]
//
// What a file gives yields to the command line: an option given there
// replaces the file's value (a list such as queues as a whole). Unknown keys,
// a key given twice, values of the wrong type and unset environment
// variables are errors that name the file, the line and the key; nothing in
// a file is ignored.
//
// In every string value `${NAME}` becomes the environment variable NAME (an
// error when it is unset), `${NAME:-default}` falls back to the default, and
// `$$` is a single `$`.
//
// Thread safety: pure functions; the environment is read through the
// lookup given, the file by the caller.

#ifndef RELIABLEQ_CLI_CONFIG_FILE_H_
#define RELIABLEQ_CLI_CONFIG_FILE_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/args.h"
#include "reliableq/status.h"

namespace reliableq::cli {

// One key of a config file, as the option it stands for.
struct ConfigEntry {
  // The option's long name, e.g. "heartbeat-ttl".
  std::string option;
  // Its values as the command line would give them: one for most options,
  // one per item for a list, a single "" for a flag that is true.
  std::vector<std::string> values;
  // For messages: "worker.yml:3: key 'concurrency'".
  std::string where;
};

// The keys a file may have and the options they stand for, for the help
// and the manual: "concurrency", "queues", ...
std::vector<std::string_view> ConfigKeys();

using EnvironmentLookup = std::function<std::optional<std::string>(std::string_view name)>;

// Reads `text`, a config file named `file_name` (for messages).
// kInvalidArgument with one line naming file, line and key for anything the
// header above calls an error.
Result<std::vector<ConfigEntry>> ParseConfig(std::string_view text, std::string_view file_name,
                                             const EnvironmentLookup& environment);

// The process's environment (getenv), for ParseConfig.
std::optional<std::string> EnvironmentVariable(std::string_view name);

// `args` with each entry's values where the command line gave none.
ParsedArgs WithConfig(const ParsedArgs& args, const std::vector<ConfigEntry>& entries);

}  // namespace reliableq::cli

#endif  // RELIABLEQ_CLI_CONFIG_FILE_H_
