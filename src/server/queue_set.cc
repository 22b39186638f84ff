#include "server/queue_set.h"

#include <algorithm>

namespace reliableq {

QueueSet::QueueSet(const std::vector<QueueSpec>& specs, const Keys& keys,
                   std::string_view identity) {
  for (const QueueSpec& spec : specs) {
    queues_.push_back(
        {spec.name, spec.weight, Keys::Queue(spec.name), keys.Working(identity, spec.name)});
    names_.push_back(spec.name);
    if (spec.weight > 0) weighted_ = true;
  }
}

std::vector<uint32_t> QueueSet::FetchOrder(std::mt19937_64& random) const {
  std::vector<uint32_t> order;
  order.reserve(queues_.size());
  if (!weighted_) {
    for (uint32_t i = 0; i < queues_.size(); ++i) order.push_back(i);
    return order;
  }
  std::vector<uint32_t> repeated;
  for (uint32_t i = 0; i < queues_.size(); ++i) {
    for (int w = 0; w < std::max(1, queues_[i].weight); ++w) repeated.push_back(i);
  }
  std::shuffle(repeated.begin(), repeated.end(), random);
  std::vector<bool> seen(queues_.size(), false);
  for (uint32_t i : repeated) {
    if (!seen[i]) {
      seen[i] = true;
      order.push_back(i);
    }
  }
  return order;
}

}  // namespace reliableq
