// Log levels, line formats and where log lines go; all three belong to one
// Server (see ServerOptions::log_level, log_format and log_sink), not to the
// process, so two servers in one program can log differently.
//
// The text format (the default) looks like Sidekiq's:
//   2026-11-21T23:59:59.123Z pid=4242 tid=p3 class=EmailJob jid=ab12... INFO: done
// (class and jid only on a processor thread while it runs a job).
// The JSON format writes one object a line, for log shippers:
//   {"time":"2026-11-21T23:59:59.123Z","level":"INFO","pid":4242,"tid":"p3",
//    "event":"job_done","msg":"done: 0.012000 sec","jid":"ab12...",
//    "class":"EmailJob","queue":"default","duration":0.012}
// reliableq(1), LOGS, lists the fields and the event names.

#ifndef RELIABLEQ_LOGGING_H_
#define RELIABLEQ_LOGGING_H_

#include <functional>
#include <string_view>

namespace reliableq {

enum class LogLevel { kError, kWarn, kInfo, kDebug };

enum class LogFormat { kText, kJson };

// Receives each line at or above the level, without its final newline,
// with control characters and invalid UTF-8 already escaped (job data in a
// line cannot forge another line or a terminal sequence; see reliableq(1),
// OUTPUT). In the JSON format each line is one complete JSON object.
// Called from the loop thread and from processor threads, possibly at the
// same time: it must be thread-safe. The view is valid only during the call.
// An empty sink writes each line to stderr with a single write(2).
using LogSink = std::function<void(LogLevel level, std::string_view line)>;

}  // namespace reliableq

#endif  // RELIABLEQ_LOGGING_H_
