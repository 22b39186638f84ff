#include "cli/periodic_options.h"

#include "reliableq/periodic.h"

namespace reliableq::cli {

std::optional<std::string> ReadPeriodicOptions(const ParsedArgs& args, ServerOptions* options) {
  for (const std::string& spec : args.Values("periodic")) {
    size_t equals = spec.find('=');
    if (equals == std::string::npos) {
      return "--periodic needs NAME=JSON ({\"cron\":\"*/5 * * * *\",\"class\":\"Report\"}), not '" +
             spec + "'";
    }
    Result<PeriodicJob> job = ParsePeriodicJob(spec.substr(0, equals), spec.substr(equals + 1));
    if (!job.ok()) return job.status().message();
    for (const PeriodicJob& earlier : options->periodic_jobs) {
      if (earlier.name == job->name) return "periodic job \"" + job->name + "\" is declared twice";
    }
    options->periodic_jobs.push_back(std::move(*job));
  }
  return std::nullopt;
}

}  // namespace reliableq::cli
