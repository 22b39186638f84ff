#include "migrate/reads.h"

#include <algorithm>

namespace reliableq::migrate {

namespace {

Result<std::optional<std::string>> OptionalString(Result<redis::ReplyPtr> reply) {
  if (!reply.ok()) return reply.status();
  if ((*reply)->type == REDIS_REPLY_NIL) return std::optional<std::string>();
  Result<std::string> text = redis::ToString(reply->get());
  if (!text.ok()) return text.status();
  return std::optional<std::string>(std::move(*text));
}

}  // namespace

Result<std::optional<std::string>> GetString(redis::Connection& redis, const std::string& key) {
  return OptionalString(redis.Command({"GET", key}));
}

Result<std::optional<std::string>> GetField(redis::Connection& redis, const std::string& key,
                                            const std::string& field) {
  return OptionalString(redis.Command({"HGET", key, field}));
}

std::vector<std::string> Strings(const redisReply* reply) {
  std::vector<std::string> out;
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) return out;
  out.reserve(reply->elements);
  for (size_t i = 0; i < reply->elements; ++i) {
    const redisReply* element = reply->element[i];
    out.emplace_back(element->type == REDIS_REPLY_STRING || element->type == REDIS_REPLY_STATUS
                         ? redis::View(element)
                         : std::string_view());
  }
  return out;
}

Status ScanKeys(redis::Connection& redis, const std::string& pattern,
                std::vector<std::string>* keys) {
  std::string cursor = "0";
  do {
    Result<redis::ReplyPtr> reply =
        redis.Command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (!reply.ok()) return reply.status();
    const redisReply* r = reply->get();
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING) {
      return Status::Protocol("SCAN answered an unexpected reply");
    }
    cursor = std::string(redis::View(r->element[0]));
    for (std::string& key : Strings(r->element[1])) keys->push_back(std::move(key));
  } while (cursor != "0");
  return Status::OK();
}

Result<std::vector<std::string>> SortedMembers(redis::Connection& redis, const std::string& key) {
  Result<redis::ReplyPtr> reply = redis.Command({"SMEMBERS", key});
  if (!reply.ok()) return reply.status();
  std::vector<std::string> members = Strings(reply->get());
  std::sort(members.begin(), members.end());
  return members;
}

Result<std::string> KeyType(redis::Connection& redis, const std::string& key) {
  Result<redis::ReplyPtr> reply = redis.Command({"TYPE", key});
  if (!reply.ok()) return reply.status();
  return redis::ToString(reply->get());
}

Result<int64_t> KeySize(redis::Connection& redis, const std::string& key, const std::string& type) {
  const char* command = type == "list"     ? "LLEN"
                        : type == "zset"   ? "ZCARD"
                        : type == "set"    ? "SCARD"
                        : type == "hash"   ? "HLEN"
                        : type == "stream" ? "XLEN"
                                           : nullptr;
  if (command == nullptr) return int64_t{type == "none" ? 0 : 1};
  Result<redis::ReplyPtr> reply = redis.Command({command, key});
  if (!reply.ok()) return reply.status();
  return redis::ToInteger(reply->get());
}

}  // namespace reliableq::migrate
