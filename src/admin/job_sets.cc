// Admin's job sets: entries by jid (Sidekiq's API), pages and entries
// addressed by score (the dashboard), and the moves of their entries.

#include "admin/job_sets.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <deque>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "admin/json_members.h"
#include "codec/job_codec.h"
#include "protocol/script_calls.h"

namespace reliableq::admin {

namespace {

// ZSCAN rounds (of COUNT kScanCount) before a jid search gives up; enough
// for sets of a billion members.
constexpr int kMaxScanRounds = 1000000;
constexpr std::string_view kScanCount = "1000";

// Members per script call of the bulk moves: a batch keeps Redis busy for
// well under a millisecond, and the set is walked in few round trips.
constexpr int64_t kBulkBatch = 100;

// `text` as a literal inside a Redis glob pattern.
std::string GlobLiteral(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// An entry read from a member and its score.
SetEntry MakeEntry(std::string payload, double score) {
  SetEntry entry;
  entry.score = score;
  Result<codec::DecodedJob> decoded = codec::DecodeJob(payload);
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
    entry.retry_count = OptionalInteger(doc, "retry_count");
    entry.error_class = OptionalString(doc, "error_class");
    entry.error_message = OptionalString(doc, "error_message");
  }
  entry.payload = std::move(payload);
  return entry;
}

// The entries of a WITHSCORES reply.
std::vector<SetEntry> EntriesOf(redis::ReplyRef reply) {
  std::vector<SetEntry> entries;
  for (redis::ScoredMember& member : redis::ScoredMembers(reply)) {
    entries.push_back(MakeEntry(std::move(member.member), member.score));
  }
  return entries;
}

// The queue a job of `entry` is pushed to, as QueueOf chooses it.
std::string TargetQueue(const SetEntry& entry) {
  return entry.queue.empty() ? "default" : entry.queue;
}

std::string GoneMessage(JobSet set, std::string_view jid) {
  return "the entry with jid " + std::string(jid) + " left " + std::string(JobSetKey(set)) +
         " meanwhile; nothing was done";
}

}  // namespace

JobSets::JobSets(AdminContext& context)
    : context_(context),
      set_keys_{context.keys.Schedule(), context.keys.Retry(), context.keys.Dead()} {}

Result<std::vector<SetEntry>> JobSets::Range(JobSet set, int64_t offset, int64_t count) {
  std::string start = std::to_string(offset);
  std::string stop = count > 0 ? std::to_string(offset + count - 1) : "-1";
  // The dead set is shown latest death first, the others next due first.
  std::string_view command = set == JobSet::kDead ? "ZREVRANGE" : "ZRANGE";
  Result<redis::ReplyPtr> reply =
      context_.redis->Command({command, SetKey(set), start, stop, "WITHSCORES"});
  if (!reply.ok()) return reply.status().WithContext("reading " + std::string(SetKey(set)));
  return EntriesOf(*reply);
}

Result<SetListing> JobSets::List(JobSet set, int64_t limit) {
  if (limit < 0) return Status::InvalidArgument("the limit must be 0 (all) or more");
  Result<redis::ReplyPtr> size = context_.redis->Command({"ZCARD", SetKey(set)});
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

Result<SetEntry> JobSets::Find(JobSet set, std::string_view jid) {
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
    Result<redis::ReplyPtr> reply = context_.redis->Command(
        {"ZSCAN", SetKey(set), cursor, "MATCH", pattern, "COUNT", kScanCount});
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

Result<std::pair<int64_t, int64_t>> JobSets::PushNow(JobSet set,
                                                     const std::vector<SetEntry>& entries) {
  std::vector<protocol::QueuedMember> moves;
  moves.reserve(entries.size());
  for (const SetEntry& entry : entries) moves.push_back({TargetQueue(entry), entry.payload});
  ScriptCall call = protocol::RetryNowCall(context_.keys, SetKey(set), context_.clock->Now(),
                                 set != JobSet::kScheduled, std::move(moves));
  Result<redis::ReplyPtr> reply = context_.redis->Eval(call);
  if (!reply.ok()) return reply.status().WithContext("retry_now.lua");
  Result<protocol::RetryNowReply> moved = protocol::ReadRetryNowReply(*reply);
  if (!moved.ok()) return moved.status();
  return std::make_pair(moved->moved, moved->missing);
}

Result<SetEntry> JobSets::RetryNow(JobSet set, std::string_view jid) {
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

Result<BulkResult> JobSets::RetryAll(JobSet set) {
  Result<redis::ReplyPtr> size = context_.redis->Command({"ZCARD", SetKey(set)});
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

Result<SetEntry> JobSets::Delete(JobSet set, std::string_view jid) {
  Result<SetEntry> entry = Find(set, jid);
  if (!entry.ok()) return entry.status();
  Result<redis::ReplyPtr> removed = context_.redis->Command({"ZREM", SetKey(set), entry->payload});
  if (!removed.ok()) return removed.status().WithContext("ZREM " + std::string(SetKey(set)));
  if (redis::CounterValue(*removed) != 1) return Status::NotFound(GoneMessage(set, jid));
  return entry;
}

Result<int64_t> JobSets::DeleteAll(JobSet set) {
  // UNLINK, as Sidekiq's SortedSet#clear: a large set is freed off Redis's
  // main thread.
  Result<protocol::ClearReply> cleared = context_.Clear(SetKey(set), "");
  if (!cleared.ok()) return cleared.status();
  return cleared->size;
}

Result<std::pair<int64_t, int64_t>> JobSets::MoveToDead(JobSet from,
                                                        const std::vector<SetEntry>& entries,
                                                        const DeadSetLimits& limits) {
  std::vector<std::string> payloads;
  payloads.reserve(entries.size());
  for (const SetEntry& entry : entries) payloads.push_back(entry.payload);
  Result<redis::ReplyPtr> reply = context_.redis->Eval(
      protocol::KillCall(context_.keys, context_.clock->Now(), limits, std::move(payloads), SetKey(from)));
  if (!reply.ok()) return reply.status().WithContext("kill.lua");
  Result<protocol::KillReply> killed = protocol::ReadKillReply(*reply);
  if (!killed.ok()) return killed.status();
  return std::make_pair(killed->killed, killed->missing);
}

Result<SetEntry> JobSets::Kill(std::string_view jid, const DeadSetLimits& limits) {
  if (Status s = CheckDeadLimits(limits); !s.ok()) return s;
  Result<SetEntry> entry = Find(JobSet::kRetry, jid);
  if (!entry.ok()) return entry.status();
  Result<std::pair<int64_t, int64_t>> moved = MoveToDead(JobSet::kRetry, {*entry}, limits);
  if (!moved.ok()) return moved.status();
  if (moved->first != 1) return Status::NotFound(GoneMessage(JobSet::kRetry, jid));
  return entry;
}

Result<BulkResult> JobSets::KillAll(const DeadSetLimits& limits) {
  if (Status s = CheckDeadLimits(limits); !s.ok()) return s;
  Result<redis::ReplyPtr> size = context_.redis->Command({"ZCARD", context_.keys.Retry()});
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

Result<SetListing> JobSets::ListPage(JobSet set, int64_t offset, int64_t limit) {
  if (offset < 0 || limit < 0) {
    return Status::InvalidArgument("the offset and the limit must not be negative");
  }
  std::string key(SetKey(set));
  std::string start = std::to_string(offset);
  std::string stop = limit > 0 ? std::to_string(offset + limit - 1) : "-1";
  std::string_view range = set == JobSet::kDead ? "ZREVRANGE" : "ZRANGE";
  std::vector<redis::Argv> commands = {{"ZCARD", key}, {range, key, start, stop, "WITHSCORES"}};
  Result<std::vector<redis::ReplyPtr>> replies = context_.redis->Pipeline(commands);
  if (Status s = context_.Failed(replies, commands, "reading " + key); !s.ok()) return s;
  SetListing listing;
  listing.size = redis::CounterValue((*replies)[0]);
  listing.entries = EntriesOf((*replies)[1]);
  return listing;
}

Result<SetEntry> JobSets::FindAt(JobSet set, const EntryRef& ref) {
  std::string score = ScoreText(ref.score);
  Result<redis::ReplyPtr> reply =
      context_.redis->Command({"ZRANGEBYSCORE", SetKey(set), score, score, "WITHSCORES"});
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

Status JobSets::Apply(JobSet set, SetAction action, std::vector<SetEntry> entries,
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
      Result<redis::ReplyPtr> removed = context_.redis->Command(zrem);
      if (!removed.ok()) return removed.status().WithContext("ZREM " + std::string(SetKey(set)));
      int64_t done = redis::CounterValue(*removed);
      counts = {done, static_cast<int64_t>(batch.size()) - done};
    } else {
      Result<std::pair<int64_t, int64_t>> moved =
          action == SetAction::kRetry ? PushNow(set, batch) : MoveToDead(set, batch, limits);
      if (!moved.ok()) return moved.status();
      counts = *moved;
    }
    result->done += counts.first;
    result->not_found += counts.second;
  }
  return Status::OK();
}

Result<ActionResult> JobSets::ActOn(JobSet set, SetAction action, const std::vector<EntryRef>& refs,
                                    const DeadSetLimits& limits) {
  if (action == SetAction::kKill) {
    if (set == JobSet::kDead) return Status::InvalidArgument("dead entries cannot be killed");
    if (Status s = CheckDeadLimits(limits); !s.ok()) return s;
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
  Result<std::vector<redis::ReplyPtr>> replies = context_.redis->Pipeline(commands);
  if (Status s = context_.Failed(replies, commands, "reading " + std::string(SetKey(set)));
      !s.ok()) {
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

Result<ActionResult> JobSets::ActOnAll(JobSet set, SetAction action, const DeadSetLimits& limits) {
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
  if (Status s = CheckDeadLimits(limits); !s.ok()) return s;
  Result<redis::ReplyPtr> size = context_.redis->Command({"ZCARD", SetKey(set)});
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

}  // namespace reliableq::admin
