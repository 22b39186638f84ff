// Admin's queues: their sizes and latencies, clearing one, its pages of
// jobs, and pausing and resuming (the `paused` set; QueuePauses is the
// worker's side).

#include "admin/queues.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <deque>
#include <utility>

#include "codec/job_codec.h"
#include "reliableq/job.h"  // CheckQueueName

namespace reliableq::admin {

namespace {

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// The edit distance of `a` and `b`, ignoring ASCII case: each insertion,
// deletion, substitution or swap of two neighbours costs 1 (optimal string
// alignment), as a typo goes.
size_t TypoDistance(std::string_view a, std::string_view b) {
  // Three rows of the table: i - 2, i - 1 and i.
  std::vector<size_t> before(b.size() + 1), last(b.size() + 1), row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) last[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = Lower(a[i - 1]) == Lower(b[j - 1]) ? 0 : 1;
      row[j] = std::min({last[j] + 1, row[j - 1] + 1, last[j - 1] + cost});
      if (i > 1 && j > 1 && Lower(a[i - 1]) == Lower(b[j - 2]) &&
          Lower(a[i - 2]) == Lower(b[j - 1])) {
        row[j] = std::min(row[j], before[j - 2] + 1);
      }
    }
    std::swap(before, last);
    std::swap(last, row);
  }
  return last[b.size()];
}

// " (did you mean 'a', 'b' or 'c'?)": the names of `known` a typo away from
// `name` (a third of its length, 1 to 2 edits), nearest first, at most
// three; "" when none is.
std::string CloseNames(std::string_view name, std::vector<std::string> known) {
  constexpr size_t kLongest = 256;  // past that, no one typed it
  constexpr size_t kShown = 3;
  size_t most = std::clamp<size_t>(name.size() / 3, 1, 2);
  std::vector<std::pair<size_t, std::string>> close;
  for (std::string& candidate : known) {
    if (candidate.size() > kLongest || name.size() > kLongest) continue;
    size_t distance = TypoDistance(name, candidate);
    if (distance <= most) close.emplace_back(distance, std::move(candidate));
  }
  if (close.empty()) return "";
  std::sort(close.begin(), close.end());
  close.erase(std::unique(close.begin(), close.end(),
                          [](const auto& x, const auto& y) { return x.second == y.second; }),
              close.end());
  if (close.size() > kShown) close.resize(kShown);
  std::string text = " (did you mean ";
  for (size_t i = 0; i < close.size(); ++i) {
    if (i > 0) text += i + 1 == close.size() ? " or " : ", ";
    text += "'" + close[i].second + "'";
  }
  return text + "?)";
}

}  // namespace

// Seconds since the job in `payload` was enqueued, as Sidekiq's queue
// latency: enqueued_at is float seconds, or (Sidekiq 8) integer
// milliseconds, told apart by being an integer above 1e12. Unknown or in the
// future (clock skew) reads as 0.
double Latency(std::string_view payload, double now) {
  Result<codec::DecodedJob> job = codec::DecodeJob(payload);
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

void AddQueueStatsReads(const std::string& key, std::vector<redis::Argv>* commands) {
  commands->push_back({"LLEN", key});
  commands->push_back({"LRANGE", key, "-1", "-1"});
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

Queues::Queues(AdminContext& context) : context_(context) {}

Result<std::vector<QueueStats>> Queues::ListQueues() {
  Result<std::vector<std::string>> names =
      context_.SortedMembers(context_.keys.Queues(), "reading queues");
  if (!names.ok()) return names.status();
  std::deque<std::string> keys;
  std::vector<redis::Argv> commands;
  for (const std::string& name : *names) {
    AddQueueStatsReads(keys.emplace_back(context_.keys.Queue(name)), &commands);
  }
  Result<std::vector<redis::ReplyPtr>> replies = context_.redis->Pipeline(commands);
  if (Status s = context_.Failed(replies, commands, "reading queues"); !s.ok()) return s;
  const double now = context_.clock->Now();
  std::vector<QueueStats> queues;
  for (size_t i = 0; i < names->size(); ++i) {
    queues.push_back(ReadQueueStats((*names)[i], (*replies)[2 * i], (*replies)[2 * i + 1], now));
  }
  if (Status s = MarkPaused(&queues); !s.ok()) return s;
  return queues;
}

Result<int64_t> Queues::ClearQueue(std::string_view name) {
  if (Status s = CheckQueueName(name); !s.ok()) return s;
  std::string key = context_.keys.Queue(name);
  // Sidekiq's Queue#clear, with the size read in the same step.
  Result<protocol::ClearReply> cleared = context_.Clear(key, name);
  if (!cleared.ok()) return cleared.status();
  if (cleared->removed == 0) {
    return Status::NotFound("no queue named '" + std::string(name) + "'");
  }
  return cleared->size;
}

Result<PauseChange> Queues::PauseQueue(std::string_view name, PauseOptions options) {
  if (Status s = CheckQueueName(name); !s.ok()) return s;
  if (!options.allow_unknown) {
    if (Status s = CheckKnown(name); !s.ok()) return s;
  }
  return ChangePause(name, true);
}

Result<PauseChange> Queues::ResumeQueue(std::string_view name) {
  if (Status s = CheckQueueName(name); !s.ok()) return s;
  return ChangePause(name, false);
}

Status Queues::CheckKnown(std::string_view name) {
  // The key names outlive the commands, which only view them.
  const std::string queues = context_.keys.Queues();
  const std::string queue = context_.keys.Queue(name);
  const std::string paused = context_.keys.Paused();
  std::vector<redis::Argv> commands = {
      {"SISMEMBER", queues, name}, {"EXISTS", queue}, {"SISMEMBER", paused, name}};
  Result<std::vector<redis::ReplyPtr>> known = context_.redis->Pipeline(commands);
  if (Status s = context_.Failed(known, commands, "looking up queue " + std::string(name));
      !s.ok()) {
    return s;
  }
  for (const redis::ReplyPtr& reply : *known) {
    if (redis::CounterValue(reply) > 0) return Status::OK();
  }
  // Only to suggest names: a failed read suggests none.
  commands = {{"SMEMBERS", queues}, {"SMEMBERS", paused}};
  Result<std::vector<redis::ReplyPtr>> names = context_.redis->Pipeline(commands);
  std::vector<std::string> candidates;
  if (names.ok()) {
    for (const redis::ReplyPtr& reply : *names) {
      for (std::string& candidate : redis::StringArray(reply)) {
        candidates.push_back(std::move(candidate));
      }
    }
  }
  return Status::NotFound("no queue named '" + std::string(name) + "'" +
                          CloseNames(name, std::move(candidates)));
}

Result<PauseChange> Queues::ChangePause(std::string_view name, bool pause) {
  std::string key = context_.keys.Paused();
  Result<redis::ReplyPtr> changed = context_.redis->Command({pause ? "SADD" : "SREM", key, name});
  if (!changed.ok()) {
    return changed.status().WithContext(pause ? "pausing queue" : "resuming queue");
  }
  // Only after the set changed: a worker applies the message as it comes,
  // and must never pause on a write that failed. Every worker's wake-up
  // connection receives it, idle or busy (QueuePauses); a refused PUBLISH
  // (an ACL without the channel) tells none, and the set still reaches each
  // worker at its next heartbeat.
  std::string channel = context_.keys.WakePaused();
  std::string message = (pause ? "pause " : "resume ") + std::string(name);
  Result<redis::ReplyPtr> told = context_.redis->Command({"PUBLISH", channel, message});
  return PauseChange{.changed = redis::CounterValue(*changed) == 1,
                     .workers_told = told.ok() ? redis::CounterValue(*told) : 0};
}

Status Queues::MarkPaused(std::vector<QueueStats>* queues) {
  std::string key = context_.keys.Paused();
  Result<std::vector<std::string>> read = context_.SortedMembers(key, "reading the paused queues");
  if (!read.ok()) return read.status();
  const std::vector<std::string>& paused = *read;
  std::vector<QueueStats> merged;
  merged.reserve(queues->size() + paused.size());
  auto p = paused.begin();
  for (QueueStats& queue : *queues) {
    for (; p != paused.end() && *p < queue.name; ++p) {
      merged.push_back({.name = *p, .paused = true});
    }
    if (p != paused.end() && *p == queue.name) {
      queue.paused = true;
      ++p;
    }
    merged.push_back(std::move(queue));
  }
  for (; p != paused.end(); ++p) merged.push_back({.name = *p, .paused = true});
  *queues = std::move(merged);
  return Status::OK();
}

Result<QueuePage> Queues::ListQueue(std::string_view name, int64_t offset, int64_t limit) {
  if (offset < 0 || limit < 0) {
    return Status::InvalidArgument("the offset and the limit must not be negative");
  }
  if (Status s = CheckQueueName(name); !s.ok()) return s;
  std::string key = context_.keys.Queue(name);
  std::string start = std::to_string(offset);
  std::string stop = limit > 0 ? std::to_string(offset + limit - 1) : "-1";
  std::string paused_key = context_.keys.Paused();
  std::vector<redis::Argv> commands = {{"LLEN", key},
                                       {"LRANGE", key, "-1", "-1"},
                                       {"LRANGE", key, start, stop},
                                       {"SISMEMBER", paused_key, name}};
  Result<std::vector<redis::ReplyPtr>> replies = context_.redis->Pipeline(commands);
  if (Status s = context_.Failed(replies, commands, "reading " + key); !s.ok()) return s;
  QueuePage page;
  page.stats =
      ReadQueueStats(std::string(name), (*replies)[0], (*replies)[1], context_.clock->Now());
  page.stats.paused = redis::CounterValue((*replies)[3]) == 1;
  std::vector<std::string> jobs = redis::StringArray((*replies)[2]);
  for (size_t i = 0; i < jobs.size(); ++i) {
    page.jobs.push_back({offset + static_cast<int64_t>(i), std::move(jobs[i])});
  }
  return page;
}

}  // namespace reliableq::admin
