// Job: what a client asks to run, in Sidekiq's terms.
//
// A Job becomes Sidekiq's job JSON when it is pushed:
//   {"class":"HardJob","args":[1,"x"],"queue":"default","retry":true,
//    "jid":"<24 hex>","created_at":1700000000.123456,"enqueued_at":...}
// plus any fields given in `extra`, kept as given. See reliableq-schema(7).
//
// Thread safety: plain values.

#ifndef RELIABLEQ_JOB_H_
#define RELIABLEQ_JOB_H_

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "reliableq/status.h"

namespace reliableq {

// The job's `retry` field: true (up to the server's max retries, 25 by
// default), false (no retry and no dead set), or a number of retries.
class Retry {
 public:
  static Retry Enabled() { return Retry(kEnabled, 0); }
  static Retry Disabled() { return Retry(kDisabled, 0); }
  // n >= 0 retries; 0 means the first failure goes to the dead set.
  static Retry Times(int n) { return Retry(kTimes, n); }

  // "true", "false" or a non-negative integer; anything else is
  // kInvalidArgument.
  static Result<Retry> Parse(std::string_view text);

  // The JSON literal for the `retry` field: true, false or the number.
  std::string ToJson() const;

  bool operator==(const Retry&) const = default;

 private:
  enum Kind { kEnabled, kDisabled, kTimes };
  Retry(Kind kind, int times) : kind_(kind), times_(times) {}
  Kind kind_;
  int times_;
};

// When a unique job's key is released (reliableq(1), UNIQUE JOBS).
enum class UniqueUntil {
  // When the job succeeds, goes to dead, is dropped or discarded as
  // expired. A retry keeps it.
  kSuccess,
  // When a worker fetches it to run it (whatever its outcome then), or
  // when it is discarded unrun.
  kStart,
};

// A push refused while another job holds the same key: Client::Push returns
// PushOutcome::kDuplicate with the holder's jid. The job carries its key in
// the fields "unique_key" (the full Redis key, "<prefix>unique:<key>") and
// "unique_until" ("success" or "start"); the scripts that end its life
// release the key (reliableq-schema(7), "Unique jobs").
struct Uniqueness {
  // The key. Empty: "<class>:<SHA-256 of args>", args written compactly
  // (so "[1, 2]" and "[1,2]" are the same key). Printable ASCII without '"'
  // or '\', at most 512 bytes.
  std::string key;
  UniqueUntil until = UniqueUntil::kSuccess;
  // A backstop: the key expires this long after the push even if the job
  // still lives (0: never). None by default: every end of a job's life
  // releases its key, and a key that expires while its job waits lets a
  // second copy in. Set it longer than a job can wait and run.
  std::chrono::milliseconds ttl{0};
};

// A sequence (reliableq(1), SEQUENCES): the jobs that name one key run one
// at a time, in the order their queue gives them (push order), across
// every worker; the next starts only once the one before it is done, dead
// or discarded. A job waiting for its retry keeps the key, unless
// release_on_retry. The job carries it in the fields "sequence" (the key)
// and, when set, "sequence_release_on_retry": true, which a Ruby app may
// write itself (Job.set(sequence: ...)). Push a sequence's jobs to one
// queue: jobs of one key in two queues run one at a time, in the order
// the workers fetch them.
struct Sequence {
  // The key: 1 to 512 bytes of UTF-8 without control characters.
  std::string key;
  // A retry lets the key go: the next job of the key starts, and the
  // retried job joins the end of the sequence when it is due.
  bool release_on_retry = false;
};

// The most bytes a sequence key may have.
inline constexpr size_t kMaxSequenceKeyBytes = 512;

// OK for a sequence key of 1 to kMaxSequenceKeyBytes bytes of UTF-8
// without control characters; kInvalidArgument saying which rule it breaks
// otherwise.
Status CheckSequenceKey(std::string_view key);

// The most bytes a queue name may have: it is part of every Redis key of
// the queue, and workers serve no longer name.
inline constexpr size_t kMaxQueueNameBytes = 1000;

// OK for a queue name of 1 to kMaxQueueNameBytes bytes of UTF-8 (or a
// worker's namespace spec, "card:*"); kInvalidArgument saying which rule it
// breaks otherwise, without quoting the name (it may be long). The one
// check of every place a queue name enters: Client::Push and PushBulk,
// Admin's queue calls, a worker's queues, the reliableq(1) verbs and
// `reliableq web`.
Status CheckQueueName(std::string_view name);

struct Job {
  // The `class` field: the name a handler is registered under. Required.
  std::string job_class;
  // The `args` field as JSON text. Must be a JSON array.
  std::string args = "[]";
  // The queue to push to. Required: see CheckQueueName.
  std::string queue = "default";
  // The `retry` field; Sidekiq's default is true.
  Retry retry = Retry::Enabled();
  // The job id; empty means a new random one (24 lowercase hex digits).
  std::string jid;
  // Further top-level fields as a JSON object (for example
  // {"backtrace":true,"retry_queue":"low","tags":["a"]}); written after the
  // fields above, in the order given. Must be a JSON object. Fields named
  // here that the client sets itself (class, args, queue, retry, jid,
  // created_at, enqueued_at, at) are an error.
  std::string extra = "{}";
  // Expiry (reliableq(1), EXPIRY): a worker that is about to start the job
  // after this time discards it unrun (counted in stat:expired, logged as
  // job_expired). Either an epoch time or seconds after the push (written
  // as expires_at = created_at + expires_in); not both. Finite and > 0.
  std::optional<double> expires_at;
  std::optional<double> expires_in;
  // Uniqueness: set to refuse a second push while this one's key is held.
  // Not for PushBulk (kInvalidArgument), and never spooled.
  std::optional<Uniqueness> unique;
  // The job's sequence: set to run it after every job of the same key
  // pushed before it (see Sequence). ClientOptions::sequence_classes and
  // sequence_queues set one for a job pushed without it.
  std::optional<Sequence> sequence;
};

// OK when Client::Push would take `job` (before any client middleware):
// the same checks, the reason of the first that fails otherwise
// (kInvalidArgument). Pure: a program checks its input with it before it
// connects or spools anything.
Status CheckJob(const Job& job);

}  // namespace reliableq

#endif  // RELIABLEQ_JOB_H_
