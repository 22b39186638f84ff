// Logger: formats log lines in Sidekiq's shape and hands them to a sink
// (stderr by default); each Server owns one, with its own level and sink.
// The thread's name and the job it runs are per-thread context, set once by
// whoever runs the thread (SetLogThreadName, JobLogContext).
//
// Each line is escaped as a whole before it reaches the sink or stderr
// (AppendEscaped in text_escape.h): control characters, the C1 controls and
// bytes that are not UTF-8 become visible escapes such as \n or \x1b, so
// untrusted text in a message (a job class, an error message, a remote
// signal name) cannot forge a line or drive a terminal. Messages therefore
// never contain control characters of their own: one message, one line.
//
// Thread safety: a Logger is immutable after construction; Log may be called
// from any thread. With the default sink each line is written with one
// write(2), so lines from threads do not interleave.

#ifndef RELIABLEQ_LOG_H_
#define RELIABLEQ_LOG_H_

#include <string>
#include <string_view>

#include "reliableq/logging.h"

namespace reliableq {

class Logger {
 public:
  explicit Logger(LogLevel level = LogLevel::kInfo, LogSink sink = {})
      : level_(level), sink_(std::move(sink)) {}

  bool Enabled(LogLevel level) const { return static_cast<int>(level) <= static_cast<int>(level_); }
  void Log(LogLevel level, const char* format, ...) const __attribute__((format(printf, 3, 4)));

 private:
  LogLevel level_;
  LogSink sink_;
};

// Names the calling thread in log lines ("loop", "p0", ...).
void SetLogThreadName(std::string name);

// While alive, lines logged on this thread carry the job's class and jid.
class JobLogContext {
 public:
  JobLogContext(std::string_view job_class, std::string_view jid);
  ~JobLogContext();
  JobLogContext(const JobLogContext&) = delete;
  JobLogContext& operator=(const JobLogContext&) = delete;
};

}  // namespace reliableq

#endif  // RELIABLEQ_LOG_H_
