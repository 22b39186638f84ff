#include "reliableq/client.h"

#include <signal.h>

#include <chrono>
#include <cmath>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "job_codec.h"
#include "keys.h"
#include "redis/connection.h"
#include "redis/errors.h"
#include "redis/reply.h"

namespace reliableq {

namespace {

// Jobs per MULTI in PushBulk: big enough to make a round trip carry a lot,
// small enough that Redis never blocks long on one EXEC.
constexpr size_t kBatchSize = 1000;

double NowSeconds() {
  using std::chrono::duration;
  using std::chrono::system_clock;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

// hiredis writes with write(2), so a connection the server has closed would
// kill a program that still has the default SIGPIPE action. A handler the
// program installed itself is left alone.
void IgnoreDefaultSigpipe() {
  struct sigaction current;
  if (sigaction(SIGPIPE, nullptr, &current) != 0) return;
  if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_DFL) {
    struct sigaction ignore = {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, nullptr);
  }
}

// The replies of MULTI, n queued commands and EXEC: every command must have
// been queued and EXEC must have run them all without an error.
Status CheckTransaction(const std::vector<redis::ReplyPtr>& replies) {
  for (const redis::ReplyPtr& reply : replies) {
    if (reply->type == REDIS_REPLY_ERROR) return redis::FromErrorReply(redis::View(reply.get()));
  }
  const redisReply* exec = replies.back().get();
  if (exec->type != REDIS_REPLY_ARRAY || exec->elements != replies.size() - 2) {
    return Status::Protocol(std::string("EXEC answered ") + redis::TypeName(exec) +
                            " instead of one reply per queued command");
  }
  for (size_t i = 0; i < exec->elements; ++i) {
    const redisReply* reply = exec->element[i];
    if (reply->type == REDIS_REPLY_ERROR) return redis::FromErrorReply(redis::View(reply));
  }
  return Status::OK();
}

class ClientImpl : public Client {
 public:
  explicit ClientImpl(std::unique_ptr<redis::Connection> connection)
      : connection_(std::move(connection)) {}

  Result<std::string> Push(const Job& job) override {
    double now = NowSeconds();
    std::string jid;
    Result<std::string> json = EncodeJob(job, now, now, &jid);
    if (!json.ok()) return json.status();
    std::string queue_key = Keys::Queue(job.queue);
    std::vector<redis::Argv> commands = {
        {"MULTI"},
        {"SADD", Keys::kQueues, job.queue},
        {"LPUSH", queue_key, *json},
        {"EXEC"},
    };
    Status s = RunTransaction(commands);
    if (!s.ok()) return s.WithContext("push to " + queue_key);
    return jid;
  }

  Result<std::vector<std::string>> PushBulk(const std::vector<Job>& jobs) override {
    // Everything is encoded before anything is sent, so that one bad job
    // leaves Redis untouched.
    double now = NowSeconds();
    std::vector<std::string> payloads(jobs.size());
    std::vector<std::string> jids(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      Result<std::string> json = EncodeJob(jobs[i], now, now, &jids[i]);
      if (!json.ok()) return json.status().WithContext("job " + std::to_string(i));
      payloads[i] = std::move(json.value());
    }

    for (size_t begin = 0; begin < jobs.size(); begin += kBatchSize) {
      size_t end = std::min(jobs.size(), begin + kBatchSize);
      // Queues in the order they first appear, each with its payloads in
      // input order: LPUSH of p1 p2 p3 leaves p1 to be taken first.
      std::vector<std::string_view> queues;
      std::unordered_map<std::string_view, std::vector<size_t>> members;
      for (size_t i = begin; i < end; ++i) {
        auto [it, added] = members.try_emplace(jobs[i].queue);
        if (added) queues.push_back(jobs[i].queue);
        it->second.push_back(i);
      }
      std::vector<std::string> queue_keys;
      queue_keys.reserve(queues.size());
      std::vector<redis::Argv> commands;
      commands.reserve(queues.size() + 3);
      commands.push_back({"MULTI"});
      redis::Argv sadd = {"SADD", Keys::kQueues};
      sadd.insert(sadd.end(), queues.begin(), queues.end());
      commands.push_back(std::move(sadd));
      for (std::string_view queue : queues) {
        queue_keys.push_back(Keys::Queue(queue));
        redis::Argv lpush = {"LPUSH", queue_keys.back()};
        for (size_t i : members[queue]) lpush.push_back(payloads[i]);
        commands.push_back(std::move(lpush));
      }
      commands.push_back({"EXEC"});
      Status s = RunTransaction(commands);
      if (!s.ok()) {
        return s.WithContext("bulk push stopped after " + std::to_string(begin) + " of " +
                             std::to_string(jobs.size()) + " jobs were pushed");
      }
    }
    return jids;
  }

  Result<std::string> PushAt(const Job& job, double epoch_seconds) override {
    if (!std::isfinite(epoch_seconds)) {
      return Status::InvalidArgument("the time to run the job at is not a finite number");
    }
    double now = NowSeconds();
    if (epoch_seconds <= now) return Push(job);
    // A scheduled job gets enqueued_at when it is moved to its queue.
    std::string jid;
    Result<std::string> json = EncodeJob(job, now, std::nullopt, &jid);
    if (!json.ok()) return json.status();
    std::string score = FormatEpoch(epoch_seconds);
    Result<redis::ReplyPtr> reply = [&] {
      std::lock_guard<std::mutex> lock(mu_);
      return connection_->Command({"ZADD", Keys::kSchedule, score, *json});
    }();
    if (!reply.ok()) return reply.status().WithContext("schedule");
    if ((*reply)->type != REDIS_REPLY_INTEGER) {
      return Status::Protocol(std::string("ZADD answered ") + redis::TypeName(reply->get()));
    }
    return jid;
  }

  Result<std::string> PushIn(const Job& job, double seconds) override {
    if (!std::isfinite(seconds)) {
      return Status::InvalidArgument("the delay is not a finite number of seconds");
    }
    return PushAt(job, NowSeconds() + seconds);
  }

 private:
  // Sends MULTI ... EXEC in one round trip and checks every reply.
  Status RunTransaction(const std::vector<redis::Argv>& commands) {
    Result<std::vector<redis::ReplyPtr>> replies = [&] {
      std::lock_guard<std::mutex> lock(mu_);
      return connection_->Pipeline(commands);
    }();
    if (!replies.ok()) return replies.status();
    return CheckTransaction(*replies);
  }

  std::mutex mu_;
  std::unique_ptr<redis::Connection> connection_;  // guarded by mu_
};

}  // namespace

Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::Open(const RedisOptions& options) {
  IgnoreDefaultSigpipe();
  Result<std::unique_ptr<redis::Connection>> connection = redis::Connection::Open(options);
  if (!connection.ok()) return connection.status();
  return std::unique_ptr<Client>(new ClientImpl(std::move(connection.value())));
}

}  // namespace reliableq
