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

// A counter as Sidekiq reads it (`to_i`): absent or not a number is 0.
int64_t CounterValue(const redisReply* reply) {
  Result<int64_t> value = redis::ToInteger(reply);
  return value.ok() ? *value : 0;
}

std::vector<std::string> StringArray(const redisReply* reply) {
  std::vector<std::string> out;
  if (reply->type != REDIS_REPLY_ARRAY) return out;
  for (size_t i = 0; i < reply->elements; ++i) {
    out.emplace_back(redis::View(reply->element[i]));
  }
  return out;
}

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

double ParseScore(const redisReply* reply) {
  if (reply->type != REDIS_REPLY_STRING) return 0;
  return std::strtod(reply->str, nullptr);
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

// The entries of a flat WITHSCORES reply (member, score, member, ...).
std::vector<SetEntry> EntriesOf(const redisReply* reply) {
  std::vector<SetEntry> entries;
  if (reply->type != REDIS_REPLY_ARRAY) return entries;
  for (size_t i = 0; i + 1 < reply->elements; i += 2) {
    entries.push_back(
        MakeEntry(std::string(redis::View(reply->element[i])), ParseScore(reply->element[i + 1])));
  }
  return entries;
}

// The queue a job of `entry` is pushed to, as QueueOf chooses it.
std::string TargetQueue(const SetEntry& entry) {
  return entry.queue.empty() ? "default" : entry.queue;
}

// The two counters a move script returns ({moved, missing}).
Result<std::pair<int64_t, int64_t>> MoveCounts(const redisReply* reply, std::string_view what) {
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
      reply->element[0]->type != REDIS_REPLY_INTEGER ||
      reply->element[1]->type != REDIS_REPLY_INTEGER) {
    return Status::Protocol(std::string(what) + ": unexpected reply of type " +
                            redis::TypeName(reply));
  }
  return std::make_pair(int64_t{reply->element[0]->integer}, int64_t{reply->element[1]->integer});
}

std::string GoneMessage(JobSet set, std::string_view jid) {
  return "the entry with jid " + std::string(jid) + " left " + std::string(JobSetKey(set)) +
         " meanwhile; nothing was done";
}

// Pipelined replies carry error replies in place; stats stop at the first
// one rather than report a figure built on a key of the wrong type. The
// connection maps it: it knows whether a MOVED means a cluster node met
// without cluster options.
Status AdminImpl::CheckReply(const redisReply* reply, std::string_view what) const {
  if (reply->type != REDIS_REPLY_ERROR) return Status::OK();
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
  for (size_t i = 0; i < r.size(); ++i) {
    Status s = CheckReply(r[i].get(), std::string(reads[i][0]) + " " + std::string(reads[i][1]));
    if (!s.ok()) return s;
  }

  Stats stats;
  stats.processed = CounterValue(r[0].get());
  stats.failed = CounterValue(r[1].get());
  stats.expired = CounterValue(r[8].get());
  std::vector<std::string> queues = StringArray(r[2].get());
  std::sort(queues.begin(), queues.end());
  stats.scheduled = r[3]->integer;
  stats.retries = r[4]->integer;
  stats.dead = r[5]->integer;
  std::vector<std::string> processes = StringArray(r[6].get());
  stats.processes = static_cast<int64_t>(processes.size());
  std::vector<std::string> working;
  {
    std::vector<std::string> flat = StringArray(r[7].get());
    for (size_t i = 0; i + 1 < flat.size(); i += 2) {
      ProcessEntry entry;
      if (!DecodeProcessEntry(flat[i + 1], &entry)) continue;
      for (const std::string& queue : entry.queues) {
        working.push_back(keys_.Working(flat[i], queue));
      }
    }
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
  if (!second.ok()) return second.status().WithContext("reading stats");
  for (size_t i = 0; i < second->size(); ++i) {
    std::string what(commands[i][0]);
    what += " ";
    what += commands[i][1];
    Status s = CheckReply((*second)[i].get(), what);
    if (!s.ok()) return s;
  }

  const double now = clock_->Now();
  size_t next = 0;
  for (const std::string& queue : queues) {
    QueueStats q;
    q.name = queue;
    q.size = (*second)[next++]->integer;
    const redisReply* oldest = (*second)[next++].get();
    if (oldest->type == REDIS_REPLY_ARRAY && oldest->elements == 1) {
      q.latency = Latency(redis::View(oldest->element[0]), now);
    }
    stats.enqueued += q.size;
    stats.queues.push_back(std::move(q));
  }
  for (size_t i = 0; i < processes.size(); ++i) {
    stats.busy += CounterValue((*second)[next++].get());
  }
  for (size_t i = 0; i < working.size(); ++i) {
    stats.in_progress += (*second)[next++]->integer;
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
  return EntriesOf(reply->get());
}

Result<SetListing> AdminImpl::List(JobSet set, int64_t limit) {
  if (limit < 0) return Status::InvalidArgument("the limit must be 0 (all) or more");
  Result<redis::ReplyPtr> size = redis_->Command({"ZCARD", SetKey(set)});
  if (!size.ok()) return size.status().WithContext("reading " + std::string(SetKey(set)));
  Result<std::vector<SetEntry>> entries = Range(set, 0, limit);
  if (!entries.ok()) return entries.status();
  SetListing listing;
  listing.size = (*size)->integer;
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
    const redisReply* r = reply->get();
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING) {
      return Status::Protocol("ZSCAN answered " + std::string(redis::TypeName(r)));
    }
    cursor = std::string(redis::View(r->element[0]));
    // ZSCAN may return a member more than once.
    for (SetEntry& entry : EntriesOf(r->element[1])) {
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
  return MoveCounts(reply->get(), "retry_now.lua");
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
  for (int64_t read = 0; read < (*size)->integer;) {
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
  if ((*removed)->integer != 1) return Status::NotFound(GoneMessage(set, jid));
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
  return MoveCounts(reply->get(), "clear.lua");
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
  return MoveCounts(reply->get(), "kill.lua");
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
  for (int64_t read = 0; read < (*size)->integer;) {
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
  std::vector<std::string> names = StringArray(members->get());
  std::sort(names.begin(), names.end());
  std::deque<std::string> keys;
  std::vector<redis::Argv> commands;
  for (const std::string& name : names) {
    const std::string& key = keys.emplace_back(keys_.Queue(name));
    commands.push_back({"LLEN", key});
    commands.push_back({"LRANGE", key, "-1", "-1"});
  }
  Result<std::vector<redis::ReplyPtr>> replies = redis_->Pipeline(commands);
  if (!replies.ok()) return replies.status().WithContext("reading queues");
  for (size_t i = 0; i < replies->size(); ++i) {
    Status s = CheckReply((*replies)[i].get(),
                          std::string(commands[i][0]) + " " + std::string(commands[i][1]));
    if (!s.ok()) return s;
  }
  const double now = clock_->Now();
  std::vector<QueueStats> queues;
  for (size_t i = 0; i < names.size(); ++i) {
    QueueStats q;
    q.name = names[i];
    q.size = (*replies)[2 * i]->integer;
    const redisReply* oldest = (*replies)[2 * i + 1].get();
    if (oldest->type == REDIS_REPLY_ARRAY && oldest->elements == 1) {
      q.latency = Latency(redis::View(oldest->element[0]), now);
    }
    queues.push_back(std::move(q));
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
