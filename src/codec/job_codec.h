// The job codec: Sidekiq job JSON in and out. Pure: no I/O beyond reading
// the kernel's random bytes for new jids.
//
// Output follows Ruby's JSON.generate, so that a payload Sidekiq reads and
// dumps again comes out byte for byte the same: compact, keys in insertion
// order, raw UTF-8, '/' not escaped, control characters as \n \t ... or
// \u00xx (and a lone UTF-16 low surrogate, which a \u escape can make but
// UTF-8 cannot hold, as its escape), floats as Ruby's Float#to_s writes
// them (1700000000.5, 0.1, 1.0e-07). Input is read with full precision
// (correctly rounded, as Ruby reads it; by the codec, not by RapidJSON,
// whose 1.1.0 gets some literals wrong), so a float read and written again
// is the same double; an integer literal, of any size, is written again
// with its digits (-0 as 0), as Ruby reads every one as an Integer.
// An object that gives a member name twice is read, and written again, as
// Ruby's JSON.parse reads it (Sidekiq's view of the job): the name once,
// where it first stands, with its last value. A raw NUL byte, which JSON
// text never holds (a string holds one as \u0000), makes a text invalid.
//
// Thread safety: every function may be called from any thread.
//
// Implemented in job_codec.cc, on the parts in src/codec/ (the Ruby JSON
// reader and writer, the payload rewriter, backtraces). New jids and the
// whole-value writer have headers of their own, which this one includes for
// its users: jid.h and json_writer.h.

#ifndef RELIABLEQ_CODEC_JOB_CODEC_H_
#define RELIABLEQ_CODEC_JOB_CODEC_H_

#include <rapidjson/document.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codec/jid.h"
#include "codec/json_writer.h"
#include "reliableq/job.h"
#include "reliableq/status.h"

namespace reliableq::codec {

// Sidekiq cuts error messages to this many characters.
inline constexpr size_t kMaxErrorMessageChars = 10000;

// Epoch seconds as a JSON float with exactly 6 decimals, e.g.
// "1700000000.123456". There is always a fractional part: Sidekiq 8 reads an
// integer timestamp as milliseconds. Also used for ZSET scores.
// Precondition: `seconds` is finite.
std::string FormatEpoch(double seconds);

// The job JSON of `job`, in this field order: class, args, queue, retry, jid
// (a new one when job.jid is empty), created_at, enqueued_at (only when
// given; a scheduled job has none), then the fields of job.extra in their
// order. `args` and the fields of extra are written again compactly from
// their text, integer literals beyond 64 bits included.
// kInvalidArgument with a one-line reason, and nothing else done, when the
// class or queue is empty or not UTF-8, args or extra is not UTF-8 JSON (a
// \u escape of a lone surrogate, no character, included), args is not a
// JSON array, extra is
// not a JSON object or names a field set here (class, args, queue, retry,
// jid, created_at, enqueued_at, at), retry is a negative count, the jid is
// not printable ASCII, or the JSON nests deeper than kMaxJsonDepth. A name
// that args' objects or extra give twice is written once (see the top of
// this file); a reserved name in extra is refused however often. The jid
// written is also stored in `*jid` when that is not null.
Result<std::string> EncodeJob(const Job& job, double created_at, std::optional<double> enqueued_at,
                              std::string* jid = nullptr);

// A parsed payload. The raw string it came from is never changed.
struct DecodedJob {
  // The DOM's pool starts at `chunk` bytes: RapidJSON's default first chunk
  // of 64 KB, taken and freed for every job a worker runs, cost more than
  // parsing the job.
  explicit DecodedJob(size_t chunk = 1024)
      : allocator(std::make_unique<rapidjson::MemoryPoolAllocator<>>(chunk)),
        document(allocator.get()) {}

  std::unique_ptr<rapidjson::MemoryPoolAllocator<>> allocator;  // before document
  // Its values live in `allocator`: never move it out of this DecodedJob.
  rapidjson::Document document;
};

// Parses a stored payload as Sidekiq reads it. kCorruption, with the
// reason, unless it is a JSON object (no raw NUL byte anywhere: the reason
// names the offset of the first) with a string "class" and an array "args"
// that nests at most kMaxJsonDepth deep. In the document, every object
// (the job's, and those at any depth below it) holds each name once, where
// it first stands in `raw`, with the value it last has there, as Ruby's
// Hash does: a handler, like Sidekiq, sees the last "class" or "args" of a
// payload that gives two.
Result<DecodedJob> DecodeJob(std::string_view raw);

// The queue a decoded job is pushed to when it leaves the schedule, retry or
// dead set: its "queue" when that is a non-empty string, else "default", as
// Sidekiq's client and poller choose it.
std::string QueueOf(const rapidjson::Value& job);

// What a failed execution leaves in its job (Sidekiq's retry bookkeeping).
struct FailureInfo {
  std::string error_class;
  // Any bytes; invalid UTF-8 becomes U+FFFD and only the first
  // kMaxErrorMessageChars characters are kept.
  std::string error_message;
  // The queue the job was fetched from.
  std::string fetched_queue;
  // Epoch seconds of the failure.
  double now = 0;
  // The error's backtrace, innermost call first; may be empty.
  std::vector<std::string> backtrace;
  // The job is dropped (Sidekiq 8's discard): discarded_at = now too.
  bool discarded = false;
};

// The payload `raw` after one more failure, per Sidekiq 6.4.1: queue =
// retry_queue when that is a non-empty string, else info.fetched_queue;
// error_message and error_class; then, when retry_count is present,
// retried_at = now and retry_count + 1, otherwise failed_at = now and
// retry_count = 0. When the job's `backtrace` field is true or a number N
// and info.backtrace is not empty, error_backtrace = MIME base64 (a newline
// after every 60 characters) of the zlib-deflated JSON array of all lines or
// of the first N. Fields already present are replaced where they stand; new
// ones are appended; every other field and the order of all of them stay,
// written again from the text of `raw` (integers beyond 64 bits stay exact).
// The fields are read, and a name given twice (at any level) written once,
// as Sidekiq would: see DecodeJob. kCorruption when `raw` does not decode or
// its retry_count is neither null nor an integer below 2^63 - 1.
Result<std::string> RecordFailure(std::string_view raw, const FailureInfo& info);

// The payload `raw` snoozed once more: snooze_count = `snooze_count` (the
// caller's count, read from the job), replaced where it stands or appended;
// everything else written again from the text of `raw`, as RecordFailure
// does. kCorruption when `raw` does not parse.
Result<std::string> RecordSnooze(std::string_view raw, int64_t snooze_count);

}  // namespace reliableq::codec

#endif  // RELIABLEQ_CODEC_JOB_CODEC_H_
