#include "redis/async_connection.h"


#include <cassert>
#include <charconv>
#include <memory>
#include <utility>

#include "redis/connection.h"  // IgnoreSigpipe
#include "redis/errors.h"
#include "redis/reply.h"

namespace reliableq::redis {

namespace {

using Clock = std::chrono::steady_clock;

// How often pending commands are checked against their deadlines.
constexpr uint64_t kWatchdogMillis = 50;

// The glue between hiredis and libuv. hiredis ships one (adapters/libuv.h),
// but the one in Debian's hiredis 0.14 drops poll errors: when libuv reports
// POLLERR (a write to a socket whose peer died, say) it stops the handle and
// the adapter returns, so the dead connection goes unnoticed until a command
// times out. This one hands the error to hiredis as a read, so hiredis reads
// the socket's error and drops the connection at once; everything else is
// as the stock adapter does it, including freeing only in the close callback.
struct UvEvents {
  redisAsyncContext* context;
  uv_poll_t handle;
  int events;
};

void UvPoll(uv_poll_t* handle, int status, int events) {
  auto* p = static_cast<UvEvents*>(handle->data);
  if (p->context == nullptr) return;
  if (status != 0) {
    redisAsyncHandleRead(p->context);
    // Still connected (the error was transient): libuv stopped the handle,
    // so start it again.
    if (p->context != nullptr && p->events != 0) uv_poll_start(&p->handle, p->events, UvPoll);
    return;
  }
  if (events & UV_READABLE) redisAsyncHandleRead(p->context);
  if (p->context != nullptr && (events & UV_WRITABLE)) redisAsyncHandleWrite(p->context);
}

void UvUpdate(UvEvents* p, int events) {
  // hiredis asks for writability once per command it buffers; libuv's
  // uv_poll_start removes the descriptor from epoll and adds it again on
  // every call, so only a change is passed on.
  if (events == p->events) return;
  int started = events != 0 ? uv_poll_start(&p->handle, events, UvPoll)
                            : uv_poll_stop(&p->handle);
  // Kept only once libuv took it, so that the next request tries again.
  if (started == 0) p->events = events;
}

void UvAddRead(void* data) {
  auto* p = static_cast<UvEvents*>(data);
  UvUpdate(p, p->events | UV_READABLE);
}
void UvDelRead(void* data) {
  auto* p = static_cast<UvEvents*>(data);
  UvUpdate(p, p->events & ~UV_READABLE);
}
void UvAddWrite(void* data) {
  auto* p = static_cast<UvEvents*>(data);
  UvUpdate(p, p->events | UV_WRITABLE);
}
void UvDelWrite(void* data) {
  auto* p = static_cast<UvEvents*>(data);
  UvUpdate(p, p->events & ~UV_WRITABLE);
}
void UvCleanup(void* data) {
  auto* p = static_cast<UvEvents*>(data);
  p->context = nullptr;  // hiredis frees the context after this
  uv_close(reinterpret_cast<uv_handle_t*>(&p->handle),
           [](uv_handle_t* h) { delete static_cast<UvEvents*>(h->data); });
}

bool UvAttach(redisAsyncContext* context, uv_loop_t* loop) {
  if (context->ev.data != nullptr) return false;
  auto* p = new UvEvents{context, {}, 0};
  if (uv_poll_init(loop, &p->handle, context->c.fd) != 0) {
    delete p;
    return false;
  }
  p->handle.data = p;
  context->ev.addRead = UvAddRead;
  context->ev.delRead = UvDelRead;
  context->ev.addWrite = UvAddWrite;
  context->ev.delWrite = UvDelWrite;
  context->ev.cleanup = UvCleanup;
  context->ev.data = p;
  return true;
}

}  // namespace

struct AsyncConnection::Request {
  Request(AsyncConnection* o, ReplyCallback cb, Clock::time_point d)
      : owner(o), callback(std::move(cb)), deadline(d) {}
  AsyncConnection* owner;
  ReplyCallback callback;
  Clock::time_point deadline;
};

AsyncConnection::AsyncConnection(uv_loop_t* loop, RedisOptions options)
    : loop_(loop), options_(std::move(options)), timer_(new uv_timer_t) {
  IgnoreSigpipe();
  uv_timer_init(loop_, timer_);
  timer_->data = this;
}

AsyncConnection::~AsyncConnection() {
  user_close_ = true;
  Close();
  uv_close(reinterpret_cast<uv_handle_t*>(timer_),
           [](uv_handle_t* handle) { delete reinterpret_cast<uv_timer_t*>(handle); });
}

void AsyncConnection::Connect(std::function<void(const Status&)> on_ready) {
  assert(state_ == State::kIdle && context_ == nullptr);
  on_ready_ = std::move(on_ready);
  user_close_ = false;
  client_id_ = 0;
  redisAsyncContext* context =
      options_.unix_path.empty()
          ? redisAsyncConnect(options_.host.c_str(), options_.port)
          : redisAsyncConnectUnix(options_.unix_path.c_str());
  if (context == nullptr) {
    FinishConnect(Status::IoError("out of memory connecting to " + options_.Describe()));
    return;
  }
  if (context->err != 0) {
    Status s = FromTransportError(context->err, context->errstr, options_.Describe());
    redisAsyncFree(context);
    FinishConnect(s.WithContext("cannot connect"));
    return;
  }
  if (!UvAttach(context, loop_)) {
    redisAsyncFree(context);
    FinishConnect(Status::IoError("cannot watch the Redis socket (" + options_.Describe() + ")"));
    return;
  }
  context->data = this;
  redisAsyncSetConnectCallback(context, &AsyncConnection::OnConnectThunk);
  redisAsyncSetDisconnectCallback(context, &AsyncConnection::OnDisconnectThunk);
  context_ = context;
  state_ = State::kConnecting;
  closing_status_ = Status::OK();
  connect_deadline_ = Clock::now() + options_.connect_timeout;
  ArmTimer();
  // hiredis queues these until the socket is writable, so the handshake
  // costs no extra round trip.
  Handshake();
}

void AsyncConnection::Handshake() {
  auto fail_on_error = [this](const char* what) {
    return [this, what](const Status& status, redisReply*) {
      if (!status.ok()) {
        Status why = status.WithContext(std::string(what) + " at " + options_.Describe());
        Abort(why);
        FinishConnect(why);
      }
    };
  };
  std::string db = std::to_string(options_.db);
  auto* self = this;
  auto send = [self](const std::vector<std::string_view>& argv, ReplyCallback callback) {
    auto* request = new Request(self, std::move(callback),
                                Clock::now() + self->options_.connect_timeout);
    return self->Send(request, argv);
  };
  if (!options_.password.empty()) {
    std::vector<std::string_view> auth = {"AUTH"};
    if (!options_.username.empty()) auth.push_back(options_.username);
    auth.push_back(options_.password);
    if (!send(auth, fail_on_error("AUTH")).ok()) return;
  }
  if (options_.db != 0) {
    if (!send({"SELECT", db}, fail_on_error("SELECT")).ok()) return;
  }
  // Every script is in the server's cache before the connection is ready.
  // Resending a script after a NOSCRIPT reply would run it after commands
  // sent later (another client may have loaded those scripts already), and
  // callers rely on their commands taking effect in the order sent: an ack
  // must never land after a hand-back.
  for (size_t i = 0; i < kScriptCount; ++i) {
    if (!send({"SCRIPT", "LOAD", kScripts[i].source}, fail_on_error("SCRIPT LOAD")).ok()) return;
  }
  // The name and id only serve the janitor's fencing of dead workers; a
  // server whose ACL refuses CLIENT still gets a working connection.
  if (!client_name_.empty()) {
    if (!send({"CLIENT", "SETNAME", client_name_}, nullptr).ok()) return;
  }
  send({"CLIENT", "ID"}, [this](const Status& status, redisReply* reply) {
    if (!status.ok() && status.IsRetryable()) {
      Status why = status.WithContext("CLIENT ID at " + options_.Describe());
      Abort(why);
      FinishConnect(why);
      return;
    }
    Result<int64_t> id = status.ok() ? ToInteger(reply) : Result<int64_t>(status);
    client_id_ = id.ok() ? *id : 0;
    last_client_id_ = client_id_;
    state_ = State::kReady;
    FinishConnect(Status::OK());
  });
}

void AsyncConnection::FinishConnect(const Status& status) {
  if (!on_ready_) return;  // already reported
  auto on_ready = std::move(on_ready_);
  on_ready_ = nullptr;
  on_ready(status);
}

Status AsyncConnection::Send(Request* request, const std::vector<std::string_view>& argv) {
  if (context_ == nullptr) {
    delete request;
    return Status::IoError("not connected to Redis at " + options_.Describe());
  }
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  ptrs.reserve(argv.size());
  lens.reserve(argv.size());
  for (std::string_view arg : argv) {
    ptrs.push_back(arg.data());
    lens.push_back(arg.size());
  }
  if (redisAsyncCommandArgv(context_, &AsyncConnection::OnReplyThunk, request,
                            static_cast<int>(ptrs.size()), ptrs.data(), lens.data()) != REDIS_OK) {
    delete request;
    return Status::IoError("cannot send to Redis at " + options_.Describe());
  }
  pending_.push_back(request);
  ArmTimer();
  return Status::OK();
}

Status AsyncConnection::Command(const std::vector<std::string_view>& argv, ReplyCallback callback,
                                std::chrono::milliseconds extra_timeout) {
  if (state_ != State::kReady) {
    return Status::IoError("not connected to Redis at " + options_.Describe());
  }
  auto* request =
      new Request(this, std::move(callback),
                              Clock::now() + options_.command_timeout + extra_timeout);
  return Send(request, argv);
}

Status AsyncConnection::Eval(const ScriptCall& call, ReplyCallback callback) {
  if (state_ != State::kReady) {
    return Status::IoError("not connected to Redis at " + options_.Describe());
  }
  std::string numkeys = std::to_string(call.keys.size());
  std::vector<std::string_view> argv;
  argv.reserve(3 + call.keys.size() + call.args.size());
  argv.push_back("EVALSHA");
  argv.push_back(GetScript(call.script).sha1);
  argv.push_back(numkeys);
  for (const std::string& k : call.keys) argv.push_back(k);
  for (const std::string& a : call.args) argv.push_back(a);
  auto* request = new Request(this, std::move(callback), Clock::now() + options_.command_timeout);
  return Send(request, argv);
}

void CommandList::Add(std::initializer_list<std::string_view> argv) {
  auto append_header = [this](char kind, size_t n) {
    char digits[24];
    auto [end, ec] = std::to_chars(digits, digits + sizeof digits, n);
    (void)ec;  // 24 digits hold any size_t
    wire_ += kind;
    wire_.append(digits, end);
    wire_ += "\r\n";
  };
  append_header('*', argv.size());
  for (std::string_view arg : argv) {
    append_header('$', arg.size());
    wire_ += arg;
    wire_ += "\r\n";
  }
  ends_.push_back(wire_.size());
}

// What the replies of one Pipeline call have said so far. Owned by the
// request of its last command: hiredis runs callbacks in the order the
// commands were sent, also when the connection fails, so the earlier ones
// always run first.
struct PipelineStatuses {
  AsyncConnection* owner;
  std::vector<Status> statuses;
  std::vector<int64_t> integers;

  void Add(Status status, const redisReply* reply) {
    statuses.push_back(std::move(status));
    integers.push_back(reply != nullptr && reply->type == REDIS_REPLY_INTEGER ? reply->integer
                                                                              : 0);
  }
};

Status AsyncConnection::Pipeline(const CommandList& commands, StatusesCallback done) {
  if (state_ != State::kReady || context_ == nullptr) {
    return Status::IoError("not connected to Redis at " + options_.Describe());
  }
  if (commands.empty()) return Status::InvalidArgument("Pipeline: no commands");
  // hiredis refuses commands only while the context is going away; checked
  // once here, so that no command of the batch is refused after another
  // was taken.
  if ((context_->c.flags & (REDIS_DISCONNECTING | REDIS_FREEING)) != 0) {
    return Status::IoError("connection to Redis at " + options_.Describe() + " is closing");
  }
  auto* collected = new PipelineStatuses{this, {}, {}};
  collected->statuses.reserve(commands.size());
  collected->integers.reserve(commands.size());
  // Only the last command is tracked for its deadline: the ones before it
  // are answered first, and a timeout drops the connection, failing them all.
  auto* request = new Request(
      this,
      [collected, done = std::move(done)](const Status& status, redisReply* reply) {
        std::unique_ptr<PipelineStatuses> owned(collected);
        owned->Add(status, reply);
        done(std::move(owned->statuses), std::move(owned->integers));
      },
      Clock::now() + options_.command_timeout);
  size_t begin = 0;
  for (size_t i = 0; i < commands.ends_.size(); ++i) {
    size_t end = commands.ends_[i];
    bool last = i + 1 == commands.ends_.size();
    int sent = redisAsyncFormattedCommand(
        context_, last ? &AsyncConnection::OnReplyThunk : &OnPipelinedReplyThunk,
        last ? static_cast<void*>(request) : static_cast<void*>(collected),
        commands.wire_.data() + begin, end - begin);
    assert(sent == REDIS_OK);  // see the flags checked above
    (void)sent;
    begin = end;
  }
  pending_.push_back(request);
  ArmTimer();
  return Status::OK();
}

void AsyncConnection::OnPipelinedReplyThunk(redisAsyncContext*, void* reply, void* privdata) {
  auto* collected = static_cast<PipelineStatuses*>(privdata);
  auto* r = static_cast<redisReply*>(reply);
  collected->Add(collected->owner->StatusOf(r), r);
}

Status AsyncConnection::StatusOf(const redisReply* reply) const {
  if (reply == nullptr) {
    return !closing_status_.ok()
               ? closing_status_
               : Status::IoError("connection to Redis at " + options_.Describe() + " lost");
  }
  if (reply->type == REDIS_REPLY_ERROR) return FromErrorReply(View(reply));
  return Status::OK();
}

void AsyncConnection::OnReplyThunk(redisAsyncContext*, void* reply, void* privdata) {
  auto* request = static_cast<Request*>(privdata);
  request->owner->OnReply(request, static_cast<redisReply*>(reply));
}

void AsyncConnection::OnReply(Request* request, redisReply* reply) {
  assert(!pending_.empty() && pending_.front() == request);
  pending_.pop_front();
  Status status = StatusOf(reply);
  if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
    if (IsNoScript(status)) {
      // The cache was flushed under us (SCRIPT FLUSH). Commands sent after
      // this one may run while it did not, so the order callers rely on is
      // gone: drop the connection; the next handshake loads the scripts.
      status = Status::IoError("Redis lost its scripts (SCRIPT FLUSH?); reconnecting");
      ReplyCallback callback = std::move(request->callback);
      delete request;
      Abort(status);
      if (callback) callback(status, nullptr);
      return;
    }
  }
  ReplyCallback callback = std::move(request->callback);
  delete request;
  if (callback) callback(status, status.ok() ? reply : nullptr);
}

void AsyncConnection::OnConnectThunk(const redisAsyncContext* context, int status) {
  auto* self = static_cast<AsyncConnection*>(context->data);
  if (status == REDIS_OK) return;  // ready once the handshake replies arrive
  // hiredis frees the context after this callback, without calling the
  // disconnect callback (it was never connected).
  Status why = FromTransportError(context->err, context->errstr, self->options_.Describe())
                   .WithContext("cannot connect");
  self->closing_status_ = why;
  self->context_ = nullptr;
  self->state_ = State::kIdle;
  self->FinishConnect(why);
}

void AsyncConnection::OnDisconnectThunk(const redisAsyncContext* context, int status) {
  auto* self = static_cast<AsyncConnection*>(context->data);
  Status why = !self->closing_status_.ok() ? self->closing_status_
               : status == REDIS_OK
                   ? Status::IoError("connection closed")
                   : FromTransportError(context->err, context->errstr, self->options_.Describe());
  self->OnDisconnected(why);
}

void AsyncConnection::OnDisconnected(const Status& why) {
  context_ = nullptr;
  bool was_ready = state_ == State::kReady;
  state_ = State::kIdle;
  client_id_ = 0;
  FinishConnect(why);
  if (was_ready && !user_close_ && on_disconnect_) on_disconnect_(why);
}

void AsyncConnection::Abort(const Status& why) {
  if (context_ == nullptr) return;
  closing_status_ = why;
  redisAsyncContext* context = context_;
  // Inside a hiredis callback the free is deferred until it returns; either
  // way the context must not be used from here on.
  context_ = nullptr;
  bool was_connecting = state_ == State::kConnecting;
  redisAsyncFree(context);
  if (was_connecting) {
    state_ = State::kIdle;
    FinishConnect(why);
  }
}

void AsyncConnection::Close() {
  user_close_ = true;
  on_ready_ = nullptr;
  Abort(Status::Shutdown("connection closed"));
  state_ = State::kIdle;
  // Nothing is left to watch, and an active timer would keep the loop up.
  uv_timer_stop(timer_);
}

void AsyncConnection::ArmTimer() {
  if (!uv_is_active(reinterpret_cast<uv_handle_t*>(timer_))) {
    uv_timer_start(timer_, &AsyncConnection::OnTimerThunk, kWatchdogMillis, kWatchdogMillis);
  }
}

void AsyncConnection::OnTimerThunk(uv_timer_t* timer) {
  auto* self = static_cast<AsyncConnection*>(timer->data);
  auto now = Clock::now();
  if (self->state_ == State::kConnecting && now >= self->connect_deadline_) {
    Status why = Status::Timeout("no connection to Redis at " + self->options_.Describe() +
                                 " within " +
                                 std::to_string(self->options_.connect_timeout.count()) + " ms");
    self->Abort(why);
    self->FinishConnect(why);
  } else if (!self->pending_.empty() && now >= self->pending_.front()->deadline) {
    self->Abort(Status::Timeout("Redis at " + self->options_.Describe() +
                                " did not answer in time; connection dropped"));
  }
  if (self->pending_.empty() && self->state_ != State::kConnecting) uv_timer_stop(timer);
}

}  // namespace reliableq::redis
