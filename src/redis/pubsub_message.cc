#include "redis/pubsub_message.h"

#include <string>

namespace reliableq::redis {

namespace {

// The kind of a pushed message ("message", "pmessage", "subscribe", ...),
// or empty when `reply` is no such array.
std::string_view KindOf(const redisReply* reply) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements < 3) return {};
  const redisReply* kind = reply->element[0];
  return kind->type == REDIS_REPLY_STRING ? View(kind) : std::string_view();
}

Status NotAMessage(ReplyRef reply, std::string_view why) {
  return Status::Protocol("not a pub/sub message (" + std::string(why) + "): " + TypeName(reply));
}

}  // namespace

bool IsPubSubMessage(ReplyRef reply) {
  std::string_view kind = KindOf(reply.raw());
  return kind == "message" || kind == "pmessage";
}

Result<PubSubMessage> ReadPubSubMessage(ReplyRef ref) {
  const redisReply* reply = ref.raw();
  std::string_view kind = KindOf(reply);
  if (kind != "message" && kind != "pmessage") return NotAMessage(ref, "its kind");
  PubSubMessage message;
  message.from_pattern = kind == "pmessage";
  size_t at = message.from_pattern ? 2 : 1;
  if (reply->elements < at + 2) return NotAMessage(ref, "too short");
  const redisReply* channel = reply->element[at];
  const redisReply* payload = reply->element[at + 1];
  if (channel->type != REDIS_REPLY_STRING) return NotAMessage(ref, "its channel");
  message.channel = View(channel);
  if (payload->type == REDIS_REPLY_STRING) {
    message.payload = View(payload);
  } else if (payload->type == REDIS_REPLY_ARRAY) {
    message.keys.reserve(payload->elements);
    for (size_t i = 0; i < payload->elements; ++i) {
      const redisReply* key = payload->element[i];
      if (key->type != REDIS_REPLY_STRING) return NotAMessage(ref, "a key of its payload");
      message.keys.push_back(View(key));
    }
  } else if (payload->type != REDIS_REPLY_NIL) {
    return NotAMessage(ref, "its payload");
  }
  return message;
}

}  // namespace reliableq::redis
