// Periodic jobs: a job pushed on every tick of a cron schedule, declared by
// the workers (ServerOptions::periodic_jobs, `reliableq worker --periodic`,
// the config file's `periodic:` key). reliableq(1), "PERIODIC JOBS", has the
// semantics:
// - exactly one push per tick across all workers that declare the job, with
//   no leader: each submits every tick to one script that records the tick
//   and pushes the job together, or finds it done;
// - a tick missed while no worker ran is not pushed later, unless
//   catch_up: then a starting worker pushes the latest missed tick, once;
// - workers declaring the same name differently: the newest declaration
//   wins, the others push nothing and log `periodic_conflict`.
// The pushed job is the declared one plus "periodic":"<name>" and
// "periodic_tick":<the tick, epoch seconds>, so a handler can tell ticks
// apart (reliableq-schema(7), "Periodic jobs").
//
// Thread safety: plain values and pure functions.

#ifndef RELIABLEQ_PERIODIC_H_
#define RELIABLEQ_PERIODIC_H_

#include <string>
#include <string_view>

#include "reliableq/status.h"

namespace reliableq {

struct PeriodicJob {
  // Its name: unique among a worker's periodic jobs, part of Redis keys.
  // Printable ASCII without spaces, at most 200 bytes.
  std::string name;
  // 5 fields (minute hour day-of-month month day-of-week), or 6 with a
  // leading seconds field, or a macro such as @daily. reliableq(1).
  std::string cron;
  // The zone the fields are read in, an IANA name from the system's tzdata
  // ("Europe/Berlin"). A local time skipped when clocks go forward gives no
  // tick; a local time that occurs twice gives one, at the first.
  std::string time_zone = "UTC";
  // What is pushed, as Job (job.h) has it: the class (required), args (a
  // JSON array), the queue, retry ("true", "false" or a count, as
  // Retry::Parse reads it) and further fields (a JSON object, which must
  // not name "periodic", "periodic_tick" or a field set here). Each tick's
  // job gets a new jid.
  std::string job_class;
  std::string args = "[]";
  std::string queue = "default";
  std::string retry = "true";
  std::string extra = "{}";
  // True: a starting worker also pushes the latest tick before its start,
  // when that tick is later than every tick pushed so far (one replay at
  // most). False: ticks missed while no worker ran are never pushed.
  bool catch_up = false;
};

// kInvalidArgument with one line naming the job and the field ("periodic job
// \"report\": cron: minute field \"61\": 61 is out of range 0-59") when a
// declaration is bad: its name, cron, time zone or job.
Status CheckPeriodicJob(const PeriodicJob& job);

// The declaration of `name` from a JSON object with the keys cron (required),
// class (required), queue, args (an array), retry (true, false or a count),
// timezone, catch_up (true or false), extra (an object) and sequence (a
// key, written into extra as the job field "sequence": each tick runs after
// the one before it is done; job.h, Sequence). Checked as by
// CheckPeriodicJob; an unknown key or a value of the wrong type is
// kInvalidArgument naming it.
Result<PeriodicJob> ParsePeriodicJob(std::string_view name, std::string_view json);

}  // namespace reliableq

#endif  // RELIABLEQ_PERIODIC_H_
