// reliableq worker: runs the job classes of plugins (-r) on a Server until
// TERM/INT or a remote stop.

#include <dlfcn.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <set>
#include <string>

#include "cli/commands.h"
#include "cli/config_file.h"
#include "cli/early_signals.h"
#include "cli/handler_options.h"
#include "cli/periodic_options.h"
#include "cli/record_options.h"
#include "cli/retry_options.h"
#include "reliableq/job.h"  // CheckQueueName
#include "reliableq/plugin.h"
#include "reliableq/server.h"
#include "server/external_handlers.h"
#include "server/options_check.h"

namespace reliableq::cli {

// Named as well, so that the verbs' kVerb, kHelp and Run stay apart in a
// unity build (tools/quickstart).
namespace worker_command {
namespace {

constexpr std::string_view kVerb = "worker";

constexpr std::string_view kNoClasses =
    "no job classes: load a plugin with -r, or map classes to programs or URLs with --exec "
    "or --http-handler";

constexpr std::string_view kHelp =
    "usage: reliableq worker [-C FILE] [-r LIB.so]... [--exec CLASS=PROGRAM]...\n"
    "                        [--http-handler CLASS=URL]...\n"
    "                        [--http-client-errors [CLASS=]dead|discard|retry]...\n"
    "                        [-q QUEUE[,WEIGHT]]...\n"
    "                        [-c|--concurrency N]\n"
    "                        [-t|--timeout SEC] [--heartbeat-ttl SEC]\n"
    "                        [--heartbeat-interval SEC] [--janitor-interval SEC]\n"
    "                        [--max-interruptions N] [--max-retries N] [--max-snoozes N]\n"
    "                        [--backoff CLASS=SPEC]... [--retry-for CLASS=SEC]...\n"
    "                        [--records SEC] [--record CLASS=SEC]... [--record-max-bytes N]\n"
    "                        [--poll-interval SEC] [--idle-poll SEC]\n"
    "                        [--exec-env NAME[=VALUE]]... [--job-timeout [CLASS=]SEC]...\n"
    "                        [--kill-grace SEC] [--on-overrun keep|exit]\n"
    "                        [--tag TAG] [--label LABEL]...\n"
    "                        [--limit NAME=SPEC]...\n"
    "                        [--http [HOST:]PORT] [--log-format text|json]\n"
    "                        [--periodic NAME=JSON]... [-v|--verbose]\n"
    "\n"
    "Runs jobs from the queues with the handlers that plugins register, or with\n"
    "programs and URLs in any language, with reliable fetch: a job stays in this\n"
    "process's working list until it is done, so no job is lost if the process\n"
    "dies. TERM or INT stops it (running jobs get --timeout seconds, then go back\n"
    "to their queues), TSTP or USR1 quiets it, TTIN logs its state (see SIGNALS\n"
    "in reliableq(1)). Seconds may have decimals (0.5) and are at most 86400.\n"
    "\n"
    "Options:\n"
    "  -C, --config FILE    read options from a YAML file in the shape of\n"
    "                       sidekiq.yml (concurrency: 20, queues: [[critical, 3],\n"
    "                       default], redis: ${REDIS_URL}, ...); options given\n"
    "                       here override it (see CONFIG FILE in reliableq(1))\n"
    "  -r, --require LIB.so a plugin: a shared library defining reliableq_register\n"
    "                       (see reliableq/plugin.h); repeat for several\n"
    "      --exec CLASS=PROGRAM [ARG]...\n"
    "                       run jobs of CLASS with PROGRAM, one process per job,\n"
    "                       without a shell (words split at spaces); the job's JSON\n"
    "                       on its stdin; exit status 0 is success, unless the\n"
    "                       program says otherwise on fd 3 (see OUTCOMES); CLASS *\n"
    "                       runs every class with no other handler (see HANDLERS)\n"
    "      --http-handler CLASS=URL\n"
    "                       run jobs of CLASS by POSTing their JSON to URL; a 2xx\n"
    "                       answer is success, 408, 425, 429 and 5xx are retried\n"
    "                       (after Retry-After, if given), another 4xx is dead\n"
    "      --http-client-errors [CLASS=]dead|discard|retry\n"
    "                       what a 4xx other than 408, 425 and 429 does to a job\n"
    "                       (of CLASS, else of every HTTP handler): to the dead\n"
    "                       set at once (default), dropped, or retried\n"
    "      --exec-env NAME[=VALUE]\n"
    "                       give the programs NAME (this process's value without\n"
    "                       =VALUE); they get nothing else of this environment\n"
    "      --job-timeout [CLASS=]SEC\n"
    "                       how long a job (of CLASS) may run; a job's own timeout\n"
    "                       field wins (see TIMEOUTS; default: none)\n"
    "      --kill-grace SEC after a timeout, how long a program has between SIGTERM\n"
    "                       and SIGKILL (default: 5)\n"
    "      --on-overrun keep|exit\n"
    "                       a C++ handler still running after its timeout and the\n"
    "                       grace: keep its thread running (default), or exit so\n"
    "                       that the janitor gives its jobs back\n"
    "  -q, --queue QUEUE[,WEIGHT]\n"
    "                       a queue to work, in order of priority (default: default);\n"
    "                       with weights (0 to 1000), each fetch picks a queue with\n"
    "                       probability weight / sum of weights; at most 1000 queues;\n"
    "                       a name ending in * (cronjob:*) is a namespace: every\n"
    "                       queue whose name starts with what precedes the *, as\n"
    "                       such queues appear\n"
    "  -c, --concurrency N  jobs run at once, 1 to 1000 (default: 10)\n"
    "  -t, --timeout SEC    how long a stop waits for running jobs (default: 25)\n"
    "      --heartbeat-ttl SEC\n"
    "                       silence after which this process counts as dead\n"
    "                       (default: 30; at least twice --heartbeat-interval)\n"
    "      --heartbeat-interval SEC\n"
    "                       how often the process beats (default: 5)\n"
    "      --janitor-interval SEC\n"
    "                       how often dead processes are looked for (default: 1)\n"
    "      --max-interruptions N\n"
    "                       a job interrupted more often goes to the dead set\n"
    "                       (default: 3)\n"
    "      --max-retries N  retries of a failing job whose retry is true (default: 25)\n"
    "      --max-snoozes N  snoozes of a job before one more fails it (default: 100)\n"
    "      --backoff CLASS=SEC[,SEC]... | CLASS=linear:SEC[:MAX] | CLASS=exponential:SEC[:MAX]\n"
    "                       the delays between the retries of a class (plus Sidekiq's\n"
    "                       jitter) instead of Sidekiq's schedule\n"
    "      --retry-for CLASS=SEC\n"
    "                       retry the class's jobs until SEC after their first failure,\n"
    "                       however many retries that takes (Sidekiq's retry_for)\n"
    "      --records SEC    keep a final record of every finished job for SEC\n"
    "                       seconds, for `reliableq job JID` (default: 0, none)\n"
    "      --record CLASS=SEC\n"
    "                       the record retention of one class (0: none), over --records\n"
    "      --record-max-bytes N\n"
    "                       the most bytes of a record; a larger result or arguments\n"
    "                       are left out (default: 8192)\n"
    "      --poll-interval SEC\n"
    "                       how often, on average across all workers, due scheduled\n"
    "                       jobs and retries are moved to their queues (default: 0.5)\n"
    "      --idle-poll SEC  how often an idle worker looks at its queues for jobs\n"
    "                       no message announced: pushed by a Ruby client while\n"
    "                       Redis's keyspace notifications are off (default: 0.1)\n"
    "      --tag TAG        Sidekiq's process tag, shown in its Web UI\n"
    "      --label LABEL    a Sidekiq process label; repeat for several\n"
    "      --limit NAME=SPEC\n"
    "                       a limit across all workers: SPEC is concurrency=N,\n"
    "                       rate=R/PERIOD (e.g. 10/1s) or both, then optionally\n"
    "                       classes=A,B (default: the class NAME); repeat for\n"
    "                       several (see LIMITS in reliableq(1))\n"
    "      --http [HOST:]PORT\n"
    "                       serve GET /metrics (Prometheus) and GET /healthz on\n"
    "                       this address; PORT alone listens on 127.0.0.1 only\n"
    "                       (see METRICS in reliableq(1))\n"
    "      --log-format text|json\n"
    "                       log lines as text (default) or as one JSON object a\n"
    "                       line (see LOGS in reliableq(1))\n"
    "      --periodic NAME=JSON\n"
    "                       push a job on every tick of a cron schedule, once per\n"
    "                       tick across all workers declaring it; JSON keys: cron,\n"
    "                       class (both required), queue, args, retry, timezone,\n"
    "                       catch_up, extra (see PERIODIC JOBS in reliableq(1))\n"
    "  -v, --verbose        log debug messages\n";

// Reads -q/-c/-t/... into `options`, each on its own (CheckRelations looks
// at them together). Returns the usage problem, if any.
std::optional<std::string> ReadOptions(const ParsedArgs& args, ServerOptions* options) {
  std::vector<std::string> queues = args.Values("queue");
  if (!queues.empty()) {
    options->queues.clear();
    std::set<std::string> seen;
    for (const std::string& spec : queues) {
      size_t comma = spec.find(',');
      QueueSpec queue;
      queue.name = spec.substr(0, comma);
      if (queue.name.empty()) return "empty queue name in -q '" + spec + "'";
      if (Status s = CheckQueueName(queue.name); !s.ok()) return "-q: " + s.message();
      if (comma != std::string::npos) {
        std::optional<int> weight = ParseCount(std::string_view(spec).substr(comma + 1));
        if (!weight || *weight > server::kMaxQueueWeight) {
          return "queue weight must be an integer from 0 to " + std::to_string(server::kMaxQueueWeight) +
                 " in -q '" + spec + "'";
        }
        queue.weight = *weight;
      }
      if (!seen.insert(queue.name).second) return "queue '" + queue.name + "' given twice";
      options->queues.push_back(std::move(queue));
    }
    if (options->queues.size() > server::kMaxQueues) {
      return "at most " + std::to_string(server::kMaxQueues) + " queues (-q), not " +
             std::to_string(options->queues.size());
    }
  }
  if (auto text = args.Value("concurrency")) {
    std::optional<int> n = ParseCount(*text);
    if (!n || *n < 1 || *n > server::kMaxConcurrency) {
      return "concurrency must be an integer from 1 to " + std::to_string(server::kMaxConcurrency) +
             ", not '" + *text + "'";
    }
    options->concurrency = *n;
  }
  struct Duration {
    const char* name;
    bool allow_zero;
    std::chrono::milliseconds* field;
  };
  const Duration durations[] = {
      {"timeout", true, &options->shutdown_timeout},
      {"heartbeat-ttl", false, &options->heartbeat_ttl},
      {"heartbeat-interval", false, &options->heartbeat_interval},
      {"janitor-interval", false, &options->janitor_interval},
      {"poll-interval", false, &options->scheduled_poll_interval},
      {"idle-poll", false, &options->idle_poll_interval},
  };
  for (const Duration& duration : durations) {
    if (auto text = args.Value(duration.name)) {
      auto ms = ParseSeconds(*text, duration.allow_zero);
      if (!ms) {
        return std::string("--") + duration.name + " needs a number of seconds " +
               (duration.allow_zero ? "from 0 to " : "above 0 and at most ") +
               SecondsText(server::kMaxDuration) + ", not '" + *text + "'";
      }
      *duration.field = *ms;
    }
  }
  if (auto text = args.Value("max-interruptions")) {
    std::optional<int> n = ParseCount(*text);
    if (!n) return "--max-interruptions needs a non-negative integer, not '" + *text + "'";
    options->max_interruptions = *n;
  }
  if (auto text = args.Value("max-retries")) {
    std::optional<int> n = ParseCount(*text);
    if (!n) return "--max-retries needs a non-negative integer, not '" + *text + "'";
    options->max_retries = *n;
  }
  if (auto text = args.Value("max-snoozes")) {
    std::optional<int> n = ParseCount(*text);
    if (!n) return "--max-snoozes needs a non-negative integer, not '" + *text + "'";
    options->max_snoozes = *n;
  }
  if (auto http = args.Value("http")) {
    if (http->empty()) return "--http needs PORT or HOST:PORT";
    options->http_address = *http;
  }
  if (auto tag = args.Value("tag")) options->tag = *tag;
  options->labels = args.Values("label");
  for (const std::string& text : args.Values("limit")) {
    Result<Limit> limit = ParseLimit(text);
    if (!limit.ok()) return "--limit: " + limit.status().message();
    options->limits.push_back(std::move(*limit));
  }
  if (Status s = CheckLimits(options->limits); !s.ok()) return "--limit: " + s.message();
  if (args.Has("verbose")) options->log_level = LogLevel::kDebug;
  if (auto problem = ReadHandlerOptions(args, options)) return problem;
  if (auto problem = ReadRetryOptions(args, options)) return problem;
  if (auto problem = ReadRecordOptions(args, options)) return problem;
  if (auto problem = ReadPeriodicOptions(args, options)) return problem;
  return ReadLogFormat(args, &options->log_format);
}

std::optional<std::string> CheckRelations(const ServerOptions& options) {
  if (options.heartbeat_ttl < 2 * options.heartbeat_interval) {
    return "--heartbeat-ttl (" + SecondsText(options.heartbeat_ttl) +
           ") must be at least twice --heartbeat-interval (" +
           SecondsText(options.heartbeat_interval) + ")";
  }
  return std::nullopt;
}

// More than any config; a larger file is a mistake.
constexpr size_t kMaxConfigBytes = 1024 * 1024;

// The command line with the config file's values under it (-C). Each key of
// the file is checked on its own first, so that a value out of range is
// reported with the file, line and key it came from. `*holds_password`:
// the file's own text has the password of its Redis URL (not one that an
// environment variable brings).
Result<ParsedArgs> WithConfigFile(const ParsedArgs& args, bool* holds_password) {
  std::optional<std::string> path = args.Value("config");
  if (!path) return args;
  Result<std::string> text = ReadBoundedFile("config file " + *path, *path, kMaxConfigBytes);
  if (!text.ok()) return text.status();
  Result<std::vector<ConfigEntry>> entries = ParseConfig(*text, *path, EnvironmentVariable);
  if (!entries.ok()) return entries.status();
  for (const ConfigEntry& entry : *entries) {
    ParsedArgs alone;
    alone.SetDefault(entry.option, entry.values);
    ServerOptions scratch;
    std::optional<std::string> problem = ReadOptions(alone, &scratch);
    if (!problem && entry.option == "redis") {
      if (Result<RedisOptions> redis = RedisFromArgs(alone); !redis.ok()) {
        problem = redis.status().message();
      } else if (!redis->password.empty() && text->find(redis->password) != std::string::npos) {
        *holds_password = true;
      }
    }
    if (problem) return Status::InvalidArgument(entry.where + ": " + *problem);
  }
  return WithConfig(args, *entries);
}

// dlopen searches the library path for a bare name; a file of that name in
// the current directory is what `-r libjobs.so` means.
std::string PluginPath(const std::string& name) {
  struct stat st;
  if (name.find('/') == std::string::npos && stat(name.c_str(), &st) == 0) return "./" + name;
  return name;
}

// Loads one plugin and lets it register its classes. The library stays
// loaded for the life of the process: its handlers are in the registry.
Status LoadPlugin(const std::string& name, HandlerRegistry* registry) {
  std::string path = PluginPath(name);
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    return Status::InvalidArgument("cannot load plugin '" + name +
                                   "': " + (error != nullptr ? error : "unknown error"));
  }
  dlerror();
  void* symbol = dlsym(handle, RELIABLEQ_PLUGIN_ENTRY_POINT);
  if (symbol == nullptr) {
    return Status::InvalidArgument("plugin '" + name + "' does not define " +
                                   RELIABLEQ_PLUGIN_ENTRY_POINT);
  }
  auto entry = reinterpret_cast<reliableq_register_fn>(symbol);
  int rc;
  try {
    rc = entry(registry, RELIABLEQ_PLUGIN_ABI_VERSION);
  } catch (const std::exception& e) {
    return Status::InvalidArgument("plugin '" + name + "': " + RELIABLEQ_PLUGIN_ENTRY_POINT +
                                   " threw: " + e.what());
  } catch (...) {
    return Status::InvalidArgument("plugin '" + name + "': " + RELIABLEQ_PLUGIN_ENTRY_POINT +
                                   " threw");
  }
  if (rc != 0) {
    return Status::InvalidArgument("plugin '" + name + "': " + RELIABLEQ_PLUGIN_ENTRY_POINT +
                                   " returned " + std::to_string(rc) + " (ABI version " +
                                   std::to_string(RELIABLEQ_PLUGIN_ABI_VERSION) + ")");
  }
  return Status::OK();
}

int Run(const ParsedArgs& args) {
  if (!args.positionals().empty()) {
    return UsageError(kVerb, "unexpected argument '" + args.positionals()[0] + "'");
  }
  bool config_holds_password = false;
  Result<ParsedArgs> effective = WithConfigFile(args, &config_holds_password);
  if (!effective.ok()) return UsageError(kVerb, effective.status().message());
  ServerOptions options;
  if (auto problem = ReadOptions(*effective, &options)) return UsageError(kVerb, *problem);
  if (auto problem = CheckRelations(options)) return UsageError(kVerb, *problem);
  Result<RedisOptions> redis = RedisFromArgs(*effective);
  if (!redis.ok()) return UsageError(kVerb, redis.status().message());
  options.redis = *redis;
  options.prefix = PrefixFromArgs(*effective);
  options.handle_signals = true;
  // The rest of the limits (--prefix, --tag, --label), and the same checks
  // Server::Open makes, so that none of them fails later with exit 1.
  if (Status s = server::CheckServerOptions(options); !s.ok()) return UsageError(kVerb, s.message());
  WarnReadableSecrets(*effective, options.log_format, args.Value("config"), config_holds_password);

  InstallEarlySignals();
  // Without handlers every job would fail and, in the end, land in the
  // dead set: refuse to start instead.
  std::vector<std::string> plugins = effective->Values("require");
  bool external = !options.command_handlers.empty() || !options.http_handlers.empty();
  if (plugins.empty() && !external) return UsageError(kVerb, kNoClasses);
  HandlerRegistry registry;
  for (const std::string& plugin : plugins) {
    Status s = LoadPlugin(plugin, &registry);
    if (!s.ok()) {
      std::fprintf(stderr, "reliableq: %s\n", Shown(s.message()).c_str());
      return kExitRuntime;
    }
  }
  if (registry.empty() && !external) {
    return UsageError(kVerb, std::string(kNoClasses) + " (the plugins given register none)");
  }

  // A program that is not there, or a bad URL, is a usage error.
  if (Status s = server::ExternalHandlers::Check(options, registry); !s.ok()) {
    return UsageError(kVerb, s.message());
  }
  Result<std::unique_ptr<Server>> server = Server::Open(options, std::move(registry));
  if (!server.ok()) return RuntimeError(server.status());
  ForwardEarlySignals(**server);
  Status s = (*server)->Run();
  int code = s.ok() ? kExitOk : RuntimeError(s);
  // After a hard stop, handlers still running on their threads cannot be
  // stopped; their jobs are already back in the queues. End the process
  // here rather than run static destructors underneath them.
  std::fflush(nullptr);
  std::_Exit(code);
}

}  // namespace
}  // namespace worker_command

const Command& WorkerCommand() {
  static const Command command = {
      .name = worker_command::kVerb,
      .summary = "run jobs with plugins' handlers, programs or URLs",
      .help = worker_command::kHelp,
      .options =
          {
              {.name = "config", .short_name = 'C', .takes_value = true},
              {.name = "require", .short_name = 'r', .takes_value = true, .repeats = true},
              {.name = "queue", .short_name = 'q', .takes_value = true, .repeats = true},
              {.name = "concurrency", .short_name = 'c', .takes_value = true},
              {.name = "timeout", .short_name = 't', .takes_value = true},
              {.name = "heartbeat-ttl", .takes_value = true},
              {.name = "heartbeat-interval", .takes_value = true},
              {.name = "janitor-interval", .takes_value = true},
              {.name = "max-interruptions", .takes_value = true},
              {.name = "max-retries", .takes_value = true},
              {.name = "max-snoozes", .takes_value = true},
              {.name = "backoff", .takes_value = true, .repeats = true},
              {.name = "retry-for", .takes_value = true, .repeats = true},
              {.name = "records", .takes_value = true},
              {.name = "record", .takes_value = true, .repeats = true},
              {.name = "record-max-bytes", .takes_value = true},
              {.name = "poll-interval", .takes_value = true},
              {.name = "idle-poll", .takes_value = true},
              {.name = "tag", .takes_value = true},
              {.name = "label", .takes_value = true, .repeats = true},
              {.name = "limit", .takes_value = true, .repeats = true},
              {.name = "exec", .takes_value = true, .repeats = true},
              {.name = "http-handler", .takes_value = true, .repeats = true},
              {.name = "http-client-errors", .takes_value = true, .repeats = true},
              {.name = "exec-env", .takes_value = true, .repeats = true},
              {.name = "job-timeout", .takes_value = true, .repeats = true},
              {.name = "kill-grace", .takes_value = true},
              {.name = "on-overrun", .takes_value = true},
              {.name = "http", .takes_value = true},
              {.name = "log-format", .takes_value = true},
              {.name = "periodic", .takes_value = true, .repeats = true},
              {.name = "verbose", .short_name = 'v'},
          },
      .run = worker_command::Run,
  };
  return command;
}

}  // namespace reliableq::cli
