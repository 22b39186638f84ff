// reliableq queues: the queues with their sizes and latencies.
// reliableq queue clear: Sidekiq's Queue#clear.
// reliableq queue pause|resume: no new jobs from a queue, and back.

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/queue_table.h"
#include "reliableq/admin.h"
#include "reliableq/job.h"  // CheckQueueName
#include "text_escape.h"

namespace reliableq::cli {

namespace {

constexpr std::string_view kQueuesVerb = "queues";
constexpr std::string_view kQueueVerb = "queue";

constexpr std::string_view kQueuesHelp =
    "usage: reliableq queues [--json]\n"
    "\n"
    "Lists every queue named in the queues set, and every paused queue, in name\n"
    "order, with its size, its latency (the seconds since its oldest job was\n"
    "enqueued), and \"paused\" in a fourth column for a paused queue.\n"
    "\n"
    "Options:\n"
    "      --json           one JSON object instead of text:\n"
    "                       {\"queues\":[{\"name\":..,\"size\":..,\"latency\":..,\n"
    "                                   \"paused\":..}]}\n";

constexpr std::string_view kQueueHelp =
    "usage: reliableq queue clear NAME --yes\n"
    "       reliableq queue pause NAME\n"
    "       reliableq queue resume NAME\n"
    "\n"
    "clear deletes every job waiting in queue NAME and removes NAME from the\n"
    "queues set, in one transaction, as Sidekiq's Queue#clear, and prints how many\n"
    "jobs were deleted. Jobs that workers have already taken are not touched: they\n"
    "finish, or are given back to the queue if their worker dies. A queue that does\n"
    "not exist is an error (exit status 1).\n"
    "\n"
    "pause stops every worker taking jobs from queue NAME within one heartbeat\n"
    "interval; jobs already taken run to the end, and pushes still go into the\n"
    "queue. The pause is kept in Redis (it holds for workers started later) until\n"
    "resume. A queue may be paused before it has any job.\n"
    "\n"
    "Options:\n"
    "      --yes            confirm a clear; without it nothing is deleted (usage\n"
    "                       error)\n";

std::string QueuesJson(const std::vector<QueueStats>& queues) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.StartObject();
  WriteQueuesJson(writer, queues);
  writer.EndObject();
  return TerminalSafeJson(std::string_view(buffer.GetString(), buffer.GetSize())) + "\n";
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
  std::string text = args.Has("json") ? QueuesJson(*queues) : QueueTableText(*queues);
  if (!WriteOut(text)) return RuntimeError(Status::IoError("cannot write to stdout"));
  return kExitOk;
}

int RunClear(Admin& admin, const std::string& name) {
  Result<int64_t> deleted = admin.ClearQueue(name);
  if (!deleted.ok()) return RuntimeError(deleted.status());
  std::string text = "queue " + Escaped(name) + " cleared: " + std::to_string(*deleted) +
                     (*deleted == 1 ? " job" : " jobs") + " deleted\n";
  if (!WriteOut(text)) return RuntimeError(Status::IoError("cannot write to stdout"));
  return kExitOk;
}

int RunPause(Admin& admin, const std::string& name, bool pause) {
  Result<bool> changed = pause ? admin.PauseQueue(name) : admin.ResumeQueue(name);
  if (!changed.ok()) return RuntimeError(changed.status());
  std::string text = "queue " + Escaped(name);
  if (pause) {
    text += *changed ? " paused: workers take no new job from it\n" : " was already paused\n";
  } else {
    text += *changed ? " resumed\n" : " was not paused\n";
  }
  if (!WriteOut(text)) return RuntimeError(Status::IoError("cannot write to stdout"));
  return kExitOk;
}

int RunQueue(const ParsedArgs& args) {
  const std::vector<std::string>& words = args.positionals();
  if (words.empty()) return UsageError(kQueueVerb, "missing subcommand (clear, pause, resume)");
  const std::string& verb = words[0];
  if (verb != "clear" && verb != "pause" && verb != "resume") {
    return UsageError(kQueueVerb, "unknown subcommand '" + verb + "' (clear, pause, resume)");
  }
  if (words.size() < 2) return UsageError(kQueueVerb, verb + " needs a queue NAME");
  if (words.size() > 2) return UsageError(kQueueVerb, "unexpected argument '" + words[2] + "'");
  const std::string& name = words[1];
  if (Status s = CheckQueueName(name); !s.ok()) return UsageError(kQueueVerb, s.message());
  if (verb == "clear" && !args.Has("yes")) {
    return UsageError(kQueueVerb,
                      "clear deletes every job of queue '" + name + "': add --yes to confirm");
  }
  if (verb != "clear" && args.Has("yes")) {
    return UsageError(kQueueVerb, "--yes is only for clear");
  }
  Result<RedisOptions> redis = RedisFromArgs(args);
  if (!redis.ok()) return UsageError(kQueueVerb, redis.status().message());
  Result<std::unique_ptr<Admin>> admin =
      Admin::Open(*redis, {.prefix = PrefixFromArgs(args), .clock = nullptr});
  if (!admin.ok()) return RuntimeError(admin.status());
  if (verb == "clear") return RunClear(**admin, name);
  return RunPause(**admin, name, verb == "pause");
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
      .summary = "clear a queue, or pause and resume it (clear|pause|resume NAME)",
      .help = kQueueHelp,
      .options = {{.name = "yes"}},
      .run = RunQueue,
  };
  return command;
}

}  // namespace reliableq::cli
