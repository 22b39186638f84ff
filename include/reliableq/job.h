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

struct Job {
  // The `class` field: the name a handler is registered under. Required.
  std::string job_class;
  // The `args` field as JSON text. Must be a JSON array.
  std::string args = "[]";
  // The queue to push to. Required, non-empty.
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
};

}  // namespace reliableq

#endif  // RELIABLEQ_JOB_H_
