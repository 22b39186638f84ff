// A pub/sub message as a subscriber's connection hands it on
// (AsyncConnection::SetOnMessage), and how such a message is told from the
// reply of a command. Pure; no I/O.

#ifndef RELIABLEQ_REDIS_PUBSUB_MESSAGE_H_
#define RELIABLEQ_REDIS_PUBSUB_MESSAGE_H_

#include <string_view>
#include <vector>

#include "redis/reply.h"
#include "reliableq/status.h"

namespace reliableq::redis {

// Views into the reply it was read from: valid while that reply is.
struct PubSubMessage {
  bool from_pattern = false;  // "pmessage": heard through a PSUBSCRIBE
  std::string_view channel;
  std::string_view payload;  // a string payload; empty otherwise
  // An array payload's strings: the keys that client tracking invalidated
  // (on "__redis__:invalidate"). Empty for nil (FLUSHALL, FLUSHDB).
  std::vector<std::string_view> keys;
};

// A "message" {kind, channel, payload} or "pmessage" {kind, pattern,
// channel, payload}; kProtocol for anything else.
Result<PubSubMessage> ReadPubSubMessage(ReplyRef message);

// True for a message pushed to a subscriber, as opposed to the reply of a
// command ((P)SUBSCRIBE's confirmations start with "subscribe" or
// "psubscribe").
bool IsPubSubMessage(ReplyRef reply);

}  // namespace reliableq::redis

#endif  // RELIABLEQ_REDIS_PUBSUB_MESSAGE_H_
