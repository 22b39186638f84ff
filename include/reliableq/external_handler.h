// Job classes run by a program or by a URL instead of C++ code, for handlers
// written in any language (ServerOptions::command_handlers, http_handlers;
// `reliableq worker --exec` and `--http-handler`).
//
//   options.command_handlers["EmailJob"] = {{"/usr/bin/python3", "/srv/jobs/email.py"}};
//   options.http_handlers["WebhookJob"] = {"http://127.0.0.1:8080/jobs"};
//   options.command_handlers["*"] = {{"/srv/jobs/dispatch"}};   // every other class
//
// A command handler is one process per job, started without a shell, in a
// process group of its own, with a clean environment: the job's JSON on its
// stdin and in RELIABLEQ_JOB (or, above 64 KiB, in the file RELIABLEQ_JOB_FILE
// names), and RELIABLEQ_JID, _CLASS, _QUEUE, _RETRY_COUNT (after a failure),
// _INTERRUPTED_COUNT and _TIMEOUT (seconds, when it has one). Exit status 0
// is success; any other status, a signal or the timeout is a failure whose
// error_message ends with the tail of its stderr. When it exits, whatever it
// left running in its process group is killed.
//
// An HTTP handler receives the job's JSON in a POST (Content-Type
// application/json) with the headers Idempotency-Key (the jid),
// X-Reliableq-Jid, -Class, -Queue, -Retry-Count, -Interrupted-Count and
// -Timeout; a 2xx answer is success, anything else or the timeout a failure.
// Connections are kept alive; redirects are not followed unless asked.
//
// reliableq(1), HANDLERS, says all of it, and what happens when the worker
// dies or stops while a handler runs.
//
// Thread safety: plain values.

#ifndef RELIABLEQ_EXTERNAL_HANDLER_H_
#define RELIABLEQ_EXTERNAL_HANDLER_H_

#include <string>
#include <vector>

namespace reliableq {

struct CommandHandler {
  // The program and its arguments. argv[0] is a path, or a name looked up in
  // the handlers' PATH when the server opens (an error there if it is not
  // found or not executable).
  std::vector<std::string> argv;
};

struct HttpHandler {
  // http:// or https://.
  std::string url;
  // Follow up to 5 redirects (http and https only). Off by default: a
  // redirect of a POST is more often a mistake than an intent.
  bool follow_redirects = false;
};

}  // namespace reliableq

#endif  // RELIABLEQ_EXTERNAL_HANDLER_H_
