// reliableq sequences: the held sequence keys, oldest hold first.
// reliableq sequence release|skip KEY: the operator's ways out of a stuck
// sequence (reliableq(1), "Operator commands").

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "base/text_escape.h"
#include "cli/commands.h"
#include "reliableq/admin.h"
#include "reliableq/clock.h"

namespace reliableq::cli {

namespace {

constexpr std::string_view kSequencesVerb = "sequences";
constexpr std::string_view kSequenceVerb = "sequence";
constexpr int kDefaultLimit = 100;

constexpr std::string_view kSequencesHelp =
    "usage: reliableq sequences [--json] [--limit N]\n"
    "\n"
    "Lists the held sequence keys, oldest hold first: the key, the jid of the\n"
    "job that holds it, how long it has held it, and how many jobs wait for it;\n"
    "then how many keys are held in all when more than N are.\n"
    "\n"
    "Options:\n"
    "      --limit N        list at most N keys (default 100, at least 1)\n"
    "      --json           one JSON object instead of text:\n"
    "                       {\"held\":..,\"sequences\":[{\"key\":..,\"holder\":..,\n"
    "                        \"held_since\":..,\"waiting\":..}]}\n";

constexpr std::string_view kSequenceHelp =
    "usage: reliableq sequence release KEY\n"
    "       reliableq sequence skip KEY\n"
    "\n"
    "release lets sequence key KEY go: the oldest job waiting for it goes to the\n"
    "end of its queue, taken next, exactly as when the holder finishes; with\n"
    "none waiting the key is free. The holder job is not touched: if it runs\n"
    "again (a retry), it waits at the end of the key's line; if it is running\n"
    "now, it runs on beside the next job. A key nobody holds is an error (exit\n"
    "status 1).\n"
    "\n"
    "skip moves the oldest job waiting for KEY to the dead set unchanged, for a\n"
    "job that must not run; the holder keeps the key. A key no job waits for is\n"
    "an error (exit status 1).\n";

std::string SequencesText(const SequenceListing& listing, double now) {
  if (listing.sequences.empty()) return "no sequence keys held\n";
  size_t key_width = 3, holder_width = 6, held_width = 8;
  std::vector<std::array<std::string, 4>> rows;
  for (const SequenceInfo& s : listing.sequences) {
    rows.push_back({base::Escaped(s.key), s.holder.empty() ? "-" : base::Escaped(s.holder),
                    SpanText(std::max(0.0, now - s.held_since)), std::to_string(s.waiting)});
    key_width = std::max(key_width, rows.back()[0].size());
    holder_width = std::max(holder_width, rows.back()[1].size());
    held_width = std::max(held_width, rows.back()[2].size());
  }
  std::string out;
  auto row = [&](const std::array<std::string, 4>& r) {
    out += r[0] + std::string(key_width - r[0].size() + 2, ' ');
    out += r[1] + std::string(holder_width - r[1].size() + 2, ' ');
    out += std::string(held_width - r[2].size(), ' ') + r[2] + "  ";
    out += std::string(r[3].size() < 7 ? 7 - r[3].size() : 0, ' ') + r[3] + "\n";
  };
  row({"KEY", "HOLDER", "HELD FOR", "WAITING"});
  for (const auto& r : rows) row(r);
  if (listing.held > static_cast<int64_t>(listing.sequences.size())) {
    out += "(" + std::to_string(listing.sequences.size()) + " of " + std::to_string(listing.held) +
           " held keys shown)\n";
  }
  return out;
}

std::string SequencesJson(const SequenceListing& listing) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  auto string = [&](const std::string& s) {
    w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  };
  w.StartObject();
  w.Key("held");
  w.Int64(listing.held);
  w.Key("sequences");
  w.StartArray();
  for (const SequenceInfo& s : listing.sequences) {
    w.StartObject();
    w.Key("key");
    string(s.key);
    w.Key("holder");
    string(s.holder);
    w.Key("held_since");
    w.Double(s.held_since);
    w.Key("waiting");
    w.Int64(s.waiting);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return base::TerminalSafeJson(std::string_view(buffer.GetString(), buffer.GetSize())) + "\n";
}

Result<std::unique_ptr<Admin>> OpenAdmin(const ParsedArgs& args, const RedisOptions& redis) {
  return Admin::Open(redis, {.prefix = PrefixFromArgs(args), .clock = nullptr});
}

int RunSequences(const ParsedArgs& args) {
  if (!args.positionals().empty()) {
    return UsageError(kSequencesVerb, "unexpected argument '" + args.positionals()[0] + "'");
  }
  int limit = kDefaultLimit;
  if (auto text = args.Value("limit")) {
    std::optional<int> n = ParseCount(*text);
    if (!n || *n < 1) {
      return UsageError(kSequencesVerb, "--limit needs a positive integer, not '" + *text + "'");
    }
    limit = *n;
  }
  Result<RedisOptions> redis = RedisFromArgs(args);
  if (!redis.ok()) return UsageError(kSequencesVerb, redis.status().message());
  Result<std::unique_ptr<Admin>> admin = OpenAdmin(args, *redis);
  if (!admin.ok()) return RuntimeError(admin.status());
  Result<SequenceListing> listing = (*admin)->ListSequences(limit);
  if (!listing.ok()) return RuntimeError(listing.status());
  std::string text =
      args.Has("json") ? SequencesJson(*listing) : SequencesText(*listing, SystemClock()->Now());
  if (!WriteOut(text)) return RuntimeError(Status::IoError("cannot write to stdout"));
  return kExitOk;
}

int RunSequence(const ParsedArgs& args) {
  const std::vector<std::string>& words = args.positionals();
  if (words.empty()) return UsageError(kSequenceVerb, "missing subcommand (release, skip)");
  const std::string& verb = words[0];
  if (verb != "release" && verb != "skip") {
    return UsageError(kSequenceVerb, "unknown subcommand '" + verb + "' (release, skip)");
  }
  if (words.size() < 2 || words[1].empty()) {
    return UsageError(kSequenceVerb, verb + " needs a sequence KEY");
  }
  if (words.size() > 2) return UsageError(kSequenceVerb, "unexpected argument '" + words[2] + "'");
  const std::string& key = words[1];
  Result<RedisOptions> redis = RedisFromArgs(args);
  if (!redis.ok()) return UsageError(kSequenceVerb, redis.status().message());
  Result<std::unique_ptr<Admin>> admin = OpenAdmin(args, *redis);
  if (!admin.ok()) return RuntimeError(admin.status());
  std::string text = "sequence " + base::Escaped(key);
  if (verb == "release") {
    Result<SequenceRelease> released = (*admin)->ReleaseSequence(key);
    if (!released.ok()) return RuntimeError(released.status());
    text += " released from " + base::Escaped(released->holder) +
            (released->next.empty() ? ": no job waited, the key is free\n"
                                    : ": handed on to " + base::Escaped(released->next) + "\n");
  } else {
    Result<SequenceSkip> skipped = (*admin)->SkipSequenceHead(key, DeadSetLimits());
    if (!skipped.ok()) return RuntimeError(skipped.status());
    text += ": " +
            (skipped->jid.empty() ? std::string("an entry that is not a job")
                                  : "job " + base::Escaped(skipped->jid)) +
            " moved to the dead set" +
            (skipped->next.empty() ? "" : "; the key went on to " + base::Escaped(skipped->next)) +
            "\n";
  }
  if (!WriteOut(text)) return RuntimeError(Status::IoError("cannot write to stdout"));
  return kExitOk;
}

}  // namespace

const Command& SequencesCommand() {
  static const Command command = {
      .name = kSequencesVerb,
      .summary = "list the held sequence keys, oldest hold first",
      .help = kSequencesHelp,
      .options = {{.name = "json"}, {.name = "limit", .takes_value = true}},
      .run = RunSequences,
  };
  return command;
}

const Command& SequenceCommand() {
  static const Command command = {
      .name = kSequenceVerb,
      .summary = "release a held sequence key, or skip its oldest waiting job",
      .help = kSequenceHelp,
      .options = {},
      .run = RunSequence,
  };
  return command;
}

}  // namespace reliableq::cli
