// The checks and the JSON form of a periodic job declaration
// (include/reliableq/periodic.h).

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <optional>
#include <string>

#include "codec/job_codec.h"
#include "periodic/cron.h"
#include "periodic/tick_plan.h"
#include "reliableq/periodic.h"

namespace reliableq {

namespace {

constexpr size_t kMaxPeriodicNameBytes = 200;

Status BadPeriodicJob(std::string_view name, const std::string& why) {
  return Status::InvalidArgument("periodic job \"" + std::string(name) + "\": " + why);
}

std::string Compact(const rapidjson::Value& value) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  value.Accept(writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace

Status CheckPeriodicJob(const PeriodicJob& job) {
  const std::string& name = job.name;
  if (name.empty() || name.size() > kMaxPeriodicNameBytes) {
    return BadPeriodicJob(name, "name: must be 1 to 200 bytes");
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.' || c == ':';
    // The name is part of Redis keys and of log lines: kept plain.
    if (!ok) return BadPeriodicJob(name, "name: only letters, digits and _ - . : are allowed");
  }
  Result<periodic::CronSchedule> cron = periodic::CronSchedule::Parse(job.cron, job.time_zone);
  if (!cron.ok()) return BadPeriodicJob(name, cron.status().message());
  Result<Job> as_job = periodic::JobOf(job);
  if (!as_job.ok()) return BadPeriodicJob(name, "retry: " + as_job.status().message());
  rapidjson::Document extra;
  if (!extra.Parse(job.extra.c_str()).HasParseError() && extra.IsObject() &&
      (extra.HasMember("periodic") || extra.HasMember("periodic_tick"))) {
    return BadPeriodicJob(name,
                          "extra: must not name periodic or periodic_tick (set for each tick)");
  }
  Result<std::string> payload = codec::EncodeJob(*as_job, 0, 0);
  if (!payload.ok()) return BadPeriodicJob(name, payload.status().message());
  return Status::OK();
}

Result<PeriodicJob> ParsePeriodicJob(std::string_view name, std::string_view json) {
  PeriodicJob job;
  job.name = std::string(name);
  rapidjson::Document doc;
  std::string text(json);
  if (doc.Parse(text.c_str()).HasParseError()) {
    return BadPeriodicJob(name, std::string("not JSON: ") +
                                    rapidjson::GetParseError_En(doc.GetParseError()) +
                                    " at offset " + std::to_string(doc.GetErrorOffset()));
  }
  if (!doc.IsObject()) return BadPeriodicJob(name, "must be a JSON object");
  bool has_cron = false;
  bool has_class = false;
  std::optional<std::string> sequence;
  for (const auto& member : doc.GetObject()) {
    std::string key(member.name.GetString(), member.name.GetStringLength());
    const rapidjson::Value& v = member.value;
    auto want = [&](const char* type) { return BadPeriodicJob(name, key + ": must be " + type); };
    if (key == "cron" || key == "class" || key == "queue" || key == "timezone") {
      if (!v.IsString()) return want("a string");
      std::string s(v.GetString(), v.GetStringLength());
      if (key == "cron") {
        job.cron = s;
        has_cron = true;
      } else if (key == "class") {
        job.job_class = s;
        has_class = true;
      } else if (key == "queue") {
        job.queue = s;
      } else {
        job.time_zone = s;
      }
    } else if (key == "args") {
      if (!v.IsArray()) return want("a JSON array");
      job.args = Compact(v);
    } else if (key == "extra") {
      if (!v.IsObject()) return want("a JSON object");
      job.extra = Compact(v);
    } else if (key == "retry") {
      if (v.IsBool()) {
        job.retry = v.GetBool() ? "true" : "false";
      } else if (v.IsInt() && v.GetInt() >= 0) {
        job.retry = std::to_string(v.GetInt());
      } else {
        return want("true, false or a count >= 0");
      }
    } else if (key == "catch_up") {
      if (!v.IsBool()) return want("true or false");
      job.catch_up = v.GetBool();
    } else if (key == "sequence") {
      // Every tick's job joins that sequence: a tick does not start before
      // the one before it is done.
      if (!v.IsString()) return want("a string");
      sequence.emplace(v.GetString(), v.GetStringLength());
      if (Status s = CheckSequenceKey(*sequence); !s.ok()) {
        return BadPeriodicJob(name, "sequence: " + s.message());
      }
    } else {
      return BadPeriodicJob(
          name, "unknown key \"" + key +
                    "\" (known: cron class queue args retry timezone catch_up extra sequence)");
    }
  }
  if (sequence) {
    // Written as the job field it is (the client's Job::sequence).
    rapidjson::Document extra;
    extra.Parse(job.extra.c_str());
    if (extra.HasMember("sequence")) return BadPeriodicJob(name, "sequence: given twice");
    extra.AddMember("sequence", rapidjson::Value(sequence->c_str(), extra.GetAllocator()),
                    extra.GetAllocator());
    job.extra = Compact(extra);
  }
  if (!has_cron) return BadPeriodicJob(name, "cron: missing");
  if (!has_class) return BadPeriodicJob(name, "class: missing");
  if (Status s = CheckPeriodicJob(job); !s.ok()) return s;
  return job;
}

}  // namespace reliableq
