#include "queue_watch.h"

#include <algorithm>
#include <cstdlib>

#include "redis/reply.h"

namespace reliableq::bench {

QueueWatch::QueueWatch(redis::Connection* redis, std::vector<std::string> queues, Keys keys)
    : redis_(redis), queues_(std::move(queues)), keys_(std::move(keys)) {
  for (const std::string& q : queues_) queue_keys_.push_back(keys_.Queue(q));
}

Result<QueueSnapshot> QueueWatch::Poll() {
  // Queues are read before working lists: a job moves from the first to the
  // second, so a job in flight is counted once or twice, never missed.
  std::vector<redis::Argv> commands;
  commands.reserve(queue_keys_.size() + working_keys_.size() + 1);
  for (const std::string& key : queue_keys_) commands.push_back({"LLEN", key});
  for (const std::string& key : working_keys_) commands.push_back({"LLEN", key});
  std::string registry = keys_.Registry();
  commands.push_back({"HKEYS", registry});
  Result<std::vector<redis::ReplyPtr>> replies = redis_->Pipeline(commands);
  if (!replies.ok()) return replies.status();

  QueueSnapshot snapshot;
  for (size_t i = 0; i + 1 < replies->size(); ++i) {
    Result<int64_t> n = redis::ToInteger((*replies)[i].get());
    if (!n.ok()) return n.status().WithContext("LLEN");
    (i < queue_keys_.size() ? snapshot.queued : snapshot.working) += *n;
  }
  const redisReply* ids = replies->back().get();
  if (ids->type != REDIS_REPLY_ARRAY) {
    return Status::Protocol(std::string("HKEYS answered ") + redis::TypeName(ids));
  }
  for (size_t i = 0; i < ids->elements; ++i) {
    std::string id(redis::View(ids->element[i]));
    if (std::find(identities_.begin(), identities_.end(), id) != identities_.end()) continue;
    identities_.push_back(id);
    for (const std::string& q : queues_) working_keys_.push_back(keys_.Working(id, q));
    snapshot.complete = false;
  }
  return snapshot;
}

Result<int64_t> ReadCounter(redis::Connection* redis, std::string_view key) {
  Result<redis::ReplyPtr> reply = redis->Command({"GET", key});
  if (!reply.ok()) return reply.status();
  if ((*reply)->type == REDIS_REPLY_NIL) return int64_t{0};
  return redis::ToInteger(reply->get());
}

Result<double> ReadInfoField(redis::Connection* redis, std::string_view section,
                             std::string_view field) {
  Result<redis::ReplyPtr> reply = redis->Command({"INFO", section});
  if (!reply.ok()) return reply.status();
  Result<std::string> text = redis::ToString(reply->get());
  if (!text.ok()) return text.status();
  std::string wanted = "\n" + std::string(field) + ":";
  size_t at = ("\n" + *text).find(wanted);
  if (at == std::string::npos) {
    return Status::NotFound("INFO " + std::string(section) + " has no " + std::string(field));
  }
  // `at` indexes the text with a newline in front; the value follows the
  // colon in the text itself.
  return std::strtod(text->c_str() + at + wanted.size() - 1, nullptr);
}

}  // namespace reliableq::bench
