#include "reliableq/job.h"

#include <string>

#include "base/utf8.h"

namespace reliableq {

Status CheckQueueName(std::string_view name) {
  if (name.empty()) return Status::InvalidArgument("the queue name is empty");
  if (name.size() > kMaxQueueNameBytes) {
    return Status::InvalidArgument("the queue name is longer than " +
                                   std::to_string(kMaxQueueNameBytes) + " bytes (" +
                                   std::to_string(name.size()) + ")");
  }
  if (!base::IsValidUtf8(name)) return Status::InvalidArgument("the queue name is not UTF-8");
  return Status::OK();
}

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
