#include "protocol/script_replies.h"

#include <string>
#include <utility>

namespace reliableq::protocol {

// A script's reply of another shape than its header documents.
Status Unexpected(std::string_view script, redis::ReplyRef reply, std::string_view want) {
  std::string got = redis::TypeName(reply);
  if (reply && reply.raw()->type == REDIS_REPLY_ARRAY) {
    got += " of " + std::to_string(reply.raw()->elements);
  }
  return Status::Protocol("unexpected reply from " + std::string(script) + ": want " +
                          std::string(want) + ", got " + got);
}

// The array `reply` when it has `least` to `most` elements, else null.
const redisReply* ArrayOf(redis::ReplyRef reply, size_t least, size_t most) {
  const redisReply* r = reply.raw();
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements < least || r->elements > most) {
    return nullptr;
  }
  return r;
}

// A reply that is an integer count ("what the LREM returned") as "removed
// something".
Result<bool> RemovedAny(std::string_view script, redis::ReplyRef reply) {
  Result<int64_t> n = redis::ToInteger(reply);
  if (!n.ok()) return Unexpected(script, reply, "an integer");
  return *n > 0;
}

// An array of `count` integers.
Result<std::vector<int64_t>> Integers(std::string_view script, redis::ReplyRef reply, size_t count,
                                      std::string_view want) {
  const redisReply* r = ArrayOf(reply, count, count);
  if (r == nullptr) return Unexpected(script, reply, want);
  std::vector<int64_t> values;
  for (size_t i = 0; i < count; ++i) {
    Result<int64_t> n = redis::ToInteger(r->element[i]);
    if (!n.ok()) return Unexpected(script, reply, want);
    values.push_back(*n);
  }
  return values;
}

// The integer reply of `script`; kProtocol naming the reply otherwise.
Result<int64_t> IntegerReply(redis::ReplyRef ref, std::string_view script) {
  const redisReply* reply = ref.raw();
  if (reply == nullptr || reply->type != REDIS_REPLY_INTEGER) {
    return Status::Protocol(std::string(script) + " answered " + redis::TypeName(ref));
  }
  return int64_t{reply->integer};
}

// The two counters `script` returns ({moved, missing} and the like).
Result<std::pair<int64_t, int64_t>> TwoCounters(redis::ReplyRef ref, std::string_view script) {
  const redisReply* reply = ref.raw();
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
      reply->element[0]->type != REDIS_REPLY_INTEGER ||
      reply->element[1]->type != REDIS_REPLY_INTEGER) {
    return Status::Protocol(std::string(script) + ": unexpected reply of type " +
                            redis::TypeName(ref));
  }
  return std::make_pair(int64_t{reply->element[0]->integer}, int64_t{reply->element[1]->integer});
}

// The reply {0} or {1, text, text} of the sequence scripts: false, or true
// with the two texts.
Result<bool> FlagAndTwoTexts(redis::ReplyRef reply, std::string_view script, std::string* first,
                             std::string* second) {
  constexpr std::string_view kWant = "{0} or {1, jid, jid}";
  const redisReply* r = ArrayOf(reply, 1, 3);
  if (r == nullptr) return Unexpected(script, reply, kWant);
  Result<int64_t> flag = redis::ToInteger(r->element[0]);
  if (!flag.ok() || (*flag != 0 && *flag != 1) || r->elements != (*flag == 1 ? 3u : 1u)) {
    return Unexpected(script, reply, kWant);
  }
  if (*flag == 0) return false;
  Result<std::string> a = redis::ToString(r->element[1]);
  Result<std::string> b = redis::ToString(r->element[2]);
  if (!a.ok() || !b.ok()) return Unexpected(script, reply, kWant);
  *first = std::move(*a);
  *second = std::move(*b);
  return true;
}

}  // namespace reliableq::protocol
