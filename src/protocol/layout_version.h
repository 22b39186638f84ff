// The layout version: which key layout and script semantics the data in a
// Redis follows, recorded at Keys::Schema() (reliableq-schema(7), "Layout
// version"): "<prefix>schema" for layout 1, the group's own
// "<prefix>{<group>}:schema" for layout 2, so that processes of different
// releases, or of different layouts, never work the same keys two
// different ways.
//
// Rule: a process writes reliableq's own keys (working lists, heartbeats,
// the registry) and moves jobs between them only when Redis records the
// layout of the keys it uses (Keys::layout()). No record means layout 1 (the data of releases
// before the record existed); for a group, that no worker of it has started. A worker at start writes its own layout when
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

#ifndef RELIABLEQ_PROTOCOL_LAYOUT_VERSION_H_
#define RELIABLEQ_PROTOCOL_LAYOUT_VERSION_H_

#include <optional>
#include <string>
#include <string_view>

#include "protocol/keys.h"
#include "redis/connection.h"
#include "reliableq/status.h"

namespace reliableq::protocol {

// The layouts this build reads and writes. 1: Sidekiq's keys and
// reliableq's prefixed keys on one Redis, as reliableq-schema(7) lists them
// (no group). 2: one keyspace per queue group, every key under
// "<prefix>{<group>}:" (Keys with a group; Redis Cluster).
inline constexpr int kLayoutSidekiq = 1;
inline constexpr int kLayoutGroups = 2;
inline constexpr int kNewestLayout = kLayoutGroups;

// Whether a process using keys of layout `layout` may work on keys whose
// record holds `recorded` (nullopt: no record, layout 1). OK when they
// match; otherwise kInvalidArgument with a one-line reason naming the
// record's key, what it holds (escaped, cut short), what this process runs,
// and what to do.
Status CheckLayout(const std::optional<std::string>& recorded, std::string_view key,
                   int layout = kLayoutSidekiq);

// Reads the record at keys.Schema() and checks it against keys.layout()
// (CheckLayout); with `record`, first writes keys.layout() there when there
// is none. A group (layout 2) with no record is OK when it has no registry
// either (no process of it ever ran: a reader has nothing to move the wrong
// way), and refused when it has one. Redis errors as the connection reports
// them.
Status VerifyLayout(redis::Connection& redis, const Keys& keys, bool record);

}  // namespace reliableq::protocol

#endif  // RELIABLEQ_PROTOCOL_LAYOUT_VERSION_H_
