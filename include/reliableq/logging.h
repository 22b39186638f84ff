// Log levels and where log lines go; both belong to one Server (see
// ServerOptions::log_level and log_sink), not to the process, so two servers
// in one program can log differently.
//
// A line looks like Sidekiq's:
//   2026-11-21T23:59:59.123Z pid=4242 tid=p3 class=EmailJob jid=ab12... INFO: done
// (class and jid only on a processor thread while it runs a job).

#ifndef RELIABLEQ_LOGGING_H_
#define RELIABLEQ_LOGGING_H_

#include <functional>
#include <string_view>

namespace reliableq {

enum class LogLevel { kError, kWarn, kInfo, kDebug };

// Receives each line at or above the level, without its final newline,
// with control characters and invalid UTF-8 already escaped (job data in a
// line cannot forge another line or a terminal sequence; see reliableq(1),
// OUTPUT).
// Called from the loop thread and from processor threads, possibly at the
// same time: it must be thread-safe. The view is valid only during the call.
// An empty sink writes each line to stderr with a single write(2).
using LogSink = std::function<void(LogLevel level, std::string_view line)>;

}  // namespace reliableq

#endif  // RELIABLEQ_LOGGING_H_
