#include "redis/sentinel_lookup.h"

#include <algorithm>
#include <charconv>
#include <memory>
#include <numeric>

#include "redis/connection.h"
#include "redis/reply.h"

namespace reliableq::redis {

namespace {

std::string DescribeSentinel(const RedisSentinelOptions::Address& s) {
  return Endpoint{s.host, s.port, {}}.Describe();
}

// The master named by one reply to SENTINEL get-master-addr-by-name.
Result<Endpoint> ParseMasterAddress(const redisReply* reply, const std::string& name) {
  if (reply->type == REDIS_REPLY_NIL) {
    return Status::NotFound("does not know a master named '" + name + "'");
  }
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
      reply->element[0]->type != REDIS_REPLY_STRING ||
      reply->element[1]->type != REDIS_REPLY_STRING) {
    return Status::Protocol("answered get-master-addr-by-name with a " +
                            std::string(TypeName(reply)));
  }
  std::string_view port_text = View(reply->element[1]);
  int port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port <= 0 ||
      port > 65535) {
    return Status::Protocol("named a master with the port '" + std::string(port_text) + "'");
  }
  return Endpoint{std::string(View(reply->element[0])), port, {}};
}

}  // namespace

RedisOptions SentinelConnectionOptions(const RedisSentinelOptions& sentinel,
                                       const RedisTlsOptions& tls, size_t i) {
  RedisOptions options;
  options.host = sentinel.sentinels[i].host;
  options.port = sentinel.sentinels[i].port;
  options.username = sentinel.username;
  options.password = sentinel.password;
  options.connect_timeout = sentinel.timeout;
  options.command_timeout = sentinel.timeout;
  options.tls = tls;
  return options;
}

SentinelLookup::SentinelLookup(const RedisOptions& options)
    : options_(options.sentinel), tls_(options.tls), order_(options.sentinel.sentinels.size()) {
  std::iota(order_.begin(), order_.end(), size_t{0});
}

std::string SentinelLookup::Describe() const {
  std::string text = "master '" + options_.master_name + "' of sentinels ";
  for (size_t i = 0; i < options_.sentinels.size(); ++i) {
    if (i > 0) text += ", ";
    text += DescribeSentinel(options_.sentinels[i]);
  }
  return text;
}

Result<Endpoint> SentinelLookup::Ask() {
  if (order_.empty()) return Status::InvalidArgument(Describe() + ": no sentinel to ask");
  // Every sentinel's answer goes into the message: when none names the
  // master, the operator needs to see which failed and how.
  std::string tried;
  bool all_timed_out = true;
  for (size_t n = 0; n < order_.size(); ++n) {
    size_t i = order_[n];
    Status why;
    Result<std::unique_ptr<Connection>> sentinel =
        Connection::Open(SentinelConnectionOptions(options_, tls_, i));
    if (sentinel.ok()) {
      Result<ReplyPtr> reply =
          (*sentinel)->Command({"SENTINEL", "get-master-addr-by-name", options_.master_name});
      if (reply.ok()) {
        Result<Endpoint> found = ParseMasterAddress(reply->get(), options_.master_name);
        if (found.ok()) {
          // The sentinel that answered is asked first next time.
          order_.erase(order_.begin() + static_cast<std::ptrdiff_t>(n));
          order_.insert(order_.begin(), i);
          named_by_ = i;
          return *found;
        }
        why = found.status();
      } else {
        why = reply.status();
      }
    } else {
      why = sentinel.status();
    }
    if (!why.IsTimeout()) all_timed_out = false;
    tried += (tried.empty() ? "" : "; ") + DescribeSentinel(options_.sentinels[i]) + ": " +
             why.message();
  }
  std::string message = "no sentinel named the " + Describe() + " (" + tried + ")";
  return all_timed_out ? Status::Timeout(message) : Status::IoError(message);
}

void SentinelLookup::Demote() {
  auto at = std::find(order_.begin(), order_.end(), named_by_);
  if (at == order_.end()) return;
  order_.erase(at);
  order_.push_back(named_by_);
}

}  // namespace reliableq::redis
