// Logger: untrusted text in a message (a job class, an error message, a
// remote signal name) cannot forge a log line or reach a terminal raw.

#include "log.h"

#include <fcntl.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "log_capture.h"

namespace reliableq {
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
  log.Log(LogLevel::kWarn, "ignoring unknown signal '%s'", remote);
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
    JobLogContext context("Evil\r\nJob\xC2\x9B", "jid\t1");
    log.Log(LogLevel::kInfo, "fail: %s", "boom\x07\xFF");
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
  log.Log(LogLevel::kInfo, "started: %d threads, queue %s", 10, "caf\xC3\xA9");
  std::vector<std::string> lines = captured.Lines();
  REQUIRE(lines.size() == 1);
  const std::string end = " INFO: started: 10 threads, queue caf\xC3\xA9";
  const std::string& line = lines[0];
  REQUIRE(line.size() > end.size());
  CHECK(line.substr(line.size() - end.size()) == end);
  CHECK(line.find("\\") == std::string::npos);
}

TEST_CASE("on stderr, a message with a newline is one line") {
  // The default sink writes to fd 2: point it at a pipe for the call.
  int fds[2];
  REQUIRE(pipe2(fds, O_CLOEXEC) == 0);
  int saved = dup(STDERR_FILENO);
  REQUIRE(saved >= 0);
  REQUIRE(dup2(fds[1], STDERR_FILENO) == STDERR_FILENO);
  Logger log;
  log.Log(LogLevel::kError, "class %s", "A\nB\x1b");
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  REQUIRE(!out.empty());
  CHECK(out.back() == '\n');
  CHECK(out.find('\n') == out.size() - 1);
  CHECK(out.find(" ERROR: class A\\nB\\x1b\n") != std::string::npos);
}

}  // namespace
}  // namespace reliableq
