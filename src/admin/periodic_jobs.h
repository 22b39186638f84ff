// Admin's periodic jobs: every one ever declared, as Redis records it, with
// its next tick by its schedule.
// Private: callers use include/reliableq/admin.h, which documents each call.
//
// Thread safety: as AdminContext.

#ifndef RELIABLEQ_ADMIN_PERIODIC_JOBS_H_
#define RELIABLEQ_ADMIN_PERIODIC_JOBS_H_

#include <vector>

#include "admin/admin_context.h"
#include "reliableq/admin.h"

namespace reliableq::admin {

class PeriodicJobs {
 public:
  explicit PeriodicJobs(AdminContext& context);

  // Admin::ListPeriodic.
  Result<std::vector<PeriodicInfo>> List();

 private:
  AdminContext& context_;
};

}  // namespace reliableq::admin

#endif  // RELIABLEQ_ADMIN_PERIODIC_JOBS_H_
