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
// _INTERRUPTED_COUNT and _TIMEOUT (seconds, when it has one). It may say how
// its job ends in lines on file descriptor 3 (RELIABLEQ_OUTCOME_FD): snooze,
// retry, discard, dead or fail, the last one winning, and also result,
// progress and log lines. Without such a line its exit status decides: 0 is
// success; any other status, a signal or the timeout is a failure whose
// error_message ends with the tail of its stderr. When it exits, whatever it
// left running in its process group is killed.
//
// An HTTP handler receives the job's JSON in a POST (Content-Type
// application/json) with the headers Idempotency-Key (the jid),
// X-Reliableq-Jid, -Class, -Queue, -Retry-Count, -Interrupted-Count and
// -Timeout. Its answer decides: 2xx success; 408, 425, 429 and 5xx a
// failure retried with the class's backoff, or with a Retry-After header a
// snooze of that long (at most an hour); any other 4xx, dead at once unless
// `client_errors` says otherwise; no answer (a connection error) a failure;
// the timeout a Reliableq::JobTimeout failure. Connections are kept alive;
// redirects are not followed unless asked.
//
// reliableq(1), HANDLERS and OUTCOMES, says all of it, and what happens when
// the worker dies or stops while a handler runs.
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

// What an HTTP handler's 4xx answer other than 408, 425 and 429 does to its
// job (Reliableq::HttpFailed, the status and the start of the body in its
// error_message).
enum class HttpClientErrors {
  kDead,     // to the dead set at once, whatever retries are left (JobDead)
  kDiscard,  // dropped: no retry, not in the dead set (JobDiscard)
  kRetry,    // retried with the class's backoff, like any failure
};

struct HttpHandler {
  // http:// or https://.
  std::string url;
  // Follow up to 5 redirects (http and https only). Off by default: a
  // redirect of a POST is more often a mistake than an intent.
  bool follow_redirects = false;
  // A 4xx other than 408, 425 and 429 will not succeed if sent again, so
  // by default its job goes to the dead set at once.
  HttpClientErrors client_errors = HttpClientErrors::kDead;
};

}  // namespace reliableq

#endif  // RELIABLEQ_EXTERNAL_HANDLER_H_
