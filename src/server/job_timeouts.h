// TimeoutPolicy: how long a job may run (reliableq(1), TIMEOUTS).
//
// In order, the first that is set: the job's own `timeout` field (seconds,
// as a client or Sidekiq's sidekiq_options put it in the payload); the
// server's timeout for its class (ServerOptions::job_timeouts); the class's
// own (JobClassOptions::timeout); the server's default ("*"). None: no
// timeout. Pure: no clock, no I/O.
//
// Thread safety: const after construction; any thread.

#ifndef RELIABLEQ_SERVER_JOB_TIMEOUTS_H_
#define RELIABLEQ_SERVER_JOB_TIMEOUTS_H_

#include <rapidjson/document.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "reliableq/status.h"

namespace reliableq::server {

class TimeoutPolicy {
 public:
  using Timeouts = std::map<std::string, std::chrono::milliseconds, std::less<>>;

  // `by_class`: ServerOptions::job_timeouts ("*" is the default).
  explicit TimeoutPolicy(Timeouts by_class);

  // The timeout of `job` (a parsed payload) of class `job_class` whose
  // class options say `class_timeout` (0: none). kInvalidArgument, saying
  // why, when the job's `timeout` is there but is not a number of seconds
  // above 0 and at most a day.
  Result<std::optional<std::chrono::milliseconds>> For(
      const rapidjson::Value& job, std::string_view job_class,
      std::chrono::milliseconds class_timeout) const;

 private:
  Timeouts by_class_;
  std::optional<std::chrono::milliseconds> default_;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_JOB_TIMEOUTS_H_
