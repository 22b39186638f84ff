#include "reliableq/admin.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <string_view>
#include <utility>

#include "keys.h"
#include "recovery.h"
#include "redis/connection.h"
#include "redis/errors.h"
#include "redis/reply.h"

namespace reliableq {

namespace {

double NowSeconds() {
  using std::chrono::duration;
  using std::chrono::system_clock;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

// Pipelined replies carry error replies in place; stats stop at the first
// one rather than report a figure built on a key of the wrong type.
Status CheckReply(const redisReply* reply, std::string_view what) {
  if (reply->type != REDIS_REPLY_ERROR) return Status::OK();
  return redis::FromErrorReply(redis::View(reply)).WithContext(std::string(what));
}

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
  rapidjson::Document doc;
  doc.Parse(payload.data(), payload.size());
  if (doc.HasParseError() || !doc.IsObject()) return 0;
  auto it = doc.FindMember("enqueued_at");
  if (it == doc.MemberEnd() || !it->value.IsNumber()) return 0;
  double enqueued_at = it->value.GetDouble();
  if ((it->value.IsInt64() || it->value.IsUint64()) && enqueued_at > 1e12) {
    enqueued_at /= 1000;
  }
  double latency = now - enqueued_at;
  return latency > 0 ? latency : 0;
}

class AdminImpl final : public Admin {
 public:
  AdminImpl(std::unique_ptr<redis::Connection> redis, std::string prefix)
      : redis_(std::move(redis)), keys_(std::move(prefix)) {}

  Result<Stats> GetStats() override;
  Result<RecoveryReport> Recover(const RecoverOptions& options) override;

 private:
  std::unique_ptr<redis::Connection> redis_;
  Keys keys_;
};

Result<Stats> AdminImpl::GetStats() {
  const std::string registry = keys_.Registry();
  Result<std::vector<redis::ReplyPtr>> first = redis_->Pipeline({
      {"GET", Keys::kProcessed},
      {"GET", Keys::kFailed},
      {"SMEMBERS", Keys::kQueues},
      {"ZCARD", Keys::kSchedule},
      {"ZCARD", Keys::kRetry},
      {"ZCARD", Keys::kDead},
      {"SMEMBERS", Keys::kProcesses},
      {"HGETALL", registry},
  });
  if (!first.ok()) return first.status().WithContext("reading stats");
  const std::vector<redis::ReplyPtr>& r = *first;
  static constexpr std::string_view kWhat[] = {"GET stat:processed", "GET stat:failed",
                                               "SMEMBERS queues",    "ZCARD schedule",
                                               "ZCARD retry",        "ZCARD dead",
                                               "SMEMBERS processes", "HGETALL registry"};
  for (size_t i = 0; i < r.size(); ++i) {
    Status s = CheckReply(r[i].get(), kWhat[i]);
    if (!s.ok()) return s;
  }

  Stats stats;
  stats.processed = CounterValue(r[0].get());
  stats.failed = CounterValue(r[1].get());
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
      std::vector<std::string> entry_queues;
      if (!ParseRegistryQueues(flat[i + 1], &entry_queues)) continue;
      for (const std::string& queue : entry_queues) {
        working.push_back(keys_.Working(flat[i], queue));
      }
    }
  }

  // The second round trip needs the names read by the first. The key
  // strings live in a deque so the string_views in the commands stay valid.
  std::deque<std::string> names;
  std::vector<redis::Argv> commands;
  for (const std::string& queue : queues) {
    const std::string& key = names.emplace_back(Keys::Queue(queue));
    commands.push_back({"LLEN", key});
    commands.push_back({"LRANGE", key, "-1", "-1"});
  }
  for (const std::string& identity : processes) {
    commands.push_back({"HGET", names.emplace_back(Keys::Process(identity)), "busy"});
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

  const double now = NowSeconds();
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
  return stats;
}

Result<RecoveryReport> AdminImpl::Recover(const RecoverOptions& options) {
  RecoveryConfig config;
  config.keys = keys_;
  config.max_interruptions = options.max_interruptions;
  config.dry_run = options.dry_run;
  config.identity = options.identity;
  config.force = options.force;
  return RunRecoveryPass(*redis_, config, NowSeconds());
}

}  // namespace

Admin::~Admin() = default;

Result<std::unique_ptr<Admin>> Admin::Open(const RedisOptions& options, std::string prefix) {
  Result<std::unique_ptr<redis::Connection>> redis = redis::Connection::Open(options);
  if (!redis.ok()) return redis.status();
  Status s = (*redis)->LoadScripts();
  if (!s.ok()) return s;
  return std::unique_ptr<Admin>(new AdminImpl(std::move(redis.value()), std::move(prefix)));
}

}  // namespace reliableq
