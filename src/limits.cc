#include "reliableq/limits.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cmath>
#include <set>

namespace reliableq {

namespace {

constexpr size_t kMaxLimitNameBytes = 100;
// Far beyond any real limit; keeps the Lua arithmetic in exact integers.
constexpr long kMaxCount = 1000000;
constexpr std::chrono::milliseconds kMaxPeriod = std::chrono::hours(24 * 7);

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > kMaxLimitNameBytes) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// A class name as Sidekiq's clients write it: no spaces, commas or quotes.
bool ValidClass(std::string_view name) {
  if (name.empty() || name.size() > 200) return false;
  for (char c : name) {
    if (c <= ' ' || c == ',' || c == '"' || c == '\\' || c == 0x7f) return false;
  }
  return true;
}

bool ParseCount(std::string_view text, int* out) {
  if (text.empty() || text.size() > 7) return false;
  long n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + (c - '0');
  }
  if (n < 1 || n > kMaxCount) return false;
  *out = static_cast<int>(n);
  return true;
}

bool ParsePeriod(std::string_view text, std::chrono::milliseconds* out) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 9) return false;
  long long n = std::stoll(std::string(text.substr(0, digits)));
  std::string_view unit = text.substr(digits);
  long long ms = 0;
  if (unit == "ms") {
    ms = n;
  } else if (unit == "s") {
    ms = n * 1000;
  } else if (unit == "m") {
    ms = n * 60000;
  } else if (unit == "h") {
    ms = n * 3600000;
  } else {
    return false;
  }
  if (ms < 1 || ms > kMaxPeriod.count()) return false;
  *out = std::chrono::milliseconds(ms);
  return true;
}

Status BadLimit(std::string_view text, const std::string& why) {
  return Status::InvalidArgument("limit '" + std::string(text.substr(0, 200)) + "': " + why);
}

}  // namespace

std::vector<std::string> Limit::EffectiveClasses() const {
  if (classes.empty()) return {name};
  return classes;
}

Result<Limit> ParseLimit(std::string_view text) {
  size_t eq = text.find('=');
  if (eq == std::string_view::npos) return BadLimit(text, "want NAME=SPEC");
  Limit limit;
  limit.name = std::string(text.substr(0, eq));
  if (!ValidName(limit.name)) {
    return BadLimit(text, "the name must be 1 to 100 of A-Z a-z 0-9 _ . : -");
  }
  std::string_view spec = text.substr(eq + 1);
  if (spec.empty()) return BadLimit(text, "empty SPEC (want concurrency=N and/or rate=R/PERIOD)");
  bool in_classes = false;
  bool seen_concurrency = false, seen_rate = false, seen_classes = false;
  while (!spec.empty()) {
    size_t comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    if (comma != std::string_view::npos && spec.empty()) return BadLimit(text, "trailing comma");
    size_t item_eq = item.find('=');
    if (item_eq == std::string_view::npos) {
      if (!in_classes) return BadLimit(text, "'" + std::string(item) + "' is not KEY=VALUE");
      if (!ValidClass(item)) return BadLimit(text, "bad class name '" + std::string(item) + "'");
      limit.classes.emplace_back(item);
      continue;
    }
    std::string_view key = item.substr(0, item_eq);
    std::string_view value = item.substr(item_eq + 1);
    in_classes = false;
    if (key == "concurrency") {
      if (seen_concurrency) return BadLimit(text, "concurrency given twice");
      seen_concurrency = true;
      if (!ParseCount(value, &limit.concurrency)) {
        return BadLimit(text, "concurrency must be an integer from 1 to 1000000");
      }
    } else if (key == "rate") {
      if (seen_rate) return BadLimit(text, "rate given twice");
      seen_rate = true;
      size_t slash = value.find('/');
      if (slash == std::string_view::npos || !ParseCount(value.substr(0, slash), &limit.rate) ||
          !ParsePeriod(value.substr(slash + 1), &limit.period)) {
        return BadLimit(text,
                        "rate must be R/PERIOD, R from 1 to 1000000, PERIOD like 500ms, 1s, 5m, 1h "
                        "(at most a week)");
      }
    } else if (key == "classes") {
      if (seen_classes) return BadLimit(text, "classes given twice");
      seen_classes = true;
      in_classes = true;
      if (!ValidClass(value)) return BadLimit(text, "bad class name '" + std::string(value) + "'");
      limit.classes.emplace_back(value);
    } else {
      return BadLimit(text,
                      "unknown key '" + std::string(key) + "' (want concurrency, rate, classes)");
    }
  }
  if (limit.concurrency == 0 && limit.rate == 0) {
    return BadLimit(text, "set concurrency=N, rate=R/PERIOD or both");
  }
  return limit;
}

Status CheckLimits(const std::vector<Limit>& limits) {
  std::set<std::string, std::less<>> names, classes;
  for (const Limit& limit : limits) {
    std::string what = "limit '" + limit.name.substr(0, 100) + "': ";
    if (!ValidName(limit.name)) {
      return Status::InvalidArgument(what + "the name must be 1 to 100 of A-Z a-z 0-9 _ . : -");
    }
    if (limit.concurrency < 0 || limit.concurrency > kMaxCount || limit.rate < 0 ||
        limit.rate > kMaxCount) {
      return Status::InvalidArgument(what + "counts must be from 0 to 1000000");
    }
    if (limit.concurrency == 0 && limit.rate == 0) {
      return Status::InvalidArgument(what + "sets neither concurrency nor rate");
    }
    if (limit.rate > 0 && (limit.period.count() < 1 || limit.period > kMaxPeriod)) {
      return Status::InvalidArgument(what + "a rate needs a period from 1 ms to a week");
    }
    if (!names.insert(limit.name).second) {
      return Status::InvalidArgument(what + "declared twice");
    }
    for (const std::string& job_class : limit.EffectiveClasses()) {
      if (!ValidClass(job_class)) {
        return Status::InvalidArgument(what + "bad class name");
      }
      if (!classes.insert(job_class).second) {
        return Status::InvalidArgument(what + "class " + job_class +
                                       " already belongs to another limit");
      }
    }
  }
  return Status::OK();
}

std::string LimitDefinitionJson(const Limit& limit) {
  rapidjson::StringBuffer out;
  rapidjson::Writer<rapidjson::StringBuffer> w(out);
  w.StartObject();
  w.Key("name");
  w.String(limit.name.data(), static_cast<rapidjson::SizeType>(limit.name.size()));
  w.Key("classes");
  w.StartArray();
  for (const std::string& c : limit.EffectiveClasses()) {
    w.String(c.data(), static_cast<rapidjson::SizeType>(c.size()));
  }
  w.EndArray();
  w.Key("concurrency");
  w.Int(limit.concurrency);
  w.Key("rate");
  w.Int(limit.rate);
  w.Key("period");
  w.Double(static_cast<double>(limit.period.count()) / 1000.0);
  w.EndObject();
  return out.GetString();
}

}  // namespace reliableq
