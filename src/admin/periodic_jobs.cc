// Admin's periodic jobs: each as Redis records it.

#include "admin/periodic_jobs.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "periodic/cron.h"

namespace reliableq::admin {

PeriodicJobs::PeriodicJobs(AdminContext& context) : context_(context) {}

Result<std::vector<PeriodicInfo>> PeriodicJobs::List() {
  const std::string directory = context_.keys.Periodic();
  // Command returns an error reply as its Status: each names the key read.
  Result<std::vector<std::string>> names =
      context_.SortedMembers(directory, "SMEMBERS " + directory);
  if (!names.ok()) return names.status();
  const auto now = static_cast<int64_t>(std::floor(context_.clock->Now()));
  std::vector<PeriodicInfo> jobs;
  for (const std::string& name : *names) {
    const std::string key = context_.keys.PeriodicJob(name);
    Result<redis::ReplyPtr> hash = context_.redis->Command({"HGETALL", key});
    if (!hash.ok()) return hash.status().WithContext("HGETALL " + key);
    std::vector<std::pair<std::string, std::string>> fields = redis::FieldValues(*hash);
    if (fields.empty()) continue;
    PeriodicInfo info;
    info.name = name;
    for (const auto& [field, value] : fields) {
      if (field == "cron") info.cron = value;
      if (field == "timezone") info.time_zone = value;
      if (field == "class") info.job_class = value;
      if (field == "queue") info.queue = value;
      if (field == "args") info.args = value;
      if (field == "retry") info.retry = value;
      if (field == "catch_up") info.catch_up = value == "true";
      if (field == "declared_by") info.declared_by = value;
      if (field == "declared_at") info.declared_at = std::strtod(value.c_str(), nullptr);
      if (field == "last_tick") info.last_tick = std::strtoll(value.c_str(), nullptr, 10);
      if (field == "last_pushed_at") info.last_pushed_at = std::strtod(value.c_str(), nullptr);
    }
    Result<periodic::CronSchedule> cron = periodic::CronSchedule::Parse(info.cron, info.time_zone);
    if (cron.ok()) info.next_tick = cron->Next(now).value_or(0);
    const std::string ticks = context_.keys.PeriodicTicks(name);
    Result<redis::ReplyPtr> count = context_.redis->Command({"ZCARD", ticks});
    if (!count.ok()) return count.status().WithContext("ZCARD " + ticks);
    info.ticks_recorded = redis::CounterValue(*count);
    jobs.push_back(std::move(info));
  }
  return jobs;
}

}  // namespace reliableq::admin
