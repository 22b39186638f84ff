// reliableq retries|dead|scheduled: list, show, retry, delete and (retries)
// kill the entries of Sidekiq's sorted sets of jobs.

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>

#include "cli/commands.h"
#include "reliableq/admin.h"
#include "base/text_escape.h"

namespace reliableq::cli {

namespace {

constexpr int64_t kDefaultLimit = 25;
// Characters of an error shown in a list row.
constexpr size_t kErrorWidth = 60;

// What differs between the three verbs.
struct SetVerb {
  std::string_view name;  // the verb
  JobSet set;
  std::string_view noun;  // "retries", for "no retries"
  bool has_kill;
  std::string_view help;
};

constexpr std::string_view kRetriesHelp =
    "usage: reliableq retries list [--limit N] [--json]\n"
    "       reliableq retries show JID [--json]\n"
    "       reliableq retries retry JID|--all\n"
    "       reliableq retries delete JID|--all\n"
    "       reliableq retries kill JID|--all\n"
    "\n"
    "The retry set: jobs whose handler failed, waiting for their next attempt,\n"
    "which a worker starts when its time comes. An entry is named by its jid and\n"
    "acted on by its exact stored payload; a jid that is not there is an error\n"
    "(exit status 1).\n"
    "\n"
    "Subcommands:\n"
    "  list           the entries, next attempt first: time (UTC), jid, class,\n"
    "                 queue, retry_count and error\n"
    "  show JID       one entry's fields and its exact payload\n"
    "  retry JID      Sidekiq's \"Retry now\": back to its queue at once, with\n"
    "                 enqueued_at = now and retry_count - 1\n"
    "  delete JID     remove the entry\n"
    "  kill JID       move the entry, unchanged, to the dead set\n"
    "\n"
    "Options:\n"
    "      --limit N        list at most N entries (default: 25; 0: all)\n"
    "      --all            retry, delete or kill every entry instead of one\n"
    "      --json           list and show print JSON: an entry is\n"
    "                       {\"score\":..,\"jid\":..,\"class\":..,\"queue\":..,\n"
    "                        \"retry_count\":..,\"error_class\":..,\"error_message\":..,\n"
    "                        \"valid\":..,\"payload\":..}; list prints\n"
    "                       {\"set\":\"retry\",\"size\":..,\"entries\":[..]}\n";

constexpr std::string_view kDeadHelp =
    "usage: reliableq dead list [--limit N] [--json]\n"
    "       reliableq dead show JID [--json]\n"
    "       reliableq dead retry JID|--all\n"
    "       reliableq dead delete JID|--all\n"
    "\n"
    "The dead set: jobs that will not run again by themselves (retries used up,\n"
    "retry 0, killed, interrupted too often, or not valid job JSON). An entry is\n"
    "named by its jid and acted on by its exact stored payload; a jid that is\n"
    "not there is an error (exit status 1).\n"
    "\n"
    "Subcommands:\n"
    "  list           the entries, latest death first: time (UTC), jid, class,\n"
    "                 queue, retry_count and error\n"
    "  show JID       one entry's fields and its exact payload\n"
    "  retry JID      Sidekiq's \"Retry now\": back to its queue at once, with\n"
    "                 enqueued_at = now and retry_count - 1\n"
    "  delete JID     remove the entry\n"
    "\n"
    "Options:\n"
    "      --limit N        list at most N entries (default: 25; 0: all)\n"
    "      --all            retry or delete every entry instead of one\n"
    "      --json           list and show print JSON: an entry is\n"
    "                       {\"score\":..,\"jid\":..,\"class\":..,\"queue\":..,\n"
    "                        \"retry_count\":..,\"error_class\":..,\"error_message\":..,\n"
    "                        \"valid\":..,\"payload\":..}; list prints\n"
    "                       {\"set\":\"dead\",\"size\":..,\"entries\":[..]}\n";

constexpr std::string_view kScheduledHelp =
    "usage: reliableq scheduled list [--limit N] [--json]\n"
    "       reliableq scheduled show JID [--json]\n"
    "       reliableq scheduled retry JID|--all\n"
    "       reliableq scheduled delete JID|--all\n"
    "\n"
    "The schedule set: jobs pushed to run later, which a worker moves to their\n"
    "queues when their time comes. An entry is named by its jid and acted on by\n"
    "its exact stored payload; a jid that is not there is an error (exit status\n"
    "1).\n"
    "\n"
    "Subcommands:\n"
    "  list           the entries, next due first: time (UTC), jid, class, queue\n"
    "  show JID       one entry's fields and its exact payload\n"
    "  retry JID      enqueue it now, with enqueued_at = now (Sidekiq's \"Add to\n"
    "                 queue\"; retry_count is left alone)\n"
    "  delete JID     remove the entry\n"
    "\n"
    "Options:\n"
    "      --limit N        list at most N entries (default: 25; 0: all)\n"
    "      --all            retry or delete every entry instead of one\n"
    "      --json           list and show print JSON: an entry is\n"
    "                       {\"score\":..,\"jid\":..,\"class\":..,\"queue\":..,\n"
    "                        \"retry_count\":..,\"error_class\":..,\"error_message\":..,\n"
    "                        \"valid\":..,\"payload\":..}; list prints\n"
    "                       {\"set\":\"schedule\",\"size\":..,\"entries\":[..]}\n";

constexpr SetVerb kRetries = {"retries", JobSet::kRetry, "retries", true, kRetriesHelp};
constexpr SetVerb kDead = {"dead", JobSet::kDead, "dead jobs", false, kDeadHelp};
constexpr SetVerb kScheduled = {"scheduled", JobSet::kScheduled, "scheduled jobs", false,
                                kScheduledHelp};

const std::vector<OptionSpec>& SetOptions() {
  static const std::vector<OptionSpec> options = {
      {.name = "limit", .takes_value = true},
      {.name = "all"},
      {.name = "json"},
  };
  return options;
}

// A score as it reads back exactly (the shortest round-trip form).
std::string ScoreText(double score) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.Double(score);
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string ErrorText(const SetEntry& entry) {
  if (!entry.error_class && !entry.error_message) return "-";
  std::string text = entry.error_class.value_or("");
  if (entry.error_message) text += (text.empty() ? "" : ": ") + *entry.error_message;
  return OneLine(text, kErrorWidth);
}

void WriteEntry(rapidjson::Writer<rapidjson::StringBuffer>& writer, const SetEntry& entry) {
  auto string_or_null = [&](const char* name, const std::string& value) {
    writer.Key(name);
    if (value.empty()) {
      writer.Null();
    } else {
      writer.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
    }
  };
  auto optional_string = [&](const char* name, const std::optional<std::string>& value) {
    writer.Key(name);
    if (value) {
      writer.String(value->data(), static_cast<rapidjson::SizeType>(value->size()));
    } else {
      writer.Null();
    }
  };
  writer.StartObject();
  writer.Key("score");
  writer.Double(entry.score);
  string_or_null("jid", entry.jid);
  string_or_null("class", entry.job_class);
  string_or_null("queue", entry.queue);
  writer.Key("retry_count");
  if (entry.retry_count) {
    writer.Int64(*entry.retry_count);
  } else {
    writer.Null();
  }
  optional_string("error_class", entry.error_class);
  optional_string("error_message", entry.error_message);
  writer.Key("valid");
  writer.Bool(entry.valid);
  writer.Key("payload");
  writer.String(entry.payload.data(), static_cast<rapidjson::SizeType>(entry.payload.size()));
  writer.EndObject();
}

std::string ListJson(const SetVerb& verb, const SetListing& listing) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.StartObject();
  writer.Key("set");
  writer.String(JobSetKey(verb.set).data(),
                static_cast<rapidjson::SizeType>(JobSetKey(verb.set).size()));
  writer.Key("size");
  writer.Int64(listing.size);
  writer.Key("entries");
  writer.StartArray();
  for (const SetEntry& entry : listing.entries) WriteEntry(writer, entry);
  writer.EndArray();
  writer.EndObject();
  return base::TerminalSafeJson(std::string_view(buffer.GetString(), buffer.GetSize())) + "\n";
}

std::string ListText(const SetVerb& verb, const SetListing& listing) {
  if (listing.entries.empty()) return "no " + std::string(verb.noun) + "\n";
  bool failures = verb.set != JobSet::kScheduled;
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"time (UTC)", "jid", "class", "queue"});
  if (failures) {
    rows[0].push_back("retry_count");
    rows[0].push_back("error");
  }
  for (const SetEntry& entry : listing.entries) {
    std::vector<std::string> row = {UtcTime(entry.score),
                                    entry.jid.empty() ? "-" : OneLine(entry.jid, 40),
                                    entry.valid ? OneLine(entry.job_class, 40) : "(not a job)",
                                    entry.queue.empty() ? "-" : OneLine(entry.queue, 40)};
    if (failures) {
      row.push_back(entry.retry_count ? std::to_string(*entry.retry_count) : "-");
      row.push_back(ErrorText(entry));
    }
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      out += row[i];
      if (i + 1 < row.size()) out += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out += "\n";
  }
  int64_t shown = static_cast<int64_t>(listing.entries.size());
  if (listing.size > shown) {
    out += std::to_string(shown) + " of " + std::to_string(listing.size) +
           " shown (--limit 0 shows all)\n";
  }
  return out;
}

std::string ShowJson(const SetEntry& entry) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  WriteEntry(writer, entry);
  return base::TerminalSafeJson(std::string_view(buffer.GetString(), buffer.GetSize())) + "\n";
}

// Every value is escaped: each field, the payload included, stays on its
// line.
std::string ShowText(const SetEntry& entry) {
  std::string out;
  auto line = [&](const char* name, const std::string& value) {
    out += name;
    out += std::string(16 - std::string_view(name).size(), ' ');
    base::AppendEscaped(value, &out);
    out += "\n";
  };
  line("jid:", entry.jid);
  if (entry.valid) {
    line("class:", entry.job_class);
  } else {
    line("class:", entry.job_class.empty() ? "(not a job)" : entry.job_class + " (not a job)");
  }
  line("queue:", entry.queue);
  line("time:", UtcTime(entry.score) + " UTC");
  line("score:", ScoreText(entry.score));
  if (entry.retry_count) line("retry_count:", std::to_string(*entry.retry_count));
  if (entry.error_class) line("error_class:", *entry.error_class);
  // The whole message: `show` is where one reads it.
  if (entry.error_message) line("error_message:", *entry.error_message);
  line("payload:", entry.payload);
  return out;
}

int Print(const std::string& text) {
  if (!WriteOut(text)) return RuntimeError(Status::IoError("cannot write to stdout"));
  return kExitOk;
}

int RunSet(const SetVerb& verb, const ParsedArgs& args) {
  const std::vector<std::string>& words = args.positionals();
  std::string choices =
      verb.has_kill ? "list, show, retry, delete or kill" : "list, show, retry or delete";
  if (words.empty()) return UsageError(verb.name, "missing subcommand (" + choices + ")");
  const std::string& sub = words[0];
  bool acts = sub == "retry" || sub == "delete" || (sub == "kill" && verb.has_kill);
  if (sub != "list" && sub != "show" && !acts) {
    return UsageError(verb.name, "unknown subcommand '" + sub + "' (" + choices + ")");
  }
  if (words.size() > 2 || (sub == "list" && words.size() > 1)) {
    return UsageError(verb.name, "unexpected argument '" + words.back() + "'");
  }
  std::string jid = words.size() == 2 ? words[1] : "";
  bool all = args.Has("all");
  bool json = args.Has("json");
  if (args.Has("limit") && sub != "list") {
    return UsageError(verb.name, "--limit goes with list only");
  }
  if (json && acts) return UsageError(verb.name, "--json goes with list and show only");
  if (all && !acts) {
    return UsageError(verb.name, std::string("--all goes with retry, delete") +
                                     (verb.has_kill ? " or kill" : " only"));
  }
  if (sub == "show" && words.size() < 2) return UsageError(verb.name, "show needs a JID");
  if (acts && all && words.size() == 2) {
    return UsageError(verb.name, "give a JID or --all, not both");
  }
  if (acts && !all && words.size() < 2) {
    return UsageError(verb.name, sub + " needs a JID or --all");
  }
  if (words.size() == 2 && jid.empty()) return UsageError(verb.name, "the jid is empty");
  int64_t limit = kDefaultLimit;
  if (auto text = args.Value("limit")) {
    std::optional<int> n = ParseCount(*text);
    if (!n)
      return UsageError(verb.name, "--limit needs a non-negative integer, not '" + *text + "'");
    limit = *n;
  }

  Result<RedisOptions> redis = RedisFromArgs(args);
  if (!redis.ok()) return UsageError(verb.name, redis.status().message());
  Result<std::unique_ptr<Admin>> opened =
      Admin::Open(*redis, {.prefix = PrefixFromArgs(args), .clock = nullptr});
  if (!opened.ok()) return RuntimeError(opened.status());
  Admin& admin = **opened;
  const std::string set_name(JobSetKey(verb.set));

  if (sub == "list") {
    Result<SetListing> listing = admin.List(verb.set, limit);
    if (!listing.ok()) return RuntimeError(listing.status());
    return Print(json ? ListJson(verb, *listing) : ListText(verb, *listing));
  }
  if (sub == "show") {
    Result<SetEntry> entry = admin.Find(verb.set, jid);
    if (!entry.ok()) return RuntimeError(entry.status());
    return Print(json ? ShowJson(*entry) : ShowText(*entry));
  }
  if (sub == "retry") {
    if (all) {
      Result<BulkResult> done = admin.RetryAll(verb.set);
      if (!done.ok()) return RuntimeError(done.status());
      std::string text =
          Plural(done->moved, "job", "jobs") + " from " + set_name + " back to their queues";
      if (done->skipped > 0) {
        text += "; " + Plural(done->skipped, "entry that is", "entries that are") +
                " not a job left in " + set_name;
      }
      return Print(text + "\n");
    }
    Result<SetEntry> entry = admin.RetryNow(verb.set, jid);
    if (!entry.ok()) return RuntimeError(entry.status());
    return Print(base::Escaped(jid) + ": back to queue " +
                 (entry->queue.empty() ? "default" : base::Escaped(entry->queue)) + "\n");
  }
  if (sub == "delete") {
    if (all) {
      Result<int64_t> deleted = admin.DeleteAll(verb.set);
      if (!deleted.ok()) return RuntimeError(deleted.status());
      return Print("deleted " + Plural(*deleted, "entry", "entries") + " from " + set_name + "\n");
    }
    Result<SetEntry> entry = admin.Delete(verb.set, jid);
    if (!entry.ok()) return RuntimeError(entry.status());
    return Print(base::Escaped(jid) + ": deleted from " + set_name + "\n");
  }
  // kill
  const std::string dead_name(JobSetKey(JobSet::kDead));
  if (all) {
    Result<BulkResult> done = admin.KillAll(DeadSetLimits());
    if (!done.ok()) return RuntimeError(done.status());
    return Print("moved " + Plural(done->moved, "entry", "entries") + " from " + set_name + " to " +
                 dead_name + "\n");
  }
  Result<SetEntry> entry = admin.Kill(jid, DeadSetLimits());
  if (!entry.ok()) return RuntimeError(entry.status());
  return Print(base::Escaped(jid) + ": moved from " + set_name + " to " + dead_name + "\n");
}

int RunRetries(const ParsedArgs& args) { return RunSet(kRetries, args); }
int RunDead(const ParsedArgs& args) { return RunSet(kDead, args); }
int RunScheduled(const ParsedArgs& args) { return RunSet(kScheduled, args); }

}  // namespace

const Command& RetriesCommand() {
  static const Command command = {
      .name = kRetries.name,
      .summary = "list, show, retry, delete or kill failed jobs awaiting retry",
      .help = kRetries.help,
      .options = SetOptions(),
      .run = RunRetries,
  };
  return command;
}

const Command& DeadCommand() {
  static const Command command = {
      .name = kDead.name,
      .summary = "list, show, retry or delete dead jobs",
      .help = kDead.help,
      .options = SetOptions(),
      .run = RunDead,
  };
  return command;
}

const Command& ScheduledCommand() {
  static const Command command = {
      .name = kScheduled.name,
      .summary = "list, show, enqueue now or delete scheduled jobs",
      .help = kScheduled.help,
      .options = SetOptions(),
      .run = RunScheduled,
  };
  return command;
}

}  // namespace reliableq::cli
