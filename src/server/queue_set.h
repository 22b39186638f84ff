// QueueSet: the queues one worker serves, with the keys of each (its
// Sidekiq queue and this process's working list), and the order a fetch
// tries them in. Pure.
//
// Strict (no weights): always the order given, so a job is taken from the
// first non-empty queue. Weighted: Sidekiq's order, each queue repeated
// `weight` times, shuffled, first occurrences kept, so queue q comes first
// with probability weight_q / sum; a queue of weight 0 in a weighted set
// counts as weight 1, as in Sidekiq.
//
// Thread safety: const after construction; FetchOrder uses the caller's
// generator.

#ifndef RELIABLEQ_SERVER_QUEUE_SET_H_
#define RELIABLEQ_SERVER_QUEUE_SET_H_

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "keys.h"
#include "reliableq/server.h"

namespace reliableq {

struct ServedQueue {
  std::string name;
  int weight = 0;
  std::string queue_key;    // queue:<name>
  std::string working_key;  // this process's working list for it
};

class QueueSet {
 public:
  QueueSet(const std::vector<QueueSpec>& specs, const Keys& keys, std::string_view identity);

  size_t size() const { return queues_.size(); }
  const ServedQueue& operator[](size_t i) const { return queues_[i]; }
  const std::vector<std::string>& names() const { return names_; }
  bool weighted() const { return weighted_; }

  // The indexes of every queue in the order the next fetch tries them.
  std::vector<uint32_t> FetchOrder(std::mt19937_64& random) const;

 private:
  std::vector<ServedQueue> queues_;
  std::vector<std::string> names_;
  bool weighted_ = false;
};

}  // namespace reliableq

#endif  // RELIABLEQ_SERVER_QUEUE_SET_H_
