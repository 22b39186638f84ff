// The worker's options for handlers in any language and for timeouts:
// --exec, --http-handler, --http-client-errors, --exec-env, --job-timeout,
// --kill-grace and --on-overrun (reliableq(1), HANDLERS, OUTCOMES and
// TIMEOUTS), read into
// ServerOptions. Pure: no file is looked at (Server::Open resolves and
// checks the programs).

#ifndef RELIABLEQ_CLI_HANDLER_OPTIONS_H_
#define RELIABLEQ_CLI_HANDLER_OPTIONS_H_

#include <optional>
#include <string>
#include <string_view>

#include "cli/args.h"
#include "reliableq/server.h"

namespace reliableq::cli {

// Separates the words of a program given as a list in the config file
// (exec: {EmailJob: [python3, email.py]}), which may contain spaces; a
// command line cannot contain it.
inline constexpr char kArgvSeparator = '\x1f';

// Reads the options above from `args` into `options`. Returns the usage
// problem, if any, naming the option and the value.
std::optional<std::string> ReadHandlerOptions(const ParsedArgs& args, ServerOptions* options);

}  // namespace reliableq::cli

#endif  // RELIABLEQ_CLI_HANDLER_OPTIONS_H_
