// LabelBounder: keeps the label values of a metric to a set known up front.
// Class names come from job payloads, and the queues of a namespace
// (`-q 'card:*'`) from whoever pushes to a new queue of it: each distinct
// value would be a new time series, so a worker that labelled by them as
// they came could be made to grow without bound. Names in the set map to
// themselves, a queue a namespace matches to the namespace's spec
// ("card:*"), anything else to "other".
//
// Pure and immutable after construction: any thread may call the readers.

#ifndef RELIABLEQ_METRICS_LABEL_BOUNDER_H_
#define RELIABLEQ_METRICS_LABEL_BOUNDER_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace reliableq::metrics {

class LabelBounder {
 public:
  // The value every name outside the set is counted under.
  static constexpr std::string_view kOther = "other";

  // Duplicates are kept once. A name equal to "other" is allowed and then
  // shares the "other" index.
  explicit LabelBounder(std::vector<std::string> names);
  // A worker's queue specs (QueueSpec::name): a name ending in "*" is a
  // namespace, the label of every name that starts with what precedes the
  // "*" (the first namespace given that matches) unless it is in the set.
  static LabelBounder ForQueues(std::vector<std::string> specs);

  // Number of indexes: the names, plus one for "other" (other_index()).
  size_t size() const { return names_.size() + 1; }
  size_t other_index() const { return names_.size(); }
  // The index of `name`, or other_index(). No allocation (a binary search).
  size_t Index(std::string_view name) const;
  // The label value of an index from Index().
  std::string_view Name(size_t index) const;
  // Name(Index(name)).
  std::string_view Bound(std::string_view name) const { return Name(Index(name)); }

 private:
  std::vector<std::string> names_;  // sorted, unique, without "other"
  // ForQueues: each namespace's prefix and the index of its spec, in the
  // order given.
  std::vector<std::pair<std::string, size_t>> namespaces_;
};

}  // namespace reliableq::metrics

#endif  // RELIABLEQ_METRICS_LABEL_BOUNDER_H_
