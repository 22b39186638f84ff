#include "protocol/retry.h"

#include <cmath>
#include <cstdint>
#include <limits>

namespace reliableq::protocol {

double DefaultRetryDelay(int count, const RandomBelow& random) {
  double c = count;
  return c * c * c * c + 15 + random(10) * (c + 1);
}

namespace {

// retry_count + 1 for an integer count (RecordFailure also reads an
// integral float such as 3.0 as one), kept within int so that a hostile
// count near or beyond INT_MAX is simply exhausted; 0 when there is none.
int CountAfterFailure(const rapidjson::Value* retry_count) {
  if (retry_count == nullptr) return 0;
  int64_t count;
  if (retry_count->IsInt64()) {
    count = retry_count->GetInt64();
  } else if (retry_count->IsDouble() && std::trunc(retry_count->GetDouble()) ==
                                            retry_count->GetDouble() &&
             std::fabs(retry_count->GetDouble()) < 9.0e15) {
    count = static_cast<int64_t>(retry_count->GetDouble());
  } else {
    return 0;
  }
  if (count >= std::numeric_limits<int>::max()) return std::numeric_limits<int>::max();
  if (count < std::numeric_limits<int>::min()) return std::numeric_limits<int>::min();
  return static_cast<int>(count + 1);
}

}  // namespace

FailurePlan PlanFailure(const rapidjson::Value& job, int max_retries, double now,
                        const std::optional<RetryIn>& then,
                        const std::function<RetryIn(int count)>& retry_in,
                        const RandomBelow& random) {
  FailurePlan plan;
  auto field = [&job](const char* name) -> const rapidjson::Value* {
    auto it = job.FindMember(name);
    return it == job.MemberEnd() ? nullptr : &it->value;
  };
  plan.count = CountAfterFailure(field("retry_count"));

  // Ruby truthiness: only false and nil turn retries off; 0 is truthy and
  // sends the first failure to the dead set.
  const rapidjson::Value* retry = field("retry");
  if (retry != nullptr && (retry->IsFalse() || retry->IsNull())) {
    plan.action = FailureAction::kDrop;
    plan.death = true;
    return plan;
  }
  // The failure said discard: whatever retries are left or used up.
  if (then && then->kind() == RetryIn::Kind::kDiscard) {
    plan.action = FailureAction::kDrop;
    plan.death = true;
    plan.discarded = true;
    return plan;
  }
  int max = max_retries;
  if (retry != nullptr && retry->IsInt()) max = retry->GetInt();

  bool exhausted;
  const rapidjson::Value* retry_for = field("retry_for");
  if (retry_for != nullptr && retry_for->IsNumber()) {
    const rapidjson::Value* failed_at = field("failed_at");
    double first = failed_at != nullptr && failed_at->IsNumber() ? failed_at->GetDouble() : now;
    // Sidekiq 8 writes its timestamps as integer milliseconds; every earlier
    // version, and reliableq, as float seconds.
    if (failed_at != nullptr && (failed_at->IsInt64() || failed_at->IsUint64()) && first > 1e12) {
      first /= 1000;
    }
    exhausted = first + retry_for->GetDouble() < now;
  } else {
    exhausted = plan.count >= max;
  }

  if (then && then->kind() == RetryIn::Kind::kKill) exhausted = true;
  if (!exhausted) {
    RetryIn custom = then ? *then : retry_in ? retry_in(plan.count) : RetryIn::Default();
    switch (custom.kind()) {
      case RetryIn::Kind::kDiscard:
        plan.action = FailureAction::kDrop;
        plan.death = true;
        plan.discarded = true;
        return plan;
      case RetryIn::Kind::kKill:
        break;  // as Sidekiq 7: the exhausted path below, now
      case RetryIn::Kind::kAfter:
        if (custom.seconds() > 0) {
          plan.action = FailureAction::kRetry;
          plan.retry_at = now + custom.seconds() + random(10) * (plan.count + 1);
          return plan;
        }
        [[fallthrough]];
      case RetryIn::Kind::kDefault:
        plan.action = FailureAction::kRetry;
        plan.retry_at = now + DefaultRetryDelay(plan.count, random);
        return plan;
    }
  }
  plan.exhausted = true;
  plan.death = true;
  const rapidjson::Value* dead = field("dead");
  plan.discarded = dead != nullptr && dead->IsFalse();
  plan.action = plan.discarded ? FailureAction::kDrop : FailureAction::kDead;
  return plan;
}

}  // namespace reliableq::protocol
