// reliableq periodic list: the periodic jobs Redis records, with their
// schedules, who declared them, and their last and next ticks.

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdio>
#include <ctime>
#include <string>

#include "cli/commands.h"
#include "reliableq/admin.h"
#include "base/text_escape.h"

namespace reliableq::cli {

// Named as well, so that the verbs' kVerb, kHelp and Run stay apart in a
// unity build (tools/quickstart).
namespace periodic_command {
namespace {

constexpr std::string_view kVerb = "periodic";

constexpr std::string_view kHelp =
    "usage: reliableq periodic list [--json]\n"
    "\n"
    "Lists every periodic job declared by workers (--periodic), by name: its cron\n"
    "schedule and time zone, class and queue, the last tick pushed and when, the\n"
    "next tick, and the worker whose declaration is in force (the newest; see\n"
    "PERIODIC JOBS in reliableq(1)).\n"
    "\n"
    "Options:\n"
    "      --json           one JSON object instead of text: {\"periodic\":[{\"name\":..,\n"
    "                       \"cron\":..,\"timezone\":..,\"class\":..,\"queue\":..,\"args\":..,\n"
    "                       \"retry\":..,\"catch_up\":..,\"last_tick\":..,\"last_pushed_at\":..,\n"
    "                       \"next_tick\":..,\"declared_by\":..,\"declared_at\":..,\n"
    "                       \"ticks_recorded\":..}]} (times in epoch seconds, null for none)\n";

// "2026-11-25T03:00:00Z", or "-" for 0.
std::string UtcText(double epoch) {
  if (epoch <= 0) return "-";
  auto seconds = static_cast<time_t>(epoch);
  struct tm tm;
  gmtime_r(&seconds, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string Json(const std::vector<PeriodicInfo>& jobs) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  auto string = [&w](const char* key, const std::string& value) {
    w.Key(key);
    w.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
  };
  auto time = [&w](const char* key, double value) {
    w.Key(key);
    if (value > 0) {
      w.Double(value);
    } else {
      w.Null();
    }
  };
  w.StartObject();
  w.Key("periodic");
  w.StartArray();
  for (const PeriodicInfo& job : jobs) {
    w.StartObject();
    string("name", job.name);
    string("cron", job.cron);
    string("timezone", job.time_zone);
    string("class", job.job_class);
    string("queue", job.queue);
    string("args", job.args);
    string("retry", job.retry);
    w.Key("catch_up");
    w.Bool(job.catch_up);
    time("last_tick", static_cast<double>(job.last_tick));
    time("last_pushed_at", job.last_pushed_at);
    time("next_tick", static_cast<double>(job.next_tick));
    string("declared_by", job.declared_by);
    time("declared_at", job.declared_at);
    w.Key("ticks_recorded");
    w.Int64(job.ticks_recorded);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return base::TerminalSafeJson(std::string_view(buffer.GetString(), buffer.GetSize())) + "\n";
}

std::string Text(const std::vector<PeriodicInfo>& jobs) {
  if (jobs.empty()) return "no periodic jobs\n";
  std::string out;
  for (const PeriodicInfo& job : jobs) {
    out += base::Escaped(job.name) + "\n";
    out += "  cron:        " + base::Escaped(job.cron) + " (" + base::Escaped(job.time_zone) + ")" +
           (job.catch_up ? ", catch_up" : "") + "\n";
    out += "  job:         " + base::Escaped(job.job_class) + " " + base::Escaped(job.args) + " on queue " +
           base::Escaped(job.queue) + ", retry " + base::Escaped(job.retry) + "\n";
    out += "  last tick:   " + UtcText(static_cast<double>(job.last_tick)) +
           (job.last_tick > 0 ? " (pushed " + UtcText(job.last_pushed_at) + ")" : "") + "\n";
    out += "  next tick:   " + UtcText(static_cast<double>(job.next_tick)) + "\n";
    out += "  declared by: " + base::Escaped(job.declared_by) + " at " + UtcText(job.declared_at) + "\n";
  }
  return out;
}

int Run(const ParsedArgs& args) {
  const std::vector<std::string>& words = args.positionals();
  if (words.empty()) return UsageError(kVerb, "missing subcommand (list)");
  if (words[0] != "list") return UsageError(kVerb, "unknown subcommand '" + words[0] + "' (list)");
  if (words.size() > 1) return UsageError(kVerb, "unexpected argument '" + words[1] + "'");
  Result<RedisOptions> redis = RedisFromArgs(args);
  if (!redis.ok()) return UsageError(kVerb, redis.status().message());
  Result<std::unique_ptr<Admin>> admin =
      Admin::Open(*redis, {.prefix = PrefixFromArgs(args), .clock = nullptr});
  if (!admin.ok()) return RuntimeError(admin.status());
  Result<std::vector<PeriodicInfo>> jobs = (*admin)->ListPeriodic();
  if (!jobs.ok()) return RuntimeError(jobs.status());
  std::string text = args.Has("json") ? Json(*jobs) : Text(*jobs);
  if (!WriteOut(text)) return RuntimeError(Status::IoError("cannot write to stdout"));
  return kExitOk;
}

}  // namespace
}  // namespace periodic_command

const Command& PeriodicCommand() {
  static const Command command = {
      .name = periodic_command::kVerb,
      .summary = "list the periodic jobs workers declared (list)",
      .help = periodic_command::kHelp,
      .options = {{.name = "json"}},
      .run = periodic_command::Run,
  };
  return command;
}

}  // namespace reliableq::cli
