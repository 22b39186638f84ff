#include "server/queue_pauses.h"

#include "redis/reply.h"
#include "text_escape.h"

namespace reliableq {

namespace {

// The members of an SMEMBERS reply; nullopt when it is not an array (an
// error reply, the key of another type).
std::optional<std::vector<std::string>> Members(const redisReply* reply) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) return std::nullopt;
  std::vector<std::string> names;
  names.reserve(reply->elements);
  for (size_t i = 0; i < reply->elements; ++i) {
    const redisReply* name = reply->element[i];
    if (name->type == REDIS_REPLY_STRING) names.emplace_back(redis::View(name));
  }
  return names;
}

std::string ErrorOf(const redisReply* reply) {
  if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) return std::string(redis::View(reply));
  return "not a set";
}

}  // namespace

QueuePauses::QueuePauses(redis::AsyncConnection& command, const Keys& keys, QueueSet& queues,
                         const Logger& log,
                         std::function<void(const std::vector<uint32_t>&)> on_resumed)
    : command_(command),
      key_(keys.Paused()),
      queues_(queues),
      log_(log),
      on_resumed_(std::move(on_resumed)) {}

Status QueuePauses::Load(redis::Connection& connection) {
  Result<redis::ReplyPtr> reply = connection.Command({"SMEMBERS", key_});
  if (!reply.ok()) return reply.status();
  std::optional<std::vector<std::string>> names = Members(reply->get());
  if (!names) {
    return Status::Script("cannot read the paused queues at " + key_ + ": " +
                          ErrorOf(reply->get()));
  }
  Apply(*names);
  return Status::OK();
}

void QueuePauses::Refresh() {
  if (!command_.ready()) return;
  command_.Command({"SMEMBERS", key_}, [this](const Status& s, redisReply* reply) {
    if (!s.ok()) return;  // the connection's own handling reports it
    std::optional<std::vector<std::string>> names = Members(reply);
    if (!names) {
      if (!read_failure_logged_) {
        read_failure_logged_ = true;
        std::string error = ErrorOf(reply);
        log_.Log(LogLevel::kWarn, LogEvent("paused_unreadable").WithError(error),
                 "cannot read the paused queues at %s: %s; pauses stay as they were",
                 Escaped(key_).c_str(), Escaped(error).c_str());
      }
      return;
    }
    read_failure_logged_ = false;
    Apply(*names);
  });
}

void QueuePauses::Apply(const std::vector<std::string>& names) {
  std::vector<uint32_t> resumed;
  for (uint32_t q : queues_.SetPaused(names)) {
    const std::string& name = queues_[q].name;
    if (queues_.paused(q)) {
      log_.Log(LogLevel::kInfo, LogEvent("queue_paused").WithQueue(name),
               "queue %s is paused: no new jobs from it", Escaped(name).c_str());
    } else {
      log_.Log(LogLevel::kInfo, LogEvent("queue_resumed").WithQueue(name), "queue %s is resumed",
               Escaped(name).c_str());
      resumed.push_back(q);
    }
  }
  if (!resumed.empty()) on_resumed_(resumed);
}

}  // namespace reliableq
