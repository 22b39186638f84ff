// Job flow fields as a processor reads them from the payload it already
// parsed: when the job expires (expires_at, or expires_in after
// created_at), and whether it holds a unique or sequence key. ReadJobFlow
// and Expired are pure; DiscardIfExpired logs and counts what they found.
//
// A malformed expiry field (not a number, expires_in without a numeric
// created_at) is ignored with a warning: the job runs, as it would have
// without the field (reliableq(1), EXPIRY).
//
// Thread safety: plain functions over values.

#ifndef RELIABLEQ_SERVER_JOB_EXPIRY_H_
#define RELIABLEQ_SERVER_JOB_EXPIRY_H_

#include <rapidjson/document.h>

#include <optional>
#include <string>
#include <string_view>

#include "base/log.h"
#include "metrics/worker_metrics.h"
#include "server/worker_jobs.h"

namespace reliableq::server {

struct JobFlow {
  // When the job expires (epoch seconds); unset when it does not.
  std::optional<double> expires_at;
  // Why an expiry field was ignored; empty when none was.
  std::string ignored;
  // The payload names a unique key ("unique_key"), a feature marker:
  // finish.lua ends the run and releases it.
  bool unique = false;
  // The payload names a sequence key ("sequence"), a feature marker too:
  // the step that ends the job hands the key on.
  bool sequence = false;
  // That key as the scripts read it (lib/sequence.lua): the string, or an
  // integer's decimal text; empty when it is neither (nothing is gated).
  std::string sequence_key;
  // The last "jid" member when it is a string (the scripts' reading).
  std::string jid;
};

// One pass over the top-level members of `job` (a JSON object). expires_at
// wins over expires_in when both are given. Sidekiq 8 writes created_at in
// milliseconds (an integer above 1e11); earlier ones in seconds.
JobFlow ReadJobFlow(const rapidjson::Value& job);

// True when a job that expires at `flow.expires_at` may no longer start
// at `now`.
inline bool Expired(const JobFlow& flow, double now) {
  return flow.expires_at && now >= *flow.expires_at;
}

// For a processor about to start a job of `job_class` from `queue` at
// `now`: reads its flow fields into `done` (done->feature_marked). Returns true
// when the job has expired: it is then discarded unrun (done->outcome
// kExpired), logged as job_expired (INFO) and counted in `metrics` (when
// not null). An expiry field that cannot be read is logged
// (job_expiry_ignored, WARN) and ignored: the job runs.
bool DiscardIfExpired(const rapidjson::Value& document, std::string_view job_class,
                      std::string_view queue, double now, const base::Logger& log, metrics::WorkerMetrics* metrics,
                      FinishedJob* done);

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_JOB_EXPIRY_H_
