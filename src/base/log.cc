#include "base/log.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <string>

#include "reliableq/redis_options.h"  // RedactUrls
#include "base/text_escape.h"

namespace reliableq::base {

namespace {

thread_local std::string t_thread_name;
// Views into the running job's payload (JobLogContext): set and cleared for
// every job, so they cost no copy.
thread_local bool t_in_job = false;
thread_local std::string_view t_job_class;
thread_local std::string_view t_jid;
thread_local std::string_view t_queue;

// Long enough for any line of ours; longer ones are cut.
constexpr size_t kMaxLine = 2048;

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return "ERROR";
    case LogLevel::kWarn: return "WARN";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kDebug: return "DEBUG";
  }
  return "?";
}

// "2026-11-21T23:59:59.123Z" into `out`; returns its length.
int FormatNow(char* out, size_t size) {
  timeval tv;
  gettimeofday(&tv, nullptr);
  tm parts;
  gmtime_r(&tv.tv_sec, &parts);
  return std::snprintf(out, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900,
                       parts.tm_mon + 1, parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec,
                       static_cast<int>(tv.tv_usec / 1000));
}

// vsnprintf at `out + used`, returning the new length, cut to fit `size`
// with room left for a newline.
size_t AppendFormatted(char* out, size_t size, size_t used, const char* format, va_list args) {
  int m = std::vsnprintf(out + used, size - used, format, args);
  if (m > 0) {
    used += static_cast<size_t>(m) < size - used ? static_cast<size_t>(m) : size - used - 1;
  }
  if (used >= size - 1) used = size - 2;
  return used;
}

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

// A string value, escaped as the text format escapes it: the writer then
// sees only printable ASCII and well-formed UTF-8 without C1 controls, so
// the value is valid JSON whatever bytes the job carried, and a reader that
// decodes it (jq -r) gets no control character either.
void PutString(JsonWriter& writer, std::string_view text, std::string* scratch) {
  if (NeedsEscaping(text)) {
    scratch->clear();
    AppendEscaped(text, scratch);
    text = *scratch;
  }
  writer.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
}

void PutField(JsonWriter& writer, const char* key, std::string_view text, std::string* scratch) {
  writer.Key(key);
  PutString(writer, text, scratch);
}

// `text` with the secrets of the URLs in it masked (RedactUrls: user info
// and query values), or "" when it names no URL: a log line may quote a
// handler's or a server's URL, whoever wrote the message.
std::string Masked(std::string_view text) {
  if (text.find("://") == std::string_view::npos) return {};
  return RedactUrls(text);
}

}  // namespace

std::optional<LogFormat> LogFormatNamed(std::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return std::nullopt;
}

void SetLogThreadName(std::string name) { t_thread_name = std::move(name); }

JobLogContext::JobLogContext(std::string_view job_class, std::string_view jid,
                             std::string_view queue) {
  t_in_job = true;
  t_job_class = job_class;
  t_jid = jid;
  t_queue = queue;
}

JobLogContext::~JobLogContext() {
  t_in_job = false;
  t_job_class = t_jid = t_queue = {};
}

void Logger::Log(LogLevel level, const LogEvent& event, const char* format, ...) const {
  if (!Enabled(level)) return;
  const char* thread = t_thread_name.empty() ? "main" : t_thread_name.c_str();
  char line[kMaxLine];
  va_list args;
  if (format_ == LogFormat::kText) {
    char now[40];
    FormatNow(now, sizeof now);
    int n;
    if (t_in_job) {
      n = std::snprintf(line, sizeof line, "%s pid=%d tid=%s class=%.*s jid=%.*s %s: ", now,
                        static_cast<int>(getpid()), thread, static_cast<int>(t_job_class.size()),
                        t_job_class.data(), static_cast<int>(t_jid.size()), t_jid.data(),
                        LevelName(level));
    } else {
      n = std::snprintf(line, sizeof line, "%s pid=%d tid=%s %s: ", now, static_cast<int>(getpid()),
                        thread, LevelName(level));
    }
    if (n < 0) return;
    size_t used = static_cast<size_t>(n) < sizeof line ? static_cast<size_t>(n) : sizeof line - 1;
    va_start(args, format);
    used = AppendFormatted(line, sizeof line, used, format, args);
    va_end(args);
    // Job classes, jids, error messages and remote signal names come from
    // outside: escaped, they can neither start a forged line nor reach a
    // terminal as an escape sequence. Our own text has no control
    // characters, so the whole line is escaped at once; most lines need
    // nothing.
    std::string_view text(line, used);
    std::string masked = Masked(text);
    if (!masked.empty()) text = masked;
    std::string escaped;
    if (NeedsEscaping(text)) {
      AppendEscaped(text, &escaped);
      text = escaped;
    }
    Emit(level, text);
    return;
  }

  va_start(args, format);
  size_t length = AppendFormatted(line, sizeof line, 0, format, args);
  va_end(args);
  char now[40];
  int now_length = FormatNow(now, sizeof now);
  rapidjson::StringBuffer buffer;
  JsonWriter writer(buffer);
  std::string scratch;
  writer.StartObject();
  writer.Key("time");
  writer.String(now, static_cast<rapidjson::SizeType>(now_length));
  writer.Key("level");
  writer.String(LevelName(level));
  writer.Key("pid");
  writer.Int(static_cast<int>(getpid()));
  PutField(writer, "tid", thread, &scratch);
  PutField(writer, "event", event.name, &scratch);
  std::string_view message(line, length);
  std::string masked = Masked(message);
  PutField(writer, "msg", masked.empty() ? message : masked, &scratch);
  if (t_in_job) {
    PutField(writer, "jid", t_jid, &scratch);
    PutField(writer, "class", t_job_class, &scratch);
  }
  if (event.has_queue) {
    PutField(writer, "queue", event.queue, &scratch);
  } else if (t_in_job) {
    PutField(writer, "queue", t_queue, &scratch);
  }
  if (event.has_duration && std::isfinite(event.duration)) {
    writer.Key("duration");
    // Microseconds, as the text format shows them.
    writer.Double(std::round(event.duration * 1e6) / 1e6);
  }
  if (event.has_error) {
    std::string error = Masked(event.error);
    PutField(writer, "error", error.empty() ? event.error : error, &scratch);
  }
  writer.EndObject();
  Emit(level, std::string_view(buffer.GetString(), buffer.GetSize()));
}

void Logger::Emit(LogLevel level, std::string_view line) const {
  if (sink_) {
    sink_(level, line);
    return;
  }
  // One writev(2) a line, newline included, so threads' lines never mix.
  iovec parts[2] = {{const_cast<char*>(line.data()), line.size()},
                    {const_cast<char*>("\n"), 1}};
  ssize_t ignored = writev(STDERR_FILENO, parts, 2);
  (void)ignored;
}

}  // namespace reliableq::base
