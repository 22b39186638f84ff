// reliableq migrate: moves a layout-1 deployment's data into a queue group
// of layout 2 (src/migrate/migration.h).

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cli/commands.h"
#include "migrate/key_map.h"
#include "migrate/migration.h"
#include "base/text_escape.h"

namespace reliableq::cli {

// Named as well, so that the verbs' kVerb, kHelp and Run stay apart in a
// unity build (tools/quickstart).
namespace migrate_command {
namespace {

using migrate::Action;
using migrate::KeyKind;
using migrate::MigrationReport;
using migrate::MovedKey;

constexpr std::string_view kVerb = "migrate";

// The tests' stand-in for a command killed between a key's copy and its
// removal from the source (migrate/mover.h): stop after N writes to the
// target.
constexpr const char* kTestStopVariable = "RELIABLEQ_TEST_MIGRATE_STOP_AFTER";

// The target's connection options, named after --to; the same as the
// source's global ones.
constexpr ConnectionOptionNames kTargetConnection = {
    "to",         "to-password-file",   "to-tls-ca",       "to-tls-cert",
    "to-tls-key", "to-tls-server-name", "to-tls-insecure", "the --to URL"};

constexpr std::string_view kHelp =
    "usage: reliableq migrate --to URL --group G [--dry-run] [--batch N] [--json]\n"
    "                         [--to-password-file FILE] [--to-tls-ca FILE]\n"
    "                         [--to-tls-cert FILE --to-tls-key FILE]\n"
    "                         [--to-tls-server-name NAME] [--to-tls-insecure]\n"
    "\n"
    "Moves the data of a single-Redis deployment (layout 1, the Redis of --redis,\n"
    "whose URL names no group) into queue group G of layout 2 on the Redis or\n"
    "cluster of --to: every queue, the schedule, retry and dead sets, the\n"
    "counters, and reliableq's paused queues, limits, periodic jobs and records;\n"
    "nothing else (unique locks stay: uniqueness ends with the move). Stop every\n"
    "worker first (and the clients that push); it refuses while a worker is alive\n"
    "or a working list exists (run 'reliableq recover'). Each key is copied to the\n"
    "target before it leaves the source: a stopped run loses no job, and running\n"
    "it again goes on. See reliableq(1).\n"
    "\n"
    "Options:\n"
    "      --to URL         the target: redis://..., rediss://... or a cluster URL\n"
    "      --to-password-file FILE\n"
    "                       the target's password is the content of FILE, less one\n"
    "                       final newline (instead of the URL's)\n"
    "      --to-tls-ca FILE, --to-tls-cert FILE, --to-tls-key FILE,\n"
    "      --to-tls-server-name NAME, --to-tls-insecure\n"
    "                       the --redis-tls-* options, for a rediss:// target (the\n"
    "                       global ones are the source's)\n"
    "      --group G        the target's queue group (letters, digits, '_', '-', '.';\n"
    "                       1-64)\n"
    "      --dry-run        check and print the plan; write nothing\n"
    "      --batch N        move a list or zset of more than N elements N at a\n"
    "                       time instead of whole (default: 1000)\n"
    "      --json           one JSON object instead of text:\n"
    "                       {\"dry_run\":..,\"group\":..,\"keys\":[{\"source\":..,\n"
    "                        \"target\":..,\"type\":..,\"kind\":..,\"action\":..,\n"
    "                        \"size\":..,\"moved\":..}],\"moved_keys\":..,\"jobs\":{\n"
    "                        \"queued\":..,\"scheduled\":..,\"retries\":..,\"dead\":..,\n"
    "                        \"parked\":..},\"schema_written\":..,\"group_added\":..};\n"
    "                       with --dry-run nothing moves: \"would_move\" and\n"
    "                       \"would_move_keys\" instead of \"moved\" and \"moved_keys\",\n"
    "                       and \"jobs\" counts the jobs that would move\n";

constexpr int64_t kDefaultBatch = 1000;

std::string_view KindName(KeyKind kind) {
  switch (kind) {
    case KeyKind::kDirectory:
      return "directory";
    case KeyKind::kQueue:
      return "queue";
    case KeyKind::kSchedule:
      return "schedule";
    case KeyKind::kRetry:
      return "retry";
    case KeyKind::kDead:
      return "dead";
    case KeyKind::kParked:
      return "parked";
    case KeyKind::kOther:
      break;
  }
  return "other";
}

std::string_view ActionName(Action action) {
  switch (action) {
    case Action::kRestore:
      return "restore";
    case Action::kDeleteOnly:
      return "delete_only";
    case Action::kBatches:
      break;
  }
  return "batches";
}

std::string_view ActionText(Action action, bool dry_run) {
  switch (action) {
    case Action::kRestore:
      return dry_run ? "copy whole" : "copied whole";
    case Action::kDeleteOnly:
      return dry_run ? "already on the target: delete from the source"
                     : "already on the target: deleted from the source";
    case Action::kBatches:
      break;
  }
  return dry_run ? "move in batches" : "moved in batches";
}

void String(rapidjson::Writer<rapidjson::StringBuffer>& writer, std::string_view text) {
  writer.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
}

std::string AsJson(const MigrationReport& report, const std::string& group) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.StartObject();
  writer.Key("dry_run");
  writer.Bool(report.dry_run);
  writer.Key("group");
  String(writer, group);
  writer.Key("keys");
  writer.StartArray();
  for (const MovedKey& moved : report.keys) {
    writer.StartObject();
    writer.Key("source");
    String(writer, moved.key.source);
    writer.Key("target");
    String(writer, moved.key.target);
    writer.Key("type");
    String(writer, moved.key.type);
    writer.Key("kind");
    String(writer, KindName(moved.key.kind));
    writer.Key("action");
    String(writer, ActionName(moved.key.action));
    writer.Key("size");
    writer.Int64(moved.key.size);
    // A dry run moves nothing: its count is what a run would move, and is
    // named so.
    writer.Key(report.dry_run ? "would_move" : "moved");
    writer.Int64(moved.moved);
    writer.EndObject();
  }
  writer.EndArray();
  writer.Key(report.dry_run ? "would_move_keys" : "moved_keys");
  writer.Uint64(report.keys.size());
  writer.Key("jobs");
  writer.StartObject();
  for (auto [name, count] : {std::pair<const char*, int64_t>{"queued", report.jobs.queued},
                             {"scheduled", report.jobs.scheduled},
                             {"retries", report.jobs.retries},
                             {"dead", report.jobs.dead},
                             {"parked", report.jobs.parked}}) {
    writer.Key(name);
    writer.Int64(count);
  }
  writer.EndObject();
  writer.Key("schema_written");
  writer.Bool(report.schema_written);
  writer.Key("group_added");
  writer.Bool(report.group_added);
  writer.EndObject();
  return base::TerminalSafeJson(std::string_view(buffer.GetString(), buffer.GetSize())) + "\n";
}

std::string AsText(const MigrationReport& report, const std::string& group,
                   const std::string& prefix) {
  std::string out;
  for (const MovedKey& moved : report.keys) {
    out += "  " + base::Escaped(moved.key.source) + " -> " + base::Escaped(moved.key.target) + ": " +
           moved.key.type +
           (moved.key.type == "string" ? "" : " of " + std::to_string(moved.key.size)) + ", " +
           std::string(ActionText(moved.key.action, report.dry_run)) + "\n";
  }
  const migrate::JobCounts& jobs = report.jobs;
  out += std::string(report.dry_run ? "would move " : "moved ") +
         std::to_string(report.keys.size()) + " keys into group '" + group +
         "'; jobs: " + std::to_string(jobs.queued) + " queued, " + std::to_string(jobs.scheduled) +
         " scheduled, " + std::to_string(jobs.retries) + " retries, " + std::to_string(jobs.dead) +
         " dead, " + std::to_string(jobs.parked) + " parked\n";
  if (!report.dry_run) {
    out += base::Escaped(prefix) + "{" + group + "}:schema = 2" +
           (report.schema_written ? "" : " (already)") + "; " + base::Escaped(prefix) + "groups has '" +
           group + "'" + (report.group_added ? "" : " (already)") + "\n";
  }
  return out;
}

int Run(const ParsedArgs& args) {
  if (!args.positionals().empty()) {
    return UsageError(kVerb, "unexpected argument '" + args.positionals()[0] + "'");
  }
  std::optional<std::string> to = args.Value("to");
  if (!to) return UsageError(kVerb, "--to URL is required (where the group's data goes)");
  std::optional<std::string> group = args.Value("group");
  if (!group) return UsageError(kVerb, "--group G is required");
  migrate::MigrateOptions options;
  options.settings.prefix = PrefixFromArgs(args);
  options.settings.group = *group;
  if (Status named = migrate::CheckGroupName(*group); !named.ok()) {
    return UsageError(kVerb, named.message());
  }
  options.settings.batch = kDefaultBatch;
  if (auto text = args.Value("batch")) {
    std::optional<int> n = ParseCount(*text);
    if (!n || *n < 1)
      return UsageError(kVerb, "--batch needs a positive integer, not '" + *text + "'");
    options.settings.batch = *n;
  }
  options.dry_run = args.Has("dry-run");
  options.settings.now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (const char* stop = std::getenv(kTestStopVariable); stop != nullptr && *stop != '\0') {
    std::optional<int> n = ParseCount(stop);
    if (!n) return UsageError(kVerb, std::string(kTestStopVariable) + " is not a count");
    options.TEST_stop_after_writes = *n;
  }

  // --group is also the global option (the group a verb works on); here it
  // names the target's group, never the source's: the source is layout 1.
  Result<RedisOptions> source = RedisFromArgsWithoutGroup(args);
  if (!source.ok()) return UsageError(kVerb, source.status().message());
  if (!source->group.empty()) {
    return UsageError(kVerb,
                      "the source of a migration is layout 1, without a queue group, but its "
                      "URL names group '" +
                          source->group +
                          "': take group= (or a cluster URL's path) out of --redis or "
                          "REDIS_URL; --group names the target's group");
  }
  Result<RedisOptions> target = RedisOptions::FromUrl(*to);
  if (!target.ok()) return UsageError(kVerb, "--to: " + target.status().message());
  if (Status s = ReadConnectionOptions(args, kTargetConnection, &*target); !s.ok()) {
    return UsageError(kVerb, s.message());
  }

  Result<MigrationReport> report = migrate::Migrate(*source, *target, options);
  if (!report.ok()) {
    if (report.status().IsInvalidArgument()) return UsageError(kVerb, report.status().message());
    return RuntimeError(report.status());
  }
  std::string text =
      args.Has("json") ? AsJson(*report, *group) : AsText(*report, *group, options.settings.prefix);
  if (!WriteOut(text)) return RuntimeError(Status::IoError("cannot write to stdout"));
  return kExitOk;
}

}  // namespace
}  // namespace migrate_command

const Command& MigrateCommand() {
  static const Command command = {
      .name = migrate_command::kVerb,
      .summary = "move a single-Redis deployment into a queue group (layout 2)",
      .help = migrate_command::kHelp,
      .options =
          [] {
            std::vector<OptionSpec> specs =
                ConnectionOptionSpecs(migrate_command::kTargetConnection);
            specs.insert(specs.end(), {
                                          {.name = "group", .takes_value = true},
                                          {.name = "dry-run"},
                                          {.name = "batch", .takes_value = true},
                                          {.name = "json"},
                                      });
            return specs;
          }(),
      .works_without_group = true,
      .run = migrate_command::Run,
  };
  return command;
}

}  // namespace reliableq::cli
