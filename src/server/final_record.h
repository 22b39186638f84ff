// AddFinalRecord: a finished job's final record (reliableq-schema(7), "Job
// records"), built on the processor thread that ran the job, for the step
// that ends it to write.
//
// Thread safety: the processor thread that ran the job.

#ifndef RELIABLEQ_SERVER_FINAL_RECORD_H_
#define RELIABLEQ_SERVER_FINAL_RECORD_H_

#include <rapidjson/document.h>

#include <string_view>

#include "reliableq/handler.h"
#include "reliableq/server.h"
#include "server/job_report.h"
#include "server/worker_jobs.h"

namespace reliableq::server {

// How one run ended a job's life.
struct RecordedEnd {
  std::string_view state;  // "done", "dead", "discarded" or "expired"
  std::string_view job_class;
  std::string_view queue;
  std::string_view ended;  // the payload as it ended (its failure fields)
  const JobError* error;   // the last failure; null: none
  double started_at;       // the run's start, epoch seconds
  double now;              // when it ended
};

// Sets done->record, jid and record_ttl when `job_class` keeps records and
// the job (`document`, as fetched) has a jid; takes the result `report`
// holds. A done job keeps its arguments alone, any other end its whole
// payload as it ended.
void AddFinalRecord(const JobRecords& records, std::string_view identity, JobReport& report,
                    const rapidjson::Document& document, const RecordedEnd& end, FinishedJob* done);

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_FINAL_RECORD_H_
