// Admin's processes: the members of `processes` with their info, running
// jobs and heartbeat, Sidekiq's remote signals, a janitor pass now, the
// jobs a dry run finds orphaned, and the janitor's record.
// Private: callers use include/reliableq/admin.h, which documents each call.
//
// Thread safety: as AdminContext.

#ifndef RELIABLEQ_ADMIN_PROCESSES_H_
#define RELIABLEQ_ADMIN_PROCESSES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "admin/admin_context.h"
#include "reliableq/admin.h"

namespace reliableq::admin {

// Sidekiq's work entry (a value of <identity>:work) for hash field
// `thread`: {"queue","payload","run_at"}, with payload the job as a JSON
// string (Sidekiq 7, reliableq) or as an object (Sidekiq 6), and reliableq's
// optional "progress" object. A value that is no JSON object is kept whole
// as the payload.
RunningJobInfo ReadWork(std::string thread, std::string_view json);

class Processes {
 public:
  explicit Processes(AdminContext& context);

  Result<RecoveryReport> Recover(const RecoverOptions& options);
  Result<std::vector<ProcessInfo>> ListProcesses();
  Status SignalProcess(std::string_view identity, ProcessSignal signal);
  Result<std::vector<Orphan>> ListOrphans(int64_t jobs_per_process);
  Result<JanitorRecord> ReadJanitorRecord();

 private:
  AdminContext& context_;
};

}  // namespace reliableq::admin

#endif  // RELIABLEQ_ADMIN_PROCESSES_H_
