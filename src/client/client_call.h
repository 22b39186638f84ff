// A client's call to Redis while other threads' calls share its connection
// (src/client.cc): what one call's round trip said, and the hand-off by
// which whichever caller holds the connection writes the others' calls.
//
// Thread safety: a Pending is shared by its caller and the caller holding
// the connection; Finish and Lead are its only hand-off (see Wait).

#ifndef RELIABLEQ_CLIENT_CLIENT_CALL_H_
#define RELIABLEQ_CLIENT_CLIENT_CALL_H_

#include <condition_variable>
#include <mutex>
#include <string>

#include "lua_scripts.h"
#include "redis/connection.h"
#include "redis/reply.h"
#include "redis/transport.h"
#include "reliableq/status.h"
#include "protocol/script_calls.h"

namespace reliableq::client {

// What the WAIT at the end of a round trip says about the writes before it:
// how many replicas confirmed them (set only when at least wait_replicas
// did), or why they are not confirmed (fewer did in time, WAIT failed or
// its reply was lost). Both stay unset without wait_replicas.
struct Confirmation {
  int replicas = 0;
  Status unconfirmed;
};

// A call to Redis: its Status, and whether a failed call may have run. That
// alone decides between kNotConfirmed (written, no reply) and kRefused (not
// sent, or answered with an error: push.lua and schedule.lua then wrote
// nothing). A call that succeeded carries its round trip's Confirmation.
struct Attempt {
  Attempt() = default;
  Attempt(Status status, bool maybe_run, redis::ReplyPtr reply, Confirmation confirmation = {})
      : status(std::move(status)),
        maybe_run(maybe_run),
        reply(std::move(reply)),
        confirmation(std::move(confirmation)) {}

  Status status;
  bool maybe_run = false;
  redis::ReplyPtr reply;  // when status is OK
  Confirmation confirmation;
};

// One script call on its way to Redis: encoded by its caller, written by
// whichever caller holds the connection then (see ClientImpl::Run).
class Pending {
 public:
  explicit Pending(const ScriptCall& call) : script(call.script) {
    std::string numkeys = std::to_string(call.keys.size());
    redis::Argv keys(call.keys.begin(), call.keys.end());
    redis::Argv args(call.args.begin(), call.args.end());
    redis::Argv argv =
        redis::ScriptArgv("EVALSHA", GetScript(call.script).sha1, numkeys, keys, args);
    redis::AppendCommand(&wire, argv.data(), argv.size());
  }

  // Called by the caller that wrote it, once `attempt` is final: its own
  // caller takes the attempt and returns.
  void Finish() { Signal(State::kDone); }
  // Called by the caller that held the connection: this call's caller
  // holds it now, and writes this call with the others queued.
  void Lead() { Signal(State::kLead); }

  enum class State { kWaiting, kDone, kLead };

  // Blocks until Finish or Lead; returns which.
  State Wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return state != State::kWaiting; });
    return state;
  }

  const ScriptId script;
  std::string wire;  // the EVALSHA, in Redis's protocol
  // Written by the caller holding the connection before Finish, read by
  // this call's caller after it.
  Attempt attempt;

 private:
  void Signal(State to) {
    std::lock_guard<std::mutex> lock(mu);
    state = to;
    // Under the lock: once the waiter sees the state, it may return and
    // destroy this object, which it can do only after this unlock. (A
    // futex wait on an atomic instead, tried, spent more system time.)
    cv.notify_one();
  }

  std::mutex mu;
  std::condition_variable cv;
  State state = State::kWaiting;  // guarded by mu
};

}  // namespace reliableq::client

#endif  // RELIABLEQ_CLIENT_CLIENT_CALL_H_
