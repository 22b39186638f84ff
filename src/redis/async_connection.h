// AsyncConnection: one non-blocking hiredis connection driven by a libuv
// loop, with the timeouts hiredis 0.14 lacks.
//
// Callback contract (as hiredis and libuv state theirs): a call that returns
// a non-OK Status never calls its callback; otherwise the callback is called
// exactly once, on the loop thread: with OK and the reply, or with a non-OK
// Status and a null reply (error reply, timeout, broken or closed connection).
// The reply is valid only during the callback.
//
// A connection is made once; when it breaks (EOF, I/O error, a command
// unanswered past its deadline) every pending callback fails, the
// on_disconnect callback runs, and the object can Connect() again.
//
// Thread safety: loop thread only. Do not destroy the object from inside one
// of its callbacks; Close() is fine there.

#ifndef RELIABLEQ_REDIS_ASYNC_CONNECTION_H_
#define RELIABLEQ_REDIS_ASYNC_CONNECTION_H_

#include <hiredis/async.h>
#include <uv.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "lua_scripts.h"
#include "redis/script_call.h"
#include "reliableq/redis_options.h"
#include "reliableq/status.h"

namespace reliableq::redis {

// Commands written in Redis's protocol as they are added, so that a batch of
// many costs one copy of each argument on the way to the socket.
class CommandList {
 public:
  void Add(std::initializer_list<std::string_view> argv);
  size_t size() const { return ends_.size(); }
  bool empty() const { return ends_.empty(); }

 private:
  friend class AsyncConnection;
  std::string wire_;          // the commands, back to back
  std::vector<size_t> ends_;  // the offset in wire_ where each one ends
};

class AsyncConnection {
 public:
  using ReplyCallback = std::function<void(const Status& status, redisReply* reply)>;

  AsyncConnection(uv_loop_t* loop, RedisOptions options);
  ~AsyncConnection();
  AsyncConnection(const AsyncConnection&) = delete;
  AsyncConnection& operator=(const AsyncConnection&) = delete;

  // Connects, authenticates, selects the database and asks for this
  // connection's CLIENT ID. `on_ready` runs once: OK when commands may be
  // sent, or the reason it failed (within options.connect_timeout).
  void Connect(std::function<void(const Status&)> on_ready);

  // Runs once each time an established connection breaks (not after Close).
  void SetOnDisconnect(std::function<void(const Status&)> on_disconnect) {
    on_disconnect_ = std::move(on_disconnect);
  }

  // Sent with CLIENT SETNAME on every (re)connect when non-empty.
  void set_client_name(std::string name) { client_name_ = std::move(name); }

  bool ready() const { return state_ == State::kReady; }
  // Redis's id for this connection (CLIENT ID); 0 before it is ready.
  int64_t client_id() const { return client_id_; }
  // The id of the last connection that was ready, also after it broke.
  int64_t last_client_id() const { return last_client_id_; }
  // Commands sent and not yet answered.
  size_t pending() const { return pending_.size(); }

  // Sends one command. `extra_timeout` is added to the command timeout, for
  // blocking commands. Fails (without calling back) when not ready.
  Status Command(const std::vector<std::string_view>& argv, ReplyCallback callback,
                 std::chrono::milliseconds extra_timeout = std::chrono::milliseconds(0));

  // Runs an embedded script by EVALSHA. The handshake loads every script,
  // so the reply is the script's; should the server lose its scripts
  // meanwhile (SCRIPT FLUSH), the connection is dropped rather than the
  // script resent out of order.
  Status Eval(const ScriptCall& call, ReplyCallback callback);

  // Sends `commands` back to back, each one atomic on its own (the batch is
  // not: a broken connection may leave any prefix of it applied). `done`
  // runs once, after the last reply or the failure of the connection, with
  // one Status per command in order: OK, the error Redis answered, or why
  // the connection failed; and one integer per command: its reply when that
  // is an integer (LREM's count, say), else 0. Other replies are not kept. Not for
  // EVALSHA: a NOSCRIPT here would not drop the connection as Eval's does,
  // and the commands after it would run while it did not.
  using StatusesCallback =
      std::function<void(std::vector<Status> statuses, std::vector<int64_t> integers)>;
  Status Pipeline(const CommandList& commands, StatusesCallback done);

  // Drops the connection: pending callbacks fail with kShutdown.
  void Close();

 private:
  enum class State { kIdle, kConnecting, kReady };
  struct Request;

  static void OnConnectThunk(const redisAsyncContext* context, int status);
  static void OnDisconnectThunk(const redisAsyncContext* context, int status);
  static void OnReplyThunk(redisAsyncContext* context, void* reply, void* privdata);
  static void OnPipelinedReplyThunk(redisAsyncContext* context, void* reply, void* privdata);
  static void OnTimerThunk(uv_timer_t* timer);

  Status Send(Request* request, const std::vector<std::string_view>& argv);
  // The status a reply (null: the connection failed) stands for.
  Status StatusOf(const redisReply* reply) const;
  void OnReply(Request* request, redisReply* reply);
  void OnDisconnected(const Status& why);
  void Handshake();
  void FinishConnect(const Status& status);
  void Abort(const Status& why);
  void ArmTimer();

  uv_loop_t* loop_;
  RedisOptions options_;
  std::string client_name_;
  redisAsyncContext* context_ = nullptr;  // owned by hiredis once attached
  State state_ = State::kIdle;
  int64_t client_id_ = 0;
  int64_t last_client_id_ = 0;
  uv_timer_t* timer_;  // freed in its close callback
  std::chrono::steady_clock::time_point connect_deadline_;
  std::function<void(const Status&)> on_ready_;
  std::function<void(const Status&)> on_disconnect_;
  // Requests in the order sent; Redis answers in the same order.
  std::deque<Request*> pending_;
  // Why the context is going away, for the callbacks it fails.
  Status closing_status_;
  bool user_close_ = false;
};

}  // namespace reliableq::redis

#endif  // RELIABLEQ_REDIS_ASYNC_CONNECTION_H_
