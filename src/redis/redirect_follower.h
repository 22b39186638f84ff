// RedirectFollower: what a blocking Connection to a Redis Cluster does
// with the error replies that mean "not here, not now" (the cluster
// specification, "Redirection and resharding"). None of them ran the
// command, so sending it again cannot run it twice:
// - MOVED for the connection's slot: the slot moved for good (a
//   resharding finished, a failover). The Connection already told its
//   Discovery (the epoch moves), so sending again reconnects to the owner.
// - MOVED for another slot: a key outside the connection's slot, which
//   layout 2 never sends; refused, never followed (following it would move
//   the slot's connections to a node that does not own their slot).
// - ASK: the slot is migrating and this key is already at the target:
//   ASKING and the command go to the target on a second connection, kept
//   while the migration lasts.
// - TRYAGAIN: a multi-key command met keys split by a migration; after a
//   short wait (2 ms, doubling up to 100 ms) it goes again.
// All within the connection's command_timeout from the first reply; then
// the last error reply is returned as a Status naming the node and slot.
//
// Thread safety: one thread at a time (its Connection's).

#ifndef RELIABLEQ_REDIS_REDIRECT_FOLLOWER_H_
#define RELIABLEQ_REDIS_REDIRECT_FOLLOWER_H_

#include <memory>
#include <string_view>
#include <vector>

#include "redis/errors.h"
#include "redis/reply.h"
#include "redis/transport.h"
#include "reliableq/status.h"

namespace reliableq::redis {

class Connection;

class RedirectFollower {
 public:
  explicit RedirectFollower(Connection* owner);
  ~RedirectFollower();

  // `reply` is the error reply `argv` got on the owner: the reply the
  // command gets in the end (never an error reply), or its failure.
  Result<ReplyPtr> Follow(const std::vector<std::string_view>& argv, ReplyPtr reply);

 private:
  // ASKING + argv on the node `ask` names: the command's reply in *reply.
  Status AskAt(const Redirect& ask, const std::vector<std::string_view>& argv, ReplyPtr* reply);

  Connection* owner_;
  std::unique_ptr<Connection> ask_;  // to the target of the last ASK
  Endpoint ask_at_;
};

}  // namespace reliableq::redis

#endif  // RELIABLEQ_REDIS_REDIRECT_FOLLOWER_H_
