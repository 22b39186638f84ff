// Admin's audit trail: the list <prefix>audit of the actions the dashboard
// took, newest first, at most 1000.
// Private: callers use include/reliableq/admin.h, which documents each call.
//
// Thread safety: as AdminContext.

#ifndef RELIABLEQ_ADMIN_AUDIT_TRAIL_H_
#define RELIABLEQ_ADMIN_AUDIT_TRAIL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "admin/admin_context.h"

namespace reliableq::admin {

class AuditTrail {
 public:
  explicit AuditTrail(AdminContext& context);

  // Admin::AppendAudit, Admin::ReadAudit.
  Status Append(std::string_view entry_json);
  Result<std::vector<std::string>> Read(int64_t limit);

 private:
  AdminContext& context_;
};

}  // namespace reliableq::admin

#endif  // RELIABLEQ_ADMIN_AUDIT_TRAIL_H_
