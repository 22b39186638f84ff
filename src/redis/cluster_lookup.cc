#include "redis/cluster_lookup.h"

#include <algorithm>
#include <memory>

#include "redis/connection.h"
#include "redis/key_slot.h"
#include "redis/reply.h"

namespace reliableq::redis {

namespace {

bool SameNode(const Endpoint& a, const Endpoint& b) { return a.host == b.host && a.port == b.port; }

// One node of a CLUSTER SLOTS range: [address, port, id, ...].
Result<Endpoint> ParseNode(const redisReply* node, const Endpoint& asked) {
  if (node->type != REDIS_REPLY_ARRAY || node->elements < 2 ||
      node->element[1]->type != REDIS_REPLY_INTEGER) {
    return Status::Protocol("answered CLUSTER SLOTS with a node that is not [address, port]");
  }
  const redisReply* address = node->element[0];
  std::string host = address->type == REDIS_REPLY_STRING ? std::string(View(address)) : "";
  if (host.empty() || host == "?") host = asked.host;
  long long port = node->element[1]->integer;
  if (port <= 0 || port > 65535) {
    return Status::Protocol("named a node with the port " + std::to_string(port));
  }
  return Endpoint{host, static_cast<int>(port), {}};
}

}  // namespace

Result<Endpoint> ParseClusterSlots(const redisReply* reply, int slot, const Endpoint& asked,
                                   std::vector<Endpoint>* nodes) {
  if (reply->type != REDIS_REPLY_ARRAY) {
    return Status::Protocol("answered CLUSTER SLOTS with a " + std::string(TypeName(reply)));
  }
  Result<Endpoint> owner = Status::NotFound("no node serves slot " + std::to_string(slot) +
                                            " (the cluster is not fully set up?)");
  for (size_t i = 0; i < reply->elements; ++i) {
    const redisReply* range = reply->element[i];
    if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
        range->element[0]->type != REDIS_REPLY_INTEGER ||
        range->element[1]->type != REDIS_REPLY_INTEGER) {
      return Status::Protocol("answered CLUSTER SLOTS with a range that is not [start, end, ...]");
    }
    for (size_t n = 2; n < range->elements; ++n) {
      Result<Endpoint> node = ParseNode(range->element[n], asked);
      if (!node.ok()) return node.status();
      nodes->push_back(*node);
      // The primary comes first in its range; the replicas follow.
      if (n == 2 && range->element[0]->integer <= slot && slot <= range->element[1]->integer) {
        owner = *node;
      }
    }
  }
  return owner;
}

ClusterLookup::ClusterLookup(const RedisOptions& options)
    : options_(options), slot_(ClusterSlot(options)), description_([&] {
        std::string text = "primary of slot " + std::to_string(ClusterSlot(options)) + " (key '" +
                           ClusterRouteKey(options) + "') of cluster ";
        for (size_t i = 0; i < options.cluster.seeds.size(); ++i) {
          const RedisClusterOptions::Address& seed = options.cluster.seeds[i];
          text += (i > 0 ? ", " : "") + Endpoint{seed.host, seed.port, {}}.Describe();
        }
        return text;
      }()) {
  for (const RedisClusterOptions::Address& seed : options.cluster.seeds) {
    Learn(Endpoint{seed.host, seed.port, {}});
  }
}

std::string ClusterLookup::Describe() const { return description_; }

RedisOptions ClusterLookup::NodeOptions(const Endpoint& node) const {
  RedisOptions options;
  options.host = node.host;
  options.port = node.port;
  options.username = options_.username;
  options.password = options_.password;
  options.connect_timeout = options_.connect_timeout;
  options.command_timeout = options_.connect_timeout;
  options.tls = options_.tls;
  return options;
}

void ClusterLookup::Learn(const Endpoint& node) {
  if (nodes_.size() >= kMaxNodes) return;
  for (const Endpoint& known : nodes_) {
    if (SameNode(known, node)) return;
  }
  nodes_.push_back(node);
}

Result<Endpoint> ClusterLookup::Ask() {
  // Every node's answer goes into the message: when none names the owner,
  // the operator needs to see which failed and how.
  std::string tried;
  bool all_timed_out = true;
  // nodes_ may grow while asking (a node names others): they are asked too.
  for (size_t n = 0; n < nodes_.size(); ++n) {
    Endpoint node = nodes_[n];
    Status why;
    Result<std::unique_ptr<Connection>> connection = Connection::Open(NodeOptions(node));
    if (connection.ok()) {
      Result<ReplyPtr> reply = (*connection)->Command({"CLUSTER", "SLOTS"});
      if (reply.ok()) {
        std::vector<Endpoint> named;
        Result<Endpoint> owner = ParseClusterSlots(reply->get(), slot_, node, &named);
        for (const Endpoint& other : named) Learn(other);
        if (owner.ok()) {
          // The node that answered is asked first next time.
          nodes_.erase(nodes_.begin() + static_cast<std::ptrdiff_t>(n));
          nodes_.insert(nodes_.begin(), node);
          named_by_ = node;
          return *owner;
        }
        why = owner.status();
      } else {
        why = reply.status();
      }
    } else {
      why = connection.status();
    }
    if (!why.IsTimeout()) all_timed_out = false;
    tried += (tried.empty() ? "" : "; ") + node.Describe() + ": " + why.message();
  }
  std::string message = "no cluster node named the " + Describe() + " (" + tried + ")";
  return all_timed_out ? Status::Timeout(message) : Status::IoError(message);
}

void ClusterLookup::Demote() {
  auto at = std::find_if(nodes_.begin(), nodes_.end(),
                         [&](const Endpoint& node) { return SameNode(node, named_by_); });
  if (at == nodes_.end()) return;
  nodes_.erase(at);
  nodes_.push_back(named_by_);
}

}  // namespace reliableq::redis
