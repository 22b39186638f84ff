// Umbrella header: the whole public API of reliableq.
#ifndef RELIABLEQ_RELIABLEQ_H_
#define RELIABLEQ_RELIABLEQ_H_

#include "reliableq/admin.h"
#include "reliableq/client.h"
#include "reliableq/clock.h"
#include "reliableq/dead_set.h"
#include "reliableq/handler.h"
#include "reliableq/job.h"
#include "reliableq/logging.h"
#include "reliableq/recovery.h"
#include "reliableq/redis_options.h"
#include "reliableq/server.h"
#include "reliableq/spool.h"
#include "reliableq/status.h"

#endif  // RELIABLEQ_RELIABLEQ_H_
