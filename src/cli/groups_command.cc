// reliableq groups: the queue groups of a prefix (layout 2), read from the
// directory of groups, with each group's queued jobs, live processes and
// layout record.

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "protocol/keys.h"
#include "redis/connection.h"
#include "redis/reply.h"
#include "base/text_escape.h"

namespace reliableq::cli {

// Named as well, so that the verbs' kVerb, kHelp and Run stay apart in a
// unity build (tools/quickstart).
namespace groups_command {
namespace {

constexpr std::string_view kVerb = "groups";

constexpr std::string_view kHelp =
    "usage: reliableq groups [--json]\n"
    "\n"
    "Lists the queue groups of the prefix (layout 2: every key of group G under\n"
    "P{G}:), as the workers recorded them at start in P groups, with each group's\n"
    "queued jobs (the sizes of its queues added up), its live processes (those\n"
    "whose heartbeat key exists) and the layout its record holds (P{G}:schema;\n"
    "none: no worker of the group has run). Each group is read on a connection of\n"
    "its own, on Redis Cluster the one of its slot. A group a worker listed stays\n"
    "listed after its data is gone. A group that cannot be read (a key of the\n"
    "wrong type, its node unreachable) is listed with the reason instead of its\n"
    "figures; the others are listed all the same, and the exit status is 1.\n"
    "\n"
    "Options:\n"
    "      --json           one JSON object instead of text:\n"
    "                       {\"groups\":[{\"name\":..,\"queued\":..,\"processes\":..,\n"
    "                                   \"layout\":..,\"error\":..}]} (layout: a\n"
    "                       string or null; error: null, or why the group could not\n"
    "                       be read, and then queued and processes are null)\n";

struct GroupInfo {
  std::string name;
  int64_t queued = 0;
  int64_t processes = 0;
  std::optional<std::string> layout;
  std::optional<Status> error;  // why the group could not be read
};

// The directory, read on a connection routed to its own slot.
Result<std::vector<std::string>> ReadDirectory(const RedisOptions& redis, const protocol::Keys& keys) {
  RedisOptions routed = redis;
  routed.cluster.route_key = keys.Groups();
  Result<std::unique_ptr<redis::Connection>> connection = redis::Connection::Open(routed);
  if (!connection.ok()) return connection.status();
  Result<redis::ReplyPtr> members = (*connection)->Command({"SMEMBERS", keys.Groups()});
  if (!members.ok()) return members.status().WithContext("SMEMBERS " + keys.Groups());
  Result<std::vector<std::string>> names = redis::ToStrings(*members);
  if (!names.ok()) return names.status().WithContext("SMEMBERS " + keys.Groups());
  std::sort(names->begin(), names->end());
  return names;
}

// One group, read with its own options (group = `name`): its slot's
// connection in a cluster.
Result<GroupInfo> ReadGroup(const RedisOptions& redis, const std::string& prefix,
                            const std::string& name) {
  GroupInfo info;
  info.name = name;
  if (!protocol::CheckGroup(name).ok()) return info;  // not a name a worker wrote: shown, not read
  RedisOptions options = redis;
  options.group = name;
  options.cluster.route_key.clear();
  const protocol::Keys keys = protocol::Keys::For(prefix, options);
  Result<std::unique_ptr<redis::Connection>> connection = redis::Connection::Open(options);
  if (!connection.ok()) return connection.status();
  const std::string schema = keys.Schema(), queues_key = keys.Queues(), registry = keys.Registry();
  const std::vector<redis::Argv> reads = {
      {"GET", schema}, {"SMEMBERS", queues_key}, {"HKEYS", registry}};
  Result<std::vector<redis::ReplyPtr>> first = (*connection)->Pipeline(reads);
  if (!first.ok()) return first.status();
  if (Status s = (*connection)->FirstError(*first, reads); !s.ok()) return s;
  if (Result<std::string> layout = redis::ToString((*first)[0]); layout.ok()) {
    info.layout = std::move(*layout);
  }
  std::vector<std::string> key_names;
  for (const std::string& queue : redis::StringArray((*first)[1]))
    key_names.push_back(keys.Queue(queue));
  const size_t queues = key_names.size();
  for (const std::string& identity : redis::StringArray((*first)[2])) {
    key_names.push_back(keys.Heartbeat(identity));
  }
  std::vector<redis::Argv> commands;
  for (size_t i = 0; i < key_names.size(); ++i) {
    commands.push_back({i < queues ? "LLEN" : "EXISTS", key_names[i]});
  }
  if (commands.empty()) return info;
  Result<std::vector<redis::ReplyPtr>> second = (*connection)->Pipeline(commands);
  if (!second.ok()) return second.status();
  if (Status s = (*connection)->FirstError(*second, commands); !s.ok()) return s;
  for (size_t i = 0; i < second->size(); ++i) {
    (i < queues ? info.queued : info.processes) += redis::CounterValue((*second)[i]);
  }
  return info;
}

std::string AsJson(const std::vector<GroupInfo>& groups) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.StartObject();
  writer.Key("groups");
  writer.StartArray();
  for (const GroupInfo& g : groups) {
    writer.StartObject();
    writer.Key("name");
    writer.String(g.name.data(), static_cast<rapidjson::SizeType>(g.name.size()));
    writer.Key("queued");
    g.error ? writer.Null() : writer.Int64(g.queued);
    writer.Key("processes");
    g.error ? writer.Null() : writer.Int64(g.processes);
    writer.Key("layout");
    if (g.layout) {
      writer.String(g.layout->data(), static_cast<rapidjson::SizeType>(g.layout->size()));
    } else {
      writer.Null();
    }
    writer.Key("error");
    if (g.error) {
      std::string error = RedactUrls(g.error->ToString());
      writer.String(error.data(), static_cast<rapidjson::SizeType>(error.size()));
    } else {
      writer.Null();
    }
    writer.EndObject();
  }
  writer.EndArray();
  writer.EndObject();
  return base::TerminalSafeJson(std::string_view(buffer.GetString(), buffer.GetSize())) + "\n";
}

// `text` (escaped, so well-formed UTF-8) and spaces up to `width`
// characters; a longer text is kept whole.
void AppendPadded(std::string_view text, size_t width, std::string* out) {
  size_t chars = 0;
  for (char c : text) chars += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  out->append(text);
  if (chars < width) out->append(width - chars, ' ');
}

void AppendRight(int64_t value, size_t width, std::string* out) {
  std::string digits = std::to_string(value);
  if (digits.size() < width) out->append(width - digits.size(), ' ');
  out->append(digits);
}

// One line per group, whatever the length of its name or error: built as a
// string, with every text from Redis escaped.
std::string AsText(const std::vector<GroupInfo>& groups) {
  if (groups.empty()) return "no queue group\n";
  std::string out = "group                             queued  processes  layout\n";
  for (const GroupInfo& g : groups) {
    AppendPadded(base::Escaped(g.name), 32, &out);
    if (g.error) {
      out += " error: " + Shown(g.error->ToString()) + "\n";
      continue;
    }
    out += ' ';
    AppendRight(g.queued, 7, &out);
    out += ' ';
    AppendRight(g.processes, 10, &out);
    out += "  " + (g.layout ? base::Escaped(*g.layout) : std::string("none")) + "\n";
  }
  return out;
}

int Run(const ParsedArgs& args) {
  if (!args.positionals().empty()) {
    return UsageError(kVerb, "unexpected argument '" + args.positionals()[0] + "'");
  }
  Result<RedisOptions> redis = RedisFromArgs(args);
  if (!redis.ok()) return UsageError(kVerb, redis.status().message());
  const std::string prefix = PrefixFromArgs(args);
  Result<std::vector<std::string>> names = ReadDirectory(*redis, protocol::Keys(prefix));
  if (!names.ok()) return RuntimeError(names.status());
  // A group that cannot be read does not hide the others: an operator
  // looking at a hundred groups wants the ninety-nine, and the row of the
  // hundredth says why; the exit status still tells a script.
  std::vector<GroupInfo> groups;
  std::vector<std::string> unread;
  for (const std::string& name : *names) {
    Result<GroupInfo> info = ReadGroup(*redis, prefix, name);
    if (info.ok()) {
      groups.push_back(std::move(*info));
      continue;
    }
    GroupInfo& failed = groups.emplace_back();
    failed.name = name;
    failed.error = info.status();
    unread.push_back(name);
  }
  std::string text = args.Has("json") ? AsJson(groups) : AsText(groups);
  if (!WriteOut(text)) return RuntimeError(Status::IoError("cannot write to stdout"));
  if (!unread.empty()) {
    std::string list;
    for (const std::string& name : unread) list += (list.empty() ? "" : ", ") + name;
    std::fprintf(stderr,
                 "reliableq: %zu of %zu groups could not be read (%s); their rows say why\n",
                 unread.size(), groups.size(), Shown(list).c_str());
    return kExitRuntime;
  }
  return kExitOk;
}

}  // namespace
}  // namespace groups_command

const Command& GroupsCommand() {
  static const Command command = {
      .name = groups_command::kVerb,
      .summary = "list the queue groups (layout 2) and their sizes",
      .help = groups_command::kHelp,
      .options = {{.name = "json"}},
      .works_without_group = true,
      .run = groups_command::Run,
  };
  return command;
}

}  // namespace reliableq::cli
