#include "server/job_timeouts.h"

#include <cmath>

namespace reliableq::server {

namespace {

// A day, as the worker's other durations (kMaxDuration in options_check.h).
constexpr double kMaxTimeoutSeconds = 86400;

}  // namespace

TimeoutPolicy::TimeoutPolicy(Timeouts by_class) : by_class_(std::move(by_class)) {
  auto it = by_class_.find("*");
  if (it != by_class_.end()) {
    default_ = it->second;
    by_class_.erase(it);
  }
}

Result<std::optional<std::chrono::milliseconds>> TimeoutPolicy::For(
    const rapidjson::Value& job, std::string_view job_class,
    std::chrono::milliseconds class_timeout) const {
  auto field = job.FindMember("timeout");
  if (field != job.MemberEnd() && !field->value.IsNull()) {
    double seconds = field->value.IsNumber() ? field->value.GetDouble() : -1;
    if (!(seconds > 0 && seconds <= kMaxTimeoutSeconds)) {
      return Status::InvalidArgument(
          "the job's timeout must be a number of seconds above 0 and at most 86400");
    }
    // At least a millisecond: 0.0001 s asks for a timeout, not none.
    return std::optional(
        std::chrono::milliseconds(std::max<long long>(1, std::llround(seconds * 1000))));
  }
  if (!by_class_.empty()) {
    auto it = by_class_.find(job_class);
    if (it != by_class_.end()) return std::optional(it->second);
  }
  if (class_timeout.count() > 0) return std::optional(class_timeout);
  return default_;
}

}  // namespace reliableq::server
