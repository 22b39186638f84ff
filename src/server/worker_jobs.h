// The jobs a worker holds, as they pass from the loop thread to the
// processors and back: fetched (moved into a working list, not started),
// running, and finished with an outcome for Redis to confirm. Plain values.

#ifndef RELIABLEQ_SERVER_WORKER_JOBS_H_
#define RELIABLEQ_SERVER_WORKER_JOBS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codec/job_record.h"
#include "protocol/retry.h"

namespace reliableq::server {

// A job moved into one of this process's working lists.
struct FetchedJob {
  uint32_t queue = 0;   // index into the server's QueueSet
  std::string payload;  // exactly as stored in Redis
  uint64_t limit_slot = 0;  // the limiter slot it holds (LimitGate); 0: none
};

// What one run came to; FinishCall (finish.lua) carries each but a plain
// success (reliableq-schema(7), "The end of a job's life").
enum class Outcome : uint8_t {
  kSucceeded,
  kFailed,   // the handler threw, or no handler knows the class
  kInvalid,  // the payload is not a job (bad JSON, no class or args)
  kExpired,  // discarded unrun: its expires_at had passed
  kSnoozed,  // not yet (JobSnooze): to the scheduled set, no retry spent
};

struct FinishedJob {
  uint32_t queue = 0;
  std::string payload;         // the exact fetched string, for LREM
  Outcome outcome = Outcome::kSucceeded;
  // kFailed: the payload with Sidekiq's error fields; kSnoozed: with its
  // snooze_count one higher.
  std::string updated_payload;
  std::string error;           // kFailed/kInvalid: one line for the log
  // kFailed: where it goes, and its score there (retry time or time of
  // death); kSnoozed: score is when it runs again.
  protocol::FailureAction action = protocol::FailureAction::kDead;
  double score = 0;
  // An earlier send of this outcome lost its reply (a broken connection, a
  // timeout): Redis may have applied it, counters included. Sent again, it
  // must not be counted again.
  bool maybe_applied = false;
  uint64_t limit_slot = 0;  // given back when the outcome is taken (LimitGate)
  // The payload carries the marker of a feature that ends with the job (a
  // unique key, a sequence key): its success is ack.lua, not the plain LREM.
  bool feature_marked = false;
  // The sequence key the payload names, read as the scripts read it; empty:
  // none. ack.lua hands it on without decoding the payload again.
  std::string sequence_key;
  // The job's final record (reliableq-schema(7), "Job records") when its
  // class keeps records and its life ended here; empty: none. Written
  // under Keys::JobRecord(jid) for record_ttl seconds.
  std::string record;
  std::string jid;
  int64_t record_ttl = 0;
};

struct RunningJob {
  int slot = 0;
  uint32_t queue = 0;
  std::string payload;
  double started_at = 0;  // epoch seconds
  // The last progress its handler reported (JobView::ReportProgress).
  std::optional<codec::JobProgress> progress;
};

// Payloads by queue index, as the requeue script takes them.
using PayloadsByQueue = std::vector<std::vector<std::string>>;

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_WORKER_JOBS_H_
