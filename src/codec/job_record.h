// A finished job's final record, and a running job's progress, as the JSON
// texts reliableq keeps in Redis (reliableq-schema(7), "Job records"): the
// record in <prefix>job:<jid>, the progress in Sidekiq's work hash entry.
//
// Thread safety: pure functions; any thread.

#ifndef RELIABLEQ_CODEC_JOB_RECORD_H_
#define RELIABLEQ_CODEC_JOB_RECORD_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace reliableq::codec {

// How far a running job is (JobView::ReportProgress).
struct JobProgress {
  double percent = 0;   // 0 to 100
  std::string message;  // may be empty
  double at = 0;        // when it was reported, epoch seconds
};

// {"percent":40,"message":"...","at":1700000000.5} ("message" only when
// set).
std::string ProgressJson(const JobProgress& progress);

// `text` as one JSON value: itself when it is one (surrounding white space
// dropped) nesting at most kMaxJsonDepth deep, else a JSON string holding
// it (invalid UTF-8 replaced).
std::string JsonValueOf(std::string_view text);

struct JobRecordFields {
  std::string_view state;  // "done", "dead", "discarded", "expired"
  double at = 0;           // when its life ended
  std::string_view jid;
  std::string_view job_class;
  std::string_view queue;
  std::string_view process;          // the identity of the process that ran it
  std::optional<double> started_at;  // its last run's start; none: it never ran
  // Runs as Sidekiq's retry_count counts them: retry_count + 2, or 1
  // without one (a retry by hand from retry or dead gives one back).
  int64_t attempts = 0;
  std::string_view error_class;      // empty: none
  std::string_view error_message;
  std::string_view result;  // one JSON value (JsonValueOf); empty: none
  const JobProgress* progress = nullptr;
  // The job as it ended, a JSON object ("job"); or, when empty, its
  // arguments alone, a JSON array ("args").
  std::string_view payload;
  std::string_view args;
};

// The record's JSON. The result, then the payload (or the arguments), is
// left out (its size given as "result_bytes", "job_bytes", "args_bytes")
// when the record would otherwise pass `max_bytes`; the other fields are
// bounded by the payload's own.
std::string JobRecordJson(const JobRecordFields& fields, size_t max_bytes);

}  // namespace reliableq::codec

#endif  // RELIABLEQ_CODEC_JOB_RECORD_H_
