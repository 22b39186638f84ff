// Admin: pausing and resuming queues (the `paused` set; QueuePauses is the
// worker's side).

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "admin/admin_impl.h"
#include "reliableq/job.h"  // CheckQueueName
#include "redis/reply.h"

namespace reliableq::admin_internal {

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

Result<PauseChange> AdminImpl::PauseQueue(std::string_view name, PauseOptions options) {
  if (Status s = CheckQueueName(name); !s.ok()) return s;
  if (!options.allow_unknown) {
    if (Status s = CheckKnown(name); !s.ok()) return s;
  }
  return ChangePause(name, true);
}

Result<PauseChange> AdminImpl::ResumeQueue(std::string_view name) {
  if (Status s = CheckQueueName(name); !s.ok()) return s;
  return ChangePause(name, false);
}

Status AdminImpl::CheckKnown(std::string_view name) {
  // The key names outlive the commands, which only view them.
  const std::string queues = keys_.Queues();
  const std::string queue = keys_.Queue(name);
  const std::string paused = keys_.Paused();
  std::vector<redis::Argv> commands = {
      {"SISMEMBER", queues, name}, {"EXISTS", queue}, {"SISMEMBER", paused, name}};
  Result<std::vector<redis::ReplyPtr>> known = redis_->Pipeline(commands);
  if (Status s = Failed(known, commands, "looking up queue " + std::string(name)); !s.ok()) {
    return s;
  }
  for (const redis::ReplyPtr& reply : *known) {
    if (redis::CounterValue(reply) > 0) return Status::OK();
  }
  // Only to suggest names: a failed read suggests none.
  commands = {{"SMEMBERS", queues}, {"SMEMBERS", paused}};
  Result<std::vector<redis::ReplyPtr>> names = redis_->Pipeline(commands);
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

Result<PauseChange> AdminImpl::ChangePause(std::string_view name, bool pause) {
  std::string key = keys_.Paused();
  Result<redis::ReplyPtr> changed = redis_->Command({pause ? "SADD" : "SREM", key, name});
  if (!changed.ok()) {
    return changed.status().WithContext(pause ? "pausing queue" : "resuming queue");
  }
  // Only after the set changed: a worker applies the message as it comes,
  // and must never pause on a write that failed. Every worker's wake-up
  // connection receives it, idle or busy (QueuePauses); a refused PUBLISH
  // (an ACL without the channel) tells none, and the set still reaches each
  // worker at its next heartbeat.
  std::string channel = keys_.WakePaused();
  std::string message = (pause ? "pause " : "resume ") + std::string(name);
  Result<redis::ReplyPtr> told = redis_->Command({"PUBLISH", channel, message});
  return PauseChange{.changed = redis::CounterValue(*changed) == 1,
                     .workers_told = told.ok() ? redis::CounterValue(*told) : 0};
}

Status AdminImpl::MarkPaused(std::vector<QueueStats>* queues) {
  std::string key = keys_.Paused();
  Result<redis::ReplyPtr> members = redis_->Command({"SMEMBERS", key});
  if (!members.ok()) return members.status().WithContext("reading the paused queues");
  std::vector<std::string> paused = redis::StringArray(*members);
  std::sort(paused.begin(), paused.end());
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

}  // namespace reliableq::admin_internal
