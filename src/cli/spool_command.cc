// reliableq spool status|drain DIR: what a client spool directory holds, and
// draining it from here.

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "reliableq/spool.h"
#include "base/text_escape.h"

namespace reliableq::cli {

// Named as well, so that the verbs' kVerb, kHelp and Run stay apart in a
// unity build (tools/quickstart).
namespace spool_command {
namespace {

constexpr std::string_view kVerb = "spool";

constexpr std::string_view kHelp =
    "usage: reliableq spool status DIR [--json]\n"
    "       reliableq spool drain DIR [--wait-replicas N [--wait-timeout MS]]\n"
    "                                 [--replay-window SECONDS]\n"
    "\n"
    "A client spool directory (reliableq push --spool DIR, or\n"
    "ClientOptions::spool_dir) holds the pushes that could not reach Redis, one\n"
    "journal file per client process, until they are drained into Redis.\n"
    "\n"
    "Subcommands:\n"
    "  status DIR     each journal: whether a live process holds it, its jobs still\n"
    "                 to push, its size, how long ago its oldest pending job was\n"
    "                 spooled, the keyspace it was written for (the prefix and\n"
    "                 the queue group), jobs Redis refused (kept, with Redis's\n"
    "                 reason) or a rule refused (dropped), and what is wrong with\n"
    "                 it if anything\n"
    "  drain DIR      pushes the jobs of every journal of this keyspace (--prefix,\n"
    "                 --group) that no live process holds (a live client drains\n"
    "                 its own), the same jid and payload, oldest first; deletes\n"
    "                 each journal once drained and prints how many jobs it\n"
    "                 pushed, and how many of them Redis had already (a push of\n"
    "                 the same jid within the replay window stored it: not\n"
    "                 stored twice). A record cut short by a crash is dropped,\n"
    "                 one line each. Journals of another keyspace are left, one\n"
    "                 line each. A damaged journal is set aside as\n"
    "                 JOURNAL.corrupt-OFFSET, its jobs before the damage drained.\n"
    "                 Exit status 1 when jobs are left: Redis could not be\n"
    "                 reached (the message says where), refused some (kept),\n"
    "                 they belong to another keyspace, or a damaged journal is\n"
    "                 set aside (until a person deletes it); and for a file\n"
    "                 named like a journal that is not a regular file (a\n"
    "                 symbolic link, say: refused)\n"
    "\n"
    "Options:\n"
    "      --json           status prints one JSON object:\n"
    "                       {\"dir\":..,\"total_bytes\":..,\"pending_jobs\":..,\n"
    "                        \"files\":[{\"name\":..,\"bytes\":..,\"live\":..,\n"
    "                        \"pending_jobs\":..,\"pending_bytes\":..,\n"
    "                        \"oldest_spooled_at\":..,\"held_jobs\":..,\n"
    "                        \"held_reason\":..,\"dropped_jobs\":..,\"format\":..,\n"
    "                        \"prefix\":..,\"group\":..,\"problem\":..}],\n"
    "                        \"corrupt_files\":[..]}\n"
    "      --wait-replicas N\n"
    "                       drain: a job counts as pushed only once N replicas have\n"
    "                       it (WAIT); otherwise it stays in the spool\n"
    "      --wait-timeout MS\n"
    "                       drain: how long WAIT waits, in milliseconds (default\n"
    "                       1000)\n"
    "      --replay-window SECONDS\n"
    "                       drain: how long Redis keeps the record of each jid\n"
    "                       pushed, so that a later push of the same jid stores\n"
    "                       nothing (default 3600)\n";

std::string Age(double spooled_at) {
  if (spooled_at <= 0) return "-";
  double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1fs", std::max(0.0, now - spooled_at));
  return buf;
}

// What the keys of the journal's jobs begin with: "P{G}:" for a group,
// "P (no group)" for layout 1; a journal of format 1 records neither.
std::string KeyspaceColumn(const SpoolFileStatus& file) {
  if (file.format == 1) return "(format 1: no group, any prefix)";
  if (!file.keyspace_recorded) return "-";
  if (file.group.empty()) return base::Escaped(file.prefix) + " (no group)";
  return base::Escaped(file.prefix) + "{" + base::Escaped(file.group) + "}:";
}

std::string StatusJson(const SpoolStatus& status) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.StartObject();
  writer.Key("dir");
  writer.String(status.dir);
  writer.Key("total_bytes");
  writer.Uint64(status.total_bytes);
  writer.Key("pending_jobs");
  writer.Int64(status.pending_jobs);
  writer.Key("files");
  writer.StartArray();
  for (const SpoolFileStatus& file : status.files) {
    writer.StartObject();
    writer.Key("name");
    writer.String(file.name);
    writer.Key("bytes");
    writer.Uint64(file.bytes);
    writer.Key("live");
    writer.Bool(file.live);
    writer.Key("pending_jobs");
    writer.Int64(file.pending_jobs);
    writer.Key("pending_bytes");
    writer.Int64(file.pending_bytes);
    writer.Key("oldest_spooled_at");
    writer.Double(file.oldest_spooled_at);
    writer.Key("held_jobs");
    writer.Int64(file.held_jobs);
    writer.Key("held_reason");
    writer.String(file.held_reason);
    writer.Key("dropped_jobs");
    writer.Int64(file.dropped_jobs);
    // null: not recorded (format 1, or a start that cannot be read).
    writer.Key("format");
    writer.Int(file.format);
    writer.Key("prefix");
    file.keyspace_recorded ? writer.String(file.prefix) : writer.Null();
    writer.Key("group");
    file.keyspace_recorded ? writer.String(file.group) : writer.Null();
    writer.Key("problem");
    writer.String(file.problem);
    writer.EndObject();
  }
  writer.EndArray();
  writer.Key("corrupt_files");
  writer.StartArray();
  for (const std::string& name : status.corrupt_files) writer.String(name);
  writer.EndArray();
  writer.EndObject();
  return base::TerminalSafeJson(std::string_view(buffer.GetString(), buffer.GetSize())) + "\n";
}

std::string StatusText(const SpoolStatus& status) {
  std::string out = "spool " + base::Escaped(status.dir) + ": " +
                    Plural(static_cast<int64_t>(status.files.size()), "journal", "journals") +
                    ", " + Plural(status.pending_jobs, "job", "jobs") + " pending, " +
                    std::to_string(status.total_bytes) + " bytes\n";
  if (!status.files.empty()) {
    size_t name_width = 7;
    for (const SpoolFileStatus& file : status.files) {
      name_width = std::max(name_width, base::Escaped(file.name).size());
    }
    char row[512];
    std::snprintf(row, sizeof row, "%-*s  %-4s  %9s  %12s  %-8s  %s\n",
                  static_cast<int>(name_width), "journal", "live", "pending", "bytes", "oldest",
                  "keyspace");
    out += row;
    for (const SpoolFileStatus& file : status.files) {
      std::snprintf(row, sizeof row, "%-*s  %-4s  %9lld  %12llu  %-8s  ",
                    static_cast<int>(name_width), base::Escaped(file.name).c_str(),
                    file.live ? "yes" : "no", static_cast<long long>(file.pending_jobs),
                    static_cast<unsigned long long>(file.bytes),
                    Age(file.oldest_spooled_at).c_str());
      out += row + KeyspaceColumn(file) + "\n";
    }
  }
  for (const SpoolFileStatus& file : status.files) {
    std::string name = base::Escaped(file.name);
    if (file.held_jobs > 0) {
      out += name + ": " + Plural(file.held_jobs, "job", "jobs") +
             " kept: Redis refused them: " + base::Escaped(file.held_reason) + "\n";
    }
    if (file.dropped_jobs > 0) {
      out += name + ": " + Plural(file.dropped_jobs, "job", "jobs") +
             " dropped: a rule refused them\n";
    }
    if (!file.problem.empty()) out += name + ": " + base::Escaped(file.problem) + "\n";
  }
  for (const std::string& name : status.corrupt_files) {
    out += "damaged journal set aside (never drained): " + base::Escaped(name) + "\n";
  }
  return out;
}

// Once per command, on stderr, before anything else it says.
void WarnIfWritable(const std::string& warning) {
  if (!warning.empty()) std::fprintf(stderr, "reliableq: warning: %s\n", Shown(warning).c_str());
}

int RunStatus(const ParsedArgs& args, const std::string& dir) {
  if (args.Has("wait-replicas") || args.Has("wait-timeout") || args.Has("replay-window")) {
    return UsageError(kVerb,
                      "--wait-replicas, --wait-timeout and --replay-window go with drain, not "
                      "status");
  }
  Result<SpoolStatus> status = ReadSpoolStatus(dir);
  if (!status.ok()) return RuntimeError(status.status());
  WarnIfWritable(status->warning);
  std::string text = args.Has("json") ? StatusJson(*status) : StatusText(*status);
  if (!WriteOut(text)) return RuntimeError(Status::IoError("cannot write to stdout"));
  return kExitOk;
}

int RunDrain(const ParsedArgs& args, const std::string& dir) {
  if (args.Has("json")) return UsageError(kVerb, "--json goes with status, not drain");
  SpoolDrainOptions options;
  options.prefix = PrefixFromArgs(args);
  if (auto text = args.Value("wait-replicas")) {
    std::optional<int> n = ParseCount(*text);
    if (!n)
      return UsageError(kVerb, "--wait-replicas needs a number of replicas, not '" + *text + "'");
    options.wait_replicas = *n;
  }
  if (auto text = args.Value("wait-timeout")) {
    if (options.wait_replicas == 0)
      return UsageError(kVerb, "--wait-timeout needs --wait-replicas");
    std::optional<int> ms = ParseCount(*text);
    if (!ms || *ms == 0) {
      return UsageError(
          kVerb, "--wait-timeout needs a number of milliseconds above 0, not '" + *text + "'");
    }
    options.wait_timeout = std::chrono::milliseconds(*ms);
  }
  if (auto text = args.Value("replay-window")) {
    std::optional<int> seconds = ParseCount(*text);
    if (!seconds || *seconds == 0) {
      return UsageError(
          kVerb, "--replay-window needs a number of seconds above 0, not '" + *text + "'");
    }
    options.replay_window = std::chrono::seconds(*seconds);
  }
  Result<RedisOptions> redis = RedisFromArgs(args);
  if (!redis.ok()) return UsageError(kVerb, redis.status().message());
  Result<SpoolDrainReport> report = DrainSpool(dir, *redis, options);
  if (!report.ok()) return RuntimeError(report.status());
  WarnIfWritable(report->warning);

  std::string out = "pushed " + Plural(report->pushed, "job", "jobs") + " from spool " +
                    base::Escaped(dir) + "; " + Plural(report->files_removed, "journal", "journals") +
                    " drained and deleted\n";
  if (report->already_stored > 0) {
    out += Plural(report->already_stored, "job was", "jobs were") +
           " in Redis already (pushed earlier under the same jid): not stored again\n";
  }
  if (report->dropped > 0) {
    out += Plural(report->dropped, "job", "jobs") + " dropped: a rule refused them\n";
  }
  for (const std::string& tail : report->dropped_tails) {
    out += "dropped the end of " + base::Escaped(tail) + "\n";
  }
  for (const std::string& name : report->live_files) {
    out += "left to the live process that holds it: " + base::Escaped(name) + "\n";
  }
  if (!WriteOut(out)) return RuntimeError(Status::IoError("cannot write to stdout"));
  bool failed = false;
  for (const std::string& other : report->other_keyspace_files) {
    std::fprintf(stderr, "reliableq: left for a drain of its own keyspace: %s\n",
                 Shown(other).c_str());
    failed = true;
  }
  for (const std::string& problem : report->failed_files) {
    std::fprintf(stderr, "reliableq: left alone: %s\n", Shown(problem).c_str());
    failed = true;
  }
  for (const std::string& damage : report->damaged_files) {
    std::fprintf(stderr, "reliableq: damaged: %s\n", Shown(damage).c_str());
    failed = true;
  }
  for (const std::string& name : report->corrupt_files) {
    std::fprintf(stderr,
                 "reliableq: damaged journal set aside earlier (never drained; look at it, "
                 "then delete it): %s\n",
                 Shown(name).c_str());
    failed = true;
  }
  if (report->held > 0) {
    std::fprintf(stderr, "reliableq: %s kept in the spool: Redis refused them: %s\n",
                 Plural(report->held, "job", "jobs").c_str(), Shown(report->held_reason).c_str());
    failed = true;
  }
  if (!report->stopped.ok()) {
    std::fprintf(stderr, "reliableq: %s; %s left in spool %s\n",
                 Shown(report->stopped.ToString()).c_str(),
                 Plural(report->left, "job", "jobs").c_str(), Shown(dir).c_str());
    failed = true;
  }
  return failed ? kExitRuntime : kExitOk;
}

int Run(const ParsedArgs& args) {
  const std::vector<std::string>& words = args.positionals();
  if (words.empty()) return UsageError(kVerb, "missing subcommand (status, drain)");
  if (words[0] != "status" && words[0] != "drain") {
    return UsageError(kVerb, "unknown subcommand '" + words[0] + "' (status, drain)");
  }
  if (words.size() < 2) return UsageError(kVerb, words[0] + " needs the spool DIR");
  if (words.size() > 2) return UsageError(kVerb, "unexpected argument '" + words[2] + "'");
  if (words[1].empty()) return UsageError(kVerb, "the spool DIR is empty");
  return words[0] == "status" ? RunStatus(args, words[1]) : RunDrain(args, words[1]);
}

}  // namespace
}  // namespace spool_command

const Command& SpoolCommand() {
  static const Command command = {
      .name = spool_command::kVerb,
      .summary = "what a client spool directory holds; drain it into Redis",
      .help = spool_command::kHelp,
      .options =
          {
              {.name = "json"},
              {.name = "wait-replicas", .takes_value = true},
              {.name = "wait-timeout", .takes_value = true},
              {.name = "replay-window", .takes_value = true},
          },
      .run = spool_command::Run,
  };
  return command;
}

}  // namespace reliableq::cli
