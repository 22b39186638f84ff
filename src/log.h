// Logging to stderr in Sidekiq's shape:
//   2026-11-21T23:59:59.123Z pid=4242 tid=p3 class=EmailJob jid=ab12... INFO: done
// A job's class and jid are added to every line logged on a processor thread
// while it runs that job (JobLogContext).
//
// Thread safety: all functions may be called from any thread; each line is
// written with one write(2), so lines from threads do not interleave.

#ifndef RELIABLEQ_LOG_H_
#define RELIABLEQ_LOG_H_

#include <string>
#include <string_view>

#include "reliableq/server.h"

namespace reliableq {

void SetLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);
void Log(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

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
