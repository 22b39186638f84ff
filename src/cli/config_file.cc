#include "cli/config_file.h"

#include <cstdlib>
#include <set>

#include "cli/handler_options.h"  // kArgvSeparator
#include "cli/yaml_document.h"

namespace reliableq::cli {

namespace {

// How a key's value is read.
enum class Kind {
  kString,   // a scalar
  kInteger,  // a scalar that is a whole number (its range is the option's)
  kSeconds,  // a scalar that is a number
  kFlag,     // true or false
  kList,     // a sequence of scalars, or one scalar
  kQueues,   // a sequence of names or [name, weight] pairs, as in sidekiq.yml
  // A mapping of NAME: value, each entry read as "NAME=value" (a value that
  // is a list, a program's words, joined with kArgvSeparator); or a list or
  // a scalar, read as kList.
  kMapping,
  // periodic: a mapping of NAME: {cron: ..., class: ..., ...}, each entry
  // read as "NAME=JSON" for --periodic; the fields' values are scalars, args
  // and extra JSON text; or NAME: 'JSON' (a scalar, the JSON object itself).
  kPeriodic,
};

struct Key {
  std::string_view key;
  std::string_view option;
  Kind kind;
};

constexpr Key kKeys[] = {
    {"concurrency", "concurrency", Kind::kInteger},
    {"queues", "queue", Kind::kQueues},
    {"timeout", "timeout", Kind::kSeconds},
    {"require", "require", Kind::kList},
    {"tag", "tag", Kind::kString},
    {"labels", "label", Kind::kList},
    {"limits", "limit", Kind::kMapping},
    {"redis", "redis", Kind::kString},
    {"redis_password_file", "redis-password-file", Kind::kString},
    {"redis_tls_ca", "redis-tls-ca", Kind::kString},
    {"redis_tls_cert", "redis-tls-cert", Kind::kString},
    {"redis_tls_key", "redis-tls-key", Kind::kString},
    {"redis_tls_server_name", "redis-tls-server-name", Kind::kString},
    {"redis_tls_insecure", "redis-tls-insecure", Kind::kFlag},
    {"sentinels", "sentinel", Kind::kList},
    {"prefix", "prefix", Kind::kString},
    {"group", "group", Kind::kString},
    {"heartbeat_ttl", "heartbeat-ttl", Kind::kSeconds},
    {"heartbeat_interval", "heartbeat-interval", Kind::kSeconds},
    {"janitor_interval", "janitor-interval", Kind::kSeconds},
    {"max_interruptions", "max-interruptions", Kind::kInteger},
    {"max_retries", "max-retries", Kind::kInteger},
    {"max_snoozes", "max-snoozes", Kind::kInteger},
    {"poll_interval", "poll-interval", Kind::kSeconds},
    {"idle_poll", "idle-poll", Kind::kSeconds},
    {"http", "http", Kind::kString},
    {"log_format", "log-format", Kind::kString},
    {"exec", "exec", Kind::kMapping},
    {"http_handlers", "http-handler", Kind::kMapping},
    {"http_client_errors", "http-client-errors", Kind::kMapping},
    {"exec_env", "exec-env", Kind::kMapping},
    {"job_timeout", "job-timeout", Kind::kMapping},
    {"backoff", "backoff", Kind::kMapping},
    {"retry_for", "retry-for", Kind::kMapping},
    {"records", "records", Kind::kInteger},
    {"record", "record", Kind::kMapping},
    {"record_max_bytes", "record-max-bytes", Kind::kInteger},
    {"kill_grace", "kill-grace", Kind::kSeconds},
    {"on_overrun", "on-overrun", Kind::kString},
    {"verbose", "verbose", Kind::kFlag},
    {"periodic", "periodic", Kind::kPeriodic},
};

const Key* FindKey(std::string_view name) {
  for (const Key& key : kKeys) {
    if (key.key == name) return &key;
  }
  return nullptr;
}

// The file and line of a node, for messages ("worker.yml:3").
std::string Place(std::string_view file, const YamlNode& node) {
  std::string place(file);
  if (node.Line() > 0) place += ":" + std::to_string(node.Line());
  return place;
}

// "25", "-1": the option says whether it is in range.
bool IsWholeNumber(std::string_view text) {
  if (text.starts_with('-')) text.remove_prefix(1);
  return !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
}

bool IsNameStart(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }

// `${NAME}`, `${NAME:-default}` and `$$` in `text`; the reason on failure.
Result<std::string> Expand(std::string_view text, const EnvironmentLookup& environment) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '$' || i + 1 == text.size()) {
      out += text[i];
    } else if (text[i + 1] == '$') {
      out += '$';
      ++i;
    } else if (text[i + 1] != '{') {
      out += text[i];
    } else {
      size_t close = text.find('}', i + 2);
      if (close == std::string_view::npos) {
        return Status::InvalidArgument("'${' without its '}' (write $$ for a $)");
      }
      std::string_view inside = text.substr(i + 2, close - i - 2);
      size_t name_end = 0;
      while (name_end < inside.size() && IsNameChar(inside[name_end])) ++name_end;
      std::string_view name = inside.substr(0, name_end);
      std::string_view rest = inside.substr(name_end);
      if (name.empty() || !IsNameStart(name[0]) || (!rest.empty() && !rest.starts_with(":-"))) {
        return Status::InvalidArgument("'${" + std::string(inside) +
                                       "}' is not ${NAME} or ${NAME:-default}");
      }
      std::optional<std::string> value = environment(name);
      if (value && (value->empty() && !rest.empty())) value.reset();  // as the shell's :-
      if (value) {
        out += *value;
      } else if (!rest.empty()) {
        out += rest.substr(2);
      } else {
        return Status::InvalidArgument("environment variable " + std::string(name) + " is not set");
      }
      i = close;
    }
  }
  return out;
}

// Reads one entry's values from `node`, or says what is wrong with it.
class EntryReader {
 public:
  EntryReader(const Key& key, const EnvironmentLookup& environment)
      : key_(key), environment_(environment) {}

  Result<std::vector<std::string>> Read(const YamlNode& node) const {
    if (node.IsNull()) return Status::InvalidArgument("has no value");
    switch (key_.kind) {
      case Kind::kString:
      case Kind::kInteger:
      case Kind::kSeconds: {
        Result<std::string> value = Scalar(node, key_.kind);
        if (!value.ok()) return value.status();
        return std::vector<std::string>{std::move(*value)};
      }
      case Kind::kFlag:
        if (node.IsScalar() && (node.Scalar() == "true" || node.Scalar() == "false")) {
          return node.Scalar() == "true" ? std::vector<std::string>{""}
                                         : std::vector<std::string>{};
        }
        return Status::InvalidArgument("expected true or false");
      case Kind::kPeriodic:
        if (!node.IsMapping()) return Status::InvalidArgument("expected a mapping of NAME: job");
        return Periodic(node);
      case Kind::kMapping:
        if (node.IsMapping()) return Mapping(node);
        [[fallthrough]];
      case Kind::kList:
      case Kind::kQueues:
        return List(node);
    }
    return Status::InvalidArgument("unreadable");
  }

 private:
  Result<std::string> Scalar(const YamlNode& node, Kind kind) const {
    if (!node.IsScalar()) {
      return Status::InvalidArgument(std::string("expected ") +
                                     (kind == Kind::kString ? "a single value" : "a number") +
                                     ", not a " + (node.IsSequence() ? "list" : "mapping"));
    }
    Result<std::string> value = Expand(node.Scalar(), environment_);
    if (!value.ok()) return value;
    if (kind == Kind::kInteger && !IsWholeNumber(*value)) {
      return Status::InvalidArgument("expected a whole number, not '" + *value + "'");
    }
    if (kind == Kind::kSeconds && !ParseNumber(*value)) {
      return Status::InvalidArgument("expected a number of seconds, not '" + *value + "'");
    }
    return value;
  }

  Result<std::vector<std::string>> List(const YamlNode& node) const {
    std::vector<std::string> values;
    if (node.IsScalar()) {
      Result<std::string> value = Scalar(node, Kind::kString);
      if (!value.ok()) return value.status();
      values.push_back(std::move(*value));
      return values;
    }
    if (!node.IsSequence()) return Status::InvalidArgument("expected a list, not a mapping");
    for (const YamlNode& item : node.Items()) {
      Result<std::string> value = Item(item);
      if (!value.ok()) {
        return Status::InvalidArgument("item at line " + std::to_string(item.Line()) + ": " +
                                       value.status().message());
      }
      values.push_back(std::move(*value));
    }
    return values;
  }

  Result<std::vector<std::string>> Mapping(const YamlNode& node) const {
    std::vector<std::string> values;
    for (const auto& [name, value] : node.Pairs()) {
      std::string where = "entry at line " + std::to_string(name.Line());
      if (!name.IsScalar() || name.Scalar().empty()) {
        return Status::InvalidArgument(where + ": a name must be a single value");
      }
      std::string entry = name.Scalar() + "=";
      if (value.IsSequence()) {
        bool first = true;
        for (const YamlNode& word : value.Items()) {
          Result<std::string> text = Scalar(word, Kind::kString);
          if (!text.ok()) return Status::InvalidArgument(where + ": " + text.status().message());
          if (!first) entry += kArgvSeparator;
          entry += *text;
          first = false;
        }
      } else {
        Result<std::string> text = value.IsNull() ? Result<std::string>(Status::InvalidArgument(
                                                        "has no value"))
                                                  : Scalar(value, Kind::kString);
        if (!text.ok()) return Status::InvalidArgument(where + ": " + text.status().message());
        entry += *text;
      }
      values.push_back(std::move(entry));
    }
    return values;
  }

  // Each NAME: {field: value, ...} as "NAME=JSON": cron, class, queue and
  // timezone become JSON strings; retry and catch_up, true, false or a
  // number, stay as written; args and extra are JSON text, kept as written.
  // ParsePeriodicJob checks the result.
  Result<std::vector<std::string>> Periodic(const YamlNode& node) const {
    std::vector<std::string> values;
    for (const auto& [name, value] : node.Pairs()) {
      std::string where = "entry at line " + std::to_string(name.Line());
      if (!name.IsScalar() || name.Scalar().empty()) {
        return Status::InvalidArgument(where + ": a name must be a single value");
      }
      std::string json;
      if (value.IsScalar()) {
        Result<std::string> text = Scalar(value, Kind::kString);
        if (!text.ok()) return Status::InvalidArgument(where + ": " + text.status().message());
        json = *text;
      } else if (value.IsMapping()) {
        json = "{";
        for (const auto& [field, field_value] : value.Pairs()) {
          Result<std::string> text = Scalar(field_value, Kind::kString);
          if (!field.IsScalar() || !text.ok()) {
            return Status::InvalidArgument(where + ": field " + field.Scalar() +
                                           " must be a single value");
          }
          std::string f = field.Scalar();
          if (json.size() > 1) json += ",";
          json += JsonString(f) + ":";
          bool raw = f == "args" || f == "extra" || f == "retry" || f == "catch_up";
          json += raw ? *text : JsonString(*text);
        }
        json += "}";
      } else {
        return Status::InvalidArgument(where + ": expected a mapping of fields or a JSON object");
      }
      values.push_back(name.Scalar() + "=" + json);
    }
    return values;
  }

  static std::string JsonString(const std::string& text) {
    std::string out = "\"";
    for (unsigned char c : text) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c < 0x20) {
        static constexpr char kHex[] = "0123456789abcdef";
        out += "\\u00";
        out += kHex[c >> 4];
        out += kHex[c & 15];
      } else {
        out += static_cast<char>(c);
      }
    }
    return out + "\"";
  }

  // A list's item: a scalar, or for queues also Sidekiq's [name, weight].
  Result<std::string> Item(const YamlNode& item) const {
    if (item.IsScalar()) return Scalar(item, Kind::kString);
    std::vector<YamlNode> pair = item.Items();
    if (key_.kind == Kind::kQueues && pair.size() == 2 && pair[0].IsScalar() &&
        pair[1].IsScalar()) {
      Result<std::string> name = Scalar(pair[0], Kind::kString);
      if (!name.ok()) return name;
      Result<std::string> weight = Scalar(pair[1], Kind::kInteger);
      if (!weight.ok()) return Status::InvalidArgument("weight: " + weight.status().message());
      return *name + "," + *weight;
    }
    return Status::InvalidArgument(key_.kind == Kind::kQueues
                                       ? "expected a queue name or [name, weight]"
                                       : "expected a single value");
  }

  const Key& key_;
  const EnvironmentLookup& environment_;
};

}  // namespace

std::vector<std::string_view> ConfigKeys() {
  std::vector<std::string_view> keys;
  for (const Key& key : kKeys) keys.push_back(key.key);
  return keys;
}

Result<std::vector<ConfigEntry>> ParseConfig(std::string_view text, std::string_view file_name,
                                             const EnvironmentLookup& environment) {
  Result<std::unique_ptr<YamlDocument>> document = YamlDocument::Load(text);
  if (!document.ok()) {
    return Status::InvalidArgument(std::string(file_name) + ":" + document.status().message());
  }
  YamlNode root = (*document)->Root();
  std::vector<ConfigEntry> entries;
  if (root.IsNull()) return entries;  // an empty file: nothing set
  if (!root.IsMapping()) {
    return Status::InvalidArgument(Place(file_name, root) +
                                   ": expected a mapping of keys (concurrency: 10, ...)");
  }
  std::set<std::string> seen;
  for (const auto& pair : root.Pairs()) {
    const YamlNode& name_node = pair.first;
    std::string place = Place(file_name, name_node);
    if (!name_node.IsScalar()) return Status::InvalidArgument(place + ": a key must be a name");
    // Sidekiq writes its keys as Ruby symbols, `:concurrency:`.
    std::string name = name_node.Scalar();
    if (name.starts_with(':')) name.erase(0, 1);
    std::string where = place + ": key '" + name + "'";
    const Key* key = FindKey(name);
    if (key == nullptr) {
      std::string underscored = name;
      for (char& c : underscored) c = c == '-' ? '_' : c;
      std::string hint = FindKey(underscored) != nullptr && underscored != name
                             ? " (did you mean '" + underscored + "'?)"
                             : " (see CONFIG FILE in reliableq(1) for the keys)";
      return Status::InvalidArgument(where + ": unknown" + hint);
    }
    if (!seen.insert(name).second) return Status::InvalidArgument(where + ": given twice");
    Result<std::vector<std::string>> values = EntryReader(*key, environment).Read(pair.second);
    if (!values.ok()) return Status::InvalidArgument(where + ": " + values.status().message());
    // A flag that is false is the flag not given.
    if (key->kind == Kind::kFlag && values->empty()) continue;
    entries.push_back({std::string(key->option), std::move(*values), std::move(where)});
  }
  return entries;
}

std::optional<std::string> EnvironmentVariable(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

ParsedArgs WithConfig(const ParsedArgs& args, const std::vector<ConfigEntry>& entries) {
  ParsedArgs merged = args;
  for (const ConfigEntry& entry : entries) merged.SetDefault(entry.option, entry.values);
  return merged;
}

}  // namespace reliableq::cli
