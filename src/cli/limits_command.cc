// reliableq limits: the limiters the workers declared (`limits` in Redis),
// with their running, parked and rate-window counts.

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "reliableq/admin.h"
#include "base/text_escape.h"

namespace reliableq::cli {

// Named as well, so that the verbs' kVerb, kHelp and Run stay apart in a
// unity build (tools/quickstart).
namespace limits_command {
namespace {

constexpr std::string_view kVerb = "limits";

constexpr std::string_view kHelp =
    "usage: reliableq limits [--json]\n"
    "\n"
    "Lists every limit the workers declared (--limit), in name order: its\n"
    "concurrency (\"-\": none), its rate per period (\"-\": none), the jobs\n"
    "running under it now, the jobs parked until a slot frees, the starts in\n"
    "the current rate window, and its classes.\n"
    "\n"
    "Options:\n"
    "      --json           one JSON object instead of text:\n"
    "                       {\"limits\":[{\"name\":..,\"classes\":[..],\n"
    "                        \"concurrency\":..,\"rate\":..,\"period\":..,\n"
    "                        \"running\":..,\"parked\":..,\"window_starts\":..}]}\n";

// A period in the unit --limit reads it in.
std::string PeriodText(double seconds) {
  char buf[48];
  long long whole = static_cast<long long>(seconds);
  if (whole < 1 || static_cast<double>(whole) != seconds) {
    std::snprintf(buf, sizeof(buf), "%.0fms", seconds * 1000);
  } else if (whole % 3600 == 0) {
    std::snprintf(buf, sizeof(buf), "%lldh", whole / 3600);
  } else if (whole % 60 == 0) {
    std::snprintf(buf, sizeof(buf), "%lldm", whole / 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%llds", whole);
  }
  return buf;
}

std::string AsText(const std::vector<LimitInfo>& limits) {
  if (limits.empty()) return "no limits declared\n";
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%-24s %11s %14s %8s %8s %8s  %s\n", "NAME", "CONCURRENCY",
                "RATE", "RUNNING", "PARKED", "STARTS", "CLASSES");
  out += buf;
  for (const LimitInfo& l : limits) {
    std::string concurrency = l.concurrency > 0 ? std::to_string(l.concurrency) : "-";
    std::string rate = l.rate > 0 ? std::to_string(l.rate) + "/" + PeriodText(l.period) : "-";
    std::string classes;
    for (const std::string& c : l.classes) classes += (classes.empty() ? "" : ",") + base::Escaped(c);
    std::snprintf(buf, sizeof(buf), "%-24s %11s %14s %8lld %8lld %8lld", base::Escaped(l.name).c_str(),
                  concurrency.c_str(), rate.c_str(), static_cast<long long>(l.running),
                  static_cast<long long>(l.parked), static_cast<long long>(l.window_starts));
    out += buf;
    out += (classes.empty() ? "" : "  " + classes) + "\n";
  }
  return out;
}

std::string AsJson(const std::vector<LimitInfo>& limits) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  auto string = [&](const std::string& s) {
    w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  };
  w.StartObject();
  w.Key("limits");
  w.StartArray();
  for (const LimitInfo& l : limits) {
    w.StartObject();
    w.Key("name");
    string(l.name);
    w.Key("classes");
    w.StartArray();
    for (const std::string& c : l.classes) string(c);
    w.EndArray();
    w.Key("concurrency");
    w.Int64(l.concurrency);
    w.Key("rate");
    w.Int64(l.rate);
    w.Key("period");
    w.Double(l.period);
    w.Key("running");
    w.Int64(l.running);
    w.Key("parked");
    w.Int64(l.parked);
    w.Key("window_starts");
    w.Int64(l.window_starts);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return base::TerminalSafeJson(std::string_view(buffer.GetString(), buffer.GetSize())) + "\n";
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
  Result<std::vector<LimitInfo>> limits = (*admin)->ListLimits();
  if (!limits.ok()) return RuntimeError(limits.status());
  std::string text = args.Has("json") ? AsJson(*limits) : AsText(*limits);
  if (!WriteOut(text)) return RuntimeError(Status::IoError("cannot write to stdout"));
  return kExitOk;
}

}  // namespace
}  // namespace limits_command

const Command& LimitsCommand() {
  static const Command command = {
      .name = limits_command::kVerb,
      .summary = "list the concurrency and rate limits with what they hold",
      .help = limits_command::kHelp,
      .options = {{.name = "json"}},
      .run = limits_command::Run,
  };
  return command;
}

}  // namespace reliableq::cli
