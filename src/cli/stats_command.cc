// reliableq stats: Sidekiq's counters, reliableq's in-progress count and the
// queues, for people or (--json) for programs.

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "reliableq/admin.h"
#include "text_escape.h"

namespace reliableq::cli {

namespace {

constexpr std::string_view kVerb = "stats";

constexpr std::string_view kHelp =
    "usage: reliableq stats [--json]\n"
    "\n"
    "Prints the counters Sidekiq's dashboard shows (processed, failed, enqueued,\n"
    "scheduled, retries, dead, processes, busy), the jobs held in reliableq's\n"
    "working lists (in progress), the jobs discarded unrun as expired (expired),\n"
    "and every queue with its size and latency:\n"
    "the seconds since its oldest job was enqueued.\n"
    "\n"
    "Options:\n"
    "      --json           one JSON object instead of text:\n"
    "                       {\"processed\":..,\"failed\":..,\"expired\":..,\n"
    "                        \"enqueued\":..,\n"
    "                        \"in_progress\":..,\"scheduled\":..,\"retries\":..,\n"
    "                        \"dead\":..,\"processes\":..,\"busy\":..,\n"
    "                        \"queues\":[{\"name\":..,\"size\":..,\"latency\":..}]}\n";

std::string Latency(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3f", seconds);
  return buf;
}

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
  writer.Key("queues");
  writer.StartArray();
  for (const QueueStats& queue : stats.queues) {
    writer.StartObject();
    writer.Key("name");
    writer.String(queue.name);
    field("size", queue.size);
    writer.Key("latency");
    // Milliseconds are all a latency can claim; three decimals as in text.
    std::string latency = Latency(queue.latency);
    writer.RawValue(latency.data(), latency.size(), rapidjson::kNumberType);
    writer.EndObject();
  }
  writer.EndArray();
  writer.EndObject();
  return TerminalSafeJson(std::string_view(buffer.GetString(), buffer.GetSize())) + "\n";
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
  out += "\n";
  if (stats.queues.empty()) {
    out += "no queues\n";
    return out;
  }
  size_t name_width = 5, size_width = 4, latency_width = 7;
  for (const QueueStats& queue : stats.queues) {
    name_width = std::max(name_width, Escaped(queue.name).size());
    size_width = std::max(size_width, std::to_string(queue.size).size());
    latency_width = std::max(latency_width, Latency(queue.latency).size());
  }
  auto row = [&](const std::string& name, const std::string& size, const std::string& latency) {
    out += name + std::string(name_width - name.size() + 2, ' ');
    out += std::string(size_width - size.size(), ' ') + size + "  ";
    out += std::string(latency_width - latency.size(), ' ') + latency + "\n";
  };
  row("queue", "size", "latency");
  for (const QueueStats& queue : stats.queues) {
    row(Escaped(queue.name), std::to_string(queue.size), Latency(queue.latency));
  }
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

const Command& StatsCommand() {
  static const Command command = {
      .name = kVerb,
      .summary = "show the counters and the queues",
      .help = kHelp,
      .options = {{.name = "json"}},
      .run = Run,
  };
  return command;
}

}  // namespace reliableq::cli
