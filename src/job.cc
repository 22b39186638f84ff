#include "reliableq/job.h"

#include <string>

namespace reliableq {

Result<Retry> Retry::Parse(std::string_view text) {
  if (text == "true") return Enabled();
  if (text == "false") return Disabled();
  // Nine digits at most, so the count always fits an int.
  if (text.empty() || text.size() > 9) {
    return Status::InvalidArgument(
        "retry must be true, false or a count from 0 to 999999999, not '" + std::string(text) +
        "'");
  }
  int n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') {
      return Status::InvalidArgument("retry must be true, false or a non-negative count, not '" +
                                     std::string(text) + "'");
    }
    n = n * 10 + (c - '0');
  }
  return Times(n);
}

std::string Retry::ToJson() const {
  switch (kind_) {
    case kEnabled: return "true";
    case kDisabled: return "false";
    case kTimes: return std::to_string(times_);
  }
  return "true";
}

}  // namespace reliableq
