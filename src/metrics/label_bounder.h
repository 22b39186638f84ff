// LabelBounder: keeps the label values of a metric to a set known up front.
// Class names come from job payloads, which anyone who can push a job
// chooses: each distinct value would be a new time series, so a worker that
// labelled by them as they came could be made to grow without bound. Names
// in the set map to themselves, anything else to "other".
//
// Pure and immutable after construction: any thread may call the readers.

#ifndef RELIABLEQ_METRICS_LABEL_BOUNDER_H_
#define RELIABLEQ_METRICS_LABEL_BOUNDER_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace reliableq {

class LabelBounder {
 public:
  // The value every name outside the set is counted under.
  static constexpr std::string_view kOther = "other";

  // Duplicates are kept once. A name equal to "other" is allowed and then
  // shares the "other" index.
  explicit LabelBounder(std::vector<std::string> names);

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
};

}  // namespace reliableq

#endif  // RELIABLEQ_METRICS_LABEL_BOUNDER_H_
