// Limits: how many jobs of a kind may run at once across every worker of a
// Redis, and how many may start per period. Declared by the workers
// (ServerOptions::limits, `--limit NAME=SPEC`, the `limits:` config key);
// reliableq(1), LIMITS, describes what a job that cannot start does and
// the crash window.

#ifndef RELIABLEQ_LIMITS_H_
#define RELIABLEQ_LIMITS_H_

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "reliableq/status.h"

namespace reliableq {

// One limiter. At least one of `concurrency` and `rate` is set.
struct Limit {
  // Its name in Redis (`limit:<name>` keys) and in `reliableq limits`.
  // 1 to 100 bytes of [A-Za-z0-9_.:-].
  std::string name;
  // The job classes it applies to; empty: the class named `name`. A class
  // belongs to at most one limiter of a worker.
  std::vector<std::string> classes;
  // At most this many of its jobs running at once, across all workers
  // (0: no concurrency limit).
  int concurrency = 0;
  // At most `rate` starts in any window of `period` (0: no rate limit).
  int rate = 0;
  std::chrono::milliseconds period{0};

  // `classes`, or {name} when it is empty.
  std::vector<std::string> EffectiveClasses() const;
};

// Parses "NAME=SPEC", SPEC being comma-separated `concurrency=N`,
// `rate=R/PERIOD` (PERIOD: a number with the unit ms, s, m or h, e.g.
// `10/1s`, `100/1m`) and `classes=A,B` (last: every later item without
// `=` is one more class). E.g. `mail=rate=10/1s,classes=Mailer,Digest`.
// Errors: InvalidArgument with a one-line reason.
Result<Limit> ParseLimit(std::string_view text);

// The checks Server::Open makes of ServerOptions::limits: valid names,
// each limiter bounding something, no name or class declared twice.
Status CheckLimits(const std::vector<Limit>& limits);

// The definition a worker writes to the `limits` hash at start (JSON:
// name, classes, concurrency, rate, period in seconds).
std::string LimitDefinitionJson(const Limit& limit);

}  // namespace reliableq

#endif  // RELIABLEQ_LIMITS_H_
