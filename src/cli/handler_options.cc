#include "cli/handler_options.h"

#include <set>

#include "cli/commands.h"
#include "server/options_check.h"  // kMaxDuration

namespace reliableq::cli {

namespace {

// The words of a program: at kArgvSeparator when the config file gave a
// list, else at spaces and tabs.
std::vector<std::string> ProgramWords(std::string_view text) {
  std::vector<std::string> words;
  bool listed = text.find(kArgvSeparator) != std::string_view::npos;
  std::string word;
  for (char c : text) {
    bool separator = listed ? c == kArgvSeparator : (c == ' ' || c == '\t');
    if (!separator) {
      word += c;
    } else if (listed || !word.empty()) {
      words.push_back(std::move(word));
      word.clear();
    }
  }
  if (listed || !word.empty()) words.push_back(std::move(word));
  return words;
}

}  // namespace

std::optional<std::string> ReadHandlerOptions(const ParsedArgs& args, ServerOptions* options) {
  for (const std::string& value : args.Values("exec")) {
    auto assignment = SplitAssignment(value);
    std::vector<std::string> argv;
    if (assignment) argv = ProgramWords(assignment->second);
    if (!assignment || argv.empty() || argv[0].empty()) {
      return "--exec needs CLASS=PROGRAM [ARG]..., not '" + value + "'";
    }
    if (options->command_handlers.contains(assignment->first)) {
      return "--exec: class '" + assignment->first + "' given twice";
    }
    options->command_handlers[assignment->first] = CommandHandler{std::move(argv)};
  }
  for (const std::string& value : args.Values("http-handler")) {
    auto assignment = SplitAssignment(value);
    if (!assignment || assignment->second.empty()) {
      return "--http-handler needs CLASS=URL, not '" + value + "'";
    }
    if (options->http_handlers.contains(assignment->first)) {
      return "--http-handler: class '" + assignment->first + "' given twice";
    }
    options->http_handlers[assignment->first] = HttpHandler{assignment->second};
  }
  // After every --http-handler: a class named here must be one of theirs.
  std::optional<HttpClientErrors> default_client_errors;
  std::set<std::string, std::less<>> client_errors_given;
  for (const std::string& value : args.Values("http-client-errors")) {
    auto assignment = SplitAssignment(value);
    std::string_view action = assignment ? std::string_view(assignment->second) : value;
    std::optional<HttpClientErrors> parsed;
    if (action == "dead") parsed = HttpClientErrors::kDead;
    if (action == "discard") parsed = HttpClientErrors::kDiscard;
    if (action == "retry") parsed = HttpClientErrors::kRetry;
    if (!parsed) {
      return "--http-client-errors needs [CLASS=]dead|discard|retry, not '" + value + "'";
    }
    if (!assignment) {
      if (default_client_errors) return "--http-client-errors: the default given twice";
      default_client_errors = parsed;
      continue;
    }
    auto handler = options->http_handlers.find(assignment->first);
    if (handler == options->http_handlers.end()) {
      return "--http-client-errors: class '" + assignment->first + "' has no --http-handler";
    }
    if (!client_errors_given.insert(assignment->first).second) {
      return "--http-client-errors: class '" + assignment->first + "' given twice";
    }
    handler->second.client_errors = *parsed;
  }
  if (default_client_errors) {
    for (auto& [job_class, handler] : options->http_handlers) {
      if (!client_errors_given.contains(job_class)) handler.client_errors = *default_client_errors;
    }
  }
  for (const std::string& value : args.Values("exec-env")) {
    if (value.empty() || value.front() == '=') {
      return "--exec-env needs NAME or NAME=VALUE, not '" + value + "'";
    }
    options->handler_environment.push_back(value);
  }
  for (const std::string& value : args.Values("job-timeout")) {
    auto assignment = SplitAssignment(value);
    std::string job_class = assignment ? assignment->first : "*";
    std::string seconds = assignment ? assignment->second : value;
    auto ms = ParseSeconds(seconds, false);
    if (!ms) {
      return "--job-timeout needs [CLASS=]SECONDS, seconds above 0 and at most " +
             SecondsText(server::kMaxDuration) + ", not '" + value + "'";
    }
    if (options->job_timeouts.contains(job_class)) {
      return "--job-timeout: " +
             (job_class == "*" ? std::string("the default") : "class '" + job_class + "'") +
             " given twice";
    }
    options->job_timeouts[job_class] = *ms;
  }
  if (auto text = args.Value("kill-grace")) {
    auto ms = ParseSeconds(*text, true);
    if (!ms) return "--kill-grace needs a number of seconds from 0 to 86400, not '" + *text + "'";
    options->kill_grace = *ms;
  }
  if (auto text = args.Value("on-overrun")) {
    if (*text == "keep") {
      options->on_overrun = OverrunAction::kKeepRunning;
    } else if (*text == "exit") {
      options->on_overrun = OverrunAction::kExitProcess;
    } else {
      return "--on-overrun needs keep or exit, not '" + *text + "'";
    }
  }
  return std::nullopt;
}

}  // namespace reliableq::cli
