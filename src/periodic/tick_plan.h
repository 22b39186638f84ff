// The pure bookkeeping of periodic jobs: which ticks a worker owes, what it
// records as a job's definition, and the payload of a tick. The scheduler
// (src/server/periodic_scheduler.h) does the I/O.
//
// Thread safety: plain functions over values.

#ifndef RELIABLEQ_PERIODIC_TICK_PLAN_H_
#define RELIABLEQ_PERIODIC_TICK_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "periodic/cron.h"
#include "reliableq/job.h"
#include "reliableq/periodic.h"
#include "reliableq/status.h"

namespace reliableq::periodic {

// The ticks a worker owes: every tick in (cursor, now], in order, but at
// most `max` of them, the latest; the earlier ones are skipped (a loop that
// stalled for an hour must not push 3600 jobs). `skipped` counts them (at
// most 1,000,000), first_skipped and last_skipped bound them.
struct OwedTicks {
  std::vector<int64_t> ticks;
  int64_t skipped = 0;
  int64_t first_skipped = 0;
  int64_t last_skipped = 0;
};
OwedTicks TicksOwed(const CronSchedule& cron, int64_t cursor, int64_t now, size_t max);

// What a worker records of its declaration (the fields of
// `periodic:<name>`): the job as pushed, minus its per-tick fields, and a
// digest over all of it, which workers compare to tell declarations apart.
struct PeriodicDefinition {
  std::string cron;
  std::string time_zone;
  std::string job_class;
  std::string queue;
  std::string args;
  std::string retry;
  std::string digest;  // 16 hex digits
};
// Precondition: CheckPeriodicJob(job) is OK. Two declarations that differ
// only in the spelling of their JSON (spaces) have the same digest.
PeriodicDefinition DefinitionOf(const PeriodicJob& job);

// The declared job as a Job; kInvalidArgument when its retry does not
// parse.
Result<Job> JobOf(const PeriodicJob& job);

// The job JSON pushed for `tick`: the declared job with a new jid,
// created_at and enqueued_at = now, then "periodic":"<name>" and
// "periodic_tick":<tick> before the declared extra fields.
Result<std::string> TickPayload(const PeriodicJob& job, int64_t tick, double now);

}  // namespace reliableq::periodic

#endif  // RELIABLEQ_PERIODIC_TICK_PLAN_H_
