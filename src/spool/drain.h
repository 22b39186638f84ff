// DrainFile: pushes the spooled jobs of one journal file to Redis, oldest
// first, with the same payloads a push would have sent, to its queue or
// into schedule, with push_once.lua (the call comes from script_calls.h),
// and records what became of each in the file. Used by a Client's drainer
// thread and by `reliableq spool drain`.
//
// Each job is its own script call, so that one job Redis refuses does not
// take others with it; up to DrainConfig::chunk_jobs calls go in one round
// trip, and one durable record of their outcomes follows the round trip.
// What becomes of a job, by Redis's answer:
//   stored                        pushed: done
//   an error reply for a rule     dropped (logged and counted): refused
//   (kRefused)                    the same way on every try
//   any other error reply         held (logged; shown by `spool status`):
//   (WRONGTYPE, OOM, ...)         kept, tried again after held_retry, while
//                                 the jobs after it go on
//   cannot serve now (LOADING,    pending: the drain stops and reports it
//   READONLY, BUSY, ...), no
//   reply, no connection
// A job whose push Redis ran but whose outcome was not recorded before a
// crash (or whose reply was lost), or whose first push landed after all,
// is pushed again by the next drain under the same jid; push_once.lua
// stores it only if no push of that jid ran within the replay window, so it
// runs once, or twice when that push was longer ago; never not at all.
//
// Thread safety: one drain per file at a time (the file's lock makes that
// so across processes); the connection is the caller's.

#ifndef RELIABLEQ_SPOOL_DRAIN_H_
#define RELIABLEQ_SPOOL_DRAIN_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "protocol/keys.h"
#include "base/log.h"
#include "redis/connection.h"
#include "reliableq/status.h"
#include "spool/journal.h"

namespace reliableq::spool {

struct DrainConfig {
  // The prefix of the wake-up channels the pushes publish on.
  protocol::Keys keys;
  // > 0: after each round trip, WAIT for this many replicas (at most
  // wait_timeout); a round trip's jobs count as pushed only once they have.
  int wait_replicas = 0;
  std::chrono::milliseconds wait_timeout{1000};
  // How long Redis keeps the record of each jid pushed (push_once.lua).
  std::chrono::seconds replay_window{3600};
  // With wait_replicas: while WAIT falls short, send WAIT again (for as long
  // as the connection holds and `stopping` says no) instead of leaving the
  // jobs pending, which would push them again.
  bool keep_waiting = false;
  // Jobs per round trip, and about how many payload bytes.
  size_t chunk_jobs = 256;
  size_t chunk_bytes = 4 << 20;
  // How long a held job waits before it is tried again.
  std::chrono::milliseconds held_retry{30000};
  // Where drops and holds are logged; none when null.
  const base::Logger* log = nullptr;
};

struct DrainCounts {
  int64_t pushed = 0;
  // Of those, the jobs an earlier push of their jid had stored already.
  int64_t already_stored = 0;
  int64_t dropped = 0;
  int64_t held = 0;  // jobs held (again) in this drain
  std::string last_held_reason;
};

// Drains `file` until nothing is pending (held jobs stay held) or a failure
// stops it. OK when everything pending was pushed, dropped or held. A
// failure is Redis's (it could not be reached or could not serve; the jobs
// left are pending) or, when file.drain_stalled() says so, the file's. Adds
// to *counts. `stopping`, checked between round trips, ends the drain early
// with kShutdown.
Status DrainFile(JournalFile* file, redis::Connection* redis, const DrainConfig& config,
                 const std::function<bool()>& stopping, DrainCounts* counts);

}  // namespace reliableq::spool

#endif  // RELIABLEQ_SPOOL_DRAIN_H_
