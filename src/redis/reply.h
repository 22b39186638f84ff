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
#include <utility>
#include <vector>

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

// A reply as the connection layer hands it to the other layers, which pass
// it to a reader (below, or a script's reader in src/protocol/) and never
// look inside: replies are read in two layers (docs/hacking.md). Empty when
// there is no reply. A view: the reply it names must outlive it.
class ReplyRef {
 public:
  ReplyRef() = default;
  ReplyRef(const redisReply* reply) : reply_(reply) {}       // NOLINT: implicit
  ReplyRef(const ReplyPtr& reply) : reply_(reply.get()) {}  // NOLINT: implicit
  explicit operator bool() const { return reply_ != nullptr; }
  // For the readers of src/redis/ and src/protocol/ only.
  const redisReply* raw() const { return reply_; }

 private:
  const redisReply* reply_ = nullptr;
};

inline std::string_view View(const redisReply* reply) {
  return {reply->str, static_cast<size_t>(reply->len)};
}

// An integer reply, or a string reply holding a whole number.
Result<int64_t> ToInteger(ReplyRef reply);

// A bulk or status string reply; nil is kNotFound.
Result<std::string> ToString(ReplyRef reply);

// For messages: the reply type's name ("array", "nil", ...).
const char* TypeName(ReplyRef reply);

// The value of `field` in the text of an INFO reply ("field:value" lines),
// or empty.
std::string_view InfoField(std::string_view info, std::string_view field);

// Readers of command replies, for the layers that do not look inside one;
// kProtocol for a reply of another shape.

// An error reply (a Pipeline's replies keep them in place), and nil.
bool IsErrorReply(ReplyRef reply);
bool IsNilReply(ReplyRef reply);

// An array of strings: SMEMBERS, HKEYS, HGETALL (field, value, ...),
// ZRANGE (with WITHSCORES: member, score, ...).
Result<std::vector<std::string>> ToStrings(ReplyRef reply);

// CONFIG GET of one parameter: its value.
Result<std::string> ReadConfigValue(ReplyRef reply);

// CLIENT TRACKINGINFO: its "flags" ("on", "off", "broken_redirect", ...).
Result<std::vector<std::string>> ReadTrackingFlags(ReplyRef reply);

// --- Replies of plain commands, read for the layers above (Admin, Client,
// the spool, migrate, the CLI). Each is named after the reply it reads. ---

// The text of an error reply ("ERR ..."), for FromErrorReply; empty for any
// other reply.
std::string_view ErrorText(ReplyRef reply);

// A counter as Sidekiq reads it (`to_i`): absent or not a number is 0.
// For GET of a stat and the counts LLEN, ZCARD, SISMEMBER, EXISTS, SADD,
// PUBLISH and the like answer.
int64_t CounterValue(ReplyRef reply);

// The elements of an array reply (SMEMBERS, LRANGE, HKEYS, HMGET, ...) as
// strings, an element that is not a string (nil) as ""; no strings for any
// other reply. (ToStrings, above, refuses both.)
std::vector<std::string> StringArray(ReplyRef reply);
// HGETALL's flat reply as (field, value) pairs, in its order.
std::vector<std::pair<std::string, std::string>> FieldValues(ReplyRef reply);

// A member of a sorted set and its score, from a WITHSCORES reply
// (ZRANGE, ZREVRANGE, ZRANGEBYSCORE, a ZSCAN page); a score that is not a
// number reads 0.
struct ScoredMember {
  std::string member;
  double score = 0;
};
std::vector<ScoredMember> ScoredMembers(ReplyRef reply);

// A SCAN, SSCAN, HSCAN or ZSCAN reply: the next cursor ("0": the scan is
// over) and the page's items, which `reply` owns (read them with
// StringArray or ScoredMembers). kProtocol naming `command` otherwise.
struct ScanPage {
  std::string cursor;
  ReplyRef items;
};
Result<ScanPage> ReadScanPage(ReplyRef reply, std::string_view command);

// EXEC's reply: the replies of the transaction's commands, in order, which
// `reply` owns (error replies among them in place). kRefused when EXEC
// answered nil (a WATCHed key changed: nothing ran); kProtocol for any
// other reply.
Result<std::vector<ReplyRef>> ExecReplies(ReplyRef reply);

// WAIT's reply: how many replicas acknowledged the writes before it. An
// error reply is its Status (FromErrorReply); anything but an integer is
// kProtocol "WAIT answered <type>".
Result<int64_t> ReadWaitReply(ReplyRef reply);

// TIME's reply ({seconds, microseconds}) as epoch seconds; kProtocol for
// any other reply.
Result<double> ReadTimeReply(ReplyRef reply);

}  // namespace reliableq::redis

#endif  // RELIABLEQ_REDIS_REPLY_H_
