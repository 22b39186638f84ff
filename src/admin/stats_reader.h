// Admin's figures: Sidekiq's stats (Sidekiq::Stats, with reliableq's own:
// jobs in progress, parked, expired) in two round trips, and what the Redis
// server says of itself.
// Private: callers use include/reliableq/admin.h, which documents each call.
//
// Thread safety: as AdminContext.

#ifndef RELIABLEQ_ADMIN_STATS_READER_H_
#define RELIABLEQ_ADMIN_STATS_READER_H_

#include "admin/admin_context.h"
#include "admin/limiters.h"
#include "admin/queues.h"
#include "reliableq/admin.h"

namespace reliableq::admin {

class StatsReader {
 public:
  // `queues` marks the paused queues, `limiters` counts the parked jobs.
  StatsReader(AdminContext& context, Queues& queues, Limiters& limiters);

  // Admin::GetStats, Admin::ServerInfo.
  Result<Stats> Read();
  Result<RedisServerInfo> ServerInfo();

 private:
  AdminContext& context_;
  Queues& queues_;
  Limiters& limiters_;
};

}  // namespace reliableq::admin

#endif  // RELIABLEQ_ADMIN_STATS_READER_H_
