// RedisOptions::FromUrl and friends: the URL grammar is in redis_options.h.

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "reliableq/redis_options.h"

namespace reliableq {

namespace {

constexpr std::string_view kMask = "***";

// `url` (no scheme, or what follows "scheme://") with the password of its
// user info masked: the part after the first ':' before the last '@', or
// all of it when it has no ':' (a lone user info is the password). The
// last '@', not the first: an unescaped '@' or '/' in a password must not
// end the mask early.
std::string MaskUserInfo(std::string_view url) {
  size_t at = url.rfind('@');
  if (at == std::string_view::npos) return std::string(url);
  size_t colon = url.substr(0, at).find(':');
  std::string_view user = colon == std::string_view::npos ? "" : url.substr(0, colon + 1);
  return std::string(user) + std::string(kMask) + std::string(url.substr(at));
}

// `url` (what follows "scheme://", its user info masked) with the value of
// every parameter of its query masked, "?token=***&db=***": any of them
// may be a secret (a handler URL's ?token=, a Redis URL's ?password=). The
// query runs from the first '?' after the user info to a '#', a blank, a
// quote or an angle bracket, which no URL holds unescaped (what follows is
// the message around it); a parameter without '=' is all value.
std::string MaskQueryValues(std::string url) {
  size_t at = url.rfind('@');
  size_t query = url.find('?', at == std::string::npos ? 0 : at + 1);
  if (query == std::string::npos) return url;
  size_t end = std::min(url.find_first_of("# \t\r\n\"'<>`", query), url.size());
  std::string out = url.substr(0, query + 1);
  for (size_t item = query + 1; item <= end;) {
    size_t next = std::min(url.find('&', item), end);
    std::string_view parameter(url.data() + item, next - item);
    size_t equals = parameter.find('=');
    if (equals == std::string_view::npos) {
      if (!parameter.empty()) out += kMask;
    } else {
      out += parameter.substr(0, equals + 1);
      if (equals + 1 < parameter.size()) out += kMask;
    }
    if (next < end) out += '&';
    item = next + 1;
  }
  out += url.substr(end);
  return out;
}

// One URL as it may be shown: "scheme://" kept, its password masked.
std::string Redacted(std::string_view url) {
  size_t scheme = url.find("://");
  size_t body = scheme == std::string_view::npos ? 0 : scheme + 3;
  return std::string(url.substr(0, body)) + MaskQueryValues(MaskUserInfo(url.substr(body)));
}

// The URL is shown with its password masked: error messages end up in
// logs and terminals.
Status Bad(std::string_view url, const std::string& why) {
  return Status::InvalidArgument("bad Redis URL '" + Redacted(url) + "': " + why);
}

// Parses a whole decimal number in [min, max]; false on anything else.
bool ParseInt(std::string_view text, int min, int max, int* out) {
  if (text.empty() || text.size() > 9) return false;
  int value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  if (value < min || value > max) return false;
  *out = value;
  return true;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX escapes; false on a malformed escape.
bool PercentDecode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    int hi = HexValue(in[i + 1]), lo = HexValue(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

// "user:password", ":password" or "password" (redis-rb reads a lone
// userinfo as the password).
Status ParseUserInfo(std::string_view url, std::string_view info, RedisOptions* options) {
  std::string_view user, password;
  size_t colon = info.find(':');
  if (colon == std::string_view::npos) {
    password = info;
  } else {
    user = info.substr(0, colon);
    password = info.substr(colon + 1);
  }
  if (!PercentDecode(user, &options->username) ||
      !PercentDecode(password, &options->password)) {
    return Bad(url, "malformed percent-escape in the user or password");
  }
  return Status::OK();
}

// The forms a missing host is reported with: the URL form it was in.
constexpr std::string_view kTcpForm = "redis[s]://HOST[:PORT][/DB]";
constexpr std::string_view kSentinelForm =
    "redis[s]+sentinel://HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB]";
constexpr std::string_view kClusterForm = "redis[s]+cluster://HOST[:PORT][,HOST[:PORT]...][/GROUP]";

// "host", "host:port", "[v6]" or "[v6]:port" into *host and *port (left
// as it is when the text has none); `form` is the URL's, for the message
// about a missing host.
Status ParseHostPort(std::string_view url, std::string_view authority, std::string_view form,
                     std::string* host, int* port) {
  std::string_view name = authority, port_text;
  bool has_port = false;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return Bad(url, "unclosed '[' in the host");
    name = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return Bad(url, "unexpected text after the host");
      port_text = after.substr(1);
      has_port = true;
    }
  } else {
    size_t colon = authority.rfind(':');
    if (colon != std::string_view::npos) {
      name = authority.substr(0, colon);
      port_text = authority.substr(colon + 1);
      has_port = true;
    }
  }
  if (has_port && port_text.empty()) return Bad(url, "empty port");
  // Redis's clients read a missing host as localhost; here it is more
  // often a variable that expanded to nothing (redis://$HOST:6379).
  if (name.empty()) return Bad(url, "no host (" + std::string(form) + ")");
  *host = std::string(name);
  if (has_port && !ParseInt(port_text, 1, 65535, port)) {
    return Bad(url, "port must be a number from 1 to 65535");
  }
  return Status::OK();
}

// Splits rest = [userinfo@]authority[/path] into *authority and *path
// (what follows the first '/'), parsing the user info into *options.
Status SplitAuthority(std::string_view url, std::string_view rest, std::string_view* authority,
                      std::string_view* path, RedisOptions* options) {
  size_t slash = rest.find('/');
  *authority = rest.substr(0, slash);
  *path = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
  size_t at = authority->rfind('@');
  if (at == std::string_view::npos) return Status::OK();
  Status s = ParseUserInfo(url, authority->substr(0, at), options);
  *authority = authority->substr(at + 1);
  return s;
}

// Calls `take(key, value)` for each key=value of `query` (joined with '&')
// until it returns an error.
template <typename Take>
Status ForEachParameter(std::string_view url, std::string_view query, const Take& take) {
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? "" : query.substr(amp + 1);
    size_t eq = pair.find('=');
    if (eq == std::string_view::npos) return Bad(url, "query parameter without '='");
    Status s = take(pair.substr(0, eq), pair.substr(eq + 1));
    if (!s.ok()) return s;
  }
  return Status::OK();
}

// Splits "...?query" into *rest and *query.
void SplitQuery(std::string_view* rest, std::string_view* query) {
  size_t question = rest->find('?');
  if (question == std::string_view::npos) return;
  *query = rest->substr(question + 1);
  *rest = rest->substr(0, question);
}

// The queue group of a group=G parameter, or of a cluster URL's path.
Status TakeGroup(std::string_view url, std::string_view value, RedisOptions* options) {
  std::string group;
  if (!PercentDecode(value, &group)) return Bad(url, "malformed group");
  // Validate cannot tell "group=" from no group at all.
  if (group.empty()) return Bad(url, "the group must be 1 to 64 letters, digits, '_', '-' or '.'");
  if (!options->group.empty() && options->group != group) {
    return Bad(url, "two different groups ('" + options->group + "' and '" + group + "')");
  }
  options->group = std::move(group);
  return Status::OK();
}

// rest = [userinfo@]host[:port][/db][?group=G]
Result<RedisOptions> ParseTcp(std::string_view url, std::string_view rest) {
  RedisOptions options;
  std::string_view authority, path, query;
  SplitQuery(&rest, &query);
  Status s = SplitAuthority(url, rest, &authority, &path, &options);
  if (!s.ok()) return s;
  s = ParseHostPort(url, authority, kTcpForm, &options.host, &options.port);
  if (!s.ok()) return s;
  if (!path.empty() && !ParseInt(path, 0, 1 << 20, &options.db)) {
    return Bad(url, "database must be a non-negative number");
  }
  s = ForEachParameter(url, query, [&](std::string_view key, std::string_view value) {
    if (key == "group") return TakeGroup(url, value, &options);
    return Bad(url, "unknown parameter '" + std::string(key) + "'");
  });
  if (!s.ok()) return s;
  return options;
}

// rest = [userinfo@]host[:port][,host[:port]...][/GROUP][?group=G]
Result<RedisOptions> ParseCluster(std::string_view url, std::string_view rest) {
  RedisOptions options;
  std::string_view authority, path, query;
  SplitQuery(&rest, &query);
  Status s = SplitAuthority(url, rest, &authority, &path, &options);
  if (!s.ok()) return s;
  while (true) {
    size_t comma = authority.find(',');
    RedisClusterOptions::Address seed;
    s = ParseHostPort(url, authority.substr(0, comma), kClusterForm, &seed.host, &seed.port);
    if (!s.ok()) return s;
    options.cluster.seeds.push_back(std::move(seed));
    if (comma == std::string_view::npos) break;
    authority = authority.substr(comma + 1);
  }
  // Redis Cluster has database 0 only: a second path part is a mistake.
  if (path.find('/') != std::string_view::npos) {
    return Bad(url,
               "a cluster URL names a group, not a database (redis+cluster://HOST:PORT/GROUP)");
  }
  // redis+cluster://HOST:PORT/0, copied from a Sidekiq-style URL, would
  // otherwise quietly mean group "0".
  if (!path.empty() &&
      std::all_of(path.begin(), path.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return Bad(url,
               "the path of a cluster URL is its queue group, not a database (Redis Cluster "
               "has database 0 only): '/" +
                   std::string(path) + "' is refused as a group; a group of digits can " +
                   "still be named with --group or ?group=");
  }
  if (!path.empty()) {
    s = TakeGroup(url, path, &options);
    if (!s.ok()) return s;
  }
  s = ForEachParameter(url, query, [&](std::string_view key, std::string_view value) {
    if (key == "group") return TakeGroup(url, value, &options);
    return Bad(url, "unknown parameter '" + std::string(key) + "'");
  });
  if (!s.ok()) return s;
  // The host and port fields stay at their defaults: a cluster connection
  // goes where the slot map says.
  return options;
}

// rest = [userinfo@]host[:port][,host[:port]...]/master[/db][?query]
Result<RedisOptions> ParseSentinel(std::string_view url, std::string_view rest) {
  RedisOptions options;
  std::string_view query;
  if (size_t question = rest.find('?'); question != std::string_view::npos) {
    query = rest.substr(question + 1);
    rest = rest.substr(0, question);
  }
  std::string_view authority, path;
  Status parsed = SplitAuthority(url, rest, &authority, &path, &options);
  if (!parsed.ok()) return parsed;
  while (true) {
    size_t comma = authority.find(',');
    RedisSentinelOptions::Address address;
    Status s =
        ParseHostPort(url, authority.substr(0, comma), kSentinelForm, &address.host, &address.port);
    if (!s.ok()) return s;
    options.sentinel.sentinels.push_back(std::move(address));
    if (comma == std::string_view::npos) break;
    authority = authority.substr(comma + 1);
  }
  size_t db_slash = path.find('/');
  std::string_view master = path.substr(0, db_slash);
  if (master.empty()) {
    return Bad(url, "no master name (redis+sentinel://HOST:PORT[,HOST:PORT...]/MASTER[/DB])");
  }
  options.sentinel.master_name = std::string(master);
  if (db_slash != std::string_view::npos &&
      !ParseInt(path.substr(db_slash + 1), 0, 1 << 20, &options.db)) {
    return Bad(url, "database must be a non-negative number");
  }
  parsed = ForEachParameter(url, query, [&](std::string_view key, std::string_view value) {
    RedisSentinelOptions& sentinel = options.sentinel;
    if (key == "sentinel_password") {
      if (!PercentDecode(value, &sentinel.password)) return Bad(url, "malformed password");
    } else if (key == "sentinel_username") {
      if (!PercentDecode(value, &sentinel.username)) return Bad(url, "malformed username");
    } else if (key == "group") {
      return TakeGroup(url, value, &options);
    } else if (key == "sentinel_timeout") {
      int ms = 0;
      if (!ParseInt(value, 1, 600000, &ms)) {
        return Bad(url, "sentinel_timeout must be a number of milliseconds from 1 to 600000");
      }
      sentinel.timeout = std::chrono::milliseconds(ms);
    } else {
      return Bad(url, "unknown parameter '" + std::string(key) + "'");
    }
    return Status::OK();
  });
  if (!parsed.ok()) return parsed;
  return options;
}

Result<RedisOptions> ParseUnix(std::string_view url, std::string_view rest) {
  RedisOptions options;
  size_t question = rest.find('?');
  std::string_view path = rest.substr(0, question);
  if (path.empty() || path.front() != '/') {
    return Bad(url, "a unix URL needs an absolute socket path (unix:///path/redis.sock)");
  }
  options.unix_path = std::string(path);
  if (question == std::string_view::npos) return options;
  Status parsed = ForEachParameter(
      url, rest.substr(question + 1), [&](std::string_view key, std::string_view value) {
        if (key == "db") {
          if (!ParseInt(value, 0, 1 << 20, &options.db)) {
            return Bad(url, "db must be a non-negative number");
          }
        } else if (key == "password") {
          if (!PercentDecode(value, &options.password)) return Bad(url, "malformed password");
        } else if (key == "group") {
          return TakeGroup(url, value, &options);
        } else if (key == "username" || key == "user") {
          if (!PercentDecode(value, &options.username)) return Bad(url, "malformed username");
        } else {
          return Bad(url, "unknown parameter '" + std::string(key) + "'");
        }
        return Status::OK();
      });
  if (!parsed.ok()) return parsed;
  return options;
}

bool IsGroupCharacter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

// The checks of Validate; with `need_group` false a cluster may go without
// a group (a URL whose program names the group otherwise).
Status Check(const RedisOptions& options, bool need_group) {
  const std::string& group = options.group;
  const RedisClusterOptions& cluster = options.cluster;
  if (!group.empty() || !cluster.seeds.empty()) {
    // The group goes inside key names and a hash tag: no '{', '}', ':' or
    // spaces, and short enough to read in a key listing.
    if (group.size() > RedisOptions::kMaxGroupLength ||
        !std::all_of(group.begin(), group.end(), IsGroupCharacter)) {
      return Status::InvalidArgument("the group must be 1 to 64 letters, digits, '_', '-' or '.'");
    }
  }
  if (cluster.seeds.empty()) return Status::OK();
  // The group picks the connection's slot; a connection routed by a key
  // of its own (the directory of groups) needs none.
  if (group.empty() && need_group && cluster.route_key.empty()) {
    return Status::InvalidArgument(
        "Redis Cluster needs a queue group (redis+cluster://HOST:PORT/GROUP or ?group=G)");
  }
  if (!options.sentinel.master_name.empty()) {
    return Status::InvalidArgument("Redis Cluster and Sentinel exclude each other");
  }
  if (!options.unix_path.empty()) {
    return Status::InvalidArgument("Redis Cluster is reached over TCP, not a unix socket");
  }
  if (options.db != 0) return Status::InvalidArgument("Redis Cluster has database 0 only");
  for (const RedisClusterOptions::Address& seed : cluster.seeds) {
    if (seed.host.empty() || seed.port <= 0 || seed.port > 65535) {
      return Status::InvalidArgument("a cluster seed needs a host and a port from 1 to 65535");
    }
  }
  return Status::OK();
}

}  // namespace

Result<RedisOptions> RedisOptions::FromUrl(std::string_view url) {
  struct Form {
    std::string_view scheme;
    Result<RedisOptions> (*parse)(std::string_view, std::string_view);
    bool tls;
  };
  static constexpr Form kForms[] = {
      {"redis://", ParseTcp, false},           {"rediss://", ParseTcp, true},
      {"unix://", ParseUnix, false},           {"redis+sentinel://", ParseSentinel, false},
      {"rediss+sentinel://", ParseSentinel, true}, {"redis+cluster://", ParseCluster, false},
      {"rediss+cluster://", ParseCluster, true},
  };
  for (const Form& form : kForms) {
    if (url.substr(0, form.scheme.size()) != form.scheme) continue;
    Result<RedisOptions> options = form.parse(url, url.substr(form.scheme.size()));
    if (!options.ok()) return options;
    options->tls.enabled = form.tls;
    // The checks a RedisOptions built in code gets too, with the URL shown;
    // but a cluster URL may leave the group to the program (migrate's
    // --group): Validate refuses a connection still without one.
    Status valid = Check(*options, /*need_group=*/false);
    if (!valid.ok()) return Bad(url, valid.message());
    return options;
  }
  return Bad(url,
             "expected redis://host:port/db, rediss://host:port/db, unix:///path.sock, "
             "redis+sentinel://host:port,host:port/master/db or "
             "redis+cluster://host:port,host:port/group");
}

Status RedisOptions::Validate() const { return Check(*this, /*need_group=*/true); }

Result<RedisOptions> RedisOptions::FromEnvironment() {
  const char* url = std::getenv("REDIS_URL");
  if (url == nullptr || *url == '\0') return RedisOptions();
  Result<RedisOptions> parsed = FromUrl(url);
  if (!parsed.ok()) return parsed.status().WithContext("REDIS_URL");
  return parsed;
}

std::string RedactUrls(std::string_view text) {
  std::string out;
  size_t done = 0;
  for (size_t sep = text.find("://"); sep != std::string_view::npos;) {
    // A URL runs from its scheme to the end of the line or the next URL.
    size_t body = sep + 3;
    size_t next = text.find("://", body);
    size_t end = next == std::string_view::npos ? text.size() : next;
    while (next != std::string_view::npos && end > body &&
           std::isalnum(static_cast<unsigned char>(text[end - 1]))) {
      --end;
    }
    end = std::min(end, text.find('\n', body));
    out.append(text.substr(done, body - done));
    out += MaskQueryValues(MaskUserInfo(text.substr(body, end - body)));
    done = end;
    sep = next;
  }
  out.append(text.substr(done));
  return out;
}

namespace {

std::string HostPort(const std::string& host, int port) {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

template <typename Address>
std::string HostList(const std::vector<Address>& addresses) {
  std::string list;
  for (size_t i = 0; i < addresses.size(); ++i) {
    list += (i > 0 ? ", " : "") + HostPort(addresses[i].host, addresses[i].port);
  }
  return list;
}

}  // namespace

std::string RedisOptions::Describe() const {
  std::string in_group = group.empty() ? "" : " group '" + group + "'";
  if (!cluster.seeds.empty()) {
    return "cluster " + HostList(cluster.seeds) + (tls.enabled ? " (TLS)" : "") + in_group;
  }
  if (!sentinel.master_name.empty()) {
    return "master '" + sentinel.master_name + "' of sentinels " + HostList(sentinel.sentinels) +
           (tls.enabled ? " (TLS)" : "") + " db " + std::to_string(db) + in_group;
  }
  std::string where = unix_path.empty() ? HostPort(host, port) : "unix:" + unix_path;
  if (tls.enabled && unix_path.empty()) where = "rediss://" + where;
  return where + " db " + std::to_string(db) + in_group;
}

}  // namespace reliableq
