// The worker's --periodic NAME=JSON option and the config file's
// `periodic:` key (reliableq(1), PERIODIC JOBS), read into
// ServerOptions::periodic_jobs. Pure.

#ifndef RELIABLEQ_CLI_PERIODIC_OPTIONS_H_
#define RELIABLEQ_CLI_PERIODIC_OPTIONS_H_

#include <optional>
#include <string>

#include "cli/args.h"
#include "reliableq/server.h"

namespace reliableq::cli {

// Reads every --periodic into `options`. Returns the usage problem, one line
// naming the job and the field, if any.
std::optional<std::string> ReadPeriodicOptions(const ParsedArgs& args, ServerOptions* options);

}  // namespace reliableq::cli

#endif  // RELIABLEQ_CLI_PERIODIC_OPTIONS_H_
