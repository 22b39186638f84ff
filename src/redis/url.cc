// RedisOptions::FromUrl and friends: the URL grammar is in redis_options.h.

#include <cstdlib>
#include <string>
#include <string_view>

#include "reliableq/redis_options.h"

namespace reliableq {

namespace {

Status Bad(std::string_view url, const std::string& why) {
  return Status::InvalidArgument("bad Redis URL '" + std::string(url) + "': " + why);
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

Result<RedisOptions> ParseTcp(std::string_view url, std::string_view rest) {
  RedisOptions options;
  // rest = [userinfo@]host[:port][/db]
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
  size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    Status s = ParseUserInfo(url, authority.substr(0, at), &options);
    if (!s.ok()) return s;
    authority = authority.substr(at + 1);
  }
  std::string_view host = authority, port;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return Bad(url, "unclosed '[' in the host");
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return Bad(url, "unexpected text after the host");
      port = after.substr(1);
      if (port.empty()) return Bad(url, "empty port");
    }
  } else {
    size_t colon = authority.rfind(':');
    if (colon != std::string_view::npos) {
      host = authority.substr(0, colon);
      port = authority.substr(colon + 1);
      if (port.empty()) return Bad(url, "empty port");
    }
  }
  if (!host.empty()) options.host = std::string(host);
  if (!port.empty() && !ParseInt(port, 1, 65535, &options.port)) {
    return Bad(url, "port must be a number from 1 to 65535");
  }
  if (!path.empty() && !ParseInt(path, 0, 1 << 20, &options.db)) {
    return Bad(url, "database must be a non-negative number");
  }
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
  std::string_view query = rest.substr(question + 1);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? "" : query.substr(amp + 1);
    size_t eq = pair.find('=');
    if (eq == std::string_view::npos) return Bad(url, "query parameter without '='");
    std::string_view key = pair.substr(0, eq), value = pair.substr(eq + 1);
    if (key == "db") {
      if (!ParseInt(value, 0, 1 << 20, &options.db)) {
        return Bad(url, "db must be a non-negative number");
      }
    } else if (key == "password") {
      if (!PercentDecode(value, &options.password)) return Bad(url, "malformed password");
    } else if (key == "username" || key == "user") {
      if (!PercentDecode(value, &options.username)) return Bad(url, "malformed username");
    } else {
      return Bad(url, "unknown parameter '" + std::string(key) + "'");
    }
  }
  return options;
}

}  // namespace

Result<RedisOptions> RedisOptions::FromUrl(std::string_view url) {
  constexpr std::string_view kRedis = "redis://", kUnix = "unix://";
  if (url.substr(0, kRedis.size()) == kRedis) return ParseTcp(url, url.substr(kRedis.size()));
  if (url.substr(0, kUnix.size()) == kUnix) return ParseUnix(url, url.substr(kUnix.size()));
  return Bad(url, "expected redis://host:port/db or unix:///path.sock");
}

Result<RedisOptions> RedisOptions::FromEnvironment() {
  const char* url = std::getenv("REDIS_URL");
  if (url == nullptr || *url == '\0') return RedisOptions();
  Result<RedisOptions> parsed = FromUrl(url);
  if (!parsed.ok()) return parsed.status().WithContext("REDIS_URL");
  return parsed;
}

std::string RedisOptions::Describe() const {
  std::string where = unix_path.empty()
                          ? (host.find(':') != std::string::npos ? "[" + host + "]" : host) +
                                ":" + std::to_string(port)
                          : "unix:" + unix_path;
  return where + " db " + std::to_string(db);
}

}  // namespace reliableq
