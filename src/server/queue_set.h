// QueueSet: the queues one worker serves, with the keys of each (its
// Sidekiq queue and this process's working list), and the order a fetch
// tries them in. Pure.
//
// A queue spec is a plain name, or a namespace: a name ending in "*"
// ("cronjob:*") stands for every queue whose name starts with what comes
// before the "*", as the queues appear in Sidekiq's `queues` set (the
// GitLab convention). Only a final "*" makes a namespace; a plain name is
// always exactly one queue, and a queue named both ways is served once, by
// its plain name. The queues of a namespace are added as they are found
// (Add), and take part in fetches only once the registry lists them
// (Publish), so that a janitor always finds every working list a job may be
// in.
//
// Strict (no weights): always the order given, a namespace's queues at its
// place, by name. Weighted: Sidekiq's order, each queue repeated `weight`
// times (a namespace's weight is each of its queues'), shuffled, first
// occurrences kept, so queue q comes first with probability weight_q / sum;
// a queue of weight 0 in a weighted set counts as weight 1, as in Sidekiq.
//
// A paused queue (`reliableq queue pause`, the `paused` set) is left out of
// every fetch order until it is resumed; its index and keys stay, so the
// jobs already taken from it finish and are acknowledged as usual.
//
// Thread safety: none; the server's loop thread owns it. Indexes and the
// ServedQueue references stay valid as queues are added.

#ifndef RELIABLEQ_SERVER_QUEUE_SET_H_
#define RELIABLEQ_SERVER_QUEUE_SET_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "protocol/keys.h"
#include "reliableq/server.h"

namespace reliableq::server {

struct ServedQueue {
  std::string name;
  int weight = 0;
  std::string queue_key;    // queue:<name>
  std::string working_key;  // this process's working list for it
  bool paused = false;      // left out of fetches (`reliableq queue pause`)
};

struct QueueNamespace {
  std::string prefix;  // the spec without its final "*"
  int weight = 0;
};

// Whether a queue spec names a namespace (ends in "*").
bool IsQueueNamespace(std::string_view spec);

class QueueSet {
 public:
  QueueSet(const std::vector<QueueSpec>& specs, const protocol::Keys& keys, std::string_view identity);

  // Every queue known, published or not.
  size_t size() const { return queues_.size(); }
  const ServedQueue& operator[](size_t i) const { return queues_[i]; }
  // The names of queues [0, size()), in index order.
  const std::vector<std::string>& names() const { return names_; }
  bool weighted() const { return weighted_; }
  // The key names every queue's keys were built with.
  const protocol::Keys& keys() const { return keys_; }
  const std::vector<QueueNamespace>& namespaces() const { return namespaces_; }

  // A namespace matches `name` and it is not known yet.
  bool Matches(std::string_view name) const;
  // Adds a queue a namespace matches (Matches must be true); its index.
  uint32_t Add(std::string_view name);
  // Queues [0, count) are listed in the registry and may be fetched from.
  void Publish(size_t count);
  size_t published() const { return published_; }
  std::optional<uint32_t> Find(std::string_view name) const;

  // Marks the queues named in `paused` paused and every other one not;
  // names this worker does not serve yet are kept for the queues Add finds
  // later. Returns the indexes whose state changed.
  std::vector<uint32_t> SetPaused(const std::vector<std::string>& paused);
  bool paused(uint32_t queue) const { return queues_[queue].paused; }

  // The indexes of every published queue that is not paused, in the order
  // the next fetch tries them.
  std::vector<uint32_t> FetchOrder(std::mt19937_64& random) const;

 private:
  // One entry of the order given: a plain queue, or namespace n's queues.
  struct Slot {
    bool is_namespace = false;
    uint32_t index = 0;  // the queue's, or the namespace's
  };

  const protocol::Keys keys_;
  const std::string identity_;
  std::deque<ServedQueue> queues_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> by_name_;
  std::vector<QueueNamespace> namespaces_;
  // Per namespace, its queues' indexes sorted by name.
  std::vector<std::vector<uint32_t>> members_;
  std::vector<Slot> slots_;
  size_t published_ = 0;
  bool weighted_ = false;
  std::unordered_set<std::string> paused_names_;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_QUEUE_SET_H_
