// ExternalHandlers: the job classes a server runs with programs and URLs
// (ServerOptions::command_handlers and http_handlers), as Handlers the
// processor threads call like C++ ones, middleware included.
//
// Open checks every entry (a program that is not found or not executable,
// a URL that is not http(s), a class with two handlers) and starts what the
// handlers need: the process supervisor (exec/process_guard.h) when a
// command handler exists, libcurl (exec/http_caller.h) when an HTTP one
// does; neither costs anything otherwise.
//
// A handler here ends its job as the program or the answer says
// (reliableq(1), OUTCOMES): a program's last outcome line on fd 3, else its
// exit status; an answer's status and Retry-After, with the handler's
// HttpClientErrors. It throws what a C++ handler would (JobSnooze,
// JobRetry, JobDiscard, JobDead, JobFailure) and logs, in the job's
// context, the program's log lines and any line it cannot use.
//
// A handler here enforces its job's timeout itself (the deadline in the
// JobView): a command's process group gets SIGTERM at the deadline and
// SIGKILL kill_grace later, an HTTP request is abandoned at the deadline;
// either fails as Reliableq::JobTimeout. The JobView's stop token stops it
// at once (SIGKILL to the group, the request aborted): the server requests
// stop on a hard stop, before the job is handed back.
//
// Thread safety: Find and the handlers from any thread once opened.

#ifndef RELIABLEQ_SERVER_EXTERNAL_HANDLERS_H_
#define RELIABLEQ_SERVER_EXTERNAL_HANDLERS_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "reliableq/clock.h"
#include "reliableq/handler.h"
#include "reliableq/server.h"
#include "reliableq/status.h"

namespace reliableq::exec {
class HttpCaller;
class ProcessGuard;
}  // namespace reliableq::exec

namespace reliableq::server {

class ExternalHandlers {
 public:
  // Null when the options name no command or HTTP handler. Otherwise
  // kInvalidArgument naming the class and what is wrong; kIoError or
  // kUnavailable when the supervisor cannot start or libcurl cannot load.
  // `registry` is the C++ handlers': a class there may not be here too.
  static Result<std::shared_ptr<const ExternalHandlers>> Open(const ServerOptions& options,
                                                              const HandlerRegistry& registry,
                                                              std::shared_ptr<const Clock> clock);
  ~ExternalHandlers();

  // What Open checks, without starting anything: for a caller that wants
  // to tell a usage error (kInvalidArgument) from a failure to run.
  static Status Check(const ServerOptions& options, const HandlerRegistry& registry);

  // The handler of `job_class`, else the catch-all's ("*"), else null.
  const Handler* Find(std::string_view job_class) const;
  // The classes named here (not "*"), for the metrics' class label.
  std::vector<std::string> Classes() const;
  // One line per handler for the start-up log: "EmailJob: /usr/bin/x".
  std::vector<std::string> Describe() const;

  ExternalHandlers(const ExternalHandlers&) = delete;
  ExternalHandlers& operator=(const ExternalHandlers&) = delete;

 private:
  ExternalHandlers() = default;
  struct Shared;

  std::shared_ptr<Shared> shared_;
  std::map<std::string, Handler, std::less<>> handlers_;
  std::vector<std::string> descriptions_;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_EXTERNAL_HANDLERS_H_
