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
#include "base/text_escape.h"

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
    "       reliableq queue pause NAME [--force]\n"
    "       reliableq queue resume NAME\n"
    "\n"
    "clear deletes every job waiting in queue NAME and removes NAME from the\n"
    "queues set, in one transaction, as Sidekiq's Queue#clear, and prints how many\n"
    "jobs were deleted. Jobs that workers have already taken are not touched: they\n"
    "finish, or are given back to the queue if their worker dies. A queue that does\n"
    "not exist is an error (exit status 1).\n"
    "\n"
    "pause stops every worker taking jobs from queue NAME: each live worker is told\n"
    "at once, idle or busy, and any other applies it at its next heartbeat (5 s by\n"
    "default); the command says how many were told. Jobs already running run to\n"
    "the end; jobs a worker fetched ahead and has not started go back to the head\n"
    "of the queue; pushes still go into the queue. The pause is kept in Redis (it\n"
    "holds for workers started later) until resume. A queue that is not known\n"
    "(not in the queues set, holding no job, not paused) is refused (exit status\n"
    "1), as a typo would be, unless --force.\n"
    "\n"
    "Options:\n"
    "      --yes            confirm a clear; without it nothing is deleted (usage\n"
    "                       error)\n"
    "      --force          pause a queue that is not known yet (ahead of the\n"
    "                       deploy that brings its first job)\n";

std::string QueuesJson(const std::vector<QueueStats>& queues) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.StartObject();
  WriteQueuesJson(writer, queues);
  writer.EndObject();
  return base::TerminalSafeJson(std::string_view(buffer.GetString(), buffer.GetSize())) + "\n";
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
  std::string text = "queue " + base::Escaped(name) + " cleared: " + std::to_string(*deleted) +
                     (*deleted == 1 ? " job" : " jobs") + " deleted\n";
  if (!WriteOut(text)) return RuntimeError(Status::IoError("cannot write to stdout"));
  return kExitOk;
}

// How far a pause or resume reached at once, and when it reaches the rest.
std::string Reach(const PauseChange& change, bool cluster) {
  int64_t told = change.workers_told;
  std::string text = told == 0   ? "no live worker told at once"
                     : told == 1 ? "1 live worker told at once"
                                 : std::to_string(told) + " live workers told at once";
  if (cluster) text += " on the node that took it (Redis Cluster counts no other node's)";
  return text + (told == 0 && !cluster ? "; each worker" : "; any other") +
         " applies it within one heartbeat (5 s by default)";
}

int RunPause(Admin& admin, const std::string& name, const ParsedArgs& args, bool cluster) {
  bool pause = args.positionals()[0] == "pause";
  Result<PauseChange> change = pause ? admin.PauseQueue(name, {.allow_unknown = args.Has("force")})
                                     : admin.ResumeQueue(name);
  if (!change.ok()) {
    if (!change.status().IsNotFound()) return RuntimeError(change.status());
    return RuntimeError(Status::NotFound(change.status().message() +
                                         "; add --force to pause it ahead of its first job"));
  }
  std::string text = "queue " + base::Escaped(name);
  if (pause) {
    text += change->changed ? " paused: " + Reach(*change, cluster) + "\n" : " was already paused\n";
  } else {
    text += change->changed ? " resumed: " + Reach(*change, cluster) + "\n" : " was not paused\n";
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
  if (verb != "pause" && args.Has("force")) {
    return UsageError(kQueueVerb, "--force is only for pause");
  }
  Result<RedisOptions> redis = RedisFromArgs(args);
  if (!redis.ok()) return UsageError(kQueueVerb, redis.status().message());
  Result<std::unique_ptr<Admin>> admin =
      Admin::Open(*redis, {.prefix = PrefixFromArgs(args), .clock = nullptr});
  if (!admin.ok()) return RuntimeError(admin.status());
  if (verb == "clear") return RunClear(**admin, name);
  return RunPause(**admin, name, args, !redis->cluster.seeds.empty());
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
      .options = {{.name = "yes"}, {.name = "force"}},
      .run = RunQueue,
  };
  return command;
}

}  // namespace reliableq::cli
