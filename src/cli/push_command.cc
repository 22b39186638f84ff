// reliableq push: one job, now, in some seconds or at a time.

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "reliableq/client.h"
#include "reliableq/job.h"
#include "reliableq/push_result.h"

namespace reliableq::cli {

// Named as well, so that the verbs' kVerb, kHelp and Run stay apart in a
// unity build (tools/quickstart).
namespace push_command {
namespace {

constexpr std::string_view kVerb = "push";

constexpr std::string_view kHelp =
    "usage: reliableq push CLASS [ARGS_JSON] [-q|--queue QUEUE] [--in SECONDS | --at EPOCH]\n"
    "                      [--retry N|true|false] [--jid JID] [--extra JSON]\n"
    "                      [--wait-replicas N [--wait-timeout MS]] [--spool DIR]\n"
    "                      [--expires-in SEC | --expires-at EPOCH]\n"
    "                      [--unique [--unique-key K] [--unique-until start|success]\n"
    "                       [--unique-ttl SEC]]\n"
    "                      [--sequence KEY [--sequence-release-on-retry]]\n"
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
    "With --wait-replicas N, Redis's WAIT follows the push: when N replicas have\n"
    "the job, prints its jid, then \"replicated (N replicas)\" on stderr, and exits\n"
    "0. When fewer confirmed it within --wait-timeout, the job is stored on the\n"
    "master but a failover may lose it: it is not confirmed (exit 1, the reason\n"
    "says how many replicas confirmed it); push it again with --jid JID.\n"
    "\n"
    "With --spool DIR, a push that cannot reach Redis is written to a journal in\n"
    "DIR, on disk, instead: prints its jid, then \"spooled\" on stderr, and exits\n"
    "0; the job is pushed from there later, under its jid (which pushes are\n"
    "spooled, and who pushes them on: reliableq(1), --spool).\n"
    "\n"
    "With --unique, the push is refused while another job holds the same unique\n"
    "key: prints \"duplicate of JID\" (the holder's jid) on stderr and exits 3;\n"
    "nothing was stored. A unique push is never spooled.\n"
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
    "      --wait-replicas N\n"
    "                       confirm the push only once N replicas have it (WAIT);\n"
    "                       0, the default, does not wait (see reliableq-schema(7),\n"
    "                       \"Replica acknowledgement\", for which N to choose)\n"
    "      --wait-timeout MS\n"
    "                       how long WAIT waits for them, in milliseconds (more\n"
    "                       than 0; default 1000)\n"
    "      --spool DIR      spool the push in DIR when Redis cannot be reached\n"
    "                       (created if missing; see reliableq spool --help)\n"
    "      --expires-in SEC the job expires SEC seconds after the push: a worker\n"
    "                       about to start it later discards it unrun\n"
    "      --expires-at EPOCH\n"
    "                       the job expires at EPOCH, in seconds since 1970\n"
    "      --unique         refuse the push while another job holds its unique key\n"
    "      --unique-key K   the key (default: the class and a hash of ARGS_JSON)\n"
    "      --unique-until start|success\n"
    "                       release the key when the job starts, or when it\n"
    "                       succeeds (the default); dead and expired release it too\n"
    "      --unique-ttl SEC the key expires SEC seconds after the push whatever\n"
    "                       becomes of the job (default: never)\n"
    "      --sequence KEY   run the job after every job of sequence KEY pushed\n"
    "                       before it, one at a time (reliableq(1), SEQUENCES)\n"
    "      --sequence-release-on-retry\n"
    "                       a retry of the job lets the next one of KEY start\n"
    "\n"
    "Examples:\n"
    "  reliableq push HardJob '[1,\"bob\"]'\n"
    "  reliableq push Reminder '[42]' -q mail --in 3600\n"
    "  reliableq push Charge '[\"order-17\"]' --unique\n"
    "  reliableq push SendOtp '[\"+15550100\"]' --expires-in 60\n"
    "  reliableq push StripeEvent '[\"evt_17\"]' --sequence cus_42\n";

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

// --expires-in/--expires-at, --unique* and --sequence*: into `job`. kExitOk, or the
// usage error's status.
int ReadFlowOptions(const ParsedArgs& args, Job* job) {
  if (args.Has("expires-in") && args.Has("expires-at")) {
    return UsageError(kVerb, "--expires-in and --expires-at cannot be used together");
  }
  for (const char* name : {"expires-in", "expires-at"}) {
    auto text = args.Value(name);
    if (!text) continue;
    std::optional<double> value = ParseNumber(*text);
    if (!value || !(*value > 0)) {
      return UsageError(kVerb, std::string("--") + name + " needs a number above 0, not '" +
                                   *text + "'");
    }
    (std::string_view(name) == "expires-in" ? job->expires_in : job->expires_at) = value;
  }
  if (args.Has("sequence-release-on-retry") && !args.Has("sequence")) {
    return UsageError(kVerb, "--sequence-release-on-retry needs --sequence");
  }
  if (auto key = args.Value("sequence")) {
    if (Status s = CheckSequenceKey(*key); !s.ok()) return UsageError(kVerb, s.message());
    job->sequence = Sequence{*key, args.Has("sequence-release-on-retry")};
  }
  bool unique = args.Has("unique");
  for (const char* name : {"unique-key", "unique-until", "unique-ttl"}) {
    if (args.Has(name) && !unique) {
      return UsageError(kVerb, std::string("--") + name + " needs --unique");
    }
  }
  if (!unique) return kExitOk;
  Uniqueness uniqueness;
  if (auto key = args.Value("unique-key")) {
    if (key->empty()) return UsageError(kVerb, "the unique key is empty");
    uniqueness.key = *key;
  }
  if (auto until = args.Value("unique-until")) {
    if (*until == "start") {
      uniqueness.until = UniqueUntil::kStart;
    } else if (*until != "success") {
      return UsageError(kVerb, "--unique-until needs start or success, not '" + *until + "'");
    }
  }
  if (auto text = args.Value("unique-ttl")) {
    std::optional<double> seconds = ParseNumber(*text);
    if (!seconds || !(*seconds > 0) || *seconds > 1e9) {
      return UsageError(kVerb, "--unique-ttl needs a number of seconds above 0, not '" + *text +
                                   "'");
    }
    uniqueness.ttl = std::chrono::milliseconds(static_cast<int64_t>(*seconds * 1000 + 0.5));
    if (uniqueness.ttl.count() == 0) uniqueness.ttl = std::chrono::milliseconds(1);
  }
  job->unique = std::move(uniqueness);
  return kExitOk;
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
  if (Status s = CheckQueueName(job.queue); !s.ok()) return UsageError(kVerb, s.message());
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

  if (int status = ReadFlowOptions(args, &job); status != kExitOk) return status;
  // Every rule the client applies, before anything connects or spools.
  if (Status s = CheckJob(job); !s.ok()) return UsageError(kVerb, s.message());

  std::optional<int> wait_replicas;
  if (auto text = args.Value("wait-replicas")) {
    wait_replicas = ParseCount(*text);
    if (!wait_replicas) {
      return UsageError(kVerb, "--wait-replicas needs a number of replicas, not '" + *text + "'");
    }
  }
  std::optional<int> wait_timeout_ms;
  if (auto text = args.Value("wait-timeout")) {
    if (!wait_replicas) return UsageError(kVerb, "--wait-timeout needs --wait-replicas");
    wait_timeout_ms = ParseCount(*text);
    if (!wait_timeout_ms || *wait_timeout_ms == 0) {
      return UsageError(kVerb, "--wait-timeout needs a number of milliseconds above 0, not '" +
                                   *text + "'");
    }
  }

  Result<RedisOptions> redis = RedisFromArgs(args);
  if (!redis.ok()) return UsageError(kVerb, redis.status().message());
  ClientOptions client_options;
  // The wake-up channels of the workers of this prefix.
  client_options.prefix = PrefixFromArgs(args);
  if (wait_replicas) client_options.wait_replicas = *wait_replicas;
  if (wait_timeout_ms) client_options.wait_timeout = std::chrono::milliseconds(*wait_timeout_ms);
  if (auto spool = args.Value("spool")) {
    if (spool->empty()) return UsageError(kVerb, "the --spool directory is empty");
    client_options.spool_dir = *spool;
  }
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
  if (pushed->outcome == PushOutcome::kDuplicate) {
    std::fprintf(stderr, "reliableq: duplicate of %s: job %s not pushed (%s)\n",
                 Shown(pushed->duplicate_of).c_str(), Shown(pushed->jid).c_str(),
                 Shown(pushed->reason.ToString()).c_str());
    return kExitDuplicate;
  }
  if (!pushed->stored()) return RuntimeError(pushed->reason);
  if (!WriteOut(pushed->jid + "\n")) {
    return RuntimeError(Status::IoError("cannot write to stdout"));
  }
  if (pushed->outcome == PushOutcome::kSpooled) {
    // On stderr, as for replicated: stdout stays the jid alone.
    std::fprintf(stderr,
                 "reliableq: spooled: Redis could not be reached; job %s is on disk in %s, to be "
                 "pushed from there under the same jid\n",
                 Shown(pushed->jid).c_str(), Shown(client_options.spool_dir).c_str());
  }
  if (pushed->outcome == PushOutcome::kReplicated) {
    // On stderr: stdout stays the jid alone, for scripts that read it.
    std::fprintf(stderr, "reliableq: replicated (%d replica%s)\n", pushed->replicas,
                 pushed->replicas == 1 ? "" : "s");
  }
  return kExitOk;
}

}  // namespace
}  // namespace push_command

const Command& PushCommand() {
  static const Command command = {
      .name = push_command::kVerb,
      .summary = "push a job, to run now, in some seconds or at a time",
      .help = push_command::kHelp,
      .options =
          {
              {.name = "queue", .short_name = 'q', .takes_value = true},
              {.name = "in", .takes_value = true},
              {.name = "at", .takes_value = true},
              {.name = "retry", .takes_value = true},
              {.name = "jid", .takes_value = true},
              {.name = "spool", .takes_value = true},
              {.name = "extra", .takes_value = true},
              {.name = "wait-replicas", .takes_value = true},
              {.name = "wait-timeout", .takes_value = true},
              {.name = "expires-in", .takes_value = true},
              {.name = "expires-at", .takes_value = true},
              {.name = "unique"},
              {.name = "unique-key", .takes_value = true},
              {.name = "unique-until", .takes_value = true},
              {.name = "unique-ttl", .takes_value = true},
              {.name = "sequence", .takes_value = true},
              {.name = "sequence-release-on-retry"},
          },
      .run = push_command::Run,
  };
  return command;
}

}  // namespace reliableq::cli
