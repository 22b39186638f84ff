#include "periodic/tick_plan.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstdio>

#include "codec/job_codec.h"

namespace reliableq::periodic {

namespace {

constexpr int64_t kMaxCounted = 1000000;

// FNV-1a, 64 bits: the digest only tells declarations apart, it guards
// nothing, so a fast non-cryptographic hash does.
uint64_t Fnv1a(uint64_t hash, std::string_view bytes) {
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// `extra` (a JSON object's text) with the periodic fields first.
std::string ExtraWithTick(const PeriodicJob& job, int64_t tick) {
  std::string fields = "\"periodic\":\"" + job.name +
                       "\",\"periodic_tick\":" + codec::FormatEpoch(static_cast<double>(tick));
  const std::string& extra = job.extra;
  size_t open = extra.find('{');
  size_t inner = extra.find_first_not_of(" \t\r\n", open + 1);
  if (open == std::string::npos || inner == std::string::npos || extra[inner] == '}') {
    return "{" + fields + "}";
  }
  return "{" + fields + "," + extra.substr(inner);
}

}  // namespace

OwedTicks TicksOwed(const CronSchedule& cron, int64_t cursor, int64_t now, size_t max) {
  OwedTicks owed;
  if (max == 0 || now <= cursor) return owed;
  // The latest `max` ticks, walking back from now, so that a long stall
  // costs `max` steps, not one per tick missed.
  for (std::optional<int64_t> t = cron.Previous(now); t && *t > cursor && owed.ticks.size() < max;
       t = cron.Previous(*t - 1)) {
    owed.ticks.push_back(*t);
  }
  std::reverse(owed.ticks.begin(), owed.ticks.end());
  if (owed.ticks.size() < max) return owed;
  std::optional<int64_t> first = cron.Next(cursor);
  if (!first || *first >= owed.ticks.front()) return owed;
  owed.first_skipped = *first;
  owed.last_skipped = cron.Previous(owed.ticks.front() - 1).value_or(*first);
  // Counted for the log only; a stall of more than kMaxCounted ticks
  // reports that many.
  for (std::optional<int64_t> t = first; t && *t <= owed.last_skipped && owed.skipped < kMaxCounted;
       t = cron.Next(*t)) {
    ++owed.skipped;
  }
  return owed;
}

PeriodicDefinition DefinitionOf(const PeriodicJob& job) {
  PeriodicDefinition d;
  d.cron = job.cron;
  d.time_zone = job.time_zone.empty() ? "UTC" : job.time_zone;
  d.job_class = job.job_class;
  d.queue = job.queue;
  Result<Job> as_job = JobOf(job);
  d.retry = as_job.ok() ? as_job->retry.ToJson() : job.retry;
  Job fixed = as_job.ok() ? *as_job : Job{};
  fixed.jid = "0";
  // The job's JSON as the codec writes it: the same for args and extra
  // spelt with other spaces.
  Result<std::string> canonical = codec::EncodeJob(fixed, 0, 0);
  std::string text = canonical.ok() ? *canonical : "";
  d.args = job.args;
  rapidjson::Document args;
  if (!args.Parse(job.args.c_str()).HasParseError()) {
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
    args.Accept(writer);
    d.args.assign(buffer.GetString(), buffer.GetSize());
  }
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const std::string* part : {&d.cron, &d.time_zone, &text}) {
    hash = Fnv1a(hash, std::to_string(part->size()));
    hash = Fnv1a(hash, ":");
    hash = Fnv1a(hash, *part);
  }
  hash = Fnv1a(hash, job.catch_up ? "catch_up" : "no_catch_up");
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  d.digest = hex;
  return d;
}

Result<Job> JobOf(const PeriodicJob& job) {
  Result<Retry> retry = Retry::Parse(job.retry);
  if (!retry.ok()) return retry.status();
  Job out;
  out.job_class = job.job_class;
  out.args = job.args;
  out.queue = job.queue;
  out.retry = *retry;
  out.extra = job.extra;
  return out;
}

Result<std::string> TickPayload(const PeriodicJob& job, int64_t tick, double now) {
  Result<Job> pushed = JobOf(job);
  if (!pushed.ok()) return pushed.status();
  pushed->extra = ExtraWithTick(job, tick);
  return codec::EncodeJob(*pushed, now, now);
}

}  // namespace reliableq::periodic
