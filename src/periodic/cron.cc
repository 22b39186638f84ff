#include "periodic/cron.h"

#include <date/tz.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <vector>

namespace reliableq::periodic {

namespace {

constexpr int64_t kDay = 86400;
// How far Next and Previous look: past every leap-day-on-a-weekday
// combination (a 28-year cycle).
constexpr int64_t kHorizon = 30 * 366 * kDay;

struct FieldSpec {
  const char* name;
  int min;
  int max;
  const char* const* names;  // names[i] stands for min + i; null: none
};

constexpr const char* kMonthNames[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                       "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr const char* kDayNames[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

constexpr FieldSpec kSecond{"second", 0, 59, nullptr};
constexpr FieldSpec kMinute{"minute", 0, 59, nullptr};
constexpr FieldSpec kHour{"hour", 0, 23, nullptr};
constexpr FieldSpec kDayOfMonth{"day-of-month", 1, 31, nullptr};
constexpr FieldSpec kMonth{"month", 1, 12, kMonthNames};
// 7 is Sunday too; folded onto 0 after parsing.
constexpr FieldSpec kDayOfWeek{"day-of-week", 0, 7, kDayNames};

Status FieldError(const FieldSpec& spec, std::string_view field, const std::string& why) {
  return Status::InvalidArgument("cron: " + std::string(spec.name) + " field \"" +
                                 std::string(field) + "\": " + why);
}

// A number or, where the field has them, a name; nullopt when neither.
std::optional<int> ParseValue(const FieldSpec& spec, std::string_view text) {
  int value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (!text.empty() && error == std::errc() && end == text.data() + text.size()) return value;
  if (spec.names == nullptr || text.size() != 3) return std::nullopt;
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  int count = spec.max - spec.min + 1;
  if (spec.names == kDayNames) count = 7;
  for (int i = 0; i < count; ++i) {
    if (lower == spec.names[i]) return spec.min + i;
  }
  return std::nullopt;
}

// Sets in `bits` (index = value) the values `field` names.
template <size_t N>
Status ParseField(const FieldSpec& spec, std::string_view field, std::bitset<N>* bits) {
  if (field.empty()) return FieldError(spec, field, "empty");
  std::string_view rest = field;
  while (true) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    if (item.empty()) return FieldError(spec, field, "empty list item");
    std::string_view range = item;
    int step = 1;
    bool stepped = false;
    if (size_t slash = item.find('/'); slash != std::string_view::npos) {
      std::string_view step_text = item.substr(slash + 1);
      auto [end, error] =
          std::from_chars(step_text.data(), step_text.data() + step_text.size(), step);
      if (step_text.empty() || error != std::errc() || end != step_text.data() + step_text.size())
        return FieldError(spec, field, "step \"" + std::string(step_text) + "\" is not a number");
      if (step < 1 || step > spec.max) {
        return FieldError(
            spec, field,
            "step " + std::to_string(step) + " is out of range 1-" + std::to_string(spec.max));
      }
      range = item.substr(0, slash);
      stepped = true;
    }
    int low = spec.min;
    int high = spec.max;
    if (range == "*") {
      // The whole field.
    } else {
      size_t dash = range.find('-');
      std::string_view first = range.substr(0, dash);
      std::optional<int> a = ParseValue(spec, first);
      if (!a) return FieldError(spec, field, "\"" + std::string(first) + "\" is not a value");
      low = *a;
      high = stepped ? spec.max : *a;  // N/STEP: from N to the end
      if (dash != std::string_view::npos) {
        std::string_view second = range.substr(dash + 1);
        std::optional<int> b = ParseValue(spec, second);
        if (!b) return FieldError(spec, field, "\"" + std::string(second) + "\" is not a value");
        high = *b;
      }
      for (int v : {low, high}) {
        if (v < spec.min || v > spec.max) {
          return FieldError(spec, field,
                            std::to_string(v) + " is out of range " + std::to_string(spec.min) +
                                "-" + std::to_string(spec.max));
        }
      }
      if (low > high) {
        return FieldError(
            spec, field,
            "range " + std::to_string(low) + "-" + std::to_string(high) + " runs backwards");
      }
    }
    for (int v = low; v <= high; v += step) bits->set(static_cast<size_t>(v));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return Status::OK();
}

std::string_view ExpandMacro(std::string_view expression) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kMacros = {{
      {"@yearly", "0 0 1 1 *"},
      {"@annually", "0 0 1 1 *"},
      {"@monthly", "0 0 1 * *"},
      {"@weekly", "0 0 * * 0"},
      {"@daily", "0 0 * * *"},
      {"@midnight", "0 0 * * *"},
      {"@hourly", "0 * * * *"},
  }};
  for (const auto& [macro, fields] : kMacros) {
    if (expression == macro) return fields;
  }
  return {};
}

unsigned DaysIn(int year, unsigned month) {
  return static_cast<unsigned>((date::year(year) / date::month(month) / date::last).day());
}

}  // namespace

Result<CronSchedule> CronSchedule::Parse(std::string_view expression, std::string_view time_zone) {
  std::vector<std::string_view> fields;
  std::string_view text = expression;
  if (!text.empty() && text.front() == '@') {
    std::string_view expanded = ExpandMacro(text);
    if (expanded.empty()) {
      return Status::InvalidArgument("cron: unknown macro \"" + std::string(text) +
                                     "\" (known: @yearly @annually @monthly @weekly @daily "
                                     "@midnight @hourly)");
    }
    text = expanded;
  }
  size_t at = 0;
  while (at < text.size()) {
    while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at]))) ++at;
    size_t end = at;
    while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end]))) ++end;
    if (end > at) fields.push_back(text.substr(at, end - at));
    at = end;
  }
  if (fields.size() != 5 && fields.size() != 6) {
    return Status::InvalidArgument("cron: \"" + std::string(expression) + "\" has " +
                                   std::to_string(fields.size()) +
                                   " fields; want 5 (minute hour day-of-month month "
                                   "day-of-week) or 6 (seconds first)");
  }
  CronSchedule cron;
  cron.has_seconds_ = fields.size() == 6;
  size_t i = 0;
  Status s;
  if (cron.has_seconds_) {
    s = ParseField(kSecond, fields[i++], &cron.seconds_);
  } else {
    cron.seconds_.set(0);
  }
  if (s.ok()) s = ParseField(kMinute, fields[i++], &cron.minutes_);
  if (s.ok()) s = ParseField(kHour, fields[i++], &cron.hours_);
  if (s.ok()) s = ParseField(kDayOfMonth, fields[i], &cron.days_);
  cron.days_star_ = fields[i++].front() == '*';
  if (s.ok()) s = ParseField(kMonth, fields[i++], &cron.months_);
  std::bitset<8> weekdays;
  if (s.ok()) s = ParseField(kDayOfWeek, fields[i], &weekdays);
  cron.weekdays_star_ = fields[i].front() == '*';
  if (!s.ok()) return s;
  for (size_t d = 0; d < 7; ++d) cron.weekdays_[d] = weekdays[d] || (d == 0 && weekdays[7]);

  // A day-of-month that no chosen month has (30 in February) would make
  // every search run to its horizon: refuse it here instead.
  if (!cron.days_star_ && cron.weekdays_star_) {
    bool possible = false;
    for (unsigned m = 1; m <= 12 && !possible; ++m) {
      if (!cron.months_[m]) continue;
      for (unsigned d = 1; d <= DaysIn(2000, m); ++d) possible = possible || cron.days_[d];
    }
    if (!possible) {
      return Status::InvalidArgument("cron: day-of-month field \"" + std::string(fields[i - 2]) +
                                     "\": no chosen month has such a day");
    }
  }

  if (time_zone.empty() || time_zone == "UTC") return cron;
  try {
    cron.zone_ = date::locate_zone(time_zone);
  } catch (const std::exception&) {
    return Status::InvalidArgument("time zone \"" + std::string(time_zone) +
                                   "\" is not in the system's tzdata (/usr/share/zoneinfo)");
  }
  cron.zone_name_ = std::string(time_zone);
  return cron;
}

bool CronSchedule::DayMatches(unsigned day, unsigned weekday) const {
  bool by_day = days_[day];
  bool by_weekday = weekdays_[weekday];
  if (!days_star_ && !weekdays_star_) return by_day || by_weekday;
  return by_day && by_weekday;
}

std::optional<int64_t> CronSchedule::NextLocal(int64_t local, int64_t limit) const {
  while (local <= limit) {
    date::sys_days day{date::days{local >= 0 ? local / kDay : (local - kDay + 1) / kDay}};
    int64_t day_start = day.time_since_epoch().count() * kDay;
    date::year_month_day ymd{day};
    unsigned month = static_cast<unsigned>(ymd.month());
    if (!months_[month]) {
      date::year_month_day first = ymd.year() / ymd.month() / 1;
      date::sys_days next_month = date::sys_days{first + date::months{1}};
      local = next_month.time_since_epoch().count() * kDay;
      continue;
    }
    unsigned weekday = date::weekday{day}.c_encoding();
    if (!DayMatches(static_cast<unsigned>(ymd.day()), weekday)) {
      local = day_start + kDay;
      continue;
    }
    int64_t of_day = local - day_start;
    int64_t hour = of_day / 3600;
    if (!hours_[static_cast<size_t>(hour)]) {
      local = day_start + (hour + 1) * 3600;
      continue;
    }
    int64_t minute = of_day % 3600 / 60;
    if (!minutes_[static_cast<size_t>(minute)]) {
      local = day_start + hour * 3600 + (minute + 1) * 60;
      continue;
    }
    int64_t second = of_day % 60;
    if (!seconds_[static_cast<size_t>(second)]) {
      local += 1;
      continue;
    }
    return local;
  }
  return std::nullopt;
}

std::optional<int64_t> CronSchedule::Next(int64_t after) const {
  if (zone_ == nullptr) return NextLocal(after + 1, after + kHorizon);
  using std::chrono::seconds;
  date::sys_seconds start{seconds{after}};
  int64_t local = zone_->to_local(start).time_since_epoch().count() + 1;
  const int64_t limit = local + kHorizon;
  while (true) {
    std::optional<int64_t> found = NextLocal(local, limit);
    if (!found) return std::nullopt;
    date::local_seconds at{seconds{*found}};
    date::local_info info = zone_->get_info(at);
    if (info.result != date::local_info::nonexistent) {
      // unique, or ambiguous: its first occurrence (info.first).
      int64_t tick = *found - info.first.offset.count();
      if (tick > after) return tick;
    }
    // A skipped local time, or the second pass of a repeated hour that
    // `after` is already in: the next local time.
    local = *found + 1;
  }
}

std::optional<int64_t> CronSchedule::Previous(int64_t at) const {
  // Next() from ever further back until a tick at or before `at` shows up;
  // then the last of those. The windows grow by at most 60 times, so the
  // walk to the last one is short for any schedule.
  static constexpr int64_t kWindows[] = {2, 60, 3600, kDay, 32 * kDay, 367 * kDay, kHorizon};
  for (int64_t window : kWindows) {
    std::optional<int64_t> tick = Next(at - window);
    if (!tick || *tick > at) continue;
    while (true) {
      std::optional<int64_t> later = Next(*tick);
      if (!later || *later > at) return tick;
      tick = later;
    }
  }
  return std::nullopt;
}

}  // namespace reliableq::periodic
