// The worker's options for job records: --records, --record and
// --record-max-bytes (reliableq(1), JOB RECORDS), read into
// ServerOptions::records. Pure.

#ifndef RELIABLEQ_CLI_RECORD_OPTIONS_H_
#define RELIABLEQ_CLI_RECORD_OPTIONS_H_

#include <optional>
#include <string>

#include "cli/args.h"
#include "reliableq/server.h"

namespace reliableq::cli {

// Reads the options above from `args` into `options`. Returns the usage
// problem, if any, naming the option and the value.
std::optional<std::string> ReadRecordOptions(const ParsedArgs& args, ServerOptions* options);

}  // namespace reliableq::cli

#endif  // RELIABLEQ_CLI_RECORD_OPTIONS_H_
