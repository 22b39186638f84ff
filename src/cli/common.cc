// What every verb shares: the global options, error reporting, output.

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

#include "base/log.h"  // LogFormatNamed
#include "base/text_escape.h"
#include "cli/commands.h"
#include "protocol/keys.h"
#include "server/options_check.h"  // kMaxDuration

namespace reliableq::cli {

std::vector<OptionSpec> ConnectionOptionSpecs(const ConnectionOptionNames& names) {
  return {
      {.name = names.url, .takes_value = true},
      {.name = names.password_file, .takes_value = true},
      {.name = names.tls_ca, .takes_value = true},
      {.name = names.tls_cert, .takes_value = true},
      {.name = names.tls_key, .takes_value = true},
      {.name = names.tls_server_name, .takes_value = true},
      {.name = names.tls_insecure},
  };
}

const std::vector<OptionSpec>& GlobalOptions() {
  static const std::vector<OptionSpec> options = [] {
    std::vector<OptionSpec> specs = ConnectionOptionSpecs(kRedisConnection);
    specs.insert(specs.end(), {
                                  {.name = "sentinel", .takes_value = true, .repeats = true},
                                  {.name = "prefix", .takes_value = true},
                                  {.name = "group", .takes_value = true},
                                  {.name = "help", .short_name = 'h'},
                              });
    return specs;
  }();
  return options;
}

std::string_view GlobalOptionsHelp() {
  return "Global options (before or after the command):\n"
         "      --redis URL      Redis to use: redis://[[user]:password@]host[:port][/db],\n"
         "                       rediss://... (the same over TLS) or\n"
         "                       unix:///path/redis.sock[?db=N],\n"
         "                       redis+sentinel://host:port[,host:port...]/master[/db]\n"
         "                       (the master the sentinels name; rediss+sentinel:// over TLS)\n"
         "                       redis+cluster://host:port[,host:port...]/group\n"
         "                       (Redis Cluster; every verb but groups and migrate needs\n"
         "                       the group, there, as ?group=G or as --group;\n"
         "                       rediss+cluster:// over TLS)\n"
         "                       (default: $REDIS_URL, else redis://127.0.0.1:6379/0)\n"
         "      --sentinel HOST[:PORT]\n"
         "                       ask this sentinel (repeat for each; port 26379 by default)\n"
         "                       for the master named by the --redis URL's host, as in\n"
         "                       Sidekiq's sentinels: option: --redis redis://mymaster/0\n"
         "      --redis-password-file FILE\n"
         "                       the Redis password is the content of FILE, less one\n"
         "                       final newline (instead of the URL's): keeps it out of ps\n"
         "      --redis-tls-ca FILE\n"
         "                       with rediss://: the CAs (PEM) that may sign the server's\n"
         "                       certificate (default: the system's trusted CAs)\n"
         "      --redis-tls-cert FILE, --redis-tls-key FILE\n"
         "                       with rediss://: a client certificate (PEM) and its key\n"
         "      --redis-tls-server-name NAME\n"
         "                       with rediss://: the name the server's certificate must\n"
         "                       carry, also sent as SNI (default: the URL's host)\n"
         "      --redis-tls-insecure\n"
         "                       with rediss://: do not verify the server's certificate\n"
         "      --prefix P       prefix of reliableq's own keys (default: reliableq:)\n"
         "      --group G        the queue group: every key under P{G}: (layout 2, for\n"
         "                       Redis Cluster; Sidekiq cannot read it) (default: none,\n"
         "                       Sidekiq's keys)\n"
         "  -h, --help           show this help\n";
}

std::string Shown(std::string_view text) { return base::Escaped(RedactUrls(text)); }

int UsageError(std::string_view verb, std::string_view reason) {
  std::string see =
      verb.empty() ? "reliableq --help" : "reliableq " + std::string(verb) + " --help";
  std::fprintf(stderr, "reliableq: %s (see '%s')\n", Shown(reason).c_str(), see.c_str());
  return kExitUsage;
}

int RuntimeError(const Status& status) {
  std::fprintf(stderr, "reliableq: %s\n", Shown(status.ToString()).c_str());
  return kExitRuntime;
}

Result<std::string> ReadBoundedFile(std::string_view what, const std::string& path,
                                    size_t max_bytes) {
  FILE* file = std::fopen(path.c_str(), "re");
  if (file == nullptr) {
    return Status::InvalidArgument("cannot read " + std::string(what) + ": " +
                                   std::strerror(errno));
  }
  std::string content;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, file)) > 0 && content.size() <= max_bytes) {
    content.append(buf, n);
  }
  int error = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (error != 0) {
    return Status::InvalidArgument("cannot read " + std::string(what) + ": " +
                                   std::strerror(error));
  }
  if (content.size() > max_bytes) {
    return Status::InvalidArgument(std::string(what) + " is larger than " +
                                   std::to_string(max_bytes / 1024) +
                                   " KiB: not what it should hold");
  }
  return content;
}

Result<std::string> ReadSecretFile(std::string_view option, const std::string& path,
                                   size_t max_bytes) {
  return ReadBoundedFile("--" + std::string(option) + " '" + path + "'", path, max_bytes);
}

namespace {

void WarnIfReadableByAll(const base::Logger& log, std::string_view what, const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || (st.st_mode & S_IROTH) == 0) return;
  log.Log(LogLevel::kWarn, base::LogEvent("secret_file_readable"),
          "%s '%s' holds a secret and every user can read it (mode %04o): chmod o-r it",
          std::string(what).c_str(), Shown(path).c_str(),
          static_cast<unsigned>(st.st_mode & 07777));
}

}  // namespace

void WarnReadableSecrets(const ParsedArgs& args, LogFormat format,
                         const std::optional<std::string>& config, bool config_holds_secret) {
  const base::Logger log(LogLevel::kWarn, {}, format);
  if (config && config_holds_secret) WarnIfReadableByAll(log, "config file", *config);
  for (std::string_view option : {kRedisConnection.password_file, std::string_view("basic-auth-file"),
                                  std::string_view("token-file")}) {
    if (std::optional<std::string> path = args.Value(option)) {
      WarnIfReadableByAll(log, "--" + std::string(option), *path);
    }
  }
}

std::optional<std::string> ReadLogFormat(const ParsedArgs& args, LogFormat* format) {
  std::optional<std::string> text = args.Value("log-format");
  if (!text) return std::nullopt;
  std::optional<LogFormat> named = base::LogFormatNamed(*text);
  if (!named) return "--log-format must be text or json, not '" + *text + "'";
  *format = *named;
  return std::nullopt;
}

namespace {

// More than any password; a larger file is not one.
constexpr size_t kMaxPasswordFileBytes = 64 * 1024;

// The content of the password file `path` (given as --`option`), less one
// final "\n" (or "\r\n"). Its content never goes into a message.
Result<std::string> ReadPasswordFile(std::string_view option, const std::string& path) {
  Result<std::string> content = ReadSecretFile(option, path, kMaxPasswordFileBytes);
  if (!content.ok()) return content.status();
  std::string password = std::move(content.value());
  if (!password.empty() && password.back() == '\n') password.pop_back();
  if (!password.empty() && password.back() == '\r') password.pop_back();
  if (password.empty()) {
    return Status::InvalidArgument("--" + std::string(option) + " '" + path + "' is empty");
  }
  return password;
}

}  // namespace

Status ReadConnectionOptions(const ParsedArgs& args, const ConnectionOptionNames& names,
                             RedisOptions* options) {
  auto flag = [](std::string_view name) { return "--" + std::string(name); };
  if (std::optional<std::string> path = args.Value(names.password_file)) {
    Result<std::string> password = ReadPasswordFile(names.password_file, *path);
    if (!password.ok()) return password.status();
    options->password = std::move(*password);
  }
  // The files are read when connecting: a missing one is a runtime error
  // (exit 1) that names it, like an unreachable server.
  for (std::string_view tls :
       {names.tls_ca, names.tls_cert, names.tls_key, names.tls_server_name, names.tls_insecure}) {
    if (args.Has(tls) && !options->tls.enabled) {
      return Status::InvalidArgument(flag(tls) + " needs a rediss:// URL (TLS); " +
                                     std::string(names.url_name) + " is not one");
    }
  }
  if (args.Has(names.tls_cert) != args.Has(names.tls_key)) {
    return Status::InvalidArgument(flag(names.tls_cert) + " and " + flag(names.tls_key) +
                                   " go together");
  }
  options->tls.ca_file = args.Value(names.tls_ca).value_or("");
  options->tls.cert_file = args.Value(names.tls_cert).value_or("");
  options->tls.key_file = args.Value(names.tls_key).value_or("");
  options->tls.server_name = args.Value(names.tls_server_name).value_or("");
  options->tls.verify_peer = !args.Has(names.tls_insecure);
  return Status::OK();
}

Result<RedisOptions> RedisFromArgsWithoutGroup(const ParsedArgs& args) {
  std::optional<std::string> url = args.Value("redis");
  Result<RedisOptions> options =
      url ? RedisOptions::FromUrl(*url) : RedisOptions::FromEnvironment();
  if (!options.ok()) return options;
  if (std::vector<std::string> sentinels = args.Values("sentinel"); !sentinels.empty()) {
    if (!options->sentinel.master_name.empty() || !options->unix_path.empty() ||
        !options->cluster.seeds.empty()) {
      return Status::InvalidArgument(
          "--sentinel needs a redis:// or rediss:// URL whose host is the master's name "
          "(redis://mymaster/0)");
    }
    std::string list;
    for (const std::string& s : sentinels) {
      if (s.empty() || s.find_first_of(",/?@") != std::string::npos) {
        return Status::InvalidArgument("--sentinel '" + s + "': expected HOST[:PORT]");
      }
      list += (list.empty() ? "" : ",") + s;
    }
    Result<RedisOptions> parsed =
        RedisOptions::FromUrl("redis+sentinel://" + list + "/" + options->host);
    if (!parsed.ok()) {
      return Status::InvalidArgument("--sentinel: " + parsed.status().message());
    }
    options->sentinel.master_name = options->host;
    options->sentinel.sentinels = parsed->sentinel.sentinels;
  }
  if (Status s = ReadConnectionOptions(args, kRedisConnection, &*options); !s.ok()) return s;
  return options;
}

Result<RedisOptions> RedisFromArgs(const ParsedArgs& args) {
  Result<RedisOptions> options = RedisFromArgsWithoutGroup(args);
  if (!options.ok()) return options;
  if (std::optional<std::string> group = args.Value("group")) {
    if (Status s = protocol::CheckGroup(*group); !s.ok()) return Status::InvalidArgument("--group: " + s.message());
    if (!options->group.empty() && options->group != *group) {
      return Status::InvalidArgument("--group '" + *group + "' and the Redis URL's group '" +
                                     options->group + "' differ");
    }
    options->group = *group;
  }
  // The group picks the one hash slot every connection serves: without one
  // the verb cannot work at all, which is the command line's fault.
  if (args.cluster_needs_group() && !options->cluster.seeds.empty() && options->group.empty()) {
    return Status::InvalidArgument(
        "Redis Cluster needs a queue group: give --group G, or name it in the URL "
        "(redis+cluster://HOST:PORT/G or ?group=G)");
  }
  if (Status s = protocol::CheckKeyLayout(PrefixFromArgs(args), options->group); !s.ok()) return s;
  return options;
}

std::string PrefixFromArgs(const ParsedArgs& args) {
  return args.Value("prefix").value_or("reliableq:");
}

bool WriteOut(std::string_view text) {
  size_t written = std::fwrite(text.data(), 1, text.size(), stdout);
  return std::fflush(stdout) == 0 && written == text.size();
}

std::optional<std::chrono::milliseconds> ParseSeconds(std::string_view text, bool allow_zero) {
  std::optional<double> seconds = ParseNumber(text);
  if (!seconds || *seconds < 0 || *seconds * 1000 > static_cast<double>(server::kMaxDuration.count())) {
    return std::nullopt;
  }
  auto ms = std::chrono::milliseconds(std::llround(*seconds * 1000));
  if (!allow_zero && ms.count() <= 0) return std::nullopt;
  return ms;
}

std::string SecondsText(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g s", static_cast<double>(ms.count()) / 1000);
  return buf;
}

std::string SpanText(double seconds) {
  int64_t s = static_cast<int64_t>(std::llround(std::fabs(seconds)));
  if (s < 60) return std::to_string(s) + " s";
  const std::pair<const char*, int64_t> units[] = {
      {"d", 86400}, {"h", 3600}, {"min", 60}, {"s", 1}};
  std::string text;
  int parts = 0;
  for (const auto& [name, size] : units) {
    if (s >= size && parts < 2) {
      text += (parts > 0 ? " " : "") + std::to_string(s / size) + " " + name;
      s %= size;
      ++parts;
    } else if (parts > 0) {
      break;
    }
  }
  return text;
}

std::string UtcTime(double seconds, const char* format) {
  if (!std::isfinite(seconds)) return seconds > 0 ? "never" : "-";
  time_t t = static_cast<time_t>(std::floor(seconds));
  tm parts;
  if (gmtime_r(&t, &parts) == nullptr) return "-";
  char buf[64];
  std::strftime(buf, sizeof buf, format, &parts);
  return buf;
}

std::string OneLine(std::string_view text, size_t width) {
  size_t chars = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    bool continuation = (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80;
    if (continuation) continue;
    if (chars == width) return base::Escaped(text.substr(0, i)) + "...";
    ++chars;
  }
  return base::Escaped(text);
}

std::optional<std::pair<std::string, std::string>> SplitAssignment(std::string_view text) {
  size_t equals = text.find('=');
  if (equals == std::string_view::npos || equals == 0) return std::nullopt;
  return std::pair{std::string(text.substr(0, equals)), std::string(text.substr(equals + 1))};
}

std::string Plural(int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace reliableq::cli
