// Admin's limits: the limiters the workers declared in the `limits` hash,
// with the slots, parked jobs and rate window each holds now.
// Private: callers use include/reliableq/admin.h, which documents each call.
//
// Thread safety: as AdminContext.

#ifndef RELIABLEQ_ADMIN_LIMITERS_H_
#define RELIABLEQ_ADMIN_LIMITERS_H_

#include <cstdint>
#include <vector>

#include "admin/admin_context.h"
#include "reliableq/admin.h"

namespace reliableq::admin {

class Limiters {
 public:
  explicit Limiters(AdminContext& context);

  // Admin::ListLimits.
  Result<std::vector<LimitInfo>> List();
  // The jobs in the waiting lists of every limiter (Stats::parked).
  Result<int64_t> CountParked();

 private:
  AdminContext& context_;
};

}  // namespace reliableq::admin

#endif  // RELIABLEQ_ADMIN_LIMITERS_H_
