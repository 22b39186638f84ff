// The worker's options for a class's retries: --backoff and --retry-for
// (reliableq(1), RETRIES), read into ServerOptions::class_retries. Pure.

#ifndef RELIABLEQ_CLI_RETRY_OPTIONS_H_
#define RELIABLEQ_CLI_RETRY_OPTIONS_H_

#include <optional>
#include <string>
#include <string_view>

#include "cli/args.h"
#include "reliableq/server.h"

namespace reliableq::cli {

// A backoff as --backoff writes it: "10,60,300" (a table of seconds, the
// last for every later retry), "linear:STEP[:MAX]" or
// "exponential:STEP[:MAX]" (seconds). Every number above 0 and at most a
// year. Empty: not one of those.
std::optional<Backoff> ParseBackoff(std::string_view text);

// Reads the options above from `args` into `options`. Returns the usage
// problem, if any, naming the option and the value.
std::optional<std::string> ReadRetryOptions(const ParsedArgs& args, ServerOptions* options);

}  // namespace reliableq::cli

#endif  // RELIABLEQ_CLI_RETRY_OPTIONS_H_
