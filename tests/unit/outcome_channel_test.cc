// What a command handler's outcome lines and an HTTP handler's answer mean,
// apart from any process or socket: the fd 3 line grammar and its splitter,
// the HTTP status classes and Retry-After (read with libcurl's own
// curl_getdate). reliableq(1), OUTCOMES, is the contract these check.

#include "exec/outcome_channel.h"

#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "exec/curl_library.h"
#include "exec/http_caller.h"

using namespace reliableq;
using namespace reliableq::exec;
using namespace std::chrono_literals;
using Verb = ChannelLine::Verb;

namespace {

ChannelLine Parsed(std::string_view line) {
  Result<ChannelLine> parsed = ParseChannelLine(line);
  REQUIRE_MESSAGE(parsed.ok(), (std::string(line) + ": " + parsed.status().ToString()));
  return *parsed;
}

std::string Refused(std::string_view line) {
  Result<ChannelLine> parsed = ParseChannelLine(line);
  REQUIRE_MESSAGE(!parsed.ok(), (std::string(line) + " was taken"));
  CHECK(parsed.status().IsInvalidArgument());
  return parsed.status().message();
}

struct Split {
  std::string line;
  bool too_long;
  size_t length;
  bool operator==(const Split&) const = default;
};

std::vector<Split> SplitAll(const std::vector<std::string>& reads, bool finish = true) {
  std::vector<Split> lines;
  LineSplitter splitter([&](std::string_view line, bool too_long, size_t length) {
    lines.push_back({std::string(line), too_long, length});
  });
  for (const std::string& bytes : reads) splitter.Feed(bytes);
  if (finish) splitter.Finish();
  return lines;
}

}  // namespace

TEST_CASE("outcome line: snooze takes seconds from 0, bounded to a year") {
  ChannelLine line = Parsed("snooze 30");
  CHECK(line.verb == Verb::kSnooze);
  CHECK(line.ends_job());
  CHECK(line.delay == 30s);
  CHECK(Parsed("snooze 0").delay == 0ms);
  CHECK(Parsed("snooze 0.25").delay == 250ms);
  CHECK(Parsed("snooze 2.0005").delay == 2001ms);  // rounded to the millisecond
  CHECK(Parsed("snooze 31536000").delay == kMostChannelDelay);
  CHECK(Parsed("snooze 99999999999").delay == kMostChannelDelay);
  CHECK(Parsed(std::string("snooze ") + std::string(400, '9')).delay == kMostChannelDelay);
  CHECK(Parsed("snooze   7").delay == 7s);  // spaces after the verb
  // A CR is the splitter's to drop; here it is not a digit.
  CHECK(Refused("snooze 7\r").find("snooze needs SECONDS") != std::string::npos);
}

TEST_CASE("outcome line: numbers are plain decimals, nothing else") {
  for (const char* bad :
       {"snooze", "snooze ", "snooze -1", "snooze +1", "snooze 1e3", "snooze inf", "snooze nan",
        "snooze 0x10", "snooze .5", "snooze 5.", "snooze 1.2.3", "snooze 5 s", "snooze five"}) {
    CAPTURE(bad);
    CHECK(Refused(bad).find("snooze needs SECONDS") != std::string::npos);
  }
}

TEST_CASE("outcome line: retry takes seconds above 0 and an optional message") {
  ChannelLine line = Parsed("retry 300 the gateway is busy");
  CHECK(line.verb == Verb::kRetry);
  CHECK(line.delay == 300s);
  CHECK(line.text == "the gateway is busy");
  CHECK(Parsed("retry 1.5").text.empty());
  CHECK(Parsed("retry 1.5").delay == 1500ms);
  CHECK(Parsed("retry 0.0001").delay == 1ms);  // above 0 stays above 0
}

TEST_CASE("outcome line: a retry of 0 seconds or without a number is refused") {
  CHECK(Refused("retry 0").find("above 0") != std::string::npos);
  CHECK(Refused("retry").find("retry needs SECONDS") != std::string::npos);
  CHECK(Refused("retry soon please").find("retry needs SECONDS") != std::string::npos);
}

TEST_CASE("outcome line: discard, dead and fail take the rest of the line as their message") {
  CHECK(Parsed("discard").verb == Verb::kDiscard);
  CHECK(Parsed("discard").text.empty());
  CHECK(Parsed("discard the order was deleted").text == "the order was deleted");
  CHECK(Parsed("dead card refused: insufficient funds").verb == Verb::kDead);
  CHECK(Parsed("dead card refused: insufficient funds").text == "card refused: insufficient funds");
  CHECK(Parsed("fail  two spaces  kept inside").text == "two spaces  kept inside");
  CHECK(Parsed("fail ünïcödé ✓").text == "ünïcödé ✓");
  for (Verb verb : {Verb::kDiscard, Verb::kDead, Verb::kFail}) {
    CHECK(Parsed(VerbName(verb)).ends_job());
  }
}

TEST_CASE("outcome line: result needs one JSON value; progress a percentage") {
  ChannelLine result = Parsed(R"(result {"charged": 1200, "id": "ch_1"})");
  CHECK(result.verb == Verb::kResult);
  CHECK_FALSE(result.ends_job());
  CHECK(result.text == R"({"charged": 1200, "id": "ch_1"})");
  CHECK(Parsed("result 42").text == "42");
  CHECK(Refused("result").find("one JSON value") != std::string::npos);
  CHECK(Refused("result {\"a\": ").find("one JSON value") != std::string::npos);
  CHECK(Refused("result {} {}").find("one JSON value") != std::string::npos);

  CHECK(Parsed("progress 42.5").percent == 42.5);
  CHECK(Parsed("progress 0").percent == 0);
  CHECK(Parsed("progress 100").percent == 100);
  CHECK_FALSE(Parsed("progress 100").ends_job());
  CHECK(Parsed("progress 100").text.empty());
  ChannelLine described = Parsed("progress 40 copying 12 of 30 files");
  CHECK(described.percent == 40);
  CHECK(described.text == "copying 12 of 30 files");
  CHECK(Refused("progress 100.5").find("0 to 100") != std::string::npos);
  CHECK(Refused("progress -1").find("0 to 100") != std::string::npos);
  CHECK(Refused("progress half").find("0 to 100") != std::string::npos);
}

TEST_CASE("outcome line: log takes one of four levels and its text") {
  ChannelLine line = Parsed("log warn the cache is cold");
  CHECK(line.verb == Verb::kLog);
  CHECK(line.level == LogLevel::kWarn);
  CHECK(line.text == "the cache is cold");
  CHECK(Parsed("log debug x").level == LogLevel::kDebug);
  CHECK(Parsed("log info x").level == LogLevel::kInfo);
  CHECK(Parsed("log error x").level == LogLevel::kError);
  // Control characters are the log's to escape; the line keeps them.
  CHECK(Parsed("log info a\x1b[31mb").text == "a\x1b[31mb");
  CHECK(Refused("log").find("a level") != std::string::npos);
  CHECK(Refused("log fatal boom").find("a level") != std::string::npos);
  CHECK(Refused("log INFO upper case").find("a level") != std::string::npos);
}

TEST_CASE("outcome line: unknown verbs, empty lines and bytes that are not UTF-8 are refused") {
  CHECK(Refused("") == "an empty line");
  CHECK(Refused("succeed") == "an unknown verb");
  CHECK(Refused("Snooze 5") == "an unknown verb");
  CHECK(Refused(" snooze 5") == "an unknown verb");
  CHECK(Refused("snooze\t5") == "an unknown verb");
  CHECK(Refused("fail \xff\xfe") == "a line that is not UTF-8");
}

TEST_CASE("line splitter: lines across reads, a CR before the LF dropped, a last line unended") {
  CHECK(
      SplitAll({"snooze 5\nlog info a", " b\r\n", "dead"}) ==
      std::vector<Split>{{"snooze 5", false, 8}, {"log info a b", false, 12}, {"dead", false, 4}});
  // Without Finish the unended line waits.
  CHECK(SplitAll({"fail\nretr"}, false) == std::vector<Split>{{"fail", false, 4}});
  CHECK(SplitAll({"\n\n"}) == std::vector<Split>{{"", false, 0}, {"", false, 0}});
  CHECK(SplitAll({}).empty());
}

TEST_CASE("line splitter: a line above 64 KiB comes as its head, and the next one whole") {
  std::string exact = "log info " + std::string(kMaxChannelLine - 9, 'x');
  REQUIRE(exact.size() == kMaxChannelLine);
  std::vector<Split> lines = SplitAll({exact + "\n"});
  REQUIRE(lines.size() == 1);
  CHECK_FALSE(lines[0].too_long);
  CHECK(lines[0].line == exact);

  // 1 MiB in 4 KiB reads, then a good line: memory stays bounded, the good
  // line is not lost.
  std::vector<std::string> reads(256, std::string(4096, 'y'));
  reads.push_back("\nsnooze 1\n");
  lines = SplitAll(reads);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].too_long);
  CHECK(lines[0].length == 256 * 4096);
  CHECK(lines[0].line == std::string(64, 'y'));
  CHECK(lines[1] == Split{"snooze 1", false, 8});
}

TEST_CASE("HTTP statuses: 2xx done; 408, 425, 429 and 5xx again; other 4xx client errors") {
  for (long status : {200, 201, 202, 204, 299}) {
    CAPTURE(status);
    CHECK(ClassifyStatus(status) == HttpStatusClass::kSuccess);
  }
  for (long status : {408, 425, 429, 500, 502, 503, 504, 599}) {
    CAPTURE(status);
    CHECK(ClassifyStatus(status) == HttpStatusClass::kTryAgain);
  }
  for (long status : {400, 401, 403, 404, 409, 410, 422, 499}) {
    CAPTURE(status);
    CHECK(ClassifyStatus(status) == HttpStatusClass::kClientError);
  }
  for (long status : {0, 100, 199, 300, 301, 302, 304, 399, 600, 999}) {
    CAPTURE(status);
    CHECK(ClassifyStatus(status) == HttpStatusClass::kOther);
  }
}

TEST_CASE("Retry-After: delta-seconds and HTTP dates (libcurl's curl_getdate), within an hour") {
  Result<const CurlLibrary*> curl = CurlLibrary::Load();
  REQUIRE_MESSAGE(curl.ok(), curl.status().ToString());
  auto parse_date = (*curl)->getdate;
  // Sun, 06 Nov 1994 08:49:37 GMT, RFC 9110's example.
  const auto now = std::chrono::system_clock::from_time_t(784111777);
  auto delay = [&](std::string_view value) { return RetryAfterDelay(value, now, parse_date); };

  CHECK(delay("2") == 2000ms);
  CHECK(delay("0") == 0ms);
  CHECK(delay(" 120 ") == 120000ms);
  CHECK(delay("3600") == 3600000ms);
  CHECK(delay("3601") == std::chrono::milliseconds(kMostRetryAfter));
  CHECK(delay("99999999999999999999999") == std::chrono::milliseconds(kMostRetryAfter));

  // The three forms HTTP allows; 90 s after now.
  CHECK(delay("Sun, 06 Nov 1994 08:51:07 GMT") == 90000ms);
  CHECK(delay("Sunday, 06-Nov-94 08:51:07 GMT") == 90000ms);
  CHECK(delay("Sun Nov  6 08:51:07 1994") == 90000ms);
  // In the past: now. A day ahead: an hour.
  CHECK(delay("Sat, 05 Nov 1994 08:49:37 GMT") == 0ms);
  CHECK(delay("Mon, 07 Nov 1994 08:49:37 GMT") == std::chrono::milliseconds(kMostRetryAfter));

  for (const char* bad : {"", "  ", "-5", "1.5", "+3", "soon", "Someday", "0x10", "12 s"}) {
    CAPTURE(bad);
    CHECK_FALSE(delay(bad).has_value());
  }
}
