#include "log.h"

#include <sys/time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <ctime>

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
  if (sink_) {
    sink_(level, std::string_view(line, used));
    return;
  }
  line[used++] = '\n';
  ssize_t ignored = write(STDERR_FILENO, line, used);
  (void)ignored;
}

}  // namespace reliableq
