// reliableq: the command-line program. This file only finds the verb,
// parses its options and dispatches; each verb lives in its own file.

#include <signal.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "reliableq/plugin.h"
#include "version.h"

namespace reliableq::cli {
namespace {

const std::vector<const Command*>& Commands() {
  static const std::vector<const Command*> commands = {
      &PushCommand(),     &StatsCommand(),   &RecoverCommand(),   &WorkerCommand(),
      &JobCommand(),      &RetriesCommand(), &ScheduledCommand(), &DeadCommand(),
      &QueuesCommand(),   &QueueCommand(),   &LimitsCommand(),    &SequencesCommand(),
      &SequenceCommand(), &SpoolCommand(),   &WebCommand(),       &PeriodicCommand(),
      &GroupsCommand(),   &MigrateCommand()};
  return commands;
}

const Command* FindCommand(std::string_view name) {
  for (const Command* command : Commands()) {
    if (command->name == name) return command;
  }
  return nullptr;
}

std::string GeneralHelp() {
  std::string text =
      "usage: reliableq [--redis URL] [--redis-password-file FILE] [--prefix P] [--group G]\n"
      "                 COMMAND [ARGS]\n"
      "\n"
      "Sidekiq-compatible jobs on Redis with reliable fetch: a job a worker has\n"
      "taken stays in Redis until it is done, so none is lost when a worker dies.\n"
      "\n"
      "Commands:\n";
  auto row = [&](std::string_view name, std::string_view summary) {
    text += "  " + std::string(name) + std::string(name.size() < 16 ? 16 - name.size() : 1, ' ') +
            std::string(summary) + "\n";
  };
  for (const Command* command : Commands()) row(command->name, command->summary);
  row("help [COMMAND]", "show the help of a command");
  text += "\n";
  text += GlobalOptionsHelp();
  text +=
      "      --version        print the version\n"
      "\n"
      "Exit status: 0 on success, 1 on a runtime error (Redis unreachable, not\n"
      "found, ...), 2 on a usage error.\n"
      "\n"
      "Text from Redis (job fields, queue names, errors) is printed with control\n"
      "characters escaped (\\n, \\x1b, ...); see reliableq(1).\n";
  return text;
}

// `reliableq --version`: the release, then what it needs of Redis, so that
// an operator can check a server before the first worker refuses it.
std::string VersionText() {
  return "reliableq " RELIABLEQ_VERSION "\n"
         "needs Redis " RELIABLEQ_MIN_REDIS " or later: LMOVE, Lua scripts (EVALSHA), CLIENT ID\n"
         "  and CLIENT LIST (the janitor tells dead workers by their connections), PUBLISH and\n"
         "  SUBSCRIBE (wake-ups), WAIT (replica acknowledgement, when asked for)\n"
         "advises maxmemory-policy noeviction and appendonly yes; with\n"
         "  notify-keyspace-events Kl, Ruby clients' pushes wake workers at once\n"
         "plugin ABI " + std::to_string(RELIABLEQ_PLUGIN_ABI_VERSION) + "\n";
}

std::string CommandHelp(const Command& command) {
  return std::string(command.help) + "\n" + std::string(GlobalOptionsHelp());
}

int PrintHelp(const std::string& text) {
  if (!WriteOut(text)) return RuntimeError(Status::IoError("cannot write to stdout"));
  return kExitOk;
}

// `reliableq help [COMMAND]`; -h and --help change nothing (help of help
// is help).
int RunHelp(std::vector<std::string> args) {
  std::erase_if(args, [](const std::string& arg) { return arg == "-h" || arg == "--help"; });
  if (args.empty()) return PrintHelp(GeneralHelp());
  if (args.size() > 1) return UsageError("help", "unexpected argument '" + args[1] + "'");
  const Command* command = FindCommand(args[0]);
  if (command == nullptr) return UsageError("", "unknown command '" + args[0] + "'");
  return PrintHelp(CommandHelp(*command));
}

int Main(const std::vector<std::string>& argv) {
  // The verb is the first argument that is neither a global option nor the
  // value of one; everything else, before or after it, is parsed with the
  // verb's options and the global ones together.
  std::vector<OptionSpec> leading = GlobalOptions();
  leading.push_back({.name = "version"});
  size_t verb_at = argv.size();
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg == "--") {
      verb_at = i + 1 < argv.size() ? i + 1 : argv.size();
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      verb_at = i;
      break;
    }
    // A global option that takes a value and has it in the next argument.
    for (const OptionSpec& spec : leading) {
      if (spec.takes_value && arg == "--" + std::string(spec.name)) {
        ++i;
        break;
      }
    }
  }
  std::vector<std::string> before(argv.begin(),
                                  argv.begin() + static_cast<std::ptrdiff_t>(verb_at));
  if (!before.empty() && before.back() == "--") before.pop_back();
  // Before the verb only global options are known.
  Result<ParsedArgs> leading_args = ParseArgs(before, leading);
  if (!leading_args.ok()) return UsageError("", leading_args.status().message());
  if (leading_args->Has("version")) return PrintHelp(VersionText());
  if (verb_at >= argv.size()) {
    if (leading_args->Has("help")) return PrintHelp(GeneralHelp());
    return UsageError("", "missing command");
  }

  const std::string& verb = argv[verb_at];
  std::vector<std::string> rest(argv.begin() + static_cast<std::ptrdiff_t>(verb_at) + 1,
                                argv.end());
  if (verb == "help") return RunHelp(rest);
  const Command* command = FindCommand(verb);
  if (command == nullptr) return UsageError("", "unknown command '" + verb + "'");
  if (WantsHelp(before) || WantsHelp(rest)) return PrintHelp(CommandHelp(*command));

  std::vector<OptionSpec> specs = GlobalOptions();
  specs.insert(specs.end(), command->options.begin(), command->options.end());
  std::vector<std::string> all = before;
  all.insert(all.end(), rest.begin(), rest.end());
  Result<ParsedArgs> parsed = ParseArgs(all, specs);
  if (!parsed.ok()) return UsageError(command->name, parsed.status().message());
  parsed->set_cluster_needs_group(!command->works_without_group);
  return command->run(*parsed);
}

}  // namespace
}  // namespace reliableq::cli

int main(int argc, char** argv) {
  // A Redis connection the server closed, or a closed stdout, must become an
  // error message and exit status 1, not a silent death by SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  return reliableq::cli::Main(args);
}
