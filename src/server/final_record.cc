#include "server/final_record.h"

#include <chrono>
#include <optional>
#include <string>

#include "base/utf8.h"
#include "codec/job_codec.h"
#include "codec/job_record.h"
#include "codec/json_writer.h"

namespace reliableq::server {

namespace {

// The most characters of an error class a record keeps (the message: as
// many as a failed payload's, codec::kMaxErrorMessageChars).
constexpr size_t kMaxRecordErrorClass = 200;

}  // namespace

void AddFinalRecord(const JobRecords& records, std::string_view identity, JobReport& report,
                    const rapidjson::Document& document, const RecordedEnd& end,
                    FinishedJob* done) {
  std::chrono::seconds retention = records.For(end.job_class);
  if (retention.count() <= 0) return;
  auto jid = document.FindMember("jid");
  if (jid == document.MemberEnd() || !jid->value.IsString() || jid->value.GetStringLength() == 0) {
    return;
  }
  auto retry_count = document.FindMember("retry_count");
  codec::JobRecordFields fields;
  fields.state = end.state;
  fields.at = end.now;
  fields.jid = {jid->value.GetString(), jid->value.GetStringLength()};
  fields.job_class = end.job_class;
  fields.queue = end.queue;
  fields.process = identity;
  // An expired job never ran.
  if (end.state != "expired") fields.started_at = end.started_at;
  // Sidekiq's retry_count: absent before the first failure, then one less
  // than the failures so far.
  fields.attempts = retry_count != document.MemberEnd() && retry_count->value.IsInt64()
                        ? retry_count->value.GetInt64() + 2
                        : 1;
  // As the payload's own error fields are: bounded, valid UTF-8.
  std::string error_class, error_message;
  if (end.error != nullptr) {
    error_class = base::Scrub(end.error->error_class, kMaxRecordErrorClass);
    error_message = base::Scrub(end.error->message, codec::kMaxErrorMessageChars);
    fields.error_class = error_class;
    fields.error_message = error_message;
  }
  // A failed job keeps no result.
  std::string result = report.TakeResult();
  if (end.error == nullptr) fields.result = result;
  std::optional<codec::JobProgress> progress = report.progress();
  if (progress) fields.progress = &*progress;
  // A done job keeps its arguments alone: the rest of its payload says
  // nothing the record does not, and a record of every success must stay
  // small. A job that failed or expired keeps it whole (its failure fields).
  std::string args;
  if (end.state == "done") {
    args = codec::ToJson(document["args"]);
    fields.args = args;
  } else {
    fields.payload = end.ended;
  }
  done->record = codec::JobRecordJson(fields, records.max_bytes);
  done->jid.assign(fields.jid);
  done->record_ttl = retention.count();
}

}  // namespace reliableq::server
