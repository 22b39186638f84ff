// reliableq push: one job, now, in some seconds or at a time.

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <cstdio>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "reliableq/client.h"
#include "reliableq/job.h"
#include "reliableq/push_result.h"

namespace reliableq::cli {

namespace {

constexpr std::string_view kVerb = "push";

constexpr std::string_view kHelp =
    "usage: reliableq push CLASS [ARGS_JSON] [-q|--queue QUEUE] [--in SECONDS | --at EPOCH]\n"
    "                      [--retry N|true|false] [--jid JID] [--extra JSON]\n"
    "\n"
    "Pushes one job of class CLASS and prints its jid. ARGS_JSON is the job's\n"
    "arguments as a JSON array (default: []). The job is Sidekiq's job JSON, so\n"
    "Sidekiq's tools see it too.\n"
    "\n"
    "When Redis stored the job, prints its jid and exits 0. When the push was sent\n"
    "but no reply came, the job may or may not be stored: prints its jid on stderr\n"
    "and exits 1; push it again with --jid JID, so that it is at worst the same\n"
    "job twice, never two different jobs. When the push was refused, nothing was\n"
    "stored: prints why and exits 1.\n"
    "\n"
    "Options:\n"
    "  -q, --queue QUEUE    the queue to push to (default: default)\n"
    "      --in SECONDS     run the job SECONDS from now (decimals allowed); the job\n"
    "                       waits in the schedule set until then\n"
    "      --at EPOCH       run the job at EPOCH, in seconds since 1970 (decimals\n"
    "                       allowed); a time that has passed pushes it now\n"
    "      --retry N|true|false\n"
    "                       the job's retry field: true (the default, 25 retries),\n"
    "                       false (none, and no dead set), or N retries\n"
    "      --jid JID        the job id (default: 24 random hex digits); give the\n"
    "                       jid of a push that was not confirmed to push it again\n"
    "      --extra JSON     further job fields as a JSON object, written after the\n"
    "                       others, e.g. '{\"retry_queue\":\"low\",\"tags\":[\"a\"]}'\n"
    "\n"
    "Examples:\n"
    "  reliableq push HardJob '[1,\"bob\"]'\n"
    "  reliableq push Reminder '[42]' -q mail --in 3600\n";

// Only the JSON syntax and the top-level type are checked here, so that a
// mistyped argument is a usage error even when Redis is unreachable; the
// Client checks the rest.
std::optional<std::string> JsonProblem(std::string_view what, const std::string& text,
                                       rapidjson::Type expected) {
  rapidjson::Document document;
  document.Parse<rapidjson::kParseIterativeFlag>(text.data(), text.size());
  if (document.HasParseError()) {
    std::string reason = rapidjson::GetParseError_En(document.GetParseError());
    if (!reason.empty() && reason.back() == '.') reason.pop_back();
    return std::string(what) + " is not valid JSON: " + reason + " at offset " +
           std::to_string(document.GetErrorOffset());
  }
  if (document.GetType() == expected) return std::nullopt;
  const char* kind = document.IsObject()   ? "an object"
                     : document.IsArray()  ? "an array"
                     : document.IsString() ? "a string"
                     : document.IsNumber() ? "a number"
                                           : "a literal";
  return std::string(what) + " must be a JSON " +
         (expected == rapidjson::kArrayType ? "array" : "object") + ", not " + kind;
}

int Run(const ParsedArgs& args) {
  const std::vector<std::string>& positionals = args.positionals();
  if (positionals.empty()) return UsageError(kVerb, "missing CLASS");
  if (positionals.size() > 2) {
    return UsageError(kVerb, "unexpected argument '" + positionals[2] + "'");
  }
  Job job;
  job.job_class = positionals[0];
  if (job.job_class.empty()) return UsageError(kVerb, "CLASS is empty");
  if (positionals.size() == 2) job.args = positionals[1];
  if (auto problem = JsonProblem("ARGS_JSON", job.args, rapidjson::kArrayType)) {
    return UsageError(kVerb, *problem);
  }
  if (auto queue = args.Value("queue")) job.queue = *queue;
  if (job.queue.empty()) return UsageError(kVerb, "the queue name is empty");
  if (auto retry = args.Value("retry")) {
    Result<Retry> parsed = Retry::Parse(*retry);
    if (!parsed.ok()) return UsageError(kVerb, parsed.status().message());
    job.retry = *parsed;
  }
  if (auto jid = args.Value("jid")) {
    if (jid->empty()) return UsageError(kVerb, "the jid is empty");
    job.jid = *jid;
  }
  if (auto extra = args.Value("extra")) {
    job.extra = *extra;
    if (auto problem = JsonProblem("--extra", job.extra, rapidjson::kObjectType)) {
      return UsageError(kVerb, *problem);
    }
  }
  if (args.Has("in") && args.Has("at")) {
    return UsageError(kVerb, "--in and --at cannot be used together");
  }
  std::optional<double> in, at;
  if (auto text = args.Value("in")) {
    in = ParseNumber(*text);
    if (!in) return UsageError(kVerb, "--in needs a number of seconds, not '" + *text + "'");
  }
  if (auto text = args.Value("at")) {
    at = ParseNumber(*text);
    if (!at) return UsageError(kVerb, "--at needs epoch seconds, not '" + *text + "'");
  }

  Result<RedisOptions> redis = RedisFromArgs(args);
  if (!redis.ok()) return UsageError(kVerb, redis.status().message());
  ClientOptions client_options;
  // The wake-up channels of the workers of this prefix.
  client_options.prefix = PrefixFromArgs(args);
  Result<std::unique_ptr<Client>> client = Client::Open(*redis, client_options);
  if (!client.ok()) return RuntimeError(client.status());
  Result<PushResult> pushed = in   ? (*client)->PushIn(job, *in)
                              : at ? (*client)->PushAt(job, *at)
                                   : (*client)->Push(job);
  // The Client refuses input the checks above let through (a reserved
  // field in --extra, a jid that is not printable): still the user's input.
  if (!pushed.ok()) return UsageError(kVerb, pushed.status().message());
  if (pushed->outcome == PushOutcome::kNotConfirmed) {
    // The one case where pushing again blindly could make a second job.
    std::fprintf(stderr,
                 "reliableq: not confirmed: job %s may or may not be stored (%s); to push it "
                 "again, add --jid %s so that it cannot become two different jobs\n",
                 Shown(pushed->jid).c_str(), Shown(pushed->reason.ToString()).c_str(),
                 Shown(pushed->jid).c_str());
    return kExitRuntime;
  }
  if (!pushed->stored()) return RuntimeError(pushed->reason);
  if (!WriteOut(pushed->jid + "\n")) {
    return RuntimeError(Status::IoError("cannot write to stdout"));
  }
  return kExitOk;
}

}  // namespace

const Command& PushCommand() {
  static const Command command = {
      .name = kVerb,
      .summary = "push a job, to run now, in some seconds or at a time",
      .help = kHelp,
      .options =
          {
              {.name = "queue", .short_name = 'q', .takes_value = true},
              {.name = "in", .takes_value = true},
              {.name = "at", .takes_value = true},
              {.name = "retry", .takes_value = true},
              {.name = "jid", .takes_value = true},
              {.name = "extra", .takes_value = true},
          },
      .run = Run,
  };
  return command;
}

}  // namespace reliableq::cli
