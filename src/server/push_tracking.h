// PushTracking: tells an idle worker of every write to a queue, whoever made
// it (Sidekiq's client pushes with a plain LPUSH in a MULTI and publishes no
// wake-up), with no server setting: Redis's client-side caching in
// broadcast mode. While the worker listens (IdleFetch), its command
// connection runs
//
//   CLIENT TRACKING on REDIRECT <listener's id> BCAST PREFIX <P>queue: NOLOOP
//
// and Redis sends the wake-up connection, which is subscribed to
// __redis__:invalidate (RESP2), a message naming each key under the prefix
// that any other client wrote (WakeListener reads it). While the worker is
// busy, tracking is off: a busy worker gets no message per push.
//
// Its catches, each handled here or in WakeListener:
// - one prefix, `queue:` (prefixes of one client may not overlap): the
//   listener keeps the keys of the queues it serves and drops the others;
// - a message names the key, not the event: another worker's pop sends one
//   too, so a message only marks the queue as maybe holding jobs, and
//   IdleFetch coalesces them (one fetch on its way at a time);
// - the redirect names a connection: when the listener reconnects (a new
//   id), or the command connection does (its tracking is gone with it),
//   tracking is turned off and on again naming the new id; a broken
//   redirect says nothing in RESP2, so each beat while on also reads CLIENT
//   TRACKINGINFO and re-arms on "broken_redirect";
// - FLUSHALL and FLUSHDB send a message naming no key: every queue counts;
// - a server that refuses CLIENT TRACKING (before 6.0, an ACL, some managed
//   services): logged once, and the idle poll (IdleFetch) covers such
//   pushes as before.
//
// Thread safety: loop thread only.

#ifndef RELIABLEQ_SERVER_PUSH_TRACKING_H_
#define RELIABLEQ_SERVER_PUSH_TRACKING_H_

#include <cstdint>
#include <string>

#include "base/log.h"
#include "redis/async_connection.h"

namespace reliableq::server {

class PushTracking {
 public:
  // `prefix`: the queue keys' (Keys::Queue("")).
  PushTracking(redis::AsyncConnection& command, std::string prefix, const base::Logger& log);

  // Whether the worker listens (idle): tracking follows.
  void Want(bool on);
  // The wake-up connection is up with client id `id` (0: down).
  void ListenerConnected(int64_t id);
  // The command connection (re)connected: its tracking state is new.
  void CommandConnected();
  // Once per beat while on: a redirect that broke silently is re-armed.
  void Check();

  // Tracking is on, redirected to the listener's current connection: every
  // write to a queue sends the listener a message.
  bool active() const { return armed_ != 0 && armed_ == listener_ && !changing_; }

 private:
  // Sends what brings the server's state to the wanted one.
  void Update();
  void Refused(const Status& why);

  redis::AsyncConnection& command_;
  const std::string prefix_;
  const base::Logger& log_;
  bool want_ = false;
  int64_t listener_ = 0;  // the wake-up connection's id; 0: down
  int64_t armed_ = 0;     // the redirect tracking is on with; 0: off
  bool changing_ = false;  // a change is on its way
  bool refused_ = false;   // the server refused it: never asked again
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_PUSH_TRACKING_H_
