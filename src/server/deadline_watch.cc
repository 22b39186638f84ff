#include "server/deadline_watch.h"

#include <cstdio>
#include <cstdlib>

#include "codec/job_codec.h"

namespace reliableq::server {

namespace {

// EX_SOFTWARE: the process ended itself because a handler would not stop.
constexpr int kOverrunExitStatus = 70;

std::string_view StringField(const rapidjson::Document& document, const char* name) {
  auto it = document.FindMember(name);
  if (it == document.MemberEnd() || !it->value.IsString()) return {};
  return {it->value.GetString(), it->value.GetStringLength()};
}

}  // namespace

DeadlineWatch::DeadlineWatch(uv::EventLoop& loop, ProcessorPool& pool, OverrunAction on_overrun,
                             const Clock& clock, const base::Logger& log, metrics::WorkerMetrics* metrics)
    : pool_(pool),
      on_overrun_(on_overrun),
      clock_(clock),
      log_(log),
      metrics_(metrics),
      timer_(loop, [this] { Check(); }) {}

void DeadlineWatch::Start() { timer_.Start(kTick, kTick); }

void DeadlineWatch::Stop() { timer_.Close(); }

void DeadlineWatch::Check() {
  for (const DeadlineEvent& event : pool_.CheckDeadlines(clock_.Monotonic())) {
    // Only jobs that started have a deadline, so the payload decodes.
    Result<codec::DecodedJob> decoded = codec::DecodeJob(event.payload);
    if (!decoded.ok()) continue;
    std::string_view job_class = StringField(decoded->document, "class");
    std::string_view queue = StringField(decoded->document, "queue");
    base::JobLogContext context(job_class, StringField(decoded->document, "jid"), queue);
    double seconds = static_cast<double>(event.timeout.count()) / 1000;
    if (event.kind == DeadlineEvent::Kind::kTimedOut) {
      if (metrics_ != nullptr) metrics_->JobTimedOut(job_class);
      log_.Log(LogLevel::kWarn, "job_timeout", "timed out after %g s: its handler is asked to stop",
               seconds);
      continue;
    }
    if (on_overrun_ == OverrunAction::kExitProcess) {
      log_.Log(LogLevel::kError, "job_overrun_exit",
               "still running after its timeout (%g s) and the grace after it: the process "
               "exits (status %d), and the janitor gives its jobs back to their queues",
               seconds, kOverrunExitStatus);
      std::fflush(nullptr);
      // No destructors, no hand-back: this job must not go back while its
      // thread runs. The supervisor kills the command handlers' groups.
      std::_Exit(kOverrunExitStatus);
    }
    log_.Log(LogLevel::kError, "job_overrun",
             "still running after its timeout (%g s) and the grace after it: a C++ handler "
             "cannot be stopped from outside; its thread stays busy until it returns",
             seconds);
  }
}

}  // namespace reliableq::server
