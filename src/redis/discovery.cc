#include "redis/discovery.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <numeric>

#include "redis/connection.h"
#include "redis/reply.h"

namespace reliableq::redis {

namespace {

// The identity of a sentinel setup: two RedisOptions with the same master
// name, sentinels, database and the settings a lookup uses (credentials,
// timeout, TLS) share a Discovery.
std::string SetupKey(const RedisOptions& options) {
  const RedisSentinelOptions& s = options.sentinel;
  const RedisTlsOptions& tls = options.tls;
  std::string key = s.master_name + "|" + std::to_string(options.db) + "|" + s.username + "|" +
                    s.password + "|" + std::to_string(s.timeout.count()) + "|" +
                    std::to_string(s.role_checks) + "|" + (tls.enabled ? "tls" : "") + "|" +
                    tls.ca_file + "|" + tls.cert_file + "|" + tls.key_file + "|" +
                    tls.server_name + "|" + (tls.verify_peer ? "" : "insecure");
  for (const RedisSentinelOptions::Address& s : options.sentinel.sentinels) {
    key += "|" + s.host + ":" + std::to_string(s.port);
  }
  return key;
}

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

std::shared_ptr<Discovery> Discovery::For(const RedisOptions& options) {
  if (options.sentinel.master_name.empty()) return nullptr;
  static std::mutex registry_mu;
  static std::map<std::string, std::weak_ptr<Discovery>> registry;
  std::lock_guard<std::mutex> lock(registry_mu);
  std::weak_ptr<Discovery>& slot = registry[SetupKey(options)];
  std::shared_ptr<Discovery> shared = slot.lock();
  if (shared == nullptr) {
    shared = std::make_shared<Discovery>(options);
    slot = shared;
  }
  return shared;
}

Discovery::Discovery(const RedisOptions& options)
    : options_(options.sentinel), tls_(options.tls), order_(options.sentinel.sentinels.size()) {
  std::iota(order_.begin(), order_.end(), size_t{0});
}

RedisOptions Discovery::SentinelOptions(size_t i) const {
  RedisOptions sentinel;
  sentinel.host = options_.sentinels[i].host;
  sentinel.port = options_.sentinels[i].port;
  sentinel.username = options_.username;
  sentinel.password = options_.password;
  sentinel.connect_timeout = options_.timeout;
  sentinel.command_timeout = options_.timeout;
  sentinel.tls = tls_;
  return sentinel;
}

std::string Discovery::Describe() const {
  std::string text = "master '" + options_.master_name + "' of sentinels ";
  for (size_t i = 0; i < options_.sentinels.size(); ++i) {
    if (i > 0) text += ", ";
    text += DescribeSentinel(options_.sentinels[i]);
  }
  return text;
}

Result<Discovery::Master> Discovery::Find() {
  uint64_t seen;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (known_) return Master{master_, epoch()};
    if (order_.empty()) return Status::InvalidArgument(Describe() + ": no sentinel to ask");
    seen = lookups_;
  }
  std::lock_guard<std::mutex> lookup(lookup_mu_);
  std::vector<size_t> order;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A lookup finished while this one waited: its answer is this one's.
    if (known_) return Master{master_, epoch()};
    if (lookups_ != seen && !last_failure_.ok()) return last_failure_;
    order = order_;
  }
  Result<std::pair<Endpoint, size_t>> asked = Ask(order);
  std::lock_guard<std::mutex> lock(mu_);
  ++lookups_;
  last_failure_ = asked.status();
  if (!asked.ok()) return last_failure_;
  // The sentinel that answered is asked first next time.
  size_t i = order[asked->second];
  order_.erase(std::find(order_.begin(), order_.end(), i));
  order_.insert(order_.begin(), i);
  named_by_ = i;
  Take(asked->first);
  return Master{master_, epoch()};
}

Result<std::pair<Endpoint, size_t>> Discovery::Ask(const std::vector<size_t>& order) const {
  // Every sentinel's answer goes into the message: when none names the
  // master, the operator needs to see which failed and how.
  std::string tried;
  bool all_timed_out = true;
  for (size_t n = 0; n < order.size(); ++n) {
    size_t i = order[n];
    Status why;
    Result<std::unique_ptr<Connection>> sentinel = Connection::Open(SentinelOptions(i));
    if (sentinel.ok()) {
      Result<ReplyPtr> reply = (*sentinel)->Command(
          {"SENTINEL", "get-master-addr-by-name", options_.master_name});
      if (reply.ok()) {
        Result<Endpoint> found = ParseMasterAddress(reply->get(), options_.master_name);
        if (found.ok()) return std::make_pair(*found, n);
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

void Discovery::Take(const Endpoint& found) {
  bool moved = master_.port != 0 && (found.host != master_.host || found.port != master_.port);
  master_ = found;
  known_ = true;
  if (moved) epoch_.fetch_add(1, std::memory_order_acq_rel);
}

void Discovery::Invalidate(uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  if (epoch == this->epoch()) known_ = false;
}

void Discovery::NotMaster(uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  if (epoch != this->epoch() || !known_) return;
  known_ = false;
  auto at = std::find(order_.begin(), order_.end(), named_by_);
  if (at != order_.end()) {
    order_.erase(at);
    order_.push_back(named_by_);
  }
}

void Discovery::Announce(const Endpoint& master) {
  std::lock_guard<std::mutex> lock(mu_);
  Take(master);
}

bool IsReadOnlyReply(const Status& status) {
  return status.IsIoError() && status.message().find("READONLY ") != std::string::npos;
}

std::string RoleOf(const redisReply* reply) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements == 0 ||
      reply->element[0]->type != REDIS_REPLY_STRING) {
    return {};
  }
  return std::string(View(reply->element[0]));
}

}  // namespace reliableq::redis
