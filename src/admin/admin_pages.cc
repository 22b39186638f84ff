// Admin for the dashboard and scripts: pages of sets and queues, entries
// addressed by score and jid, processes and their signals, orphans, the
// janitor's record, the audit trail. Every read is bounded by the page
// asked for: nothing here walks a whole set or list.

#include <rapidjson/document.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <deque>
#include <set>
#include <string>
#include <system_error>

#include "admin/admin_impl.h"
#include "reliableq/job.h"  // CheckQueueName
#include "codec/job_codec.h"
#include "protocol/keys.h"
#include "redis/errors.h"
#include "redis/reply.h"
#include "protocol/script_calls.h"

namespace reliableq {

std::optional<EntryRef> EntryRef::Parse(std::string_view id) {
  EntryRef ref;
  auto [end, error] = std::from_chars(id.data(), id.data() + id.size(), ref.score);
  if (error != std::errc() || end == id.data() + id.size() || *end != '-' ||
      !std::isfinite(ref.score)) {
    return std::nullopt;
  }
  ref.jid = std::string(end + 1, id.data() + id.size());
  return ref;
}

std::string EntryRef::ToString() const {
  return admin_internal::ScoreText(score) + "-" + jid;
}

std::string EntryIdOf(const SetEntry& entry) { return EntryRef{entry.score, entry.jid}.ToString(); }

namespace admin_internal {

std::string ScoreText(double score) {
  // Fixed notation, the shortest that reads back as the same double: Redis
  // parses it with strtod, so ZRANGEBYSCORE meets the member's exact score.
  char buf[400];
  auto [end, error] = std::to_chars(buf, buf + sizeof buf, score, std::chars_format::fixed);
  if (error != std::errc()) return "0";
  return std::string(buf, end);
}

namespace {

std::string Member(const rapidjson::Value& object, const char* name) {
  auto it = object.FindMember(name);
  if (it == object.MemberEnd() || !it->value.IsString()) return {};
  return {it->value.GetString(), it->value.GetStringLength()};
}

double NumberMember(const rapidjson::Value& object, const char* name) {
  auto it = object.FindMember(name);
  if (it == object.MemberEnd() || !it->value.IsNumber()) return 0;
  return it->value.GetDouble();
}

std::vector<std::string> StringsMember(const rapidjson::Value& object, const char* name) {
  std::vector<std::string> out;
  auto it = object.FindMember(name);
  if (it == object.MemberEnd() || !it->value.IsArray()) return out;
  for (const rapidjson::Value& v : it->value.GetArray()) {
    if (v.IsString()) out.emplace_back(v.GetString(), v.GetStringLength());
  }
  return out;
}

double ToDouble(const std::string& text) {
  if (text.empty()) return 0;
  return std::strtod(text.c_str(), nullptr);
}

}  // namespace

Status AdminImpl::Failed(const Result<std::vector<redis::ReplyPtr>>& replies,
                         const std::vector<redis::Argv>& commands, std::string_view what) const {
  if (!replies.ok()) return replies.status().WithContext(std::string(what));
  return redis_->FirstError(*replies, commands);
}

namespace {

// Sidekiq's work entry: {"queue","payload","run_at"}; payload is the job as
// a JSON string (Sidekiq 7, reliableq) or as an object (Sidekiq 6).
RunningJobInfo ReadWork(std::string thread, std::string_view json) {
  RunningJobInfo job;
  job.thread = std::move(thread);
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(json.data(), json.size());
  if (!doc.IsObject()) {
    job.payload = std::string(json);
    return job;
  }
  job.queue = Member(doc, "queue");
  job.run_at = NumberMember(doc, "run_at");
  auto payload = doc.FindMember("payload");
  if (payload != doc.MemberEnd()) {
    if (payload->value.IsString()) {
      job.payload.assign(payload->value.GetString(), payload->value.GetStringLength());
    } else {
      job.payload = ToJson(payload->value);
    }
  }
  return job;
}

}  // namespace

Result<SetListing> AdminImpl::ListPage(JobSet set, int64_t offset, int64_t limit) {
  if (offset < 0 || limit < 0) {
    return Status::InvalidArgument("the offset and the limit must not be negative");
  }
  std::string key(SetKey(set));
  std::string start = std::to_string(offset);
  std::string stop = limit > 0 ? std::to_string(offset + limit - 1) : "-1";
  std::string_view range = set == JobSet::kDead ? "ZREVRANGE" : "ZRANGE";
  std::vector<redis::Argv> commands = {{"ZCARD", key},
                                       {range, key, start, stop, "WITHSCORES"}};
  Result<std::vector<redis::ReplyPtr>> replies = redis_->Pipeline(commands);
  if (Status s = Failed(replies, commands, "reading " + key); !s.ok()) return s;
  SetListing listing;
  listing.size = redis::CounterValue((*replies)[0]);
  listing.entries = EntriesOf((*replies)[1]);
  return listing;
}

Result<SetEntry> AdminImpl::FindAt(JobSet set, const EntryRef& ref) {
  std::string score = ScoreText(ref.score);
  Result<redis::ReplyPtr> reply =
      redis_->Command({"ZRANGEBYSCORE", SetKey(set), score, score, "WITHSCORES"});
  if (!reply.ok()) return reply.status().WithContext("reading " + std::string(SetKey(set)));
  std::optional<SetEntry> best;
  for (SetEntry& entry : EntriesOf(*reply)) {
    if (entry.jid != ref.jid) continue;
    if (!best || entry.payload < best->payload) best = std::move(entry);
  }
  if (!best) {
    return Status::NotFound("no entry " + ref.ToString() + " in " + std::string(SetKey(set)));
  }
  return std::move(*best);
}

Status AdminImpl::Apply(JobSet set, SetAction action, std::vector<SetEntry> entries,
                        const DeadSetLimits& limits, ActionResult* result) {
  if (action == SetAction::kRetry) {
    std::erase_if(entries, [&](const SetEntry& e) {
      if (!e.valid) ++result->skipped;
      return !e.valid;
    });
  }
  for (size_t at = 0; at < entries.size(); at += kBulkBatch) {
    std::vector<SetEntry> batch(
        entries.begin() + static_cast<std::ptrdiff_t>(at),
        entries.begin() + static_cast<std::ptrdiff_t>(std::min(entries.size(), at + kBulkBatch)));
    std::pair<int64_t, int64_t> counts;
    if (action == SetAction::kDelete) {
      redis::Argv zrem = {"ZREM", SetKey(set)};
      for (const SetEntry& e : batch) zrem.push_back(e.payload);
      Result<redis::ReplyPtr> removed = redis_->Command(zrem);
      if (!removed.ok()) return removed.status().WithContext("ZREM " + std::string(SetKey(set)));
      int64_t done = redis::CounterValue(*removed);
      counts = {done, static_cast<int64_t>(batch.size()) - done};
    } else {
      Result<std::pair<int64_t, int64_t>> moved = action == SetAction::kRetry
                                                      ? PushNow(set, batch)
                                                      : MoveToDead(set, batch, limits);
      if (!moved.ok()) return moved.status();
      counts = *moved;
    }
    result->done += counts.first;
    result->not_found += counts.second;
  }
  return Status::OK();
}

Result<ActionResult> AdminImpl::ActOn(JobSet set, SetAction action,
                                      const std::vector<EntryRef>& refs,
                                      const DeadSetLimits& limits) {
  if (action == SetAction::kKill) {
    if (set == JobSet::kDead) return Status::InvalidArgument("dead entries cannot be killed");
    if (Status s = CheckLimits(limits); !s.ok()) return s;
  }
  ActionResult result;
  if (refs.empty()) return result;
  // Every entry found in one round trip; each ZRANGEBYSCORE reads the few
  // members with that exact score.
  std::deque<std::string> scores;
  std::vector<redis::Argv> commands;
  for (const EntryRef& ref : refs) {
    const std::string& score = scores.emplace_back(ScoreText(ref.score));
    commands.push_back({"ZRANGEBYSCORE", SetKey(set), score, score, "WITHSCORES"});
  }
  Result<std::vector<redis::ReplyPtr>> replies = redis_->Pipeline(commands);
  if (Status s = Failed(replies, commands, "reading " + std::string(SetKey(set))); !s.ok()) {
    return s;
  }
  std::vector<SetEntry> found;
  std::set<std::string> taken;
  for (size_t i = 0; i < refs.size(); ++i) {
    std::optional<SetEntry> best;
    for (SetEntry& entry : EntriesOf((*replies)[i])) {
      if (entry.jid != refs[i].jid || taken.count(entry.payload) != 0) continue;
      if (!best || entry.payload < best->payload) best = std::move(entry);
    }
    if (!best) {
      ++result.not_found;
      continue;
    }
    taken.insert(best->payload);
    found.push_back(std::move(*best));
  }
  if (Status s = Apply(set, action, std::move(found), limits, &result); !s.ok()) return s;
  return result;
}

Result<ActionResult> AdminImpl::ActOnAll(JobSet set, SetAction action,
                                         const DeadSetLimits& limits) {
  ActionResult result;
  switch (action) {
    case SetAction::kRetry: {
      Result<BulkResult> bulk = RetryAll(set);
      if (!bulk.ok()) return bulk.status();
      result.done = bulk->moved;
      result.skipped = bulk->skipped;
      return result;
    }
    case SetAction::kDelete: {
      Result<int64_t> deleted = DeleteAll(set);
      if (!deleted.ok()) return deleted.status();
      result.done = *deleted;
      return result;
    }
    case SetAction::kKill:
      break;
  }
  if (set == JobSet::kDead) return Status::InvalidArgument("dead entries cannot be killed");
  if (Status s = CheckLimits(limits); !s.ok()) return s;
  Result<redis::ReplyPtr> size = redis_->Command({"ZCARD", SetKey(set)});
  if (!size.ok()) return size.status().WithContext("reading " + std::string(SetKey(set)));
  // As KillAll: every page starts at the front, which the last one emptied;
  // bounded by the size the set had at the start.
  for (int64_t read = 0; read < redis::CounterValue(*size);) {
    Result<std::vector<SetEntry>> page = Range(set, 0, kBulkBatch);
    if (!page.ok()) return page.status();
    if (page->empty()) break;
    read += static_cast<int64_t>(page->size());
    Result<std::pair<int64_t, int64_t>> moved = MoveToDead(set, *page, limits);
    if (!moved.ok()) return moved.status();
    result.done += moved->first;
  }
  return result;
}

Result<QueuePage> AdminImpl::ListQueue(std::string_view name, int64_t offset, int64_t limit) {
  if (offset < 0 || limit < 0) {
    return Status::InvalidArgument("the offset and the limit must not be negative");
  }
  if (Status s = CheckQueueName(name); !s.ok()) return s;
  std::string key = keys_.Queue(name);
  std::string start = std::to_string(offset);
  std::string stop = limit > 0 ? std::to_string(offset + limit - 1) : "-1";
  std::string paused_key = keys_.Paused();
  std::vector<redis::Argv> commands = {{"LLEN", key},
                                       {"LRANGE", key, "-1", "-1"},
                                       {"LRANGE", key, start, stop},
                                       {"SISMEMBER", paused_key, name}};
  Result<std::vector<redis::ReplyPtr>> replies = redis_->Pipeline(commands);
  if (Status s = Failed(replies, commands, "reading " + key); !s.ok()) return s;
  QueuePage page;
  page.stats = ReadQueueStats(std::string(name), (*replies)[0], (*replies)[1], clock_->Now());
  page.stats.paused = redis::CounterValue((*replies)[3]) == 1;
  std::vector<std::string> jobs = redis::StringArray((*replies)[2]);
  for (size_t i = 0; i < jobs.size(); ++i) {
    page.jobs.push_back({offset + static_cast<int64_t>(i), std::move(jobs[i])});
  }
  return page;
}

Result<std::vector<ProcessInfo>> AdminImpl::ListProcesses() {
  Result<redis::ReplyPtr> members = redis_->Command({"SMEMBERS", keys_.Processes()});
  if (!members.ok()) return members.status().WithContext("reading processes");
  std::vector<std::string> identities = redis::StringArray(*members);
  std::sort(identities.begin(), identities.end());
  std::deque<std::string> keys;
  std::vector<redis::Argv> commands;
  for (const std::string& identity : identities) {
    commands.push_back({"HMGET", keys.emplace_back(keys_.Process(identity)), "info", "busy", "beat",
                        "quiet", "rss"});
    commands.push_back({"HGETALL", keys.emplace_back(keys_.Work(identity))});
    commands.push_back({"PTTL", keys.emplace_back(keys_.Heartbeat(identity))});
  }
  Result<std::vector<redis::ReplyPtr>> replies = redis_->Pipeline(commands);
  if (Status s = Failed(replies, commands, "reading processes"); !s.ok()) return s;
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
      p.hostname = Member(info, "hostname");
      p.pid = static_cast<int64_t>(NumberMember(info, "pid"));
      p.tag = Member(info, "tag");
      p.labels = StringsMember(info, "labels");
      p.queues = StringsMember(info, "queues");
      p.concurrency = static_cast<int64_t>(NumberMember(info, "concurrency"));
      p.started_at = NumberMember(info, "started_at");
      p.version = Member(info, "version");
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

Status AdminImpl::SignalProcess(std::string_view identity, ProcessSignal signal) {
  Result<redis::ReplyPtr> member = redis_->Command({"SISMEMBER", keys_.Processes(), identity});
  if (!member.ok()) return member.status().WithContext("reading processes");
  if (redis::CounterValue(*member) != 1) {
    return Status::NotFound("no process " + std::string(identity) + " in " + keys_.Processes());
  }
  std::string key = keys_.Signals(identity);
  std::string_view name = signal == ProcessSignal::kQuiet ? "TSTP" : "TERM";
  // As Sidekiq::Process#signal: the list outlives no process by more than
  // a minute.
  std::vector<redis::Argv> commands = {{"LPUSH", key, name}, {"EXPIRE", key, "60"}};
  return Failed(redis_->Pipeline(commands), commands, "signalling " + std::string(identity));
}

Result<std::vector<Orphan>> AdminImpl::ListOrphans(int64_t jobs_per_process) {
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
      const std::string& key = keys.emplace_back(keys_.Working(recovery.identity, q.queue));
      commands.push_back({"LLEN", key});
      commands.push_back({"LRANGE", key, "0", stop});
    }
    Orphan orphan;
    orphan.recovery = std::move(recovery);
    orphans.push_back(std::move(orphan));
  }
  Result<std::vector<redis::ReplyPtr>> replies = redis_->Pipeline(commands);
  if (Status s = Failed(replies, commands, "reading working lists"); !s.ok()) return s;
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

Result<JanitorRecord> AdminImpl::ReadJanitorRecord() {
  std::string last = keys_.JanitorLast();
  std::string passes = keys_.JanitorPasses();
  std::vector<redis::Argv> commands = {{"GET", last}, {"LRANGE", passes, "0", "99"}};
  Result<std::vector<redis::ReplyPtr>> replies = redis_->Pipeline(commands);
  if (Status s = Failed(replies, commands, "reading the janitor's record"); !s.ok()) return s;
  JanitorRecord record;
  if (Result<std::string> last = redis::ToString((*replies)[0]); last.ok()) record.last = *last;
  record.passes = redis::StringArray((*replies)[1]);
  return record;
}

Status AdminImpl::AppendAudit(std::string_view entry_json) {
  std::string key = keys_.Audit();
  std::vector<redis::Argv> commands = {
      {"MULTI"}, {"LPUSH", key, entry_json}, {"LTRIM", key, "0", "999"}, {"EXEC"}};
  Result<std::vector<redis::ReplyPtr>> replies = redis_->Pipeline(commands);
  if (!replies.ok()) return replies.status().WithContext("writing the audit trail");
  Result<std::vector<redis::ReplyRef>> ran = redis::ExecReplies(replies->back());
  if (!ran.ok()) {
    for (const redis::ReplyPtr& r : *replies) {
      if (Status s = CheckReply(r, "writing the audit trail"); !s.ok()) return s;
    }
    return ran.status().WithContext("writing the audit trail");
  }
  for (redis::ReplyRef r : *ran) {
    if (Status s = CheckReply(r, "writing the audit trail"); !s.ok()) return s;
  }
  return Status::OK();
}

Result<std::vector<std::string>> AdminImpl::ReadAudit(int64_t limit) {
  if (limit < 1) return std::vector<std::string>{};
  Result<redis::ReplyPtr> reply =
      redis_->Command({"LRANGE", keys_.Audit(), "0", std::to_string(limit - 1)});
  if (!reply.ok()) return reply.status().WithContext("reading the audit trail");
  return redis::StringArray(*reply);
}

Result<RedisServerInfo> AdminImpl::ServerInfo() {
  Result<redis::ReplyPtr> reply = redis_->Command({"INFO"});
  if (!reply.ok()) return reply.status().WithContext("INFO");
  Result<std::string> text = redis::ToString(*reply);
  if (!text.ok()) return text.status().WithContext("INFO");
  auto number = [&](std::string_view field) {
    return std::atoll(std::string(redis::InfoField(*text, field)).c_str());
  };
  RedisServerInfo info;
  info.version = redis::InfoField(*text, "redis_version");
  info.uptime_seconds = number("uptime_in_seconds");
  info.used_memory_human = redis::InfoField(*text, "used_memory_human");
  info.connected_clients = number("connected_clients");
  return info;
}

}  // namespace admin_internal
}  // namespace reliableq
