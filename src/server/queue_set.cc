#include "server/queue_set.h"

#include <algorithm>

namespace reliableq::server {

bool IsQueueNamespace(std::string_view spec) { return !spec.empty() && spec.back() == '*'; }

QueueSet::QueueSet(const std::vector<QueueSpec>& specs, const protocol::Keys& keys,
                   std::string_view identity)
    : keys_(keys), identity_(identity) {
  for (const QueueSpec& spec : specs) {
    if (spec.weight > 0) weighted_ = true;
    if (IsQueueNamespace(spec.name)) {
      slots_.push_back({true, static_cast<uint32_t>(namespaces_.size())});
      namespaces_.push_back({spec.name.substr(0, spec.name.size() - 1), spec.weight});
      members_.emplace_back();
      continue;
    }
    slots_.push_back({false, static_cast<uint32_t>(queues_.size())});
    queues_.push_back(
        {spec.name, spec.weight, keys.Queue(spec.name), keys.Working(identity, spec.name)});
    names_.push_back(spec.name);
    by_name_.emplace(spec.name, static_cast<uint32_t>(by_name_.size()));
  }
  published_ = queues_.size();
}

std::optional<uint32_t> QueueSet::Find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

bool QueueSet::Matches(std::string_view name) const {
  if (name.empty()) return false;
  bool matched = false;
  for (const QueueNamespace& ns : namespaces_) {
    if (name.substr(0, ns.prefix.size()) == ns.prefix) matched = true;
  }
  return matched && !Find(name).has_value();
}

uint32_t QueueSet::Add(std::string_view name) {
  // The first namespace in the order given that matches owns it.
  uint32_t owner = 0;
  for (uint32_t n = 0; n < namespaces_.size(); ++n) {
    if (name.substr(0, namespaces_[n].prefix.size()) == namespaces_[n].prefix) {
      owner = n;
      break;
    }
  }
  auto index = static_cast<uint32_t>(queues_.size());
  std::string text(name);
  queues_.push_back({text, namespaces_[owner].weight, keys_.Queue(text),
                     keys_.Working(identity_, text), paused_names_.contains(text)});
  names_.push_back(text);
  by_name_.emplace(text, index);
  std::vector<uint32_t>& members = members_[owner];
  auto at = std::lower_bound(members.begin(), members.end(), text,
                             [this](uint32_t i, const std::string& n) { return names_[i] < n; });
  members.insert(at, index);
  return index;
}

void QueueSet::Publish(size_t count) { published_ = std::max(published_, std::min(count, size())); }

std::vector<uint32_t> QueueSet::SetPaused(const std::vector<std::string>& paused) {
  paused_names_ = std::unordered_set<std::string>(paused.begin(), paused.end());
  std::vector<bool> now(queues_.size(), false);
  for (const std::string& name : paused) {
    if (std::optional<uint32_t> q = Find(name)) now[*q] = true;
  }
  std::vector<uint32_t> changed;
  for (uint32_t q = 0; q < queues_.size(); ++q) {
    if (queues_[q].paused != now[q]) {
      queues_[q].paused = now[q];
      changed.push_back(q);
    }
  }
  return changed;
}

std::vector<uint32_t> QueueSet::FetchOrder(std::mt19937_64& random) const {
  std::vector<uint32_t> order;
  order.reserve(published_);
  for (const Slot& slot : slots_) {
    if (!slot.is_namespace) {
      if (!queues_[slot.index].paused) order.push_back(slot.index);
      continue;
    }
    for (uint32_t i : members_[slot.index]) {
      if (i < published_ && !queues_[i].paused) order.push_back(i);
    }
  }
  if (!weighted_) return order;
  std::vector<uint32_t> repeated;
  for (uint32_t i : order) {
    for (int w = 0; w < std::max(1, queues_[i].weight); ++w) repeated.push_back(i);
  }
  std::shuffle(repeated.begin(), repeated.end(), random);
  std::vector<bool> seen(queues_.size(), false);
  order.clear();
  for (uint32_t i : repeated) {
    if (!seen[i]) {
      seen[i] = true;
      order.push_back(i);
    }
  }
  return order;
}

}  // namespace reliableq::server
