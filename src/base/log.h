// Logger: formats log lines, as text in Sidekiq's shape or as one JSON
// object a line, and hands them to a sink (stderr by default); each Server
// owns one, with its own level, format and sink. The thread's name and the
// job it runs are per-thread context, set once by whoever runs the thread
// (SetLogThreadName, JobLogContext).
//
// Every line names its event: a short, stable snake_case identifier
// ("job_done", "fetch_failed") that operators grep and alert on, so it never
// changes with the wording of the message; reliableq(1), LOGS, lists them.
// The JSON format writes it as "event", with the job's fields and the
// line's error text and duration apart from the message. The text format
// is Sidekiq's and shows neither.
//
// Escaping: control characters, the C1 controls and bytes that are not
// UTF-8 become visible escapes such as \n or \x1b (AppendEscaped in
// text_escape.h), so untrusted text (a job class, an error message, a
// remote signal name) cannot forge a line or drive a terminal. In text
// each line is escaped as a whole; in JSON each string value is escaped
// the same way before the JSON writer sees it, so the value holds what the
// text format shows, the object is valid JSON in UTF-8, and `jq -r` prints
// nothing a terminal acts on. Messages never contain control characters of
// their own: one message, one line.
//
// Thread safety: a Logger is immutable after construction; Log may be called
// from any thread. With the default sink each line is written with one
// write(2), so lines from threads do not interleave.

#ifndef RELIABLEQ_BASE_LOG_H_
#define RELIABLEQ_BASE_LOG_H_

#include <optional>
#include <string>
#include <string_view>

#include "reliableq/logging.h"

namespace reliableq::base {

// What a line reports beyond its message: the event's name, and the error
// text and duration when it has them. Implicit from a name, so a plain line
// reads `log.Log(LogLevel::kInfo, "queue_recovered", "queue %s works again", ...)`.
// The views must stay valid for the Log call (a temporary in the same
// expression does).
struct LogEvent {
  LogEvent(const char* event_name) : name(event_name) {}  // NOLINT: implicit on purpose

  // The error this line reports (also in the message, for the text format).
  LogEvent& WithError(std::string_view text) {
    error = text;
    has_error = true;
    return *this;
  }
  // How long the job ran, in seconds.
  LogEvent& WithDuration(double seconds) {
    duration = seconds;
    has_duration = true;
    return *this;
  }
  // The queue a line outside a job's context is about.
  LogEvent& WithQueue(std::string_view name) {
    queue = name;
    has_queue = true;
    return *this;
  }

  const char* name;
  std::string_view error;
  std::string_view queue;
  double duration = 0;
  bool has_error = false;
  bool has_queue = false;
  bool has_duration = false;
};

class Logger {
 public:
  explicit Logger(LogLevel level = LogLevel::kInfo, LogSink sink = {},
                  LogFormat format = LogFormat::kText)
      : level_(level), format_(format), sink_(std::move(sink)) {}

  bool Enabled(LogLevel level) const { return static_cast<int>(level) <= static_cast<int>(level_); }
  // Nothing is formatted when the level is off.
  void Log(LogLevel level, const LogEvent& event, const char* format, ...) const
      __attribute__((format(printf, 4, 5)));

 private:
  void Emit(LogLevel level, std::string_view line) const;

  LogLevel level_;
  LogFormat format_;
  LogSink sink_;
};

// "text" or "json" (--log-format), or nullopt.
std::optional<LogFormat> LogFormatNamed(std::string_view name);

// Names the calling thread in log lines ("loop", "p0", ...).
void SetLogThreadName(std::string name);

// While alive, lines logged on this thread carry the job's class and jid
// (and, in JSON, its queue). It keeps the views, not copies, since it is
// made for every job: they must outlive it.
class JobLogContext {
 public:
  JobLogContext(std::string_view job_class, std::string_view jid, std::string_view queue);
  ~JobLogContext();
  JobLogContext(const JobLogContext&) = delete;
  JobLogContext& operator=(const JobLogContext&) = delete;
};

}  // namespace reliableq::base

#endif  // RELIABLEQ_BASE_LOG_H_
