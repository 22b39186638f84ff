// FailurePlanner: what becomes of a job whose handler failed, or snoozed.
// Records the failure in the payload the way Sidekiq does, decides retry or
// dead (the job's retry option, its class's retry_in, the retry count), and
// calls the retries-exhausted hook and the death handlers; or counts the
// snooze and times it. Runs on processor threads, right after the handler,
// so the loop thread only sends the result.
//
// Thread safety: Plan and Snooze may be called from several threads at once; hooks and
// random_below must allow that.

#ifndef RELIABLEQ_SERVER_FAILURE_PLANNER_H_
#define RELIABLEQ_SERVER_FAILURE_PLANNER_H_

#include <rapidjson/document.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/log.h"
#include "reliableq/handler.h"
#include "reliableq/server.h"
#include "server/worker_jobs.h"

namespace reliableq::server {

class FailurePlanner {
 public:
  // The planner keeps references to `registry`, `class_retries`,
  // `death_handlers` and `log`.
  FailurePlanner(const HandlerRegistry& registry, int max_retries, int max_snoozes,
                 const std::map<std::string, ClassRetry, std::less<>>& class_retries,
                 std::function<int(int n)> random_below,
                 const std::vector<DeathHandler>& death_handlers, const base::Logger& log);

  // Sets done->outcome (kFailed), error, updated_payload, action and score
  // for the job `payload` fetched from `queue`, parsed as `document`, that
  // failed with `error` at `now` (epoch seconds); `then` is what the
  // failure itself said should become of it (JobFailure::then), which wins
  // over its class's retry_in. A payload that cannot carry the failure
  // (say, a retry_count that is not an integer) goes to the dead set as it
  // was, with the reason in done->error.
  void Plan(std::string_view payload, const std::string& queue, const rapidjson::Document& document,
            JobError error, std::vector<std::string> backtrace, std::optional<RetryIn> then,
            double now, FinishedJob* done) const;

  // A job of `job_class` that snoozed for `delay` at `now`: sets `done`
  // (kSnoozed, `payload` with snooze_count + 1, its time) and returns true;
  // or, snoozed more than its class allows (max_snoozes), sets `error` and
  // returns false, and it fails instead.
  bool Snooze(std::string_view payload, const rapidjson::Document& document,
              std::string_view job_class, std::chrono::milliseconds delay, double now,
              JobError* error, FinishedJob* done) const;

 private:
  const HandlerRegistry& registry_;
  int max_retries_;
  int max_snoozes_;
  const std::map<std::string, ClassRetry, std::less<>>& class_retries_;
  std::function<int(int n)> random_below_;  // empty: a generator per thread
  const std::vector<DeathHandler>& death_handlers_;
  const base::Logger& log_;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_FAILURE_PLANNER_H_
