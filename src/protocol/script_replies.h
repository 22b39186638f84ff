// Script replies: the checks of a reply's shape that the readers in
// script_calls.cc share, each turning a reply of another shape than the
// script's header documents into kProtocol naming the script, what it wants
// and what came.
//
// Thread safety: plain functions over replies.

#ifndef RELIABLEQ_PROTOCOL_SCRIPT_REPLIES_H_
#define RELIABLEQ_PROTOCOL_SCRIPT_REPLIES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "redis/reply.h"
#include "reliableq/status.h"

namespace reliableq::protocol {

// A script's reply of another shape than its header documents.
Status Unexpected(std::string_view script, redis::ReplyRef reply, std::string_view want);

// The array `reply` when it has `least` to `most` elements, else null.
const redisReply* ArrayOf(redis::ReplyRef reply, size_t least, size_t most);

// A reply that is an integer count ("what the LREM returned") as "removed
// something".
Result<bool> RemovedAny(std::string_view script, redis::ReplyRef reply);

// An array of `count` integers.
Result<std::vector<int64_t>> Integers(std::string_view script, redis::ReplyRef reply, size_t count,
                                      std::string_view want);

// The integer reply of `script`; kProtocol naming the reply otherwise.
Result<int64_t> IntegerReply(redis::ReplyRef ref, std::string_view script);

// The two counters `script` returns ({moved, missing} and the like).
Result<std::pair<int64_t, int64_t>> TwoCounters(redis::ReplyRef ref, std::string_view script);

// The reply {0} or {1, text, text} of the sequence scripts: false, or true
// with the two texts.
Result<bool> FlagAndTwoTexts(redis::ReplyRef reply, std::string_view script, std::string* first,
                             std::string* second);

}  // namespace reliableq::protocol

#endif  // RELIABLEQ_PROTOCOL_SCRIPT_REPLIES_H_
