#include "server/job_report.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "base/utf8.h"

namespace reliableq::server {

namespace {

// A progress message is a short line for a dashboard, not a log.
constexpr size_t kMaxProgressMessage = 200;

}  // namespace

void JobReport::Result(std::string_view json) {
  // Checked and made one JSON value here, on the handler's thread.
  std::string value = codec::JsonValueOf(json);
  std::lock_guard<std::mutex> lock(mu_);
  result_ = std::move(value);
  reported_.store(true, std::memory_order_relaxed);
}

void JobReport::Progress(double percent, std::string_view message) {
  codec::JobProgress progress;
  progress.percent = std::isfinite(percent) ? std::clamp(percent, 0.0, 100.0) : 0.0;
  progress.message = base::Scrub(message, kMaxProgressMessage);
  progress.at = clock_.Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    progress_ = std::move(progress);
    reported_.store(true, std::memory_order_relaxed);
  }
  progress_changed_.store(true, std::memory_order_release);
}

void JobReport::Clear() {
  // Only the processor thread that runs the jobs calls Clear, between them.
  if (!reported_.exchange(false, std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(mu_);
  result_.clear();
  progress_.reset();
}

std::string JobReport::TakeResult() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(result_, std::string());
}

std::optional<codec::JobProgress> JobReport::progress() const {
  std::lock_guard<std::mutex> lock(mu_);
  return progress_;
}

}  // namespace reliableq::server
