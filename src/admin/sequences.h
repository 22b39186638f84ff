// Admin's sequences: the held sequence keys, with their holders and the
// jobs waiting for each, and the operator's two ways out of a stuck one.
// Private: callers use include/reliableq/admin.h, which documents each call.
//
// Thread safety: as AdminContext.

#ifndef RELIABLEQ_ADMIN_SEQUENCES_H_
#define RELIABLEQ_ADMIN_SEQUENCES_H_

#include <cstdint>
#include <string_view>

#include "admin/admin_context.h"
#include "reliableq/admin.h"

namespace reliableq::admin {

class Sequences {
 public:
  explicit Sequences(AdminContext& context);

  // Admin::ListSequences, Admin::ReleaseSequence, Admin::SkipSequenceHead.
  Result<SequenceListing> List(int64_t limit);
  Result<SequenceRelease> Release(std::string_view key);
  Result<SequenceSkip> SkipHead(std::string_view key, const DeadSetLimits& limits);

 private:
  AdminContext& context_;
};

}  // namespace reliableq::admin

#endif  // RELIABLEQ_ADMIN_SEQUENCES_H_
