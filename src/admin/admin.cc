#include "reliableq/admin.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include "codec/job_codec.h"
#include "protocol/keys.h"
#include "admin/admin_impl.h"
#include "reliableq/job.h"  // CheckQueueName
#include "protocol/process_entry.h"
#include "protocol/recovery.h"
#include "redis/connection.h"
#include "redis/errors.h"
#include "redis/reply.h"
#include "protocol/script_calls.h"

namespace reliableq {

namespace admin_internal {

// Seconds since the job in `payload` was enqueued, as Sidekiq's queue
// latency: enqueued_at is float seconds, or (Sidekiq 8) integer
// milliseconds, told apart by being an integer above 1e12. Unknown or in the
// future (clock skew) reads as 0.
double Latency(std::string_view payload, double now) {
  Result<DecodedJob> job = DecodeJob(payload);
  if (!job.ok()) return 0;
  const rapidjson::Document& doc = job->document;
  auto it = doc.FindMember("enqueued_at");
  if (it == doc.MemberEnd() || !it->value.IsNumber()) return 0;
  double enqueued_at = it->value.GetDouble();
  if ((it->value.IsInt64() || it->value.IsUint64()) && enqueued_at > 1e12) {
    enqueued_at /= 1000;
  }
  double latency = now - enqueued_at;
  return latency > 0 ? latency : 0;
}

// ZSCAN rounds (of COUNT kScanCount) before a jid search gives up; enough
// for sets of a billion members.
constexpr int kMaxScanRounds = 1000000;
constexpr std::string_view kScanCount = "1000";

// The text a JSON writer puts between the quotes of the string `text`, as
// Ruby's JSON.generate writes it: how a jid appears inside a payload.
std::string JsonEscaped(std::string_view text) {
  rapidjson::Value value(rapidjson::StringRef(text.data(), text.size()));
  std::string quoted = ToJson(value);
  return quoted.substr(1, quoted.size() - 2);
}

// `text` as a literal inside a Redis glob pattern.
std::string GlobLiteral(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

std::string StringMember(const rapidjson::Value& object, const char* name) {
  auto it = object.FindMember(name);
  if (it == object.MemberEnd() || !it->value.IsString()) return {};
  return {it->value.GetString(), it->value.GetStringLength()};
}

std::optional<std::string> OptionalString(const rapidjson::Value& object, const char* name) {
  auto it = object.FindMember(name);
  if (it == object.MemberEnd() || !it->value.IsString()) return std::nullopt;
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

SetEntry MakeEntry(std::string payload, double score) {
  SetEntry entry;
  entry.score = score;
  Result<DecodedJob> decoded = DecodeJob(payload);
  entry.valid = decoded.ok();
  // A member that is no job is still shown with what it names, read
  // iteratively: one nested absurdly deep must not exhaust the stack.
  rapidjson::Document fallback;
  if (!entry.valid) fallback.Parse<rapidjson::kParseIterativeFlag>(payload.data(), payload.size());
  const rapidjson::Value& doc = entry.valid ? decoded->document : fallback;
  if (doc.IsObject()) {
    entry.jid = StringMember(doc, "jid");
    entry.job_class = StringMember(doc, "class");
    entry.queue = StringMember(doc, "queue");
    auto count = doc.FindMember("retry_count");
    if (count != doc.MemberEnd() && count->value.IsInt64()) {
      entry.retry_count = count->value.GetInt64();
    }
    entry.error_class = OptionalString(doc, "error_class");
    entry.error_message = OptionalString(doc, "error_message");
  }
  entry.payload = std::move(payload);
  return entry;
}

std::vector<SetEntry> EntriesOf(redis::ReplyRef reply) {
  std::vector<SetEntry> entries;
  for (redis::ScoredMember& member : redis::ScoredMembers(reply)) {
    entries.push_back(MakeEntry(std::move(member.member), member.score));
  }
  return entries;
}

QueueStats ReadQueueStats(std::string name, redis::ReplyRef size, redis::ReplyRef oldest,
                          double now) {
  QueueStats queue;
  queue.name = std::move(name);
  queue.size = redis::CounterValue(size);
  std::vector<std::string> jobs = redis::StringArray(oldest);
  if (jobs.size() == 1) queue.latency = Latency(jobs[0], now);
  return queue;
}

// The queue a job of `entry` is pushed to, as QueueOf chooses it.
std::string TargetQueue(const SetEntry& entry) {
  return entry.queue.empty() ? "default" : entry.queue;
}

std::string GoneMessage(JobSet set, std::string_view jid) {
  return "the entry with jid " + std::string(jid) + " left " + std::string(JobSetKey(set)) +
         " meanwhile; nothing was done";
}

// Pipelined replies carry error replies in place; stats stop at the first
// one rather than report a figure built on a key of the wrong type. The
// connection maps it: it knows whether a MOVED means a cluster node met
// without cluster options.
Status AdminImpl::CheckReply(redis::ReplyRef reply, std::string_view what) const {
  if (!redis::IsError(reply)) return Status::OK();
  return redis_->ErrorOf(reply).WithContext(std::string(what));
}

Result<Stats> AdminImpl::GetStats() {
  // The key names outlive the commands, which only view them.
  const std::string read_keys[] = {keys_.Processed(), keys_.Failed(),   keys_.Queues(),
                                   keys_.Schedule(),  keys_.Retry(),    keys_.Dead(),
                                   keys_.Processes(), keys_.Registry(), keys_.StatExpired()};
  static constexpr std::string_view kReads[] = {"GET",   "GET",      "SMEMBERS", "ZCARD", "ZCARD",
                                                "ZCARD", "SMEMBERS", "HGETALL",  "GET"};
  static_assert(std::size(kReads) == sizeof read_keys / sizeof read_keys[0]);
  std::vector<redis::Argv> reads;
  for (size_t i = 0; i < std::size(kReads); ++i) reads.push_back({kReads[i], read_keys[i]});
  Result<std::vector<redis::ReplyPtr>> first = redis_->Pipeline(reads);
  if (!first.ok()) return first.status().WithContext("reading stats");
  const std::vector<redis::ReplyPtr>& r = *first;
  // Each error names the key read, as it is in this layout and group.
  if (Status s = redis_->FirstError(r, reads); !s.ok()) return s;

  Stats stats;
  stats.processed = redis::CounterValue(r[0]);
  stats.failed = redis::CounterValue(r[1]);
  stats.expired = redis::CounterValue(r[8]);
  std::vector<std::string> queues = redis::StringArray(r[2]);
  std::sort(queues.begin(), queues.end());
  stats.scheduled = redis::CounterValue(r[3]);
  stats.retries = redis::CounterValue(r[4]);
  stats.dead = redis::CounterValue(r[5]);
  std::vector<std::string> processes = redis::StringArray(r[6]);
  stats.processes = static_cast<int64_t>(processes.size());
  std::vector<std::string> working;
  for (const auto& [identity, json] : redis::FieldValues(r[7])) {
    ProcessEntry entry;
    if (!DecodeProcessEntry(json, &entry)) continue;
    for (const std::string& queue : entry.queues) working.push_back(keys_.Working(identity, queue));
  }

  // The second round trip needs the names read by the first. The key
  // strings live in a deque so the string_views in the commands stay valid.
  std::deque<std::string> names;
  std::vector<redis::Argv> commands;
  for (const std::string& queue : queues) {
    const std::string& key = names.emplace_back(keys_.Queue(queue));
    commands.push_back({"LLEN", key});
    commands.push_back({"LRANGE", key, "-1", "-1"});
  }
  for (const std::string& identity : processes) {
    commands.push_back({"HGET", names.emplace_back(keys_.Process(identity)), "busy"});
  }
  for (const std::string& key : working) commands.push_back({"LLEN", key});
  Result<std::vector<redis::ReplyPtr>> second = redis_->Pipeline(commands);
  if (Status s = Failed(second, commands, "reading stats"); !s.ok()) return s;

  const double now = clock_->Now();
  size_t next = 0;
  for (const std::string& queue : queues) {
    QueueStats q = ReadQueueStats(queue, (*second)[next], (*second)[next + 1], now);
    next += 2;
    stats.enqueued += q.size;
    stats.queues.push_back(std::move(q));
  }
  for (size_t i = 0; i < processes.size(); ++i) {
    stats.busy += redis::CounterValue((*second)[next++]);
  }
  for (size_t i = 0; i < working.size(); ++i) {
    stats.in_progress += redis::CounterValue((*second)[next++]);
  }
  if (Status s = MarkPaused(&stats.queues); !s.ok()) return s;
  Result<int64_t> parked = CountParked();
  if (!parked.ok()) return parked.status();
  stats.parked = *parked;
  return stats;
}

Result<RecoveryReport> AdminImpl::Recover(const RecoverOptions& options) {
  RecoveryConfig config;
  config.keys = keys_;
  config.max_interruptions = options.max_interruptions;
  config.dry_run = options.dry_run;
  config.identity = options.identity;
  config.force = options.force;
  return RunRecoveryPass(*redis_, config, clock_->Now());
}

Result<std::vector<SetEntry>> AdminImpl::Range(JobSet set, int64_t offset, int64_t count) {
  std::string start = std::to_string(offset);
  std::string stop = count > 0 ? std::to_string(offset + count - 1) : "-1";
  // The dead set is shown latest death first, the others next due first.
  std::string_view command = set == JobSet::kDead ? "ZREVRANGE" : "ZRANGE";
  Result<redis::ReplyPtr> reply =
      redis_->Command({command, SetKey(set), start, stop, "WITHSCORES"});
  if (!reply.ok()) return reply.status().WithContext("reading " + std::string(SetKey(set)));
  return EntriesOf(*reply);
}

Result<SetListing> AdminImpl::List(JobSet set, int64_t limit) {
  if (limit < 0) return Status::InvalidArgument("the limit must be 0 (all) or more");
  Result<redis::ReplyPtr> size = redis_->Command({"ZCARD", SetKey(set)});
  if (!size.ok()) return size.status().WithContext("reading " + std::string(SetKey(set)));
  Result<std::vector<SetEntry>> entries = Range(set, 0, limit);
  if (!entries.ok()) return entries.status();
  SetListing listing;
  listing.size = redis::CounterValue(*size);
  listing.entries = std::move(entries.value());
  // The set may have grown between the two reads.
  listing.size = std::max(listing.size, static_cast<int64_t>(listing.entries.size()));
  return listing;
}

Result<SetEntry> AdminImpl::Find(JobSet set, std::string_view jid) {
  if (jid.empty()) return Status::InvalidArgument("the jid is empty");
  // ZSCAN's MATCH keeps the search on the server, as Sidekiq's find_job
  // does; the pattern only narrows it down, the parsed jid decides.
  std::string pattern = "*" + GlobLiteral(JsonEscaped(jid)) + "*";
  std::string cursor = "0";
  std::set<std::string> seen;
  std::vector<SetEntry> found;
  for (int round = 0;; ++round) {
    if (round == kMaxScanRounds) {
      return Status::Timeout("searching " + std::string(SetKey(set)) + " did not finish");
    }
    Result<redis::ReplyPtr> reply =
        redis_->Command({"ZSCAN", SetKey(set), cursor, "MATCH", pattern, "COUNT", kScanCount});
    if (!reply.ok()) return reply.status().WithContext("searching " + std::string(SetKey(set)));
    Result<redis::ScanPage> page = redis::ReadScanPage(*reply, "ZSCAN");
    if (!page.ok()) return page.status();
    cursor = std::move(page->cursor);
    // ZSCAN may return a member more than once.
    for (SetEntry& entry : EntriesOf(page->items)) {
      if (entry.jid != jid || !seen.insert(entry.payload).second) continue;
      found.push_back(std::move(entry));
    }
    if (cursor == "0") break;
  }
  if (found.empty()) {
    return Status::NotFound("no job with jid " + std::string(jid) + " in " +
                            std::string(SetKey(set)));
  }
  auto first = std::min_element(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return std::tie(a.score, a.payload) < std::tie(b.score, b.payload);
  });
  return std::move(*first);
}

Result<std::pair<int64_t, int64_t>> AdminImpl::PushNow(JobSet set,
                                                       const std::vector<SetEntry>& entries) {
  std::vector<QueuedMember> moves;
  moves.reserve(entries.size());
  for (const SetEntry& entry : entries) moves.push_back({TargetQueue(entry), entry.payload});
  ScriptCall call = RetryNowCall(keys_, SetKey(set), clock_->Now(), set != JobSet::kScheduled,
                                 std::move(moves));
  Result<redis::ReplyPtr> reply = redis_->Eval(call);
  if (!reply.ok()) return reply.status().WithContext("retry_now.lua");
  Result<RetryNowReply> moved = ReadRetryNowReply(*reply);
  if (!moved.ok()) return moved.status();
  return std::make_pair(moved->moved, moved->missing);
}

Result<SetEntry> AdminImpl::RetryNow(JobSet set, std::string_view jid) {
  Result<SetEntry> entry = Find(set, jid);
  if (!entry.ok()) return entry.status();
  if (!entry->valid) {
    return Status::Corruption("the entry with jid " + std::string(jid) + " in " +
                              std::string(SetKey(set)) +
                              " is not a job (it needs a string class and an array args); "
                              "it stays where it is");
  }
  Result<std::pair<int64_t, int64_t>> moved = PushNow(set, {*entry});
  if (!moved.ok()) return moved.status();
  if (moved->first != 1) return Status::NotFound(GoneMessage(set, jid));
  return entry;
}

Result<BulkResult> AdminImpl::RetryAll(JobSet set) {
  Result<redis::ReplyPtr> size = redis_->Command({"ZCARD", SetKey(set)});
  if (!size.ok()) return size.status().WithContext("reading " + std::string(SetKey(set)));
  BulkResult result;
  // Entries that are not jobs stay in the set, in front of the ones not yet
  // read: the next page starts after them. Each page is one more step
  // towards the size the set had at the start, so the walk ends even while
  // others keep adding members.
  int64_t offset = 0;
  for (int64_t read = 0; read < redis::CounterValue(*size);) {
    Result<std::vector<SetEntry>> page = Range(set, offset, kBulkBatch);
    if (!page.ok()) return page.status();
    if (page->empty()) break;
    read += static_cast<int64_t>(page->size());
    std::vector<SetEntry> jobs;
    for (SetEntry& entry : *page) {
      if (entry.valid) {
        jobs.push_back(std::move(entry));
      } else {
        ++result.skipped;
        ++offset;
      }
    }
    if (jobs.empty()) continue;
    Result<std::pair<int64_t, int64_t>> moved = PushNow(set, jobs);
    if (!moved.ok()) return moved.status();
    result.moved += moved->first;
  }
  return result;
}

Result<SetEntry> AdminImpl::Delete(JobSet set, std::string_view jid) {
  Result<SetEntry> entry = Find(set, jid);
  if (!entry.ok()) return entry.status();
  Result<redis::ReplyPtr> removed = redis_->Command({"ZREM", SetKey(set), entry->payload});
  if (!removed.ok()) return removed.status().WithContext("ZREM " + std::string(SetKey(set)));
  if (redis::CounterValue(*removed) != 1) return Status::NotFound(GoneMessage(set, jid));
  return entry;
}

Result<int64_t> AdminImpl::DeleteAll(JobSet set) {
  // UNLINK, as Sidekiq's SortedSet#clear: a large set is freed off Redis's
  // main thread.
  Result<std::pair<int64_t, int64_t>> cleared = Clear(SetKey(set), "");
  if (!cleared.ok()) return cleared.status();
  return cleared->first;
}

Result<std::pair<int64_t, int64_t>> AdminImpl::Clear(std::string_view key,
                                                     std::string_view queue) {
  Result<redis::ReplyPtr> reply = redis_->Eval(ClearCall(keys_, key, queue));
  if (!reply.ok()) return reply.status().WithContext("clearing " + std::string(key));
  Result<ClearReply> cleared = ReadClearReply(*reply);
  if (!cleared.ok()) return cleared.status();
  return std::make_pair(cleared->size, cleared->removed);
}

Result<std::pair<int64_t, int64_t>> AdminImpl::MoveToDead(JobSet from,
                                                          const std::vector<SetEntry>& entries,
                                                          const DeadSetLimits& limits) {
  std::vector<std::string> payloads;
  payloads.reserve(entries.size());
  for (const SetEntry& entry : entries) payloads.push_back(entry.payload);
  Result<redis::ReplyPtr> reply = redis_->Eval(
      KillCall(keys_, clock_->Now(), limits, std::move(payloads), SetKey(from)));
  if (!reply.ok()) return reply.status().WithContext("kill.lua");
  Result<KillReply> killed = ReadKillReply(*reply);
  if (!killed.ok()) return killed.status();
  return std::make_pair(killed->killed, killed->missing);
}

Status CheckLimits(const DeadSetLimits& limits) {
  if (limits.max_jobs < 1) return Status::InvalidArgument("dead max jobs must be at least 1");
  if (limits.timeout.count() < 0) {
    return Status::InvalidArgument("the dead timeout must not be negative");
  }
  return Status::OK();
}

Result<SetEntry> AdminImpl::Kill(std::string_view jid, const DeadSetLimits& limits) {
  if (Status s = CheckLimits(limits); !s.ok()) return s;
  Result<SetEntry> entry = Find(JobSet::kRetry, jid);
  if (!entry.ok()) return entry.status();
  Result<std::pair<int64_t, int64_t>> moved = MoveToDead(JobSet::kRetry, {*entry}, limits);
  if (!moved.ok()) return moved.status();
  if (moved->first != 1) return Status::NotFound(GoneMessage(JobSet::kRetry, jid));
  return entry;
}

Result<BulkResult> AdminImpl::KillAll(const DeadSetLimits& limits) {
  if (Status s = CheckLimits(limits); !s.ok()) return s;
  Result<redis::ReplyPtr> size = redis_->Command({"ZCARD", keys_.Retry()});
  if (!size.ok()) return size.status().WithContext("reading retry");
  BulkResult result;
  for (int64_t read = 0; read < redis::CounterValue(*size);) {
    Result<std::vector<SetEntry>> page = Range(JobSet::kRetry, 0, kBulkBatch);
    if (!page.ok()) return page.status();
    if (page->empty()) break;
    read += static_cast<int64_t>(page->size());
    Result<std::pair<int64_t, int64_t>> moved = MoveToDead(JobSet::kRetry, *page, limits);
    if (!moved.ok()) return moved.status();
    result.moved += moved->first;
  }
  return result;
}

Result<std::vector<QueueStats>> AdminImpl::ListQueues() {
  Result<redis::ReplyPtr> members = redis_->Command({"SMEMBERS", keys_.Queues()});
  if (!members.ok()) return members.status().WithContext("reading queues");
  std::vector<std::string> names = redis::StringArray(*members);
  std::sort(names.begin(), names.end());
  std::deque<std::string> keys;
  std::vector<redis::Argv> commands;
  for (const std::string& name : names) {
    const std::string& key = keys.emplace_back(keys_.Queue(name));
    commands.push_back({"LLEN", key});
    commands.push_back({"LRANGE", key, "-1", "-1"});
  }
  Result<std::vector<redis::ReplyPtr>> replies = redis_->Pipeline(commands);
  if (Status s = Failed(replies, commands, "reading queues"); !s.ok()) return s;
  const double now = clock_->Now();
  std::vector<QueueStats> queues;
  for (size_t i = 0; i < names.size(); ++i) {
    queues.push_back(ReadQueueStats(names[i], (*replies)[2 * i], (*replies)[2 * i + 1], now));
  }
  if (Status s = MarkPaused(&queues); !s.ok()) return s;
  return queues;
}

Result<int64_t> AdminImpl::ClearQueue(std::string_view name) {
  if (Status s = CheckQueueName(name); !s.ok()) return s;
  std::string key = keys_.Queue(name);
  // Sidekiq's Queue#clear, with the size read in the same step.
  Result<std::pair<int64_t, int64_t>> cleared = Clear(key, name);
  if (!cleared.ok()) return cleared.status();
  if (cleared->second == 0) {
    return Status::NotFound("no queue named '" + std::string(name) + "'");
  }
  return cleared->first;
}

}  // namespace admin_internal

std::string_view JobSetKey(JobSet set) {
  switch (set) {
    case JobSet::kScheduled:
      return "schedule";
    case JobSet::kRetry:
      return "retry";
    case JobSet::kDead:
      return "dead";
  }
  return "retry";
}

Admin::~Admin() = default;

Result<std::unique_ptr<Admin>> Admin::Open(const RedisOptions& options, AdminOptions admin_options) {
  if (Status s = CheckKeyLayout(admin_options.prefix, options.group); !s.ok()) return s;
  Result<std::unique_ptr<redis::Connection>> redis = redis::Connection::Open(options);
  if (!redis.ok()) return redis.status();
  Status s = (*redis)->LoadScripts();
  if (!s.ok()) return s;
  Keys keys = Keys::For(admin_options.prefix, options);
  return std::unique_ptr<Admin>(new admin_internal::AdminImpl(
      std::move(redis.value()), std::move(keys), std::move(admin_options)));
}

}  // namespace reliableq
