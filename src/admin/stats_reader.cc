// Admin's figures: Sidekiq's stats and what the Redis server says of
// itself.

#include "admin/stats_reader.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <utility>

#include "protocol/process_entry.h"

namespace reliableq::admin {

StatsReader::StatsReader(AdminContext& context, Queues& queues, Limiters& limiters)
    : context_(context), queues_(queues), limiters_(limiters) {}

Result<Stats> StatsReader::Read() {
  // The key names outlive the commands, which only view them.
  const std::string read_keys[] = {context_.keys.Processed(),   context_.keys.Failed(),
                                   context_.keys.Queues(),      context_.keys.Schedule(),
                                   context_.keys.Retry(),       context_.keys.Dead(),
                                   context_.keys.Processes(),   context_.keys.Registry(),
                                   context_.keys.StatExpired(), context_.keys.SequencesSince()};
  static constexpr std::string_view kReads[] = {"GET",   "GET",      "SMEMBERS", "ZCARD", "ZCARD",
                                                "ZCARD", "SMEMBERS", "HGETALL",  "GET",   "ZCARD"};
  static_assert(std::size(kReads) == sizeof read_keys / sizeof read_keys[0]);
  std::vector<redis::Argv> reads;
  for (size_t i = 0; i < std::size(kReads); ++i) reads.push_back({kReads[i], read_keys[i]});
  // The oldest hold of a sequence key (its score: when it was taken).
  reads.push_back({"ZRANGE", read_keys[9], "0", "0", "WITHSCORES"});
  Result<std::vector<redis::ReplyPtr>> first = context_.redis->Pipeline(reads);
  // Each error names the key read, as it is in this layout and group.
  if (Status s = context_.Failed(first, reads, "reading stats"); !s.ok()) return s;
  const std::vector<redis::ReplyPtr>& r = *first;

  Stats stats;
  stats.processed = redis::CounterValue(r[0]);
  stats.failed = redis::CounterValue(r[1]);
  stats.expired = redis::CounterValue(r[8]);
  stats.sequences_held = redis::CounterValue(r[9]);
  const double now = context_.clock->Now();
  for (const redis::ScoredMember& oldest : redis::ScoredMembers(r[10])) {
    stats.oldest_sequence_hold = std::max(0.0, now - oldest.score);
  }
  std::vector<std::string> queues = redis::StringArray(r[2]);
  std::sort(queues.begin(), queues.end());
  stats.scheduled = redis::CounterValue(r[3]);
  stats.retries = redis::CounterValue(r[4]);
  stats.dead = redis::CounterValue(r[5]);
  std::vector<std::string> processes = redis::StringArray(r[6]);
  stats.processes = static_cast<int64_t>(processes.size());
  std::vector<std::string> working;
  for (const auto& [identity, json] : redis::FieldValues(r[7])) {
    protocol::ProcessEntry entry;
    if (!protocol::DecodeProcessEntry(json, &entry)) continue;
    for (const std::string& queue : entry.queues)
      working.push_back(context_.keys.Working(identity, queue));
  }

  // The second round trip needs the names read by the first. The key
  // strings live in a deque so the string_views in the commands stay valid.
  std::deque<std::string> names;
  std::vector<redis::Argv> commands;
  for (const std::string& queue : queues) {
    AddQueueStatsReads(names.emplace_back(context_.keys.Queue(queue)), &commands);
  }
  for (const std::string& identity : processes) {
    commands.push_back({"HGET", names.emplace_back(context_.keys.Process(identity)), "busy"});
  }
  for (const std::string& key : working) commands.push_back({"LLEN", key});
  Result<std::vector<redis::ReplyPtr>> second = context_.redis->Pipeline(commands);
  if (Status s = context_.Failed(second, commands, "reading stats"); !s.ok()) return s;

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
  if (Status s = queues_.MarkPaused(&stats.queues); !s.ok()) return s;
  Result<int64_t> parked = limiters_.CountParked();
  if (!parked.ok()) return parked.status();
  stats.parked = *parked;
  return stats;
}

Result<RedisServerInfo> StatsReader::ServerInfo() {
  Result<redis::ReplyPtr> reply = context_.redis->Command({"INFO"});
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

}  // namespace reliableq::admin
