// CronSchedule: a cron expression in a time zone, and the ticks it gives.
// Pure: no I/O beyond reading the system's tzdata (/usr/share/zoneinfo, by
// Howard Hinnant's date/tz library) the first time a zone other than UTC is
// named.
//
// Syntax (reliableq(1), "PERIODIC JOBS"): 5 fields, minute hour
// day-of-month month day-of-week, or 6 with a leading seconds field. Each
// field is a comma list of `*`, N, N-M, each optionally /STEP (N/STEP means
// N to the field's end). Months jan..dec and days sun..sat by name, in any
// case; day-of-week 7 is Sunday. Macros: @yearly @annually @monthly @weekly
// @daily @midnight @hourly. Vixie cron's day rule: when neither the
// day-of-month nor the day-of-week field starts with `*`, a day matching
// either one fires; otherwise a day must match both.
//
// Time zones: the fields are read in local time of the zone. A local time
// that does not exist (the hour skipped when clocks go forward) gives no
// tick; a local time that occurs twice (clocks go back) gives one tick, at
// its first occurrence.
//
// Thread safety: a CronSchedule is an immutable value; its calls may run on
// any thread at once.

#ifndef RELIABLEQ_PERIODIC_CRON_H_
#define RELIABLEQ_PERIODIC_CRON_H_

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "reliableq/status.h"

namespace date {
class time_zone;
}

namespace reliableq::periodic {

class CronSchedule {
 public:
  // kInvalidArgument with a one-line reason naming the field ("cron: minute
  // field \"61\": 61 is out of range 0-59"), or the time zone, when the
  // expression or the zone is bad, or when the expression can never fire
  // (day-of-month 30 in February only).
  static Result<CronSchedule> Parse(std::string_view expression,
                                    std::string_view time_zone = "UTC");

  // The first tick strictly after `after` (epoch seconds), or nullopt when
  // none falls in the next 30 years.
  std::optional<int64_t> Next(int64_t after) const;
  // The latest tick at or before `at`, or nullopt when none falls in the 30
  // years before it.
  std::optional<int64_t> Previous(int64_t at) const;

  // True when the expression has a seconds field.
  bool has_seconds() const { return has_seconds_; }
  const std::string& time_zone_name() const { return zone_name_; }

 private:
  CronSchedule() = default;
  // The first local time (seconds since the local epoch) at or after
  // `local` whose fields match, or nullopt past `limit`.
  std::optional<int64_t> NextLocal(int64_t local, int64_t limit) const;
  bool DayMatches(unsigned day, unsigned weekday) const;

  std::bitset<60> seconds_;
  std::bitset<60> minutes_;
  std::bitset<24> hours_;
  std::bitset<32> days_;     // 1..31
  std::bitset<13> months_;   // 1..12
  std::bitset<7> weekdays_;  // 0 = Sunday
  bool days_star_ = true;
  bool weekdays_star_ = true;
  bool has_seconds_ = false;
  const date::time_zone* zone_ = nullptr;  // null: UTC
  std::string zone_name_ = "UTC";
};

}  // namespace reliableq::periodic

#endif  // RELIABLEQ_PERIODIC_CRON_H_
