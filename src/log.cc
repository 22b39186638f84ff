#include "log.h"

#include <sys/time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <string>

#include "text_escape.h"

namespace reliableq {

namespace {

thread_local std::string t_thread_name;
thread_local std::string t_job_context;

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return "ERROR";
    case LogLevel::kWarn: return "WARN";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kDebug: return "DEBUG";
  }
  return "?";
}

}  // namespace

void SetLogThreadName(std::string name) { t_thread_name = std::move(name); }

JobLogContext::JobLogContext(std::string_view job_class, std::string_view jid) {
  // Built in place: the thread's string keeps its capacity from job to job.
  t_job_context.assign("class=").append(job_class).append(" jid=").append(jid).append(" ");
}

JobLogContext::~JobLogContext() { t_job_context.clear(); }

void Logger::Log(LogLevel level, const char* format, ...) const {
  if (!Enabled(level)) return;
  char line[2048];
  timeval tv;
  gettimeofday(&tv, nullptr);
  tm parts;
  gmtime_r(&tv.tv_sec, &parts);
  int n = std::snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ pid=%d tid=%s %s%s: ",
                        parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday, parts.tm_hour,
                        parts.tm_min, parts.tm_sec, static_cast<int>(tv.tv_usec / 1000),
                        static_cast<int>(getpid()),
                        t_thread_name.empty() ? "main" : t_thread_name.c_str(),
                        t_job_context.c_str(), LevelName(level));
  if (n < 0) return;
  size_t used = static_cast<size_t>(n) < sizeof line ? static_cast<size_t>(n) : sizeof line - 1;
  va_list args;
  va_start(args, format);
  int m = std::vsnprintf(line + used, sizeof line - used, format, args);
  va_end(args);
  if (m > 0) used += static_cast<size_t>(m) < sizeof line - used ? static_cast<size_t>(m)
                                                                 : sizeof line - used - 1;
  if (used >= sizeof line - 1) used = sizeof line - 2;
  // Job classes, jids, error messages and remote signal names come from
  // outside: escaped, they can neither start a forged line nor reach a
  // terminal as an escape sequence. Our own text has no control characters,
  // so the whole line is escaped at once; most lines need nothing.
  std::string_view text(line, used);
  std::string escaped;
  if (NeedsEscaping(text)) {
    AppendEscaped(text, &escaped);
    text = escaped;
  }
  if (sink_) {
    sink_(level, text);
    return;
  }
  if (escaped.empty()) {
    line[used++] = '\n';
    text = std::string_view(line, used);
  } else {
    escaped.push_back('\n');
    text = escaped;
  }
  ssize_t ignored = write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
}

}  // namespace reliableq
