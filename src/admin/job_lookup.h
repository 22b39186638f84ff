// Admin's lookup of a job by jid (Admin::FindJob, which documents the
// places, their order and the cost): the reads in JobLookups, and apart
// from them the pure steps, which the unit tests take alone: reading a
// final record and a payload, and choosing what to report from what the
// reads found.
// Private: callers use include/reliableq/admin.h.
//
// Thread safety: JobLookups as AdminContext; the functions are pure.

#ifndef RELIABLEQ_ADMIN_JOB_LOOKUP_H_
#define RELIABLEQ_ADMIN_JOB_LOOKUP_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "admin/admin_context.h"
#include "admin/job_sets.h"
#include "reliableq/admin.h"

namespace reliableq::admin {

// Everything the reads found for one jid.
struct JobFindings {
  std::string jid;
  // The places that hold it, in any order: each a JobLookup with its state
  // and the fields of that place (process, thread, queue, limit, position,
  // list_size, since, at, progress, payload) alone.
  std::vector<JobLookup> places;
  std::optional<JobRecord> record;  // the final record, when the key exists
  std::vector<NotSearched> not_searched;
};

// What FindJob reports: the place first in JobState's order (running ...
// dead), with the record as its previous end; with no place, the state the
// record names (a record whose state is not one of done, dead, discarded,
// expired or cancelled, or that is not JSON, leaves the job kUnknown with
// the record shown); with neither, kUnknown and the lists not searched.
JobLookup ChooseJobLookup(JobFindings findings);

// The final record stored as `json` (ttl_ms is left unset).
JobRecord ParseJobRecord(std::string json);

// The fields of `payload` the lookup shows.
JobBasics ParseJobBasics(std::string_view payload);

// The string member "jid" of `payload`; "" when it has none. Payloads that
// do not contain `escaped_jid` (JsonEscaped of the jid looked for) are not
// parsed: they cannot carry it.
std::string JidIn(std::string_view payload, std::string_view escaped_jid);

// The state a record's "state" names; kUnknown for any other text.
JobState RecordState(std::string_view state);

class JobLookups {
 public:
  JobLookups(AdminContext& context, JobSets& job_sets);

  Result<JobLookup> Find(std::string_view jid, const JobLookupOptions& options);

 private:
  AdminContext& context_;
  JobSets& job_sets_;
};

}  // namespace reliableq::admin

#endif  // RELIABLEQ_ADMIN_JOB_LOOKUP_H_
