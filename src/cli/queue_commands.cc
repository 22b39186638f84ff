// reliableq queues: the queues with their sizes and latencies.
// reliableq queue clear: Sidekiq's Queue#clear.

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

constexpr std::string_view kQueuesVerb = "queues";
constexpr std::string_view kQueueVerb = "queue";

constexpr std::string_view kQueuesHelp =
    "usage: reliableq queues [--json]\n"
    "\n"
    "Lists every queue named in the queues set, in name order, with its size and\n"
    "its latency: the seconds since its oldest job was enqueued.\n"
    "\n"
    "Options:\n"
    "      --json           one JSON object instead of text:\n"
    "                       {\"queues\":[{\"name\":..,\"size\":..,\"latency\":..}]}\n";

constexpr std::string_view kQueueHelp =
    "usage: reliableq queue clear NAME --yes\n"
    "\n"
    "Deletes every job waiting in queue NAME and removes NAME from the queues set,\n"
    "in one transaction, as Sidekiq's Queue#clear, and prints how many jobs were\n"
    "deleted. Jobs that workers have already taken are not touched: they finish,\n"
    "or are given back to the queue if their worker dies. A queue that does not\n"
    "exist is an error (exit status 1).\n"
    "\n"
    "Options:\n"
    "      --yes            confirm; without it nothing is deleted (usage error)\n";

std::string LatencyText(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3f", seconds);
  return buf;
}

std::string QueuesJson(const std::vector<QueueStats>& queues) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.StartObject();
  writer.Key("queues");
  writer.StartArray();
  for (const QueueStats& queue : queues) {
    writer.StartObject();
    writer.Key("name");
    writer.String(queue.name.data(), static_cast<rapidjson::SizeType>(queue.name.size()));
    writer.Key("size");
    writer.Int64(queue.size);
    writer.Key("latency");
    // Three decimals, as in text and in `stats --json`.
    std::string latency = LatencyText(queue.latency);
    writer.RawValue(latency.data(), latency.size(), rapidjson::kNumberType);
    writer.EndObject();
  }
  writer.EndArray();
  writer.EndObject();
  return TerminalSafeJson(std::string_view(buffer.GetString(), buffer.GetSize())) + "\n";
}

std::string QueuesText(const std::vector<QueueStats>& queues) {
  if (queues.empty()) return "no queues\n";
  size_t name_width = 5, size_width = 4, latency_width = 7;
  for (const QueueStats& queue : queues) {
    name_width = std::max(name_width, Escaped(queue.name).size());
    size_width = std::max(size_width, std::to_string(queue.size).size());
    latency_width = std::max(latency_width, LatencyText(queue.latency).size());
  }
  std::string out;
  auto row = [&](const std::string& name, const std::string& size, const std::string& latency) {
    out += name + std::string(name_width - name.size() + 2, ' ');
    out += std::string(size_width - size.size(), ' ') + size + "  ";
    out += std::string(latency_width - latency.size(), ' ') + latency + "\n";
  };
  row("queue", "size", "latency");
  for (const QueueStats& queue : queues) {
    row(Escaped(queue.name), std::to_string(queue.size), LatencyText(queue.latency));
  }
  return out;
}

int RunQueues(const ParsedArgs& args) {
  if (!args.positionals().empty()) {
    return UsageError(kQueuesVerb, "unexpected argument '" + args.positionals()[0] + "'");
  }
  Result<RedisOptions> redis = RedisFromArgs(args);
  if (!redis.ok()) return UsageError(kQueuesVerb, redis.status().message());
  Result<std::unique_ptr<Admin>> admin =
      Admin::Open(*redis, {.prefix = PrefixFromArgs(args), .clock = nullptr});
  if (!admin.ok()) return RuntimeError(admin.status());
  Result<std::vector<QueueStats>> queues = (*admin)->ListQueues();
  if (!queues.ok()) return RuntimeError(queues.status());
  std::string text = args.Has("json") ? QueuesJson(*queues) : QueuesText(*queues);
  if (!WriteOut(text)) return RuntimeError(Status::IoError("cannot write to stdout"));
  return kExitOk;
}

int RunQueue(const ParsedArgs& args) {
  const std::vector<std::string>& words = args.positionals();
  if (words.empty()) return UsageError(kQueueVerb, "missing subcommand (clear)");
  if (words[0] != "clear") {
    return UsageError(kQueueVerb, "unknown subcommand '" + words[0] + "' (clear)");
  }
  if (words.size() < 2) return UsageError(kQueueVerb, "clear needs a queue NAME");
  if (words.size() > 2) return UsageError(kQueueVerb, "unexpected argument '" + words[2] + "'");
  const std::string& name = words[1];
  if (name.empty()) return UsageError(kQueueVerb, "the queue name is empty");
  if (!args.Has("yes")) {
    return UsageError(kQueueVerb,
                      "clear deletes every job of queue '" + name + "': add --yes to confirm");
  }
  Result<RedisOptions> redis = RedisFromArgs(args);
  if (!redis.ok()) return UsageError(kQueueVerb, redis.status().message());
  Result<std::unique_ptr<Admin>> admin =
      Admin::Open(*redis, {.prefix = PrefixFromArgs(args), .clock = nullptr});
  if (!admin.ok()) return RuntimeError(admin.status());
  Result<int64_t> deleted = (*admin)->ClearQueue(name);
  if (!deleted.ok()) return RuntimeError(deleted.status());
  std::string text = "queue " + Escaped(name) + " cleared: " + std::to_string(*deleted) +
                     (*deleted == 1 ? " job" : " jobs") + " deleted\n";
  if (!WriteOut(text)) return RuntimeError(Status::IoError("cannot write to stdout"));
  return kExitOk;
}

}  // namespace

const Command& QueuesCommand() {
  static const Command command = {
      .name = kQueuesVerb,
      .summary = "list the queues with their sizes and latencies",
      .help = kQueuesHelp,
      .options = {{.name = "json"}},
      .run = RunQueues,
  };
  return command;
}

const Command& QueueCommand() {
  static const Command command = {
      .name = kQueueVerb,
      .summary = "delete every job waiting in a queue (clear NAME --yes)",
      .help = kQueueHelp,
      .options = {{.name = "yes"}},
      .run = RunQueue,
  };
  return command;
}

}  // namespace reliableq::cli
