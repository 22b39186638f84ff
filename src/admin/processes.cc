// Admin's processes: the `processes` set with each one's info, work and
// heartbeat, their remote signals, the dead ones' orphaned jobs, the
// janitor's pass and its record.

#include "admin/processes.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <utility>

#include "admin/json_members.h"
#include "codec/job_codec.h"
#include "protocol/recovery.h"

namespace reliableq::admin {

namespace {

double ToDouble(const std::string& text) {
  if (text.empty()) return 0;
  return std::strtod(text.c_str(), nullptr);
}

}  // namespace

RunningJobInfo ReadWork(std::string thread, std::string_view json) {
  RunningJobInfo job;
  job.thread = std::move(thread);
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(json.data(), json.size());
  if (!doc.IsObject()) {
    job.payload = std::string(json);
    return job;
  }
  job.queue = StringMember(doc, "queue");
  job.run_at = NumberMember(doc, "run_at");
  auto payload = doc.FindMember("payload");
  if (payload != doc.MemberEnd()) {
    if (payload->value.IsString()) {
      job.payload.assign(payload->value.GetString(), payload->value.GetStringLength());
    } else {
      job.payload = codec::ToJson(payload->value);
    }
  }
  auto progress = doc.FindMember("progress");
  if (progress != doc.MemberEnd() && progress->value.IsObject()) {
    job.progress = codec::ToJson(progress->value);
  }
  return job;
}

Processes::Processes(AdminContext& context) : context_(context) {}

Result<RecoveryReport> Processes::Recover(const RecoverOptions& options) {
  protocol::RecoveryConfig config;
  config.keys = context_.keys;
  config.max_interruptions = options.max_interruptions;
  config.dry_run = options.dry_run;
  config.identity = options.identity;
  config.force = options.force;
  return protocol::RunRecoveryPass(*context_.redis, config, context_.clock->Now());
}

Result<std::vector<ProcessInfo>> Processes::ListProcesses() {
  Result<std::vector<std::string>> members =
      context_.SortedMembers(context_.keys.Processes(), "reading processes");
  if (!members.ok()) return members.status();
  const std::vector<std::string>& identities = *members;
  std::deque<std::string> keys;
  std::vector<redis::Argv> commands;
  for (const std::string& identity : identities) {
    commands.push_back({"HMGET", keys.emplace_back(context_.keys.Process(identity)), "info", "busy",
                        "beat", "quiet", "rss"});
    commands.push_back({"HGETALL", keys.emplace_back(context_.keys.Work(identity))});
    commands.push_back({"PTTL", keys.emplace_back(context_.keys.Heartbeat(identity))});
  }
  Result<std::vector<redis::ReplyPtr>> replies = context_.redis->Pipeline(commands);
  if (Status s = context_.Failed(replies, commands, "reading processes"); !s.ok()) return s;
  std::vector<ProcessInfo> processes;
  for (size_t i = 0; i < identities.size(); ++i) {
    ProcessInfo p;
    p.identity = identities[i];
    const std::vector<std::string> fields = redis::StringArray((*replies)[3 * i]);
    auto field = [&](size_t k) { return k < fields.size() ? fields[k] : std::string(); };
    p.info = field(0);
    rapidjson::Document info;
    info.Parse<rapidjson::kParseIterativeFlag>(p.info.data(), p.info.size());
    if (info.IsObject()) {
      p.hostname = StringMember(info, "hostname");
      p.pid = static_cast<int64_t>(NumberMember(info, "pid"));
      p.tag = StringMember(info, "tag");
      p.labels = StringsMember(info, "labels");
      p.queues = StringsMember(info, "queues");
      p.concurrency = static_cast<int64_t>(NumberMember(info, "concurrency"));
      p.started_at = NumberMember(info, "started_at");
      p.version = StringMember(info, "version");
    }
    p.busy = static_cast<int64_t>(ToDouble(field(1)));
    p.beat = ToDouble(field(2));
    p.quiet = field(3) == "true";
    p.rss_kb = static_cast<int64_t>(ToDouble(field(4)));
    for (auto& [thread, work] : redis::FieldValues((*replies)[3 * i + 1])) {
      p.jobs.push_back(ReadWork(std::move(thread), work));
    }
    std::sort(p.jobs.begin(), p.jobs.end(),
              [](const auto& a, const auto& b) { return a.thread < b.thread; });
    Result<int64_t> ttl = redis::ToInteger((*replies)[3 * i + 2]);
    if (ttl.ok() && *ttl >= 0) p.heartbeat_ttl_ms = *ttl;
    processes.push_back(std::move(p));
  }
  return processes;
}

Status Processes::SignalProcess(std::string_view identity, ProcessSignal signal) {
  Result<redis::ReplyPtr> member =
      context_.redis->Command({"SISMEMBER", context_.keys.Processes(), identity});
  if (!member.ok()) return member.status().WithContext("reading processes");
  if (redis::CounterValue(*member) != 1) {
    return Status::NotFound("no process " + std::string(identity) + " in " +
                            context_.keys.Processes());
  }
  std::string key = context_.keys.Signals(identity);
  std::string_view name = signal == ProcessSignal::kQuiet ? "TSTP" : "TERM";
  // As Sidekiq::Process#signal: the list outlives no process by more than
  // a minute.
  std::vector<redis::Argv> commands = {{"LPUSH", key, name}, {"EXPIRE", key, "60"}};
  return context_.Failed(context_.redis->Pipeline(commands), commands,
                         "signalling " + std::string(identity));
}

Result<std::vector<Orphan>> Processes::ListOrphans(int64_t jobs_per_process) {
  RecoverOptions dry;
  dry.dry_run = true;
  Result<RecoveryReport> report = Recover(dry);
  if (!report.ok()) return report.status();
  std::vector<Orphan> orphans;
  std::deque<std::string> keys;
  std::vector<redis::Argv> commands;
  std::string stop = std::to_string(std::max<int64_t>(jobs_per_process, 1) - 1);
  for (IdentityRecovery& recovery : report->identities) {
    if (recovery.alive) continue;
    for (const QueueRecovery& q : recovery.queues) {
      const std::string& key = keys.emplace_back(context_.keys.Working(recovery.identity, q.queue));
      commands.push_back({"LLEN", key});
      commands.push_back({"LRANGE", key, "0", stop});
    }
    Orphan orphan;
    orphan.recovery = std::move(recovery);
    orphans.push_back(std::move(orphan));
  }
  Result<std::vector<redis::ReplyPtr>> replies = context_.redis->Pipeline(commands);
  if (Status s = context_.Failed(replies, commands, "reading working lists"); !s.ok()) return s;
  size_t next = 0;
  for (Orphan& orphan : orphans) {
    for (const QueueRecovery& q : orphan.recovery.queues) {
      orphan.total += redis::CounterValue((*replies)[next++]);
      for (std::string& payload : redis::StringArray((*replies)[next++])) {
        if (static_cast<int64_t>(orphan.jobs.size()) >= jobs_per_process) break;
        orphan.jobs.push_back({q.queue, std::move(payload)});
      }
    }
  }
  return orphans;
}

Result<JanitorRecord> Processes::ReadJanitorRecord() {
  std::string last = context_.keys.JanitorLast();
  std::string passes = context_.keys.JanitorPasses();
  std::vector<redis::Argv> commands = {{"GET", last}, {"LRANGE", passes, "0", "99"}};
  Result<std::vector<redis::ReplyPtr>> replies = context_.redis->Pipeline(commands);
  if (Status s = context_.Failed(replies, commands, "reading the janitor's record"); !s.ok())
    return s;
  JanitorRecord record;
  if (Result<std::string> last = redis::ToString((*replies)[0]); last.ok()) record.last = *last;
  record.passes = redis::StringArray((*replies)[1]);
  return record;
}

}  // namespace reliableq::admin
