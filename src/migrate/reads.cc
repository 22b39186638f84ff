#include "migrate/reads.h"

#include <algorithm>

namespace reliableq::migrate {

namespace {

Result<std::optional<std::string>> OptionalString(Result<redis::ReplyPtr> reply) {
  if (!reply.ok()) return reply.status();
  if (redis::IsNilReply(*reply)) return std::optional<std::string>();
  Result<std::string> text = redis::ToString(*reply);
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

Result<std::optional<std::string>> Dump(redis::Connection& redis, const std::string& key) {
  return OptionalString(redis.Command({"DUMP", key}));
}

Result<std::vector<std::string>> ReadStrings(redis::Connection& redis, const redis::Argv& command) {
  Result<redis::ReplyPtr> reply = redis.Command(command);
  if (!reply.ok()) return reply.status();
  return redis::StringArray(*reply);
}

Status ScanKeys(redis::Connection& redis, const std::string& pattern,
                std::vector<std::string>* keys) {
  std::string cursor = "0";
  do {
    Result<redis::ReplyPtr> reply =
        redis.Command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (!reply.ok()) return reply.status();
    Result<redis::ScanPage> page = redis::ReadScanPage(*reply, "SCAN");
    if (!page.ok()) return page.status();
    cursor = std::move(page->cursor);
    for (std::string& key : redis::StringArray(page->items)) keys->push_back(std::move(key));
  } while (cursor != "0");
  return Status::OK();
}

Result<std::vector<std::string>> SortedMembers(redis::Connection& redis, const std::string& key) {
  Result<std::vector<std::string>> members = ReadStrings(redis, {"SMEMBERS", key});
  if (!members.ok()) return members.status();
  std::sort(members->begin(), members->end());
  return members;
}

Result<std::string> KeyType(redis::Connection& redis, const std::string& key) {
  Result<redis::ReplyPtr> reply = redis.Command({"TYPE", key});
  if (!reply.ok()) return reply.status();
  return redis::ToString(*reply);
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
  return redis::ToInteger(*reply);
}

}  // namespace reliableq::migrate
