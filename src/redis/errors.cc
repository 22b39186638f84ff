#include "redis/errors.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <array>
#include <utility>

namespace reliableq::redis {

namespace {

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

std::string_view FirstWord(std::string_view text) {
  return text.substr(0, text.find(' '));
}

}  // namespace

Status FromTransportError(int err, std::string_view errstr, const std::string& where) {
  std::string detail = std::string(errstr.empty() ? "unknown error" : errstr) + " (Redis at " +
                       where + ")";
  switch (err) {
    case REDIS_ERR_PROTOCOL:
      return Status::Protocol(detail);
    case REDIS_ERR_EOF:
      return Status::IoError("connection closed by server: " + detail);
    case REDIS_ERR_IO:
      // hiredis 0.14 reports a socket timeout as an I/O error with the
      // strerror of EAGAIN; later versions add REDIS_ERR_TIMEOUT.
      if (errstr.find("Resource temporarily unavailable") != std::string_view::npos ||
          errstr.find("timed out") != std::string_view::npos) {
        return Status::Timeout("no answer in time: " + detail);
      }
      return Status::IoError(detail);
    default:
      return Status::IoError(detail);
  }
}

Status FromErrorReply(std::string_view text, bool plain) {
  std::string_view word = FirstWord(text);
  std::string message(text);
  if (word == "RQ_NOTFOUND" || word == "RQ_INVALID") {
    std::string rest(text.substr(std::min(text.size(), word.size() + 1)));
    return word == "RQ_NOTFOUND" ? Status::NotFound(rest) : Status::InvalidArgument(rest);
  }
  static constexpr std::array<std::string_view, 8> kUnavailable = {
      "LOADING",     "READONLY",   "MASTERDOWN", "TRYAGAIN",
      "CLUSTERDOWN", "NOREPLICAS", "MOVED",      "ASK"};
  if (plain && (word == "MOVED" || word == "ASK")) {
    // Only a cluster node redirects; a connection without cluster options
    // would meet the same answer again and again.
    return Status::IoError("Redis answered " + message +
                           ": it is a node of a Redis Cluster, which a redis:// URL does not "
                           "follow; use a redis+cluster:// URL (and a queue group)");
  }
  for (std::string_view w : kUnavailable) {
    if (word == w) return Status::IoError("Redis cannot serve now: " + message);
  }
  if (word == "BUSY") return Status::Timeout("Redis is busy running a script: " + message);
  if (word == "NOAUTH" || word == "WRONGPASS" || word == "NOPERM") {
    return Status::InvalidArgument("Redis refused the credentials: " + message);
  }
  // Errors raised inside a script arrive as "ERR user_script:12: ..." or, for
  // redis.error_reply, as the text given; both stay readable as they are.
  return Status::Script(message);
}

bool IsNoScript(const Status& status) {
  return status.IsScript() && StartsWith(status.message(), "NOSCRIPT");
}

std::optional<Redirect> ParseRedirect(std::string_view text) {
  Redirect redirect;
  std::string_view word = FirstWord(text);
  if (word == "ASK") {
    redirect.ask = true;
  } else if (word != "MOVED") {
    return std::nullopt;
  }
  std::string_view rest = text.substr(std::min(text.size(), word.size() + 1));
  size_t space = rest.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  std::string_view slot = rest.substr(0, space), address = rest.substr(space + 1);
  size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view host = address.substr(0, colon), port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  auto number = [](std::string_view digits, int max, int* out) {
    if (digits.empty() || digits.size() > 5) return false;
    int value = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return false;
      value = value * 10 + (c - '0');
    }
    *out = value;
    return value <= max;
  };
  if (!number(slot, 16383, &redirect.slot) || !number(port, 65535, &redirect.port) ||
      redirect.port == 0) {
    return std::nullopt;
  }
  redirect.host = std::string(host);
  return redirect;
}

bool IsTryAgainReply(std::string_view text) { return FirstWord(text) == "TRYAGAIN"; }

}  // namespace reliableq::redis
