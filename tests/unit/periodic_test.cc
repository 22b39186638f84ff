// The cron parser and next-tick calculator (with time zones and DST), and
// the pure bookkeeping of periodic jobs. No Redis.

#include "reliableq/periodic.h"

#include <doctest/doctest.h>

#include <string>

#include "codec/job_codec.h"
#include "periodic/cron.h"
#include "periodic/tick_plan.h"

namespace reliableq {

using namespace reliableq::codec;

using namespace periodic;

namespace {

CronSchedule Cron(std::string_view text, std::string_view zone = "UTC") {
  Result<CronSchedule> cron = CronSchedule::Parse(text, zone);
  REQUIRE_MESSAGE(cron.ok(), cron.status().ToString());
  return *cron;
}

std::string ParseError(std::string_view text, std::string_view zone = "UTC") {
  Result<CronSchedule> cron = CronSchedule::Parse(text, zone);
  REQUIRE_FALSE(cron.ok());
  CHECK(cron.status().code() == Status::Code::kInvalidArgument);
  return cron.status().message();
}

// 2024-01-01T00:00:00Z, a Monday.
constexpr int64_t kJan1 = 1704067200;

TEST_CASE("cron: fields, lists, ranges and steps") {
  CronSchedule every_minute = Cron("* * * * *");
  CHECK(every_minute.Next(kJan1) == kJan1 + 60);
  CHECK(every_minute.Next(kJan1 + 59) == kJan1 + 60);
  CHECK_FALSE(every_minute.has_seconds());

  CronSchedule steps = Cron("*/15 * * * *");
  CHECK(steps.Next(kJan1) == kJan1 + 15 * 60);
  CHECK(steps.Next(kJan1 + 45 * 60) == kJan1 + 3600);

  CronSchedule ranged = Cron("10-30/10 * * * *");
  CHECK(ranged.Next(kJan1) == kJan1 + 10 * 60);
  CHECK(ranged.Next(kJan1 + 10 * 60) == kJan1 + 20 * 60);
  CHECK(ranged.Next(kJan1 + 30 * 60) == kJan1 + 3600 + 10 * 60);

  // N/STEP runs from N to the field's end.
  CronSchedule from = Cron("50/5 * * * *");
  CHECK(from.Next(kJan1) == kJan1 + 50 * 60);
  CHECK(from.Next(kJan1 + 55 * 60) == kJan1 + 3600 + 50 * 60);

  CronSchedule list = Cron("0 9,17 * * *");
  CHECK(list.Next(kJan1) == kJan1 + 9 * 3600);
  CHECK(list.Next(kJan1 + 9 * 3600) == kJan1 + 17 * 3600);
  CHECK(list.Next(kJan1 + 17 * 3600) == kJan1 + 86400 + 9 * 3600);
}

TEST_CASE("cron: a leading seconds field") {
  CronSchedule every_second = Cron("* * * * * *");
  CHECK(every_second.has_seconds());
  CHECK(every_second.Next(kJan1) == kJan1 + 1);
  CronSchedule quarter = Cron("*/15 * * * * *");
  CHECK(quarter.Next(kJan1) == kJan1 + 15);
  CHECK(quarter.Next(kJan1 + 45) == kJan1 + 60);
  CHECK(quarter.Previous(kJan1 + 44) == kJan1 + 30);
  CHECK(quarter.Previous(kJan1 + 45) == kJan1 + 45);
}

TEST_CASE("cron: month and day names, any case; 7 is Sunday") {
  // 2024-01-01 is a Monday; Jan 6 a Saturday, Jan 7 a Sunday.
  CronSchedule weekdays = Cron("0 12 * JAN-mar Mon-FRI");
  CHECK(weekdays.Next(kJan1) == kJan1 + 12 * 3600);
  CHECK(weekdays.Next(kJan1 + 4 * 86400 + 12 * 3600) == kJan1 + 7 * 86400 + 12 * 3600);
  CHECK(Cron("0 0 * * 7").Next(kJan1) == kJan1 + 6 * 86400);
  CHECK(Cron("0 0 * * sun").Next(kJan1) == kJan1 + 6 * 86400);
  CHECK(Cron("0 0 1 apr *").Next(kJan1) == 1711929600);  // 2024-04-01
}

TEST_CASE("cron: macros") {
  CHECK(Cron("@hourly").Next(kJan1) == kJan1 + 3600);
  CHECK(Cron("@daily").Next(kJan1) == kJan1 + 86400);
  CHECK(Cron("@midnight").Next(kJan1) == kJan1 + 86400);
  CHECK(Cron("@weekly").Next(kJan1) == kJan1 + 6 * 86400);  // Sunday Jan 7
  CHECK(Cron("@monthly").Next(kJan1) == 1706745600);        // 2024-02-01
  CHECK(Cron("@yearly").Next(kJan1) == 1735689600);         // 2025-01-01
  CHECK(Cron("@annually").Next(kJan1) == 1735689600);
}

TEST_CASE("cron: February 29 fires in leap years only") {
  CronSchedule leap = Cron("0 0 29 2 *");
  CHECK(leap.Next(1709251200) == 1835395200);      // from 2024-03-01 to 2028-02-29
  CHECK(leap.Previous(1835395199) == 1709164800);  // 2024-02-29
}

TEST_CASE("cron: Vixie's rule for day-of-month and day-of-week") {
  const int64_t sep1 = 1725148800;  // 2024-09-01, a Sunday
  // Both restricted: the 13th or any Friday.
  CronSchedule either = Cron("0 0 13 * 5");
  CHECK(either.Next(sep1) == 1725580800);               // Fri Sep 6
  CHECK(either.Next(1725580800) == 1726185600);         // Fri Sep 13
  CHECK(either.Next(1726185600) == 1726790400);         // Fri Sep 20
  CHECK(Cron("0 0 2 * 5").Next(sep1) == sep1 + 86400);  // Mon Sep 2 (the 2nd)
  // A field starting with `*` is not a restriction: both must match.
  CronSchedule both = Cron("0 0 */2 * 5");  // odd days that are Fridays
  CHECK(both.Next(sep1) == 1726185600);     // Sep 13 (Sep 6 is even)
  CHECK(Cron("0 0 13 * *").Next(sep1) == 1726185600);
}

TEST_CASE("cron: DST in Europe/Berlin") {
  // 2024-03-31 02:00 CET the clocks go to 03:00: 02:30 does not exist.
  CronSchedule half_past_two = Cron("30 2 * * *", "Europe/Berlin");
  CHECK(half_past_two.Next(1711762200 - 1) == 1711762200);  // Mar 30 02:30 CET
  CHECK(half_past_two.Next(1711762200) == 1711931400);      // Apr 1 02:30 CEST
  // 2024-10-27 03:00 CEST the clocks go back to 02:00: 02:30 happens twice,
  // and fires at the first.
  CHECK(half_past_two.Next(1729944000) == 1729989000);  // 00:30 UTC, CEST
  CHECK(half_past_two.Next(1729989000) == 1730079000);  // the next day, not 01:30 UTC
  // A worker that starts during the second 02:xx does not fire 02:30 again.
  CHECK(half_past_two.Next(1729989000 + 3600 - 60) == 1730079000);
  // Wall-clock hours stay put across the change.
  CronSchedule nine = Cron("0 9 * * *", "Europe/Berlin");
  CHECK(nine.Next(1711762200) == 1711785600);  // Mar 30 09:00 CET = 08:00 UTC
  CHECK(nine.Next(1711785600) == 1711868400);  // Mar 31 09:00 CEST = 07:00 UTC
}

TEST_CASE("cron: DST in America/New_York") {
  // 2024-03-10 02:00 EST the clocks go to 03:00: 02:00 is skipped that day.
  CronSchedule two = Cron("0 2 * * *", "America/New_York");
  CHECK(two.Next(1709967600) == 1710136800);  // Mar 9 02:00 EST -> Mar 11 02:00 EDT
  // 2024-11-03 02:00 EDT the clocks go back to 01:00: 01:xx happens twice.
  // Every minute fires through the first 01:xx, then not again until 02:00
  // EST.
  CronSchedule every_minute = Cron("* * * * *", "America/New_York");
  CHECK(every_minute.Next(1730613540 - 60) == 1730613540);  // 01:59 EDT
  CHECK(every_minute.Next(1730613540) == 1730617200);       // 02:00 EST = 07:00 UTC
  CHECK(every_minute.Previous(1730617199) == 1730613540);
}

TEST_CASE("cron: every error names the field") {
  CHECK(ParseError("* * * *").find("has 4 fields") != std::string::npos);
  CHECK(ParseError("* * * * * * *").find("has 7 fields") != std::string::npos);
  CHECK(ParseError("60 * * * *") == "cron: minute field \"60\": 60 is out of range 0-59");
  CHECK(ParseError("60 * * * * *").find("second field") != std::string::npos);
  CHECK(ParseError("* 24 * * *").find("hour field \"24\"") != std::string::npos);
  CHECK(ParseError("* * 0 * *").find("day-of-month field \"0\"") != std::string::npos);
  CHECK(ParseError("* * 32 * *").find("day-of-month field") != std::string::npos);
  CHECK(ParseError("* * * 13 *").find("month field \"13\"") != std::string::npos);
  CHECK(ParseError("* * * foo *").find("month field \"foo\": \"foo\" is not a value") !=
        std::string::npos);
  CHECK(ParseError("* * * * 8").find("day-of-week field \"8\"") != std::string::npos);
  CHECK(ParseError("* * * * mon-bogus").find("day-of-week field") != std::string::npos);
  CHECK(ParseError("*/0 * * * *").find("minute field \"*/0\": step 0") != std::string::npos);
  CHECK(ParseError("*/x * * * *").find("is not a number") != std::string::npos);
  CHECK(ParseError("30-10 * * * *").find("runs backwards") != std::string::npos);
  CHECK(ParseError("1,,2 * * * *").find("empty list item") != std::string::npos);
  CHECK(ParseError("@reboot").find("unknown macro") != std::string::npos);
  CHECK(ParseError("0 0 30 2 *").find("day-of-month field \"30\": no chosen month") !=
        std::string::npos);
  CHECK(ParseError("* * * * *", "Mars/Olympus").find("time zone \"Mars/Olympus\"") !=
        std::string::npos);
}

TEST_CASE("periodic: ticks owed, in order, the latest at most") {
  CronSchedule every_second = Cron("* * * * * *");
  OwedTicks none = TicksOwed(every_second, kJan1, kJan1, 10);
  CHECK(none.ticks.empty());
  OwedTicks three = TicksOwed(every_second, kJan1, kJan1 + 3, 10);
  CHECK(three.ticks == std::vector<int64_t>{kJan1 + 1, kJan1 + 2, kJan1 + 3});
  CHECK(three.skipped == 0);
  // A stalled loop: an hour owed, 5 pushed, the rest skipped and counted.
  OwedTicks stalled = TicksOwed(every_second, kJan1, kJan1 + 3600, 5);
  CHECK(stalled.ticks ==
        std::vector<int64_t>{kJan1 + 3596, kJan1 + 3597, kJan1 + 3598, kJan1 + 3599, kJan1 + 3600});
  CHECK(stalled.skipped == 3595);
  CHECK(stalled.first_skipped == kJan1 + 1);
  CHECK(stalled.last_skipped == kJan1 + 3595);
  // Exactly max owed: nothing skipped.
  OwedTicks exact = TicksOwed(Cron("@hourly"), kJan1, kJan1 + 5 * 3600, 5);
  CHECK(exact.ticks.size() == 5);
  CHECK(exact.skipped == 0);
}

TEST_CASE("periodic: declarations from JSON, and their errors") {
  Result<PeriodicJob> job = ParsePeriodicJob(
      "report", R"({"cron":"0 6 * * *","class":"Report","queue":"low","args":[1, "x"],)"
                R"("retry":3,"timezone":"Europe/Berlin","catch_up":true})");
  REQUIRE_MESSAGE(job.ok(), job.status().ToString());
  CHECK(job->cron == "0 6 * * *");
  CHECK(job->job_class == "Report");
  CHECK(job->queue == "low");
  CHECK(job->args == R"([1,"x"])");
  CHECK(job->retry == "3");
  CHECK(job->time_zone == "Europe/Berlin");
  CHECK(job->catch_up);

  auto error = [](std::string_view name, std::string_view json) {
    Result<PeriodicJob> bad = ParsePeriodicJob(name, json);
    REQUIRE_FALSE(bad.ok());
    return bad.status().message();
  };
  CHECK(error("r", R"({"class":"A"})") == "periodic job \"r\": cron: missing");
  CHECK(error("r", R"({"cron":"* * * * *"})") == "periodic job \"r\": class: missing");
  CHECK(error("r", R"({"cron":"61 * * * *","class":"A"})") ==
        "periodic job \"r\": cron: minute field \"61\": 61 is out of range 0-59");
  CHECK(error("r", R"({"cron":"* * * * *","class":"A","args":{}})") ==
        "periodic job \"r\": args: must be a JSON array");
  CHECK(error("r", R"({"cron":"* * * * *","class":"A","retry":-1})").find("retry:") !=
        std::string::npos);
  CHECK(error("r", R"({"cron":"* * * * *","class":"A","catch_up":1})").find("catch_up:") !=
        std::string::npos);
  CHECK(error("r", R"({"cron":"* * * * *","class":"A","when":1})").find("unknown key \"when\"") !=
        std::string::npos);
  CHECK(error("r", R"({"cron":"* * * * *","class":"A","timezone":"No/Where"})").find("time zone") !=
        std::string::npos);
  CHECK(error("r", R"({"cron":"* * * * *","class":"A","extra":{"periodic":1}})").find("extra:") !=
        std::string::npos);
  CHECK(error("r", "[1]") == "periodic job \"r\": must be a JSON object");
  CHECK(error("r", "{").find("not JSON") != std::string::npos);
  CHECK(error("a b", R"({"cron":"* * * * *","class":"A"})").find("name:") != std::string::npos);
  CHECK(error("", R"({"cron":"* * * * *","class":"A"})").find("name:") != std::string::npos);
}

TEST_CASE("periodic: the definition digest and the pushed payload") {
  PeriodicJob a = *ParsePeriodicJob("n", R"({"cron":"* * * * *","class":"A","args":[1,2]})");
  PeriodicJob b = *ParsePeriodicJob("n", R"({"cron":"* * * * *","class":"A","args":[1, 2]})");
  PeriodicJob c = *ParsePeriodicJob("n", R"({"cron":"*/2 * * * *","class":"A","args":[1,2]})");
  PeriodicJob d = *ParsePeriodicJob("n", R"({"cron":"* * * * *","class":"A","args":[1,3]})");
  PeriodicJob e = *ParsePeriodicJob("n", R"({"cron":"* * * * *","class":"A","args":[1,2],)"
                                         R"("timezone":"Europe/Berlin"})");
  PeriodicDefinition da = DefinitionOf(a);
  CHECK(da.digest.size() == 16);
  CHECK(da.args == "[1,2]");
  CHECK(da.time_zone == "UTC");
  CHECK(da.retry == "true");
  CHECK(DefinitionOf(b).digest == da.digest);
  CHECK(DefinitionOf(c).digest != da.digest);
  CHECK(DefinitionOf(d).digest != da.digest);
  CHECK(DefinitionOf(e).digest != da.digest);

  PeriodicJob extra = *ParsePeriodicJob(
      "n", R"({"cron":"* * * * *","class":"A","queue":"q","extra":{"tags":["t"]}})");
  Result<std::string> payload = TickPayload(extra, kJan1 + 60, 1704067260.5);
  REQUIRE(payload.ok());
  Result<DecodedJob> job = DecodeJob(*payload);
  REQUIRE(job.ok());
  CHECK(std::string(job->document["periodic"].GetString()) == "n");
  CHECK(job->document["periodic_tick"].GetDouble() == doctest::Approx(kJan1 + 60));
  CHECK(std::string(job->document["queue"].GetString()) == "q");
  CHECK(job->document["tags"].IsArray());
  CHECK(std::string(job->document["jid"].GetString()).size() == 24);
  CHECK(payload->find("\"periodic\":\"n\",\"periodic_tick\":1704067260.0") != std::string::npos);
}

}  // namespace
}  // namespace reliableq
