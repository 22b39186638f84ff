#include "server/external_handlers.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/log.h"
#include "base/text_escape.h"
#include "exec/command_runner.h"
#include "exec/http_caller.h"
#include "exec/outcome_channel.h"
#include "exec/process_guard.h"
#include "reliableq/redis_options.h"  // RedactUrls

namespace reliableq::server {

namespace {

// What a handler's environment gets for PATH unless it is configured:
// enough to find an interpreter, and nothing of this process's own.
constexpr std::string_view kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

// A failed handler's stderr (or response body) kept in error_message: the
// end of a traceback, which is where its cause is. The Web UI shows it.
constexpr size_t kErrorOutputLimit = 1024;

// `text` for an error message: a NUL byte, which would end the message
// there (std::exception::what()), shown as the two characters \0.
std::string WithoutNul(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\0') {
      out += "\\0";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Tail(std::string_view text, size_t limit) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
    text.remove_suffix(1);
  }
  if (text.size() > limit) return "..." + WithoutNul(text.substr(text.size() - limit));
  return WithoutNul(text);
}

std::string Head(std::string_view text, size_t limit) {
  if (text.size() > limit) return WithoutNul(text.substr(0, limit)) + "...";
  return WithoutNul(text);
}

// The error class of every failure a program's outcome line asks for.
constexpr const char* kCommandFailed = "Reliableq::CommandFailed";
// Lines of one run's outcome channel that the worker logs (log, result and
// progress lines, and warnings about bad lines); past this, the rest are
// counted and dropped, and one warning says how many. Outcome lines are
// never dropped: only the last one counts, and it takes no more memory.
constexpr int kMostChannelLogLines = 256;
// How much of a line the channel could not read a warning shows.
constexpr size_t kBadLineLogLimit = 1024;

// What a program says on its outcome channel, read line by line as it
// comes, on the processor thread that runs it (in its job's log context).
class ChannelReader {
 public:
  // The job's result and progress go to `job`.
  ChannelReader(const base::Logger& log, const JobView& job) : log_(log), job_(job) {}

  void OnLine(std::string_view line, bool too_long, size_t length) {
    if (too_long) {
      Warn("a line of " + std::to_string(length) + " bytes, above the " +
           std::to_string(exec::kMaxChannelLine) + " allowed: '" + base::Escaped(line) + "...'");
      return;
    }
    Result<exec::ChannelLine> parsed = exec::ParseChannelLine(line);
    if (!parsed.ok()) {
      Warn(parsed.status().message() + ": '" + base::Escaped(Head(line, kBadLineLogLimit)) + "'");
      return;
    }
    switch (parsed->verb) {
      case exec::ChannelLine::Verb::kLog:
        if (Budget()) {
          log_.Log(parsed->level, "handler_log", "%s", base::Escaped(parsed->text).c_str());
        }
        return;
      case exec::ChannelLine::Verb::kResult:
        job_.SetResult(parsed->text);
        return;
      case exec::ChannelLine::Verb::kProgress:
        job_.ReportProgress(parsed->percent, parsed->text);
        return;
      default:
        outcome_ = std::move(*parsed);  // the last one wins
    }
  }

  // Once the program has ended: how many lines the budget dropped.
  void Finish() const {
    if (dropped_ > 0) {
      log_.Log(LogLevel::kWarn, "handler_channel_ignored",
               "outcome channel: %zu more lines not logged (at most %d a run)", dropped_,
               kMostChannelLogLines);
    }
  }

  const std::optional<exec::ChannelLine>& outcome() const { return outcome_; }

 private:
  bool Budget() {
    if (logged_ < kMostChannelLogLines) {
      ++logged_;
      return true;
    }
    ++dropped_;
    return false;
  }

  void Warn(const std::string& what) {
    if (Budget()) {
      log_.Log(LogLevel::kWarn, "handler_channel_ignored", "outcome channel: ignored %s",
               what.c_str());
    }
  }

  const base::Logger& log_;
  const JobView& job_;
  std::optional<exec::ChannelLine> outcome_;
  int logged_ = 0;
  size_t dropped_ = 0;
};

// What a program's last outcome line asks for, thrown. `stderr_tail`
// completes a failure without a message of its own.
[[noreturn]] void ThrowChannelOutcome(const exec::ChannelLine& line,
                                      const std::string& stderr_tail) {
  std::string message = line.text;
  if (message.empty()) {
    message = "the program said " + std::string(exec::VerbName(line.verb));
    if (!stderr_tail.empty()) message += "; stderr: " + stderr_tail;
  }
  switch (line.verb) {
    case exec::ChannelLine::Verb::kSnooze:
      throw JobSnooze(line.delay);
    case exec::ChannelLine::Verb::kRetry:
      throw JobRetry(static_cast<double>(line.delay.count()) / 1000, message, kCommandFailed);
    case exec::ChannelLine::Verb::kDiscard:
      throw JobDiscard(message, kCommandFailed);
    case exec::ChannelLine::Verb::kDead:
      throw JobDead(message, kCommandFailed);
    default:
      throw JobFailure::Named(kCommandFailed, message);
  }
}

// OK when `path` is a file this process may execute; access(X_OK) alone
// also takes a directory.
Status CheckExecutable(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    return Status::InvalidArgument(path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(path + ": not an executable file");
  if (access(path.c_str(), X_OK) != 0) {
    return Status::InvalidArgument(path + ": " + std::strerror(errno));
  }
  return Status::OK();
}

// The handlers' environment from ServerOptions::handler_environment.
Result<std::vector<std::string>> BaseEnvironment(const std::vector<std::string>& entries) {
  std::vector<std::string> environment;
  bool has_path = false;
  for (const std::string& entry : entries) {
    size_t equals = entry.find('=');
    std::string name = entry.substr(0, equals);
    if (name.empty() || name.find_first_of(" \t\n") != std::string::npos) {
      return Status::InvalidArgument("handler environment: '" + name +
                                     "' is not a variable name (NAME=VALUE or NAME)");
    }
    if (name.starts_with("RELIABLEQ_")) {
      return Status::InvalidArgument("handler environment: " + name +
                                     " is set by the worker for each job");
    }
    has_path = has_path || name == "PATH";
    if (equals != std::string::npos) {
      environment.push_back(entry);
    } else if (const char* value = std::getenv(name.c_str())) {
      environment.push_back(name + "=" + value);
    }
    // NAME alone and unset here: the handlers do not get it either.
  }
  if (!has_path) environment.push_back("PATH=" + std::string(kDefaultPath));
  return environment;
}

std::string_view PathOf(const std::vector<std::string>& environment) {
  for (const std::string& entry : environment) {
    if (entry.starts_with("PATH=")) return std::string_view(entry).substr(5);
  }
  return kDefaultPath;
}

// argv[0] as an absolute path: itself when it names a file, else the first
// executable of that name in `path`.
Result<std::string> ResolveProgram(const std::string& program, std::string_view path) {
  if (program.empty()) return Status::InvalidArgument("no program given");
  if (program.find('/') != std::string::npos) {
    if (Status s = CheckExecutable(program); !s.ok()) return s;
    if (program.front() == '/') return program;
    char* absolute = realpath(program.c_str(), nullptr);
    if (absolute == nullptr) return Status::InvalidArgument(program + ": " + std::strerror(errno));
    std::string out = absolute;
    std::free(absolute);
    return out;
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view dir = path.substr(start, end - start);
    if (!dir.empty() && dir.front() == '/') {
      std::string candidate = std::string(dir) + "/" + program;
      if (CheckExecutable(candidate).ok()) return candidate;
    }
    start = end + 1;
  }
  return Status::InvalidArgument(program + ": not found in the handlers' PATH (" +
                                 std::string(path) + ")");
}

std::string SecondsText(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(ms.count()) / 1000);
  return buf;
}

// What every external handler learns of its job besides the JSON, as
// header-style names: X-Reliableq-<name> for HTTP, RELIABLEQ_<NAME> (upper
// case, - as _) for commands. Retry-Count only after a failure (Sidekiq's
// retry_count), Timeout only with one (the seconds left).
std::vector<std::pair<std::string_view, std::string>> JobFacts(const JobView& job,
                                                               std::chrono::milliseconds left) {
  std::vector<std::pair<std::string_view, std::string>> facts = {
      {"Jid", std::string(job.jid())},
      {"Class", std::string(job.job_class())},
      {"Queue", std::string(job.queue())},
      {"Interrupted-Count", std::to_string(job.interrupted_count())}};
  if (job.retry_count()) facts.emplace_back("Retry-Count", std::to_string(*job.retry_count()));
  if (left.count() > 0) facts.emplace_back("Timeout", SecondsText(left));
  return facts;
}

// The job's remaining time, at least a millisecond once it has a deadline.
std::chrono::milliseconds Remaining(const JobView& job, const Clock& clock) {
  if (!job.deadline()) return std::chrono::milliseconds(0);
  auto left = std::chrono::ceil<std::chrono::milliseconds>(*job.deadline() - clock.Monotonic());
  return std::max(left, std::chrono::milliseconds(1));
}

}  // namespace

struct ExternalHandlers::Shared {
  std::shared_ptr<const Clock> clock;
  std::shared_ptr<const base::Logger> log;
  std::vector<std::string> environment;
  std::chrono::milliseconds kill_grace{5000};
  std::unique_ptr<exec::ProcessGuard> guard;  // with command handlers
  std::unique_ptr<exec::HttpCaller> caller;   // with HTTP handlers

  void RunCommandJob(const std::vector<std::string>& argv, const JobView& job) const;
  void PostJob(const HttpHandler& target, const JobView& job) const;
};

void ExternalHandlers::Shared::RunCommandJob(const std::vector<std::string>& argv,
                                             const JobView& job) const {
  exec::CommandRequest request;
  request.argv = argv;
  request.environment = environment;
  request.timeout = Remaining(job, *clock);
  for (const auto& [name, value] : JobFacts(job, request.timeout)) {
    std::string variable = "RELIABLEQ_";
    for (char c : name) variable += c == '-' ? '_' : static_cast<char>(std::toupper(c));
    request.environment.push_back(variable + "=" + value);
  }
  request.job = job.raw();
  request.kill_grace = kill_grace;
  ChannelReader channel(*log, job);
  request.on_channel_line = [&channel](std::string_view line, bool too_long, size_t length) {
    channel.OnLine(line, too_long, length);
  };
  exec::CommandOutcome outcome = exec::RunCommand(request, guard.get(), job.stop_token());
  channel.Finish();
  std::string stderr_tail = Tail(outcome.stderr_tail, kErrorOutputLimit);
  // The program's word wins over how it exited, whatever the status or the
  // signal it died of; but not over its end at the worker's hands (its
  // timeout, a stop), which may have cut it short, nor over a start that
  // never was.
  bool ended_itself = outcome.end == exec::CommandOutcome::End::kExited ||
                      outcome.end == exec::CommandOutcome::End::kSignaled;
  if (ended_itself && channel.outcome()) ThrowChannelOutcome(*channel.outcome(), stderr_tail);
  if (outcome.succeeded()) return;
  std::string message = outcome.Describe();
  if (!stderr_tail.empty()) message += "; stderr: " + stderr_tail;
  switch (outcome.end) {
    case exec::CommandOutcome::End::kTimedOut:
      throw JobTimeout(message);
    case exec::CommandOutcome::End::kExited:
      throw JobFailure::Named("Reliableq::CommandFailed", message);
    case exec::CommandOutcome::End::kSignaled:
      throw JobFailure::Named("Reliableq::CommandKilled", message);
    case exec::CommandOutcome::End::kStopped:
      throw JobFailure::Named("Reliableq::JobStopped", message);
    case exec::CommandOutcome::End::kNotStarted:
      break;
  }
  throw JobFailure::Named("Reliableq::CommandNotStarted", message);
}

void ExternalHandlers::Shared::PostJob(const HttpHandler& target, const JobView& job) const {
  exec::HttpCallRequest request;
  request.url = target.url;
  request.follow_redirects = target.follow_redirects;
  request.body = job.raw();
  request.headers.push_back("Idempotency-Key: " + std::string(job.jid()));
  request.timeout = Remaining(job, *clock);
  for (const auto& [name, value] : JobFacts(job, request.timeout)) {
    request.headers.push_back("X-Reliableq-" + std::string(name) + ": " + value);
  }
  exec::HttpCallOutcome outcome = caller->Post(request, job.stop_token());
  std::string message = outcome.Describe();
  switch (outcome.end) {
    case exec::HttpCallOutcome::End::kResponse: {
      exec::HttpStatusClass status = exec::ClassifyStatus(outcome.status);
      if (status == exec::HttpStatusClass::kSuccess) {
        // The body is the job's result (as JSON when it is JSON).
        if (!outcome.body.empty()) job.SetResult(outcome.body);
        return;
      }
      std::string body = Head(outcome.body, kErrorOutputLimit);
      if (!body.empty()) message += ": " + body;
      if (status == exec::HttpStatusClass::kTryAgain) {
        if (outcome.retry_after_delay) throw JobSnooze(*outcome.retry_after_delay);
        if (!outcome.retry_after.empty()) {
          log->Log(LogLevel::kWarn, "handler_retry_after_ignored",
                   "Retry-After '%s' is neither seconds nor an HTTP date: retried as a failure",
                   Head(outcome.retry_after, 200).c_str());
        }
      }
      if (status == exec::HttpStatusClass::kClientError) {
        switch (target.client_errors) {
          case HttpClientErrors::kDead:
            throw JobDead(message, "Reliableq::HttpFailed");
          case HttpClientErrors::kDiscard:
            throw JobDiscard(message, "Reliableq::HttpFailed");
          case HttpClientErrors::kRetry:
            break;
        }
      }
      throw JobFailure::Named("Reliableq::HttpFailed", message);
    }
    case exec::HttpCallOutcome::End::kTimedOut:
      throw JobTimeout(message);
    case exec::HttpCallOutcome::End::kStopped:
      throw JobFailure::Named("Reliableq::JobStopped", message);
    case exec::HttpCallOutcome::End::kTransportError:
      break;
  }
  throw JobFailure::Named("Reliableq::HttpUnreachable", message);
}

ExternalHandlers::~ExternalHandlers() = default;

namespace {

// What the options ask for, checked: the handlers' environment, and each
// command's argv with its program resolved.
struct HandlerPlan {
  std::vector<std::string> environment;
  std::map<std::string, std::vector<std::string>, std::less<>> commands;
};

Result<HandlerPlan> PlanHandlers(const ServerOptions& options, const HandlerRegistry& registry) {
  auto check_class = [&](const std::string& job_class, const char* kind) -> Status {
    if (job_class.empty()) return Status::InvalidArgument(std::string(kind) + ": empty class name");
    if (job_class != "*" && registry.Find(job_class) != nullptr) {
      return Status::InvalidArgument(std::string(kind) + " for " + job_class +
                                     ": a plugin registers a handler for that class already");
    }
    return Status::OK();
  };
  HandlerPlan plan;
  if (!options.command_handlers.empty()) {
    Result<std::vector<std::string>> environment = BaseEnvironment(options.handler_environment);
    if (!environment.ok()) return environment.status();
    plan.environment = std::move(*environment);
  }
  for (const auto& [job_class, command] : options.command_handlers) {
    if (Status s = check_class(job_class, "command handler"); !s.ok()) return s;
    if (options.http_handlers.contains(job_class)) {
      return Status::InvalidArgument("class " + job_class +
                                     " has both a command handler and an HTTP handler");
    }
    if (command.argv.empty()) {
      return Status::InvalidArgument("command handler for " + job_class + ": no program");
    }
    Result<std::string> program = ResolveProgram(command.argv[0], PathOf(plan.environment));
    if (!program.ok()) {
      return Status::InvalidArgument("command handler for " + job_class + ": " +
                                     program.status().message());
    }
    std::vector<std::string> argv = command.argv;
    argv[0] = *program;
    plan.commands[job_class] = std::move(argv);
  }
  for (const auto& [job_class, target] : options.http_handlers) {
    if (Status s = check_class(job_class, "HTTP handler"); !s.ok()) return s;
    if (Status s = exec::HttpCaller::CheckUrl(target.url); !s.ok()) {
      return Status::InvalidArgument("HTTP handler for " + job_class + ": " + s.message());
    }
  }
  return plan;
}

}  // namespace

Status ExternalHandlers::Check(const ServerOptions& options, const HandlerRegistry& registry) {
  return PlanHandlers(options, registry).status();
}

Result<std::shared_ptr<const ExternalHandlers>> ExternalHandlers::Open(
    const ServerOptions& options, const HandlerRegistry& registry,
    std::shared_ptr<const Clock> clock) {
  if (options.command_handlers.empty() && options.http_handlers.empty()) {
    return std::shared_ptr<const ExternalHandlers>();
  }
  Result<HandlerPlan> plan = PlanHandlers(options, registry);
  if (!plan.ok()) return plan.status();
  std::shared_ptr<ExternalHandlers> handlers(new ExternalHandlers());
  auto shared = std::make_shared<Shared>();
  shared->clock = std::move(clock);
  // The server's own logger is made later, by the server; this one writes
  // to the same sink in the same format, and its lines carry the job's
  // context as every line of a processor thread does.
  shared->log =
      std::make_shared<base::Logger>(options.log_level, options.log_sink, options.log_format);
  shared->kill_grace = options.kill_grace;
  shared->environment = std::move(plan->environment);
  Shared* raw = shared.get();
  for (auto& [job_class, argv] : plan->commands) {
    std::string line = job_class + ": " + argv[0];
    for (size_t i = 1; i < argv.size(); ++i) line += " " + argv[i];
    handlers->descriptions_.push_back(std::move(line));
    handlers->handlers_[job_class] = [raw, argv = std::move(argv)](const JobView& job) {
      raw->RunCommandJob(argv, job);
    };
  }
  for (const auto& [job_class, target] : options.http_handlers) {
    handlers->descriptions_.push_back(job_class + ": POST " + RedactUrls(target.url));
    handlers->handlers_[job_class] = [raw, target](const JobView& job) {
      raw->PostJob(target, job);
    };
  }
  // Started last, once nothing else can fail: the supervisor is a process.
  if (!options.http_handlers.empty()) {
    Result<std::unique_ptr<exec::HttpCaller>> caller = exec::HttpCaller::Open();
    if (!caller.ok()) return caller.status();
    shared->caller = std::move(*caller);
  }
  if (!options.command_handlers.empty()) {
    Result<std::unique_ptr<exec::ProcessGuard>> guard = exec::ProcessGuard::Start();
    if (!guard.ok()) return guard.status();
    shared->guard = std::move(*guard);
  }
  handlers->shared_ = std::move(shared);
  return std::shared_ptr<const ExternalHandlers>(std::move(handlers));
}

const Handler* ExternalHandlers::Find(std::string_view job_class) const {
  auto it = handlers_.find(job_class);
  if (it == handlers_.end()) it = handlers_.find("*");
  return it == handlers_.end() ? nullptr : &it->second;
}

std::vector<std::string> ExternalHandlers::Classes() const {
  std::vector<std::string> classes;
  for (const auto& [job_class, handler] : handlers_) {
    if (job_class != "*") classes.push_back(job_class);
  }
  return classes;
}

std::vector<std::string> ExternalHandlers::Describe() const { return descriptions_; }

}  // namespace reliableq::server
