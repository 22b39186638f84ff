// AsyncConnection: one non-blocking connection to Redis driven by a libuv
// loop, with per-command deadlines.
//
// How it works: a Transport (TCP, unix socket or TLS; see transport.h) under
// a uv_poll_t on its descriptor; commands are written in Redis's protocol
// into one write buffer, flushed when the socket is writable (so the
// commands of one loop turn leave in one write); replies are read into a
// reusable buffer, parsed by hiredis's redisReader and matched in order
// with a FIFO of pending requests. uv_poll_start is called only when the
// events wanted change (it re-registers the descriptor with epoll on every
// call). With TLS, reads continue while SSL holds decrypted bytes, and a
// read or write that waits for the other direction gets it.
//
// The connect does not block the loop: it is a state machine driven from
// the poll callback (Transport::ContinueConnect: TCP connect, then the TLS
// handshake), and the Redis handshake (AUTH, SELECT, SCRIPT LOAD, CLIENT
// SETNAME, CLIENT ID) is queued at once behind it, as hiredis did, so it
// costs no extra round trip. Not libuv's thread pool: a connect there could
// not be abandoned by Close() or the destructor (the loop would have to wait
// for the thread), and the pool is shared with the janitor's blocking pass.
// Only a host name's resolution blocks, as it did with hiredis.
//
// Callback contract (as hiredis and libuv state theirs): a call that returns
// a non-OK Status never calls its callback; otherwise the callback is called
// exactly once, on the loop thread: with OK and the reply, or with a non-OK
// Status and an empty reply (error reply, timeout, broken or closed
// connection). The reply is a redis::ReplyRef, which the caller hands to a
// reader (reply.h, or the script's reader in protocol/script_calls.h); it
// is valid only during the callback.
//
// With Sentinel (options.sentinel), Connect asks the process's Discovery
// where the master is (a bounded blocking lookup, see discovery.h), and the
// handshake checks ROLE; a READONLY reply, or the Discovery's epoch moving
// on (another connection of the process found the master moved, or the
// sentinels announced it), breaks the connection within one watchdog tick,
// so that its owner reconnects to the new master.
//
// With Redis Cluster (options.cluster) the same holds for the primary
// owning the connection's slot ("{group}" or cluster.route_key), and a
// MOVED reply for that slot counts as READONLY does: the Discovery takes
// the owner it names and the connection drops (its callback gets the
// error first). ASK and TRYAGAIN come back as error replies: the command
// did not run, and a caller treats them as any refused command. Pub/sub
// needs nothing more: a cluster broadcasts PUBLISH to every node, so a
// SUBSCRIBE on the slot's primary hears the whole cluster's messages.
//
// A connection is made once; when it breaks (EOF, I/O error, a command
// unanswered past its deadline) every pending callback fails, the
// on_disconnect callback runs, and the object can Connect() again.
//
// Thread safety: loop thread only. Do not destroy the object from inside one
// of its callbacks; Close() is fine there.

#ifndef RELIABLEQ_REDIS_ASYNC_CONNECTION_H_
#define RELIABLEQ_REDIS_ASYNC_CONNECTION_H_

#include <hiredis/hiredis.h>
#include <uv.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lua_scripts.h"
#include "redis/discovery.h"
#include "redis/reply.h"
#include "redis/script_call.h"
#include "redis/tls.h"
#include "redis/transport.h"
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
  using ReplyCallback = std::function<void(const Status& status, ReplyRef reply)>;

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

  // For a subscriber: every pub/sub message (an array whose first element
  // is "message" or "pmessage") goes to `on_message` instead of a request.
  // (P)SUBSCRIBE answers once per channel: send one channel per command
  // (Pipeline) so that each reply matches its command. The message is read
  // with ReadPubSubMessage (pubsub_message.h).
  void SetOnMessage(std::function<void(ReplyRef message)> on_message) {
    on_message_ = std::move(on_message);
  }

  // For a connection to a sentinel, which has no scripts, databases or
  // CLIENT ID: the handshake is AUTH only.
  void set_sentinel_handshake() { sentinel_handshake_ = true; }

  // Sent with CLIENT SETNAME on every (re)connect when non-empty.
  void set_client_name(std::string name) { client_name_ = std::move(name); }

  bool ready() const { return state_ == State::kReady; }
  // Redis's id for this connection (CLIENT ID); 0 before it is ready.
  int64_t client_id() const { return client_id_; }
  // The run_id (INFO server) of the server this connection was made to,
  // read in the handshake: client ids are counted per server run. Empty
  // before it is ready, and where INFO is refused (an ACL).
  const std::string& run_id() const { return run_id_; }
  // The id of the last connection that was ready, also after it broke,
  // and the run that gave it out (empty where INFO is refused). Only on a
  // server of that same run does the id still name that connection: a
  // restart or a failover starts the ids again, for other clients.
  int64_t last_client_id() const { return last_client_id_; }
  const std::string& last_run_id() const { return last_run_id_; }
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

  // For the worker's metrics and health, readable from any thread. Errors:
  // error replies, and connections that broke or could not be made (not a
  // Close). Reconnects: connections made ready after an earlier one was.
  uint64_t errors() const { return errors_.load(std::memory_order_relaxed); }
  uint64_t reconnects() const { return reconnects_.load(std::memory_order_relaxed); }
  // When Redis last answered a command without an error (steady clock);
  // the clock's epoch before any such reply.
  std::chrono::steady_clock::time_point last_good_reply() const {
    return std::chrono::steady_clock::time_point(
        std::chrono::steady_clock::duration(last_good_reply_.load(std::memory_order_relaxed)));
  }

 private:
  using Clock = std::chrono::steady_clock;
  enum class State { kIdle, kConnecting, kReady };

  // What one entry of the FIFO waits for: the reply of one command, or the
  // `replies` replies of one Pipeline.
  struct Request {
    ReplyCallback callback;       // a command's
    StatusesCallback done;        // a Pipeline's
    std::vector<Status> statuses;  // a Pipeline's replies so far
    std::vector<int64_t> integers;
    size_t replies = 1;
    Clock::time_point deadline;
    bool moved = false;  // a reply was MOVED for this connection's slot
  };

  static void OnPollThunk(uv_poll_t* handle, int status, int events);
  static void OnTimerThunk(uv_timer_t* timer);

  Status NotReady() const;
  // Queues one command; fails when there is no transport.
  Status Send(const std::string_view* argv, size_t argc, ReplyCallback callback,
              Clock::time_point deadline);
  void OnEvents(int events);
  void Flush();
  void ReadReplies();
  // Hands every whole reply the reader holds to its request; false once
  // the connection failed or was closed meanwhile.
  bool DeliverReplies();
  void OnReply(ReplyPtr reply);
  void WantWrite();
  void UpdatePoll();
  void ClosePoll();
  void Handshake();
  // The steps after AUTH (or all of them without a password), of the
  // connect attempt `attempt` (the generation it began in).
  void HandshakeAfterAuth(uint64_t attempt);
  // True when the connect attempt `attempt` has ended (failed and been
  // reported, or a newer one began): its handshake steps then do nothing.
  bool AttemptOver(uint64_t attempt) const;
  // Ends the connect attempt under way with `why` (Fail, FinishConnect).
  void FailConnect(const Status& why);
  void FinishConnect(const Status& status);
  // Drops the transport and fails every pending request with `why`, in
  // order; then on_ready (while connecting) or on_disconnect (when it was
  // ready and not closed by the user).
  void Fail(const Status& why);
  // A READONLY reply: the server was demoted; Fail, and find the master anew.
  void FailOnReplica();
  // With a cluster, an error reply that is MOVED for this slot: tells the
  // Discovery the new owner; true when it was one.
  bool NoteMoved(const redisReply& reply);
  // After a MOVED: Fail; the owner reconnects to the slot's owner now.
  void FailOnMoved();
  void ArmTimer();

  uv_loop_t* loop_;
  RedisOptions options_;
  std::shared_ptr<Discovery> discovery_;  // null without Sentinel or a cluster
  Endpoint at_;                           // where the connect went
  uint64_t epoch_ = 0;                    // the Discovery's epoch at the connect
  std::string client_name_;
  std::shared_ptr<const TlsContext> tls_;  // made on the first Connect with TLS
  std::unique_ptr<Transport> transport_;   // null while idle
  ReaderPtr reader_;                       // one per transport
  uv_poll_t* poll_ = nullptr;              // on transport_'s fd; freed in its close callback
  int poll_events_ = 0;                    // what poll_ was last started with
  int read_want_ = kReadable;              // what the next read waits for
  int write_want_ = 0;                     // what the next write waits for; 0: nothing to write
  std::string out_;                        // commands not yet written, from out_offset_
  size_t out_offset_ = 0;
  std::unique_ptr<char[]> in_;  // what one read brings
  // Bumped whenever the transport goes away, so that a loop over replies
  // notices when a callback closed the connection under it.
  uint64_t generation_ = 0;
  State state_ = State::kIdle;
  int64_t client_id_ = 0;
  int64_t last_client_id_ = 0;
  std::string last_run_id_;
  std::string run_id_;
  uv_timer_t* timer_;  // freed in its close callback
  Clock::time_point connect_deadline_;
  std::function<void(const Status&)> on_ready_;
  std::function<void(const Status&)> on_disconnect_;
  std::function<void(ReplyRef)> on_message_;
  // Requests in the order sent; Redis answers in the same order.
  std::deque<Request> pending_;
  bool user_close_ = false;
  bool sentinel_handshake_ = false;
  bool ever_ready_ = false;
  // Atomics only because other threads read them; written here alone.
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint64_t> reconnects_{0};
  std::atomic<Clock::rep> last_good_reply_{0};
};

}  // namespace reliableq::redis

#endif  // RELIABLEQ_REDIS_ASYNC_CONNECTION_H_
