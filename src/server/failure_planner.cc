#include "server/failure_planner.h"

#include <algorithm>
#include <random>

#include "codec/job_codec.h"
#include "protocol/retry.h"

namespace reliableq::server {

FailurePlanner::FailurePlanner(const HandlerRegistry& registry, int max_retries, int max_snoozes,
                               const std::map<std::string, ClassRetry, std::less<>>& class_retries,
                               std::function<int(int n)> random_below,
                               const std::vector<DeathHandler>& death_handlers,
                               const base::Logger& log)
    : registry_(registry),
      max_retries_(max_retries),
      max_snoozes_(max_snoozes),
      class_retries_(class_retries),
      random_below_(std::move(random_below)),
      death_handlers_(death_handlers),
      log_(log) {}

void FailurePlanner::Plan(std::string_view payload, const std::string& queue,
                          const rapidjson::Document& document, JobError error,
                          std::vector<std::string> backtrace, std::optional<RetryIn> then,
                          double now, FinishedJob* done) const {
  thread_local std::mt19937 random{std::random_device{}()};
  done->outcome = Outcome::kFailed;
  done->error = error.error_class + ": " + error.message;

  std::string_view job_class;
  if (auto it = document.FindMember("class"); it->value.IsString()) {
    job_class = {it->value.GetString(), it->value.GetStringLength()};
  }
  const JobClassOptions* options = registry_.Options(job_class);
  std::function<RetryIn(int)> retry_in;
  if (options != nullptr && options->retry_in) {
    retry_in = [this, options, &error](int count) {
      try {
        return options->retry_in(count, error);
      } catch (const std::exception& e) {
        log_.Log(LogLevel::kWarn, base::LogEvent("retry_in_failed").WithError(e.what()),
                 "retry_in failed (%s): default schedule", e.what());
        return RetryIn::Default();
      }
    };
  }
  // The class's own schedule (--backoff, --retry-for) where no C++
  // retry_in says otherwise.
  const ClassRetry* policy = nullptr;
  if (auto it = class_retries_.find(job_class); it != class_retries_.end()) policy = &it->second;
  if (!retry_in && policy != nullptr && policy->backoff) {
    retry_in = [backoff = &*policy->backoff](int count) {
      return RetryIn::After(protocol::BackoffDelay(*backoff, count));
    };
  }
  std::optional<double> class_retry_for;
  if (policy != nullptr && policy->retry_for) {
    class_retry_for = static_cast<double>(policy->retry_for->count());
  }
  protocol::RandomBelow below = random_below_ ? protocol::RandomBelow(random_below_) : [](int n) {
    return std::uniform_int_distribution<int>(0, n - 1)(random);
  };
  protocol::FailurePlan plan =
      protocol::PlanFailure(document, max_retries_, now, class_retry_for, then, retry_in, below);

  codec::FailureInfo info;
  info.error_class = error.error_class;
  info.error_message = error.message;
  info.fetched_queue = queue;
  info.now = now;
  info.backtrace = std::move(backtrace);
  info.discarded = plan.discarded;
  Result<std::string> failed = codec::RecordFailure(payload, info);
  if (!failed.ok()) {
    // A payload Sidekiq could not retry either (say, a retry_count that is
    // not an integer): it goes to the dead set as it was, with the reason
    // in the log.
    done->updated_payload = std::string(payload);
    done->error += " (the payload cannot carry the failure: " + failed.status().message() + ")";
    done->action = protocol::FailureAction::kDead;
    done->score = now;
    return;
  }
  done->updated_payload = std::move(failed.value());
  done->action = plan.action;
  done->score = plan.action == protocol::FailureAction::kRetry ? plan.retry_at : now;
  if (!plan.exhausted && !plan.death) return;

  // Hooks see the job as it now stands, with the failure recorded.
  Result<codec::DecodedJob> failed_doc = codec::DecodeJob(done->updated_payload);
  if (!failed_doc.ok()) return;
  JobView failed_view(done->updated_payload, queue, failed_doc->document);
  auto guarded = [&](const char* what, const auto& hook) {
    try {
      hook(failed_view, error);
    } catch (const std::exception& e) {
      log_.Log(LogLevel::kWarn, base::LogEvent("hook_failed").WithError(e.what()), "%s threw: %s", what,
               e.what());
    } catch (...) {
      log_.Log(LogLevel::kWarn, "hook_failed", "%s threw", what);
    }
  };
  if (plan.exhausted && options != nullptr && options->on_retries_exhausted) {
    guarded("retries-exhausted hook", options->on_retries_exhausted);
  }
  if (plan.death) {
    for (const DeathHandler& handler : death_handlers_) guarded("death handler", handler);
  }
}

bool FailurePlanner::Snooze(std::string_view payload, const rapidjson::Document& document,
                            std::string_view job_class, std::chrono::milliseconds delay, double now,
                            JobError* error, FinishedJob* done) const {
  // A year at most: a score far beyond would never come, and a negative
  // delay is "now".
  constexpr std::chrono::milliseconds kLongestSnooze = std::chrono::hours(24 * 365);
  delay = std::clamp(delay, std::chrono::milliseconds(0), kLongestSnooze);
  int64_t count = 0;
  if (auto it = document.FindMember("snooze_count");
      it != document.MemberEnd() && it->value.IsInt64() && it->value.GetInt64() > 0) {
    count = it->value.GetInt64();
  }
  // A command or HTTP class is not in the registry: the server's bound.
  const JobClassOptions* options = registry_.Options(job_class);
  int most = options != nullptr && options->max_snoozes ? *options->max_snoozes : max_snoozes_;
  if (count >= most) {
    error->error_class = "Reliableq::SnoozedTooOften";
    error->message = "snoozed " + std::to_string(count) + " times, the most its class allows (" +
                     std::to_string(most) + "), and once more";
    return false;
  }
  Result<std::string> snoozed = codec::RecordSnooze(payload, count + 1);
  if (!snoozed.ok()) {
    error->error_class = "Reliableq::InvalidJob";
    error->message = snoozed.status().message();
    return false;
  }
  double seconds = std::chrono::duration<double>(delay).count();
  done->outcome = Outcome::kSnoozed;
  done->updated_payload = std::move(*snoozed);
  done->score = now + seconds;
  log_.Log(LogLevel::kInfo, "job_snoozed", "snoozed for %.3f s (%lld of %d)", seconds,
           static_cast<long long>(count + 1), most);
  return true;
}

}  // namespace reliableq::server
