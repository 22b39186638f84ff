// Owning pointers to a hiredis reply and to hiredis's RESP parser, and small
// readers that turn a reply of an expected shape into a value or a
// kProtocol Status. Pure; no I/O.

#ifndef RELIABLEQ_REDIS_REPLY_H_
#define RELIABLEQ_REDIS_REPLY_H_

#include <hiredis/hiredis.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "reliableq/status.h"

namespace reliableq::redis {

struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

// hiredis's parser: bytes go in with redisReaderFeed, redisReply objects
// come out of redisReaderGetReply. One per connection; after a protocol
// error (reader->err) it is unusable, as is the connection.
struct ReaderDeleter {
  void operator()(redisReader* reader) const { redisReaderFree(reader); }
};
using ReaderPtr = std::unique_ptr<redisReader, ReaderDeleter>;
inline ReaderPtr NewReader() { return ReaderPtr(redisReaderCreate()); }

inline std::string_view View(const redisReply* reply) {
  return {reply->str, static_cast<size_t>(reply->len)};
}

// An integer reply, or a string reply holding a whole number.
Result<int64_t> ToInteger(const redisReply* reply);

// A bulk or status string reply; nil is kNotFound.
Result<std::string> ToString(const redisReply* reply);

// For messages: the reply type's name ("array", "nil", ...).
const char* TypeName(const redisReply* reply);

// The value of `field` in the text of an INFO reply ("field:value" lines),
// or empty.
std::string_view InfoField(std::string_view info, std::string_view field);

}  // namespace reliableq::redis

#endif  // RELIABLEQ_REDIS_REPLY_H_
