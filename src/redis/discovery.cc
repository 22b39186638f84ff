#include "redis/discovery.h"

#include <map>

#include "redis/cluster_lookup.h"
#include "redis/key_slot.h"
#include "redis/reply.h"
#include "redis/sentinel_lookup.h"

namespace reliableq::redis {

namespace {

std::string TlsKey(const RedisTlsOptions& tls) {
  return std::string(tls.enabled ? "tls" : "") + "|" + tls.ca_file + "|" + tls.cert_file + "|" +
         tls.key_file + "|" + tls.server_name + "|" + (tls.verify_peer ? "" : "insecure");
}

// The identity of a setup: two RedisOptions with the same master name,
// sentinels, database and the settings a lookup uses (credentials,
// timeout, TLS) share a Discovery; for a cluster, the same seeds, slot,
// node credentials, connect timeout and TLS.
std::string SetupKey(const RedisOptions& options) {
  if (!options.cluster.seeds.empty()) {
    std::string key = "cluster|" + std::to_string(ClusterSlot(options)) + "|" +
                      options.username + "|" + options.password + "|" +
                      std::to_string(options.connect_timeout.count()) + "|" +
                      TlsKey(options.tls);
    for (const RedisClusterOptions::Address& seed : options.cluster.seeds) {
      key += "|" + seed.host + ":" + std::to_string(seed.port);
    }
    return key;
  }
  const RedisSentinelOptions& s = options.sentinel;
  std::string key = s.master_name + "|" + std::to_string(options.db) + "|" + s.username + "|" +
                    s.password + "|" + std::to_string(s.timeout.count()) + "|" +
                    std::to_string(s.role_checks) + "|" + TlsKey(options.tls);
  for (const RedisSentinelOptions::Address& s : options.sentinel.sentinels) {
    key += "|" + s.host + ":" + std::to_string(s.port);
  }
  return key;
}

std::unique_ptr<Lookup> LookupFor(const RedisOptions& options) {
  if (!options.cluster.seeds.empty()) return std::make_unique<ClusterLookup>(options);
  return std::make_unique<SentinelLookup>(options);
}

}  // namespace

std::shared_ptr<Discovery> Discovery::For(const RedisOptions& options) {
  if (options.sentinel.master_name.empty() && options.cluster.seeds.empty()) return nullptr;
  if (!options.Validate().ok()) return nullptr;
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
    : options_(options.cluster.seeds.empty() ? options.sentinel : RedisSentinelOptions()),
      tls_(options.tls),
      slot_(options.cluster.seeds.empty() ? -1 : ClusterSlot(options)),
      lookup_(LookupFor(options)) {}

RedisOptions Discovery::SentinelOptions(size_t i) const {
  return SentinelConnectionOptions(options_, tls_, i);
}

std::string Discovery::Describe() const { return lookup_->Describe(); }

Result<Discovery::Master> Discovery::Find() {
  uint64_t seen;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (known_) return Master{master_, epoch()};
    seen = lookups_;
  }
  std::lock_guard<std::mutex> lookup(lookup_mu_);
  bool demote;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A lookup finished while this one waited: its answer is this one's.
    if (known_) return Master{master_, epoch()};
    if (lookups_ != seen && !last_failure_.ok()) return last_failure_;
    demote = demote_;
    demote_ = false;
  }
  // The lookup's own state (its order) is touched under lookup_mu_ only.
  if (demote) lookup_->Demote();
  Result<Endpoint> asked = lookup_->Ask();
  std::lock_guard<std::mutex> lock(mu_);
  ++lookups_;
  last_failure_ = asked.status();
  if (!asked.ok()) return last_failure_;
  Take(*asked);
  return Master{master_, epoch()};
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
  demote_ = true;
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
