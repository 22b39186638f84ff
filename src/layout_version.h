// The layout version: which key layout and script semantics the data in a
// Redis follows, recorded at <prefix>schema (reliableq-schema(7), LAYOUT
// VERSION), so that processes of different releases never work the same
// keys two different ways.
//
// Rule: a process writes reliableq's own keys (working lists, heartbeats,
// the registry) and moves jobs between them only when Redis records the
// layout this build runs. No record means layout 1 (the data of releases
// before the record existed). A worker at start writes its own layout when
// there is no record (SET NX); one that finds another refuses to start,
// naming both, and a janitor pass (which only reads the record, so that a
// pass with nothing to do writes nothing) refuses to move anything. A rolling upgrade to a new layout
// therefore runs in two steps: first every process is replaced by a release
// that runs the old layout and also knows the new one; then one command
// migrates the keys and changes the record (the next release that changes
// the layout brings that command, `reliableq migrate`).
//
// Thread safety: pure functions, and ClaimLayout on the calling thread's
// connection.

#ifndef RELIABLEQ_LAYOUT_VERSION_H_
#define RELIABLEQ_LAYOUT_VERSION_H_

#include <optional>
#include <string>
#include <string_view>

#include "keys.h"
#include "redis/connection.h"
#include "reliableq/status.h"

namespace reliableq {

// The layout this build reads and writes. 1: Sidekiq's keys and reliableq's
// prefixed keys on one Redis, as reliableq-schema(7) lists them.
inline constexpr int kLayoutVersion = 1;

// Whether a process of this build may work on a Redis whose record holds
// `recorded` (nullopt: no record, layout 1). OK for kLayoutVersion;
// otherwise kInvalidArgument with a one-line reason naming the record's
// key, what it holds (escaped, cut short), what this build runs, and what
// to do.
Status CheckLayout(const std::optional<std::string>& recorded, std::string_view key);

// Reads the record at keys.Schema() and checks it (CheckLayout); with
// `record`, first writes kLayoutVersion there when there is none. Redis
// errors as the connection reports them.
Status VerifyLayout(redis::Connection& redis, const Keys& keys, bool record);

}  // namespace reliableq

#endif  // RELIABLEQ_LAYOUT_VERSION_H_
