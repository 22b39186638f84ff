// Admin's job sets (schedule, retry, dead): entries found by jid, as
// Sidekiq's API finds them, pages and entries addressed by score and jid,
// as the dashboard shows them, and the moves of entries to their queues, to
// dead or out of the set, each one script or one ZREM per batch.
// Private: callers use include/reliableq/admin.h, which documents each call.
//
// Thread safety: as AdminContext.

#ifndef RELIABLEQ_ADMIN_JOB_SETS_H_
#define RELIABLEQ_ADMIN_JOB_SETS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "admin/admin_context.h"
#include "reliableq/admin.h"

namespace reliableq::admin {

class JobSets {
 public:
  explicit JobSets(AdminContext& context);

  Result<SetListing> List(JobSet set, int64_t limit);
  Result<SetEntry> Find(JobSet set, std::string_view jid);
  Result<SetEntry> RetryNow(JobSet set, std::string_view jid);
  Result<BulkResult> RetryAll(JobSet set);
  Result<SetEntry> Delete(JobSet set, std::string_view jid);
  Result<int64_t> DeleteAll(JobSet set);
  Result<SetEntry> Kill(std::string_view jid, const DeadSetLimits& limits);
  Result<BulkResult> KillAll(const DeadSetLimits& limits);

  Result<SetListing> ListPage(JobSet set, int64_t offset, int64_t limit);
  Result<SetEntry> FindAt(JobSet set, const EntryRef& ref);
  Result<ActionResult> ActOn(JobSet set, SetAction action, const std::vector<EntryRef>& refs,
                             const DeadSetLimits& limits);
  Result<ActionResult> ActOnAll(JobSet set, SetAction action, const DeadSetLimits& limits);

 private:
  // Members [offset, offset + count) of `set` in its display order.
  Result<std::vector<SetEntry>> Range(JobSet set, int64_t offset, int64_t count);
  // One retry_now.lua call for `entries` (all valid): {moved, missing}.
  Result<std::pair<int64_t, int64_t>> PushNow(JobSet set, const std::vector<SetEntry>& entries);
  // One kill.lua call for `entries` of `from` (retry or schedule):
  // {killed, missing}.
  Result<std::pair<int64_t, int64_t>> MoveToDead(JobSet from, const std::vector<SetEntry>& entries,
                                                 const DeadSetLimits& limits);
  // `action` on `entries` (found in `set`), in batches; adds to *result.
  Status Apply(JobSet set, SetAction action, std::vector<SetEntry> entries,
               const DeadSetLimits& limits, ActionResult* result);

  // The key of `set` (JobSetKey is its name; the key carries the group's
  // prefix in layout 2).
  const std::string& SetKey(JobSet set) const {
    return set_keys_[set == JobSet::kScheduled ? 0 : set == JobSet::kRetry ? 1 : 2];
  }

  AdminContext& context_;
  const std::string set_keys_[3];  // schedule, retry, dead
};

}  // namespace reliableq::admin

#endif  // RELIABLEQ_ADMIN_JOB_SETS_H_
