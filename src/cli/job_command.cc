// reliableq job JID: where a job is (Admin::FindJob), as aligned lines or
// as the JSON of `GET /api/find`.

#include <rapidjson/document.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>

#include "base/text_escape.h"
#include "cli/commands.h"
#include "reliableq/admin.h"
#include "web/json_out.h"

namespace reliableq::cli {

namespace {

// Characters of the arguments shown on the args line.
constexpr size_t kArgsWidth = 200;
// Characters of the result shown on the result line.
constexpr size_t kResultWidth = 200;

constexpr std::string_view kHelp =
    "usage: reliableq job JID [--json] [--scan-limit N]\n"
    "\n"
    "Where job JID is and what became of it: running on a process, fetched by\n"
    "one (orphaned when that process is dead), queued, parked on a limit,\n"
    "scheduled, waiting for a retry or dead; or, when it is none of those, how it\n"
    "ended (done, discarded, expired, dead), from the final record\n"
    "that a worker keeps for the classes it is told to. Reads only; it writes\n"
    "nothing to Redis.\n"
    "\n"
    "Each queue and each limit's waiting list is read for at most N entries,\n"
    "from the end taken next; a job further back is reported as unknown, naming\n"
    "the lists not read to their end. A position counts from the job taken\n"
    "next (0).\n"
    "\n"
    "Exit status: 0 when the job was found or has a record, 1 when its state is\n"
    "unknown (and on a runtime error), 2 on a usage error.\n"
    "\n"
    "Options:\n"
    "      --json           print one JSON object: jid, state, process, thread,\n"
    "                       queue, limit, position, list_size, since, at,\n"
    "                       progress, class, retry_count, error_class,\n"
    "                       error_message, args, job, payload, record, last_end,\n"
    "                       record_ttl_ms, not_searched (see reliableq(1))\n"
    "      --scan-limit N   read at most N entries of each list (default: 10000)\n";

const std::vector<OptionSpec>& JobOptions() {
  static const std::vector<OptionSpec> options = {
      {.name = "json"},
      {.name = "scan-limit", .takes_value = true},
  };
  return options;
}

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// "2026-11-29T13:00:00Z (12 s ago)" or "(in 5 min)".
std::string When(double at, double now) {
  double diff = at - now;
  return UtcTime(at, "%Y-%m-%dT%H:%M:%SZ") + " (" +
         (diff > 0 ? "in " + SpanText(diff) : SpanText(diff) + " ago") + ")";
}

// "40% parsing page 3 (at ...)" of a progress object's JSON text.
std::string ProgressText(const std::string& json, double now) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(json.data(), json.size());
  if (!doc.IsObject()) return OneLine(json, kResultWidth);
  std::string text;
  auto percent = doc.FindMember("percent");
  if (percent != doc.MemberEnd() && percent->value.IsNumber()) {
    double p = percent->value.GetDouble();
    text = std::to_string(static_cast<int64_t>(std::llround(p))) + "%";
  }
  auto message = doc.FindMember("message");
  if (message != doc.MemberEnd() && message->value.IsString()) {
    if (!text.empty()) text += " ";
    text += OneLine(std::string_view(message->value.GetString(), message->value.GetStringLength()),
                    kResultWidth);
  }
  auto at = doc.FindMember("at");
  if (at != doc.MemberEnd() && at->value.IsNumber()) {
    std::string when = When(at->value.GetDouble(), now);
    text = text.empty() ? "at " + when : text + ", at " + when;
  }
  return text.empty() ? OneLine(json, kResultWidth) : text;
}

// How a record says its job ended: "done at T (D ago) on process P".
std::string EndText(const JobRecord& record, double now) {
  if (!record.valid) return "a record that is not JSON";
  std::string text = (record.state.empty() ? "ended" : base::Escaped(record.state)) + " at " +
                     When(record.at, now);
  if (!record.process.empty()) text += " on process " + base::Escaped(record.process);
  return text;
}

// The state line: what it is, where, since or until when.
std::string StateText(const JobLookup& job, double now) {
  const std::string process = base::Escaped(job.process);
  const std::string queue = base::Escaped(job.queue);
  auto position = [&] {
    return std::to_string(job.position.value_or(0)) + " of " +
           std::to_string(job.list_size.value_or(0)) + " (0 = next)";
  };
  switch (job.state) {
    case JobState::kRunning:
      return "running on process " + process + (job.since ? " since " + When(*job.since, now) : "");
    case JobState::kFetched:
      return "fetched by process " + process + " from queue " + queue + ", not started yet";
    case JobState::kOrphaned:
      return "orphaned: fetched from queue " + queue + " by process " + process +
             ", which is dead; the janitor gives it back to the queue";
    case JobState::kQueued:
      return "queued in " + queue + " at position " + position() +
             (job.since ? ", enqueued " + When(*job.since, now) : "");
    case JobState::kParked:
      return "parked on limit " + base::Escaped(job.limit) + " at position " + position() +
             ", waiting for a slot";
    case JobState::kScheduled:
      return "scheduled for " + When(job.at.value_or(0), now);
    case JobState::kRetry:
      return "waiting for a retry at " + When(job.at.value_or(0), now) +
             (job.basics.retry_count
                  ? " (retry_count " + std::to_string(*job.basics.retry_count) + ")"
                  : "");
    case JobState::kDead:
      if (job.ended) {
        return "dead at " + When(job.at.value_or(0), now) +
               "; no longer in the dead set (trimmed or deleted)";
      }
      return "dead since " + When(job.since.value_or(0), now);
    case JobState::kDone:
    case JobState::kDiscarded:
    case JobState::kExpired:
    case JobState::kCancelled:
      return EndText(*job.record, now) + (job.state == JobState::kExpired ? "; it never ran" : "");
    case JobState::kUnknown:
      break;
  }
  if (job.record) return "unknown: its record says " + EndText(*job.record, now);
  return "unknown: in no process, queue, limit or set, and no record (records may be off for "
         "its class or expired, or the jid never existed)";
}

std::string Text(const JobLookup& job, double now) {
  std::string out;
  auto line = [&](std::string_view name, const std::string& value) {
    out += name;
    out += std::string(name.size() < 16 ? 16 - name.size() : 1, ' ');
    out += value;
    out += "\n";
  };
  const JobBasics& basics = job.basics;
  line("jid:", base::Escaped(job.jid));
  line("state:", StateText(job, now));
  for (const NotSearched& list : job.not_searched) {
    line("not searched:", list.kind + " " + base::Escaped(list.name) + " has " +
                              Plural(list.size, "job", "jobs") + ", only the first " +
                              std::to_string(list.searched) + " searched (--scan-limit)");
  }
  if (!job.thread.empty()) line("thread:", base::Escaped(job.thread));
  if (!basics.job_class.empty()) line("class:", base::Escaped(basics.job_class));
  if (!basics.queue.empty()) line("queue:", base::Escaped(basics.queue));
  if (basics.retry_count) line("retry_count:", std::to_string(*basics.retry_count));
  if (job.record && job.record->attempts) {
    line("attempts:", std::to_string(*job.record->attempts));
  }
  if (basics.error_class || basics.error_message) {
    std::string error = basics.error_class.value_or("");
    if (basics.error_message) error += (error.empty() ? "" : ": ") + *basics.error_message;
    line("error:", base::Escaped(error));
  }
  if (basics.args) line("args:", OneLine(*basics.args, kArgsWidth));
  if (job.progress) line("progress:", ProgressText(*job.progress, now));
  if (job.record && job.record->result) line("result:", OneLine(*job.record->result, kResultWidth));
  if (job.record && job.record->result_bytes) {
    line("result:", "not kept: " + std::to_string(*job.record->result_bytes) + " bytes");
  }
  if (job.record && !job.ended) line("last end:", EndText(*job.record, now));
  if (job.record) {
    line("record expires:", job.record->ttl_ms
                                ? When(now + static_cast<double>(*job.record->ttl_ms) / 1000, now)
                                : "never");
  }
  return out;
}

int Run(const ParsedArgs& args) {
  const std::vector<std::string>& words = args.positionals();
  if (words.empty()) return UsageError("job", "missing JID");
  if (words.size() > 1) return UsageError("job", "unexpected argument '" + words[1] + "'");
  if (words[0].empty()) return UsageError("job", "the jid is empty");
  JobLookupOptions options;
  if (auto text = args.Value("scan-limit")) {
    std::optional<int> n = ParseCount(*text);
    if (!n || *n < 1) {
      return UsageError("job", "--scan-limit needs a positive integer, not '" + *text + "'");
    }
    options.scan_limit = *n;
  }
  Result<RedisOptions> redis = RedisFromArgs(args);
  if (!redis.ok()) return UsageError("job", redis.status().message());
  Result<std::unique_ptr<Admin>> admin =
      Admin::Open(*redis, {.prefix = PrefixFromArgs(args), .clock = nullptr});
  if (!admin.ok()) return RuntimeError(admin.status());
  Result<JobLookup> job = (*admin)->FindJob(words[0], options);
  if (!job.ok()) return RuntimeError(job.status());
  std::string out;
  if (args.Has("json")) {
    rapidjson::StringBuffer buffer;
    web::JsonWriter writer(buffer);
    web::WriteJobLookup(writer, *job);
    out = base::TerminalSafeJson(std::string_view(buffer.GetString(), buffer.GetSize())) + "\n";
  } else {
    out = Text(*job, NowSeconds());
  }
  if (!WriteOut(out)) return RuntimeError(Status::IoError("cannot write to stdout"));
  return job->state == JobState::kUnknown ? kExitRuntime : kExitOk;
}

}  // namespace

const Command& JobCommand() {
  static const Command command = {
      .name = "job",
      .summary = "show where a job is, or how it ended, by its jid",
      .help = kHelp,
      .options = JobOptions(),
      .run = Run,
  };
  return command;
}

}  // namespace reliableq::cli
