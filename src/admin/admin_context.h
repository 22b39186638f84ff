// What the parts of Admin share: the one connection, the key names of the
// prefix and group, the clock, and the reading of error replies. Each part
// (job_sets.h, queues.h, processes.h, limiters.h, periodic_jobs.h,
// audit_trail.h, stats_reader.h) holds a reference to the one context
// AdminImpl owns. Private: callers use include/reliableq/admin.h.
//
// Thread safety: one per Admin, used by one thread at a time, as Admin.

#ifndef RELIABLEQ_ADMIN_ADMIN_CONTEXT_H_
#define RELIABLEQ_ADMIN_ADMIN_CONTEXT_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/keys.h"
#include "protocol/script_calls.h"
#include "redis/connection.h"
#include "redis/reply.h"
#include "reliableq/clock.h"
#include "reliableq/dead_set.h"
#include "reliableq/status.h"

namespace reliableq::admin {

struct AdminContext {
  std::unique_ptr<redis::Connection> redis;
  protocol::Keys keys;
  std::shared_ptr<const Clock> clock;

  // A reply read on `redis` (a pipelined error reply comes in place) as a
  // Status naming `what` when it is an error; OK otherwise.
  Status CheckReply(redis::ReplyRef reply, std::string_view what) const;
  // The failure of a pipeline's `replies` in the context `what`, or its
  // first error reply named by its command and first argument; OK
  // otherwise.
  Status Failed(const Result<std::vector<redis::ReplyPtr>>& replies,
                const std::vector<redis::Argv>& commands, std::string_view what) const;
  // The members of the set `key` (SMEMBERS), sorted by name; a failure in
  // the context `what`.
  Result<std::vector<std::string>> SortedMembers(const std::string& key,
                                                 std::string_view what) const;
  // One clear.lua call: deletes the job set `key` (`queue` empty) or the
  // queue `queue` (key: its list) and its name in `queues`.
  Result<protocol::ClearReply> Clear(std::string_view key, std::string_view queue) const;
};

// kInvalidArgument for unusable dead-set limits (max_jobs below 1, a
// negative timeout).
Status CheckDeadLimits(const DeadSetLimits& limits);

// `score` in fixed notation, the shortest text that reads back as the same
// double (so ZRANGEBYSCORE with it meets the member's exact score).
std::string ScoreText(double score);

}  // namespace reliableq::admin

#endif  // RELIABLEQ_ADMIN_ADMIN_CONTEXT_H_
