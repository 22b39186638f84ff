// JobReport: what one processor's running job says about itself besides
// how it ends (JobView::SetResult, ReportProgress): its result, for its
// final record, and its progress, which the heartbeat writes into Sidekiq's
// work hash. The handler writes from its thread; the loop thread reads the
// progress for each beat, and the processor takes the result when the job
// ends.
//
// Thread safety: every method from any thread (one mutex, held briefly).

#ifndef RELIABLEQ_SERVER_JOB_REPORT_H_
#define RELIABLEQ_SERVER_JOB_REPORT_H_

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "codec/job_record.h"
#include "reliableq/clock.h"
#include "reliableq/handler.h"

namespace reliableq::server {

class JobReport final : public JobReporter {
 public:
  // `progress_changed` is set on each progress report (the loop's cue to
  // beat sooner); it and `clock` outlive the report.
  JobReport(const Clock& clock, std::atomic<bool>& progress_changed)
      : clock_(clock), progress_changed_(progress_changed) {}

  void Result(std::string_view json) override;
  void Progress(double percent, std::string_view message) override;

  // Forgets the last job's result and progress (before the next job).
  void Clear();
  // The result given (JSON), or "" when none; taken once.
  std::string TakeResult();
  std::optional<codec::JobProgress> progress() const;

 private:
  const Clock& clock_;
  std::atomic<bool>& progress_changed_;
  // Something was reported since the last Clear: a job that reports
  // nothing costs no lock.
  std::atomic<bool> reported_{false};
  mutable std::mutex mu_;
  std::string result_;                          // guarded by mu_
  std::optional<codec::JobProgress> progress_;  // guarded by mu_
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_JOB_REPORT_H_
