// reliableq recover: one janitor pass on demand.

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <string>
#include <string_view>

#include "cli/commands.h"
#include "reliableq/admin.h"
#include "base/text_escape.h"

namespace reliableq::cli {

// Named as well, so that the verbs' kVerb, kHelp and Run stay apart in a
// unity build (tools/quickstart).
namespace recover_command {
namespace {

constexpr std::string_view kVerb = "recover";

constexpr std::string_view kHelp =
    "usage: reliableq recover [--dry-run] [--identity ID [--force]] [--max-interruptions N]\n"
    "                         [--json]\n"
    "\n"
    "Returns the jobs of dead worker processes (those whose heartbeat key has\n"
    "expired, and those none of whose Redis connections exists any more) from\n"
    "their working lists to the front of their queues, as the workers' janitor\n"
    "does every second. A job interrupted more than N times goes to the dead set\n"
    "instead. Safe to run beside live workers.\n"
    "\n"
    "Options:\n"
    "      --dry-run        only show what would move\n"
    "      --identity ID    only this process (hostname:pid:hex)\n"
    "      --force          recover ID even though its heartbeat is alive: its jobs\n"
    "                       may then run twice (needs --identity)\n"
    "      --max-interruptions N\n"
    "                       the interruptions a job may have had (default: 3)\n"
    "      --json           one JSON object instead of text:\n"
    "                       {\"dry_run\":..,\"identities\":[{\"identity\":..,\"alive\":..,\n"
    "                        [\"evidence\":\"heartbeat_expired\"|\"connections_gone\",]\n"
    "                        [\"error\":..,]\"queues\":[{\"queue\":..,\"requeued\":..,\n"
    "                        \"dead\":..}]}]}\n";

// How the report names the reason a process was taken for dead; empty when
// it was not.
std::string_view EvidenceName(DeathEvidence evidence) {
  switch (evidence) {
    case DeathEvidence::kHeartbeatExpired:
      return "heartbeat_expired";
    case DeathEvidence::kConnectionsGone:
      return "connections_gone";
    case DeathEvidence::kNone:
      break;
  }
  return {};
}

std::string AsJson(const RecoveryReport& report, bool dry_run) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.StartObject();
  writer.Key("dry_run");
  writer.Bool(dry_run);
  writer.Key("identities");
  writer.StartArray();
  for (const IdentityRecovery& identity : report.identities) {
    writer.StartObject();
    writer.Key("identity");
    writer.String(identity.identity);
    writer.Key("alive");
    writer.Bool(identity.alive);
    if (std::string_view evidence = EvidenceName(identity.evidence); !evidence.empty()) {
      writer.Key("evidence");
      writer.String(evidence.data(), static_cast<rapidjson::SizeType>(evidence.size()));
    }
    if (!identity.error.empty()) {
      writer.Key("error");
      writer.String(identity.error);
    }
    writer.Key("queues");
    writer.StartArray();
    for (const QueueRecovery& queue : identity.queues) {
      writer.StartObject();
      writer.Key("queue");
      writer.String(queue.queue);
      writer.Key("requeued");
      writer.Int64(queue.requeued);
      writer.Key("dead");
      writer.Int64(queue.dead);
      writer.EndObject();
    }
    writer.EndArray();
    writer.EndObject();
  }
  writer.EndArray();
  writer.EndObject();
  return base::TerminalSafeJson(std::string_view(buffer.GetString(), buffer.GetSize())) + "\n";
}

std::string AsText(const RecoveryReport& report, const RecoverOptions& options) {
  std::string out;
  int64_t processes = 0, requeued = 0, dead = 0;
  for (const IdentityRecovery& identity : report.identities) {
    // A live process is only recovered when forced; listing it otherwise
    // would suggest something happened to it.
    if (identity.alive && !options.force) continue;
    ++processes;
    std::string moves;
    int64_t identity_dead = 0;
    for (const QueueRecovery& queue : identity.queues) {
      identity_dead += queue.dead;
      requeued += queue.requeued;
      if (queue.requeued == 0) continue;
      if (!moves.empty()) moves += ", ";
      moves += std::to_string(queue.requeued) + " back to " + base::Escaped(queue.queue);
    }
    dead += identity_dead;
    if (identity_dead > 0) {
      if (!moves.empty()) moves += ", ";
      moves += std::to_string(identity_dead) + " to dead";
    }
    if (!identity.error.empty()) {
      out += base::Escaped(identity.identity) + ": not recovered: " + base::Escaped(identity.error) + "\n";
    }
    if (moves.empty()) continue;
    std::string why = identity.alive ? "alive, forced"
                      : identity.evidence == DeathEvidence::kConnectionsGone
                          ? "connections gone"
                          : "heartbeat expired";
    out += base::Escaped(identity.identity) + ": " + (options.dry_run ? "would move " : "") + moves +
           " (" + why + ")\n";
  }
  if (processes == 0) return out + "no dead processes\n";
  std::string jobs = Plural(requeued + dead, "job", "jobs");
  out += Plural(processes, "process", "processes") + ": " + jobs +
         (options.dry_run ? " would be recovered" : " recovered") + " (" +
         std::to_string(requeued) + " requeued, " + std::to_string(dead) + " to dead)\n";
  return out;
}

int Run(const ParsedArgs& args) {
  if (!args.positionals().empty()) {
    return UsageError(kVerb, "unexpected argument '" + args.positionals()[0] + "'");
  }
  RecoverOptions options;
  options.dry_run = args.Has("dry-run");
  options.force = args.Has("force");
  if (auto identity = args.Value("identity")) {
    if (identity->empty()) return UsageError(kVerb, "the identity is empty");
    options.identity = *identity;
  }
  if (options.force && options.identity.empty()) {
    return UsageError(kVerb, "--force needs --identity");
  }
  if (auto text = args.Value("max-interruptions")) {
    std::optional<int> n = ParseCount(*text);
    if (!n) {
      return UsageError(kVerb,
                        "--max-interruptions needs a non-negative integer, not '" + *text + "'");
    }
    options.max_interruptions = *n;
  }

  Result<RedisOptions> redis = RedisFromArgs(args);
  if (!redis.ok()) return UsageError(kVerb, redis.status().message());
  Result<std::unique_ptr<Admin>> admin =
      Admin::Open(*redis, {.prefix = PrefixFromArgs(args), .clock = nullptr});
  if (!admin.ok()) return RuntimeError(admin.status());
  Result<RecoveryReport> report = (*admin)->Recover(options);
  if (!report.ok()) return RuntimeError(report.status());
  std::string text = args.Has("json") ? AsJson(*report, options.dry_run) : AsText(*report, options);
  if (!WriteOut(text)) return RuntimeError(Status::IoError("cannot write to stdout"));
  // The report is printed either way; a process whose jobs Redis refused to
  // move is a failure of the command.
  for (const IdentityRecovery& identity : report->identities) {
    if (!identity.error.empty()) return kExitRuntime;
  }
  return kExitOk;
}

}  // namespace
}  // namespace recover_command

const Command& RecoverCommand() {
  static const Command command = {
      .name = recover_command::kVerb,
      .summary = "return the jobs of dead worker processes to their queues",
      .help = recover_command::kHelp,
      .options =
          {
              {.name = "dry-run"},
              {.name = "identity", .takes_value = true},
              {.name = "force"},
              {.name = "max-interruptions", .takes_value = true},
              {.name = "json"},
          },
      .run = recover_command::Run,
  };
  return command;
}

}  // namespace reliableq::cli
