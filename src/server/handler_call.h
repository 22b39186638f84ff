// CallHandler: one call of a job's handler, through the server's
// middleware, and how it ended: it returned, it snoozed (JobSnooze), or it
// threw, read as Sidekiq reads an exception (its class and message, and a
// JobFailure's backtrace and outcome).
//
// Thread safety: any thread; it touches only what it is given.

#ifndef RELIABLEQ_SERVER_HANDLER_CALL_H_
#define RELIABLEQ_SERVER_HANDLER_CALL_H_

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "reliableq/handler.h"
#include "reliableq/server.h"

namespace reliableq::server {

struct HandlerEnding {
  // Empty error_class: the handler returned, or snoozed.
  JobError error;
  std::vector<std::string> backtrace;               // a JobFailure's
  std::optional<RetryIn> then;                      // what the failure said becomes of the job
  std::optional<std::chrono::milliseconds> snooze;  // JobSnooze's delay
};

// Calls `handler` with `view` inside `middleware` (outermost first).
HandlerEnding CallHandler(const Handler& handler, const std::vector<ServerMiddleware>& middleware,
                          const JobView& view);

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_HANDLER_CALL_H_
