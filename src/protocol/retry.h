// What happens to a job after its handler failed: Sidekiq's retry rules as
// a pure function of the job, the clock and a random source, so they test
// without Redis (data contract 3.3).

#ifndef RELIABLEQ_PROTOCOL_RETRY_H_
#define RELIABLEQ_PROTOCOL_RETRY_H_

#include <rapidjson/document.h>

#include <functional>
#include <optional>

#include "reliableq/handler.h"

namespace reliableq::protocol {

enum class FailureAction {
  kRetry,  // ZADD retry at retry_at
  kDead,   // to the dead set
  kDrop,   // gone: `retry` false, or the class said discard
};

struct FailurePlan {
  FailureAction action = FailureAction::kDead;
  double retry_at = 0;     // kRetry: epoch seconds
  int count = 0;           // the job's retry_count after this failure
  // Retries are used up: run the class's retries-exhausted hook.
  bool exhausted = false;
  // Run the death handlers (dead by exhaustion, `retry` false, or
  // discarded).
  bool death = false;
  // Dropped by a discard or a `dead` false: the payload gets discarded_at
  // (Sidekiq 8).
  bool discarded = false;
};

// A uniform integer in [0, n).
using RandomBelow = std::function<int(int n)>;

// Sidekiq's default delay before retry number `count` + 1:
// count^4 + 15 + rand(10) * (count + 1) seconds.
double DefaultRetryDelay(int count, const RandomBelow& random);

// Plans the fate of `job` (the payload as fetched, before the failure's
// bookkeeping) failing at `now`:
// - `retry` false: drop, death handlers run;
// - `retry` true (or absent): up to max_retries retries; N: up to N;
// - `retry_for` (seconds): exhausted once failed_at + retry_for < now;
// - `then` (the failure's own: JobRetry, JobDiscard, JobDead), else
//   `retry_in` (may be empty), can give its own delay (jitter is added),
//   discard the job (drop; the death handlers run, as in Sidekiq 8) or kill
//   it (exhausted now, as in Sidekiq 7); a discard or a kill holds even
//   when the retries are used up;
// - exhausted: the retries-exhausted hook and death handlers run, and the
//   job goes to the dead set unless its `dead` field is false (then it is
//   discarded).
FailurePlan PlanFailure(const rapidjson::Value& job, int max_retries, double now,
                        const std::optional<RetryIn>& then,
                        const std::function<RetryIn(int count)>& retry_in,
                        const RandomBelow& random);

}  // namespace reliableq::protocol

#endif  // RELIABLEQ_PROTOCOL_RETRY_H_
