// reliableq stats: Sidekiq's counters, reliableq's in-progress count and the
// queues, for people or (--json) for programs.

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/queue_table.h"
#include "reliableq/admin.h"
#include "base/text_escape.h"

namespace reliableq::cli {

// Named as well, so that the verbs' kVerb, kHelp and Run stay apart in a
// unity build (tools/quickstart).
namespace stats_command {
namespace {

constexpr std::string_view kVerb = "stats";

constexpr std::string_view kHelp =
    "usage: reliableq stats [--json]\n"
    "\n"
    "Prints the counters Sidekiq's dashboard shows (processed, failed, enqueued,\n"
    "scheduled, retries, dead, processes, busy), the jobs held in reliableq's\n"
    "working lists (in progress), the jobs discarded unrun as expired (expired),\n"
    "and every queue with its size and latency (the seconds since its oldest\n"
    "job was enqueued), marking the paused ones; parked counts the jobs waiting\n"
    "for a slot of a concurrency limit.\n"
    "\n"
    "Options:\n"
    "      --json           one JSON object instead of text:\n"
    "                       {\"processed\":..,\"failed\":..,\"expired\":..,\n"
    "                        \"enqueued\":..,\n"
    "                        \"in_progress\":..,\"scheduled\":..,\"retries\":..,\n"
    "                        \"dead\":..,\"processes\":..,\"busy\":..,\n"
    "                        \"parked\":..,\n"
    "                        \"queues\":[{\"name\":..,\"size\":..,\"latency\":..,\n"
    "                                    \"paused\":..}]}\n";

std::string AsJson(const Stats& stats) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  auto field = [&](const char* name, int64_t value) {
    writer.Key(name);
    writer.Int64(value);
  };
  writer.StartObject();
  field("processed", stats.processed);
  field("failed", stats.failed);
  field("expired", stats.expired);
  field("enqueued", stats.enqueued);
  field("in_progress", stats.in_progress);
  field("scheduled", stats.scheduled);
  field("retries", stats.retries);
  field("dead", stats.dead);
  field("processes", stats.processes);
  field("busy", stats.busy);
  field("parked", stats.parked);
  WriteQueuesJson(writer, stats.queues);
  writer.EndObject();
  return base::TerminalSafeJson(std::string_view(buffer.GetString(), buffer.GetSize())) + "\n";
}

std::string AsText(const Stats& stats) {
  std::string out;
  auto line = [&](const char* name, int64_t value) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%-13s %lld\n", name, static_cast<long long>(value));
    out += buf;
  };
  line("processed:", stats.processed);
  line("failed:", stats.failed);
  line("expired:", stats.expired);
  line("enqueued:", stats.enqueued);
  line("in progress:", stats.in_progress);
  line("scheduled:", stats.scheduled);
  line("retries:", stats.retries);
  line("dead:", stats.dead);
  line("processes:", stats.processes);
  line("busy:", stats.busy);
  line("parked:", stats.parked);
  out += "\n";
  out += QueueTableText(stats.queues);
  return out;
}

int Run(const ParsedArgs& args) {
  if (!args.positionals().empty()) {
    return UsageError(kVerb, "unexpected argument '" + args.positionals()[0] + "'");
  }
  Result<RedisOptions> redis = RedisFromArgs(args);
  if (!redis.ok()) return UsageError(kVerb, redis.status().message());
  Result<std::unique_ptr<Admin>> admin =
      Admin::Open(*redis, {.prefix = PrefixFromArgs(args), .clock = nullptr});
  if (!admin.ok()) return RuntimeError(admin.status());
  Result<Stats> stats = (*admin)->GetStats();
  if (!stats.ok()) return RuntimeError(stats.status());
  std::string text = args.Has("json") ? AsJson(*stats) : AsText(*stats);
  if (!WriteOut(text)) return RuntimeError(Status::IoError("cannot write to stdout"));
  return kExitOk;
}

}  // namespace
}  // namespace stats_command

const Command& StatsCommand() {
  static const Command command = {
      .name = stats_command::kVerb,
      .summary = "show the counters and the queues",
      .help = stats_command::kHelp,
      .options = {{.name = "json"}},
      .run = stats_command::Run,
  };
  return command;
}

}  // namespace reliableq::cli
