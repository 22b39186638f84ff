// Logger: untrusted text in a message (a job class, an error message, a
// remote signal name) cannot forge a log line or reach a terminal raw, in
// text or in JSON; a JSON line carries the job's fields apart.

#include "base/log.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <rapidjson/document.h>
#include <unistd.h>

#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "support/log_capture.h"

namespace reliableq {

using namespace reliableq::base;
namespace {

// True when `line` holds no byte a terminal acts on: nothing below 0x20,
// no DEL, no C1 control (U+0080..U+009F, C2 80..C2 9F in UTF-8).
bool Inert(const std::string& line) {
  for (size_t i = 0; i < line.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(line[i]);
    if (c < 0x20 || c == 0x7F) return false;
    if (c == 0xC2 && i + 1 < line.size() && static_cast<unsigned char>(line[i + 1]) < 0xA0) {
      return false;
    }
  }
  return true;
}

TEST_CASE("a message with newlines and ANSI escapes is one escaped line") {
  LogCapture captured;
  Logger log(LogLevel::kInfo, captured.Sink());
  const char* remote = "TSTP\n2026-01-01T00:00:00.000Z pid=1 tid=loop INFO: \x1b[2Jforged";
  log.Log(LogLevel::kWarn, "signal_unknown", "ignoring unknown signal '%s'", remote);
  std::vector<std::string> lines = captured.Lines();
  REQUIRE(lines.size() == 1);
  const std::string& line = lines[0];
  CHECK(Inert(line));
  CHECK(line.find(" WARN: ignoring unknown signal 'TSTP\\n2026-01-01T00:00:00.000Z pid=1 "
                  "tid=loop INFO: \\x1b[2Jforged'") != std::string::npos);
}

TEST_CASE("the job class and jid of the context are escaped too") {
  LogCapture captured;
  Logger log(LogLevel::kInfo, captured.Sink());
  {
    JobLogContext context("Evil\r\nJob\xC2\x9B", "jid\t1", "q\x1b");
    log.Log(LogLevel::kInfo, "job_fail", "fail: %s", "boom\x07\xFF");
  }
  std::vector<std::string> lines = captured.Lines();
  REQUIRE(lines.size() == 1);
  const std::string& line = lines[0];
  CHECK(Inert(line));
  CHECK(line.find(" class=Evil\\r\\nJob\\u009b jid=jid\\t1 INFO: fail: boom\\x07\\xff") !=
        std::string::npos);
}

TEST_CASE("printable UTF-8 and our own messages are logged as they are") {
  LogCapture captured;
  Logger log(LogLevel::kInfo, captured.Sink());
  log.Log(LogLevel::kInfo, "started", "started: %d threads, queue %s", 10, "caf\xC3\xA9");
  std::vector<std::string> lines = captured.Lines();
  REQUIRE(lines.size() == 1);
  const std::string end = " INFO: started: 10 threads, queue caf\xC3\xA9";
  const std::string& line = lines[0];
  REQUIRE(line.size() > end.size());
  CHECK(line.substr(line.size() - end.size()) == end);
  CHECK(line.find("\\") == std::string::npos);
}

// What `log_call` writes to fd 2, where the default sink writes: fd 2 is a
// pipe for the call.
std::string CapturedStderr(const std::function<void()>& log_call) {
  int fds[2];
  REQUIRE(pipe2(fds, O_CLOEXEC) == 0);
  int saved = dup(STDERR_FILENO);
  REQUIRE(saved >= 0);
  REQUIRE(dup2(fds[1], STDERR_FILENO) == STDERR_FILENO);
  log_call();
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  return out;
}

TEST_CASE("on stderr, a message with a newline is one line") {
  std::string out = CapturedStderr([] {
    Logger log;
    log.Log(LogLevel::kError, "test", "class %s", "A\nB\x1b");
  });
  REQUIRE(!out.empty());
  CHECK(out.back() == '\n');
  CHECK(out.find('\n') == out.size() - 1);
  CHECK(out.find(" ERROR: class A\\nB\\x1b\n") != std::string::npos);
}

TEST_CASE("the text format is Sidekiq's: time, pid, tid, class and jid, level, message") {
  LogCapture captured;
  Logger log(LogLevel::kInfo, captured.Sink(), LogFormat::kText);
  {
    JobLogContext context("EmailJob", "ab12", "mail");
    log.Log(LogLevel::kWarn, LogEvent("job_fail").WithDuration(0.5).WithError("E: x"),
            "fail: %.6f sec: %s", 0.5, "E: x");
  }
  log.Log(LogLevel::kInfo, "started", "started");
  std::vector<std::string> lines = captured.Lines();
  REQUIRE(lines.size() == 2);
  // "2026-11-21T23:59:59.123Z " then the rest; neither the event, the
  // queue nor the fields apart appear in text.
  const std::string pid = " pid=" + std::to_string(getpid());
  REQUIRE(lines[0].size() > 25);
  CHECK(lines[0][4] == '-');
  CHECK(lines[0][10] == 'T');
  CHECK(lines[0].substr(23, 2) == "Z ");
  CHECK(lines[0].substr(24) ==
        pid + " tid=main class=EmailJob jid=ab12 WARN: fail: 0.500000 sec: E: x");
  REQUIRE(lines[1].size() > 25);
  CHECK(lines[1].substr(24) == pid + " tid=main INFO: started");
}

TEST_CASE("--log-format names: text and json") {
  CHECK(LogFormatNamed("text") == LogFormat::kText);
  CHECK(LogFormatNamed("json") == LogFormat::kJson);
  CHECK(!LogFormatNamed("xml").has_value());
  CHECK(!LogFormatNamed("JSON").has_value());
  CHECK(!LogFormatNamed("").has_value());
}

// The one JSON object `line` holds; fails the test when it is anything else
// (not JSON, not UTF-8, more than one value, more than one line).
rapidjson::Document ParseLine(const std::string& line) {
  CHECK(line.find('\n') == std::string::npos);
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseValidateEncodingFlag>(line.data(), line.size());
  REQUIRE_MESSAGE(!doc.HasParseError(), line);
  REQUIRE(doc.IsObject());
  return doc;
}

std::string StringField(const rapidjson::Document& doc, const char* key) {
  auto it = doc.FindMember(key);
  REQUIRE_MESSAGE(it != doc.MemberEnd(), key);
  REQUIRE(it->value.IsString());
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

TEST_CASE("a job line in JSON carries every field, each with its type") {
  LogCapture captured;
  Logger log(LogLevel::kInfo, captured.Sink(), LogFormat::kJson);
  // On a thread of its own: the name stays with that thread.
  std::thread processor([&] {
    SetLogThreadName("p3");
    JobLogContext context("EmailJob", "ab12cd", "mail");
    log.Log(LogLevel::kWarn,
            LogEvent("job_fail").WithDuration(0.0123456789).WithError("RuntimeError: boom"),
            "fail: %.6f sec: %s", 0.0123456789, "RuntimeError: boom");
  });
  processor.join();
  std::vector<std::string> lines = captured.Lines();
  REQUIRE(lines.size() == 1);
  rapidjson::Document doc = ParseLine(lines[0]);
  std::string time = StringField(doc, "time");
  CHECK(time.size() == 24);
  CHECK(time[10] == 'T');
  CHECK(time.back() == 'Z');
  CHECK(StringField(doc, "level") == "WARN");
  REQUIRE(doc.HasMember("pid"));
  REQUIRE(doc["pid"].IsInt());
  CHECK(doc["pid"].GetInt() == getpid());
  CHECK(StringField(doc, "tid") == "p3");
  CHECK(StringField(doc, "event") == "job_fail");
  CHECK(StringField(doc, "msg") == "fail: 0.012346 sec: RuntimeError: boom");
  CHECK(StringField(doc, "jid") == "ab12cd");
  CHECK(StringField(doc, "class") == "EmailJob");
  CHECK(StringField(doc, "queue") == "mail");
  REQUIRE(doc.HasMember("duration"));
  REQUIRE(doc["duration"].IsNumber());
  CHECK(doc["duration"].GetDouble() == doctest::Approx(0.012346).epsilon(1e-9));
  CHECK(StringField(doc, "error") == "RuntimeError: boom");
  // In the documented order.
  const char* order[] = {"time", "level", "pid",   "tid",      "event", "msg",
                         "jid",  "class", "queue", "duration", "error"};
  size_t i = 0;
  for (auto it = doc.MemberBegin(); it != doc.MemberEnd(); ++it, ++i) {
    REQUIRE(i < std::size(order));
    CHECK(std::string(it->name.GetString()) == order[i]);
  }
  CHECK(i == std::size(order));
}

TEST_CASE("a JSON line leaves out the fields it has not") {
  LogCapture captured;
  Logger log(LogLevel::kInfo, captured.Sink(), LogFormat::kJson);
  log.Log(LogLevel::kInfo, "started", "started %s", "host:1");
  log.Log(LogLevel::kWarn, LogEvent("queue_broken").WithQueue("low").WithError("WRONGTYPE"),
          "queue %s is broken", "low");
  log.Log(LogLevel::kInfo, LogEvent("odd").WithDuration(1.0 / 0.0), "infinite");
  std::vector<std::string> lines = captured.Lines();
  REQUIRE(lines.size() == 3);
  rapidjson::Document plain = ParseLine(lines[0]);
  CHECK(StringField(plain, "tid") == "main");
  CHECK(StringField(plain, "event") == "started");
  CHECK(StringField(plain, "msg") == "started host:1");
  for (const char* absent : {"jid", "class", "queue", "duration", "error"}) {
    CHECK_MESSAGE(!plain.HasMember(absent), absent);
  }
  rapidjson::Document queue = ParseLine(lines[1]);
  CHECK(StringField(queue, "queue") == "low");
  CHECK(StringField(queue, "error") == "WRONGTYPE");
  CHECK(!queue.HasMember("jid"));
  CHECK(!ParseLine(lines[2]).HasMember("duration"));  // not a number JSON can hold
}

TEST_CASE("control characters and invalid UTF-8 in JSON fields cannot forge a line") {
  LogCapture captured;
  Logger log(LogLevel::kInfo, captured.Sink(), LogFormat::kJson);
  const char* evil_class = "Evil\r\n{\"level\":\"INFO\"}\x1b[2J\xC2\x9B\xFF";
  const char* evil_error = "boom\x07\xFF\xC0\xAF\" \\ \n\x7F";
  {
    JobLogContext context(evil_class, "j\"1", "q\xE2\x82");
    log.Log(LogLevel::kWarn, LogEvent("job_fail").WithDuration(1).WithError(evil_error), "fail: %s",
            evil_error);
  }
  std::vector<std::string> lines = captured.Lines();
  REQUIRE(lines.size() == 1);
  CHECK(Inert(lines[0]));
  rapidjson::Document doc = ParseLine(lines[0]);
  // Each value holds what the text format shows.
  CHECK(StringField(doc, "class") == "Evil\\r\\n{\"level\":\"INFO\"}\\x1b[2J\\u009b\\xff");
  CHECK(StringField(doc, "error") == "boom\\x07\\xff\\xc0\\xaf\" \\ \\n\\x7f");
  CHECK(StringField(doc, "msg") == "fail: boom\\x07\\xff\\xc0\\xaf\" \\ \\n\\x7f");
  CHECK(StringField(doc, "jid") == "j\"1");
  CHECK(StringField(doc, "queue") == "q\\xe2\\x82");
  CHECK(StringField(doc, "level") == "WARN");
}

TEST_CASE("a JSON message cut for length is still one valid object") {
  LogCapture captured;
  Logger log(LogLevel::kInfo, captured.Sink(), LogFormat::kJson);
  std::string long_text;
  for (int i = 0; i < 3000; ++i) long_text += "\xC3\xA9";  // é: the cut may split one
  log.Log(LogLevel::kInfo, LogEvent("long").WithError(long_text), "%s", long_text.c_str());
  std::vector<std::string> lines = captured.Lines();
  REQUIRE(lines.size() == 1);
  rapidjson::Document doc = ParseLine(lines[0]);
  CHECK(StringField(doc, "msg").size() < long_text.size());
  CHECK(StringField(doc, "error") == long_text);
}

TEST_CASE("below the level nothing reaches the sink, in either format") {
  for (LogFormat format : {LogFormat::kText, LogFormat::kJson}) {
    LogCapture captured;
    Logger log(LogLevel::kInfo, captured.Sink(), format);
    JobLogContext context("C", "j", "q");
    log.Log(LogLevel::kDebug, LogEvent("job_done").WithDuration(0.1), "done: %.6f sec", 0.1);
    CHECK(captured.Lines().empty());
    CHECK(!log.Enabled(LogLevel::kDebug));
  }
}

TEST_CASE("on stderr, a JSON line is one object and one newline") {
  std::string out = CapturedStderr([] {
    Logger log(LogLevel::kInfo, {}, LogFormat::kJson);
    log.Log(LogLevel::kError, LogEvent("test").WithError("A\nB"), "class %s", "A\nB\x1b");
  });
  REQUIRE(!out.empty());
  CHECK(out.back() == '\n');
  CHECK(out.find('\n') == out.size() - 1);
  out.pop_back();
  rapidjson::Document doc = ParseLine(out);
  CHECK(StringField(doc, "msg") == "class A\\nB\\x1b");
  CHECK(StringField(doc, "error") == "A\\nB");
}

}  // namespace
}  // namespace reliableq
