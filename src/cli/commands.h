// The verbs of the `reliableq` program and what they share.
//
// main.cc finds the verb and parses its options together with the global
// ones; the verb's Run gets the result. A verb prints its output to stdout
// and its errors to stderr through UsageError/RuntimeError, and returns the
// exit status: kExitOk, kExitRuntime (Redis unreachable, not found, ...) or
// kExitUsage (the command line is wrong; one line on stderr).
//
// Thread safety: the program is single-threaded until `worker` starts a
// Server.

#ifndef RELIABLEQ_CLI_COMMANDS_H_
#define RELIABLEQ_CLI_COMMANDS_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/args.h"
#include "reliableq/logging.h"
#include "reliableq/redis_options.h"
#include "reliableq/status.h"

namespace reliableq::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntime = 1;
inline constexpr int kExitUsage = 2;
// push --unique: another job holds the unique key; nothing was stored.
inline constexpr int kExitDuplicate = 3;

struct Command {
  // The verb, e.g. "push".
  std::string_view name;
  // One line for the list of commands.
  std::string_view summary;
  // The help text: synopsis, description and the verb's own options. The
  // global options are added when it is printed.
  std::string_view help;
  // The verb's own options; the global ones are added when parsing.
  std::vector<OptionSpec> options;
  // The verb works on a Redis Cluster URL that names no queue group. False
  // for every verb that reads or writes a group's keys: a cluster URL
  // without a group (and no --group) is then a usage error, before anything
  // is done (RedisFromArgs). True for `groups` (the directory of groups is
  // outside every group) and `migrate` (its group is the target's --group).
  bool works_without_group = false;
  // Runs the verb with its parsed arguments; returns the exit status.
  int (*run)(const ParsedArgs& args);
};

const Command& PushCommand();
const Command& StatsCommand();
const Command& RecoverCommand();
const Command& WorkerCommand();
const Command& RetriesCommand();
const Command& DeadCommand();
const Command& ScheduledCommand();
const Command& QueuesCommand();
const Command& QueueCommand();
const Command& LimitsCommand();
const Command& SequencesCommand();
const Command& SequenceCommand();
const Command& SpoolCommand();
const Command& WebCommand();
const Command& PeriodicCommand();
const Command& GroupsCommand();
const Command& MigrateCommand();
const Command& JobCommand();

// The options that say how to reach one Redis: its URL and the files of
// its password and TLS. The global ones (kRedisConnection) and migrate's
// target (--to, --to-password-file, --to-tls-*) are two sets of names for
// the same options, parsed by the same code.
struct ConnectionOptionNames {
  std::string_view url;
  std::string_view password_file;
  std::string_view tls_ca;
  std::string_view tls_cert;
  std::string_view tls_key;
  std::string_view tls_server_name;
  std::string_view tls_insecure;  // a flag
  // The URL as messages name it: "the Redis URL".
  std::string_view url_name;
};
inline constexpr ConnectionOptionNames kRedisConnection = {
    "redis",         "redis-password-file",   "redis-tls-ca",       "redis-tls-cert",
    "redis-tls-key", "redis-tls-server-name", "redis-tls-insecure", "the Redis URL"};

// The specs of one set of connection options.
std::vector<OptionSpec> ConnectionOptionSpecs(const ConnectionOptionNames& names);

// Applies the password file and TLS options of `names` to `options` (made
// from the URL of names.url): the password is the file's content less one
// final newline; the TLS options fill RedisOptions::tls. kInvalidArgument
// for a password file that cannot be read or is empty (naming the file,
// never its content), a TLS option without a rediss:// URL, or a
// certificate without its key (or the reverse).
Status ReadConnectionOptions(const ParsedArgs& args, const ConnectionOptionNames& names,
                             RedisOptions* options);

// The connection options of kRedisConnection, --sentinel, --prefix P,
// --group G and -h/--help: accepted before or after any verb.
const std::vector<OptionSpec>& GlobalOptions();

// The help of the global options, as printed below every verb's help.
std::string_view GlobalOptionsHelp();

// `text` as an error message may show it: the password of any URL in it
// masked (RedactUrls) and control characters escaped (Escaped).
std::string Shown(std::string_view text);

// Seconds given on the command line, as milliseconds. Refuses what is not a
// plain number, is negative (or zero when `allow_zero` is false) or is
// above server::kMaxDuration (a day).
std::optional<std::chrono::milliseconds> ParseSeconds(std::string_view text, bool allow_zero);
// "2.5 s".
std::string SecondsText(std::chrono::milliseconds ms);
// The length of a span of seconds, its sign ignored: "12 s", "3 min 4 s",
// "2 h 5 min", "6 d 23 h".
std::string SpanText(double seconds);
// The UTC time of epoch seconds in strftime's `format` ("2026-01-01
// 12:00:00" by default); "never" or "-" for an infinite or unusable time.
std::string UtcTime(double seconds, const char* format = "%Y-%m-%d %H:%M:%S");
// `text` on one line, escaped (base::Escaped): only its first `width`
// characters are kept (a UTF-8 sequence is never cut), "..." then marking
// the cut.
std::string OneLine(std::string_view text, size_t width);
// "CLASS=REST" split at the first '='; empty when there is none, or
// nothing before it.
std::optional<std::pair<std::string, std::string>> SplitAssignment(std::string_view text);
// "1 job", "2 jobs": `n` and the word for it.
std::string Plural(int64_t n, const char* one, const char* many);

// Prints "reliableq: <reason> (see 'reliableq VERB --help')" to stderr
// ("(see 'reliableq --help')" when `verb` is empty) and returns kExitUsage.
// The reason goes through Shown: it may quote what the user typed.
int UsageError(std::string_view verb, std::string_view reason);

// Prints "reliableq: <status.ToString()>" to stderr, through Shown, and
// returns kExitRuntime.
int RuntimeError(const Status& status);

// Where Redis is: --redis, else $REDIS_URL, else redis://127.0.0.1:6379/0,
// with --sentinel and the options of kRedisConnection applied
// (ReadConnectionOptions), and the queue group of --group. kInvalidArgument
// for a URL that does not parse, what ReadConnectionOptions refuses, a
// --group that differs from the URL's; and, when args.cluster_needs_group()
// (the verb's Command::works_without_group is false), a cluster URL without
// a queue group in it or in --group.
Result<RedisOptions> RedisFromArgs(const ParsedArgs& args);

// RedisFromArgs without --group: the group is the URL's own, if any. For
// `migrate`, whose --group is the target's.
Result<RedisOptions> RedisFromArgsWithoutGroup(const ParsedArgs& args);

// The content of the file at `path`, at most max_bytes; kInvalidArgument
// "cannot read WHAT: <reason>" or "WHAT is larger than ...", never with the
// content.
Result<std::string> ReadBoundedFile(std::string_view what, const std::string& path,
                                    size_t max_bytes);

// The content of the file a secret-bearing --OPTION names, at most
// max_bytes. Errors name the option and the path, never the content.
Result<std::string> ReadSecretFile(std::string_view option, const std::string& path,
                                   size_t max_bytes);

// Warns, as ssh does for keys, when a file that holds a secret can be read
// by every user of the host (mode o+r): one warning line per file, in the
// log's `format`, on stderr (where the log of `worker` and `web` goes).
// Looks at the files of --redis-password-file, --basic-auth-file and
// --token-file in `args`, and at `config` (-C) when `config_holds_secret`.
// A file that cannot be stat'ed is left to the code that reads it.
void WarnReadableSecrets(const ParsedArgs& args, LogFormat format,
                         const std::optional<std::string>& config = std::nullopt,
                         bool config_holds_secret = false);

// --log-format text|json into `format`; the usage problem, if any.
std::optional<std::string> ReadLogFormat(const ParsedArgs& args, LogFormat* format);

// The prefix of reliableq's own keys: --prefix, else "reliableq:".
std::string PrefixFromArgs(const ParsedArgs& args);

// Writes `text` to stdout and flushes it; false when that failed (for
// example a closed pipe), which the verbs report as a runtime error.
bool WriteOut(std::string_view text);

}  // namespace reliableq::cli

#endif  // RELIABLEQ_CLI_COMMANDS_H_
