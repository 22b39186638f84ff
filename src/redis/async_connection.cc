#include "redis/async_connection.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "redis/connection.h"  // IgnoreSigpipe
#include "redis/errors.h"
#include "redis/pubsub_message.h"

namespace reliableq::redis {

namespace {

// How often pending commands are checked against their deadlines.
constexpr uint64_t kWatchdogMillis = 50;

}  // namespace

void CommandList::Add(std::initializer_list<std::string_view> argv) {
  AppendCommand(&wire_, argv.begin(), argv.size());
  ends_.push_back(wire_.size());
}

AsyncConnection::AsyncConnection(uv_loop_t* loop, RedisOptions options)
    : loop_(loop),
      options_(std::move(options)),
      discovery_(Discovery::For(options_)),
      in_(new char[kReadBufferBytes]),
      timer_(new uv_timer_t) {
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

Status AsyncConnection::NotReady() const {
  return Status::IoError("not connected to Redis at " + options_.Describe());
}

void AsyncConnection::Connect(std::function<void(const Status&)> on_ready) {
  assert(state_ == State::kIdle && transport_ == nullptr);
  on_ready_ = std::move(on_ready);
  user_close_ = false;
  client_id_ = 0;
  run_id_.clear();
  if (options_.tls.enabled && tls_ == nullptr) {
    Result<std::shared_ptr<const TlsContext>> tls = TlsContext::Create(options_.tls);
    if (!tls.ok()) {
      FinishConnect(tls.status());
      return;
    }
    tls_ = std::move(*tls);
  }
  if (Status valid = options_.Validate(); !valid.ok()) {
    FinishConnect(valid.WithContext(options_.Describe()));
    return;
  }
  Endpoint endpoint = Endpoint::Of(options_);
  if (discovery_ != nullptr) {
    Result<Discovery::Master> master = discovery_->Find();
    if (!master.ok()) {
      FinishConnect(master.status());
      return;
    }
    endpoint = master->endpoint;
    epoch_ = master->epoch;
  }
  at_ = endpoint;
  Result<std::unique_ptr<Transport>> started =
      Transport::StartConnect(endpoint, options_.tls.enabled ? tls_ : nullptr);
  if (!started.ok()) {
    // Not even tried (a name that does not resolve): ask the sentinels
    // again next time rather than retry the same address forever.
    if (discovery_ != nullptr) discovery_->Invalidate(epoch_);
    FinishConnect(started.status());
    return;
  }
  reader_ = NewReader();
  auto* poll = new uv_poll_t;
  if (reader_ == nullptr || uv_poll_init(loop_, poll, (*started)->fd()) != 0) {
    delete poll;
    reader_.reset();
    FinishConnect(Status::IoError("cannot watch the Redis socket (" + options_.Describe() + ")"));
    return;
  }
  poll->data = this;
  poll_ = poll;
  poll_events_ = 0;
  transport_ = std::move(*started);
  read_want_ = kReadable;
  write_want_ = 0;
  out_.clear();
  out_offset_ = 0;
  state_ = State::kConnecting;
  connect_deadline_ = Clock::now() + options_.connect_timeout;
  ArmTimer();
  // Queued behind the connect; written as soon as it is made.
  Handshake();
  UpdatePoll();
}

void AsyncConnection::Handshake() {
  const uint64_t attempt = generation_;
  if (options_.password.empty()) {
    HandshakeAfterAuth(attempt);
    return;
  }
  // The rest waits for AUTH's answer: Redis closes the connection of a
  // client that is not authenticated and sends a long argument (a script
  // of SCRIPT LOAD), and a refused password would then read as a broken
  // pipe instead of the server's own reason.
  ReplyCallback authenticated = [this, attempt](const Status& status, ReplyRef) {
    if (AttemptOver(attempt)) return;
    if (!status.ok()) {
      FailConnect(status.WithContext("AUTH at " + options_.Describe()));
      return;
    }
    HandshakeAfterAuth(attempt);
  };
  std::initializer_list<std::string_view> auth = {"AUTH", options_.password};
  std::initializer_list<std::string_view> user_auth = {"AUTH", options_.username,
                                                       options_.password};
  const auto& argv = options_.username.empty() ? auth : user_auth;
  Send(argv.begin(), argv.size(), std::move(authenticated),
       Clock::now() + options_.connect_timeout);
}

void AsyncConnection::HandshakeAfterAuth(uint64_t attempt) {
  // Every step's callback also runs when the attempt fails before its reply
  // comes (Fail calls each pending callback with the reason). Such an
  // attempt is over and already reported through on_ready: a later step
  // must neither fail it again nor, taking the reason for one it may ignore
  // (CLIENT ID's), mark a dead connection ready (AttemptOver).
  auto fail_on_error = [this, attempt](const char* what) {
    return [this, attempt, what](const Status& status, ReplyRef) {
      if (AttemptOver(attempt)) return;
      if (!status.ok()) {
        FailConnect(status.WithContext(std::string(what) + " at " + options_.Describe()));
      }
    };
  };
  std::string db = std::to_string(options_.db);
  auto send = [this](std::initializer_list<std::string_view> argv, ReplyCallback callback) {
    return Send(argv.begin(), argv.size(), std::move(callback),
                Clock::now() + options_.connect_timeout);
  };
  if (sentinel_handshake_) {
    send({"PING"}, [this, attempt](const Status& status, ReplyRef) {
      if (AttemptOver(attempt)) return;
      if (!status.ok()) {
        FailConnect(status.WithContext("PING at sentinel " + options_.Describe()));
        return;
      }
      state_ = State::kReady;
      FinishConnect(Status::OK());
    });
    return;
  }
  if (options_.db != 0) {
    if (!send({"SELECT", db}, fail_on_error("SELECT")).ok()) return;
  }
  if (discovery_ != nullptr) {
    // The sentinels may still name a master that was just demoted.
    Status sent = send({"ROLE"}, [this, attempt](const Status& status, ReplyRef reply) {
      if (AttemptOver(attempt)) return;
      std::string role = status.ok() ? RoleOf(reply.raw()) : "master";  // an ACL may refuse ROLE
      if (role == "master" || role.empty()) return;
      discovery_->NotMaster(epoch_);
      FailConnect(Status::IoError("the " + discovery_->Describe() + " named " +
                                  transport_->where() + ", which is not a master (ROLE: " + role +
                                  ")"));
    });
    if (!sent.ok()) return;
  }
  // Every script is in the server's cache before the connection is ready.
  // Resending a script after a NOSCRIPT reply would run it after commands
  // sent later (another client may have loaded those scripts already), and
  // callers rely on their commands taking effect in the order sent: an ack
  // must never land after a hand-back.
  for (size_t i = 0; i < kScriptCount; ++i) {
    if (!send({"SCRIPT", "LOAD", kScripts[i].source}, fail_on_error("SCRIPT LOAD")).ok()) return;
  }
  // The name, the run and the id only serve the janitor's judgement and
  // fencing of dead workers; a server whose ACL refuses INFO or CLIENT still
  // gets a working connection.
  if (!client_name_.empty()) {
    if (!send({"CLIENT", "SETNAME", client_name_}, nullptr).ok()) return;
  }
  Status asked = send({"INFO", "server"}, [this, attempt](const Status& status, ReplyRef reply) {
    if (AttemptOver(attempt) || !status.ok() || reply.raw()->type != REDIS_REPLY_STRING) return;
    run_id_ = std::string(InfoField(View(reply.raw()), "run_id"));
  });
  if (!asked.ok()) return;
  send({"CLIENT", "ID"}, [this, attempt](const Status& status, ReplyRef reply) {
    if (AttemptOver(attempt)) return;
    if (!status.ok() && status.IsRetryable()) {
      FailConnect(status.WithContext("CLIENT ID at " + options_.Describe()));
      return;
    }
    Result<int64_t> id = status.ok() ? ToInteger(reply) : Result<int64_t>(status);
    client_id_ = id.ok() ? *id : 0;
    last_client_id_ = client_id_;
    // INFO was answered first (same pipeline), so run_id_ is this id's run.
    last_run_id_ = run_id_;
    state_ = State::kReady;
    FinishConnect(Status::OK());
  });
}

bool AsyncConnection::AttemptOver(uint64_t attempt) const {
  // Fail moves the generation on before it calls back, so it tells.
  return generation_ != attempt || state_ != State::kConnecting;
}

void AsyncConnection::FailConnect(const Status& why) {
  // Fail reports `why` to on_ready while connecting; FinishConnect does
  // when the transport was already gone (Fail then does nothing).
  Fail(why);
  FinishConnect(why);
}

void AsyncConnection::FinishConnect(const Status& status) {
  if (!on_ready_) return;  // already reported
  auto on_ready = std::move(on_ready_);
  on_ready_ = nullptr;
  if (status.ok()) {
    if (ever_ready_) reconnects_.fetch_add(1, std::memory_order_relaxed);
    ever_ready_ = true;
  }
  on_ready(status);
}

Status AsyncConnection::Send(const std::string_view* argv, size_t argc, ReplyCallback callback,
                             Clock::time_point deadline) {
  if (transport_ == nullptr) return NotReady();
  AppendCommand(&out_, argv, argc);
  Request& request = pending_.emplace_back();
  request.callback = std::move(callback);
  request.deadline = deadline;
  WantWrite();
  ArmTimer();
  return Status::OK();
}

Status AsyncConnection::Command(const std::vector<std::string_view>& argv, ReplyCallback callback,
                                std::chrono::milliseconds extra_timeout) {
  if (state_ != State::kReady) return NotReady();
  return Send(argv.data(), argv.size(), std::move(callback),
              Clock::now() + options_.command_timeout + extra_timeout);
}

Status AsyncConnection::Eval(const ScriptCall& call, ReplyCallback callback) {
  if (state_ != State::kReady) return NotReady();
  std::string numkeys = std::to_string(call.keys.size());
  std::vector<std::string_view> argv;
  argv.reserve(3 + call.keys.size() + call.args.size());
  argv.push_back("EVALSHA");
  argv.push_back(GetScript(call.script).sha1);
  argv.push_back(numkeys);
  for (const std::string& k : call.keys) argv.push_back(k);
  for (const std::string& a : call.args) argv.push_back(a);
  return Send(argv.data(), argv.size(), std::move(callback),
              Clock::now() + options_.command_timeout);
}

Status AsyncConnection::Pipeline(const CommandList& commands, StatusesCallback done) {
  if (state_ != State::kReady || transport_ == nullptr) return NotReady();
  if (commands.empty()) return Status::InvalidArgument("Pipeline: no commands");
  out_ += commands.wire_;
  // One entry for the batch: its replies come back to back, and a timeout
  // drops the connection, failing them all.
  Request& request = pending_.emplace_back();
  request.done = std::move(done);
  request.replies = commands.size();
  request.statuses.reserve(commands.size());
  request.integers.reserve(commands.size());
  request.deadline = Clock::now() + options_.command_timeout;
  WantWrite();
  ArmTimer();
  return Status::OK();
}

void AsyncConnection::WantWrite() {
  if (write_want_ != 0 || !transport_->connected()) return;
  write_want_ = kWritable;
  UpdatePoll();
}

void AsyncConnection::UpdatePoll() {
  if (poll_ == nullptr) return;
  int events = transport_->connected() ? (read_want_ | write_want_) : transport_->wants();
  // A request per command would otherwise re-register the descriptor with
  // epoll each time (uv_poll_start does): only a change is passed on.
  if (events == poll_events_) return;
  int rc = events != 0 ? uv_poll_start(poll_, events, &AsyncConnection::OnPollThunk)
                       : uv_poll_stop(poll_);
  // Kept only once libuv took it, so that the next update tries again.
  if (rc == 0) poll_events_ = events;
}

void AsyncConnection::ClosePoll() {
  if (poll_ == nullptr) return;
  // uv_close stops watching the descriptor at once, before the transport
  // closes it (a new socket may get the same number); the memory goes in
  // the close callback, as libuv requires.
  poll_->data = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(poll_),
           [](uv_handle_t* handle) { delete reinterpret_cast<uv_poll_t*>(handle); });
  poll_ = nullptr;
  poll_events_ = 0;
}

void AsyncConnection::OnPollThunk(uv_poll_t* handle, int status, int events) {
  auto* self = static_cast<AsyncConnection*>(handle->data);
  if (self == nullptr) return;
  if (status < 0) {
    // libuv stopped the handle: the socket has an error (a write to a peer
    // that died, say). Reading or writing says which at once, instead of a
    // timeout later; UpdatePoll starts the handle again if it was transient.
    self->poll_events_ = 0;
    events = UV_READABLE | UV_WRITABLE;
  }
  self->OnEvents(events);
}

void AsyncConnection::OnEvents(int events) {
  uint64_t generation = generation_;
  if (!transport_->connected()) {
    IoResult step = transport_->ContinueConnect();
    if (step.kind == IoResult::Kind::kError) {
      Fail(step.error);
      return;
    }
    if (step.kind == IoResult::Kind::kWouldBlock) {
      UpdatePoll();
      return;
    }
    // Connected: the handshake commands wait in out_.
    read_want_ = kReadable;
    write_want_ = out_.size() > out_offset_ ? kWritable : 0;
    events = write_want_;
  }
  if (write_want_ != 0 && (events & write_want_) != 0) {
    Flush();
    if (generation != generation_) return;
  }
  if ((events & read_want_) != 0) {
    ReadReplies();
    if (generation != generation_) return;
  }
  UpdatePoll();
}

void AsyncConnection::Flush() {
  while (out_offset_ < out_.size()) {
    IoResult r = transport_->Write(out_.data() + out_offset_, out_.size() - out_offset_);
    switch (r.kind) {
      case IoResult::Kind::kDone:
        out_offset_ += r.bytes;
        break;
      case IoResult::Kind::kWouldBlock:
        write_want_ = r.wants;
        return;
      case IoResult::Kind::kEof:
      case IoResult::Kind::kError:
        Fail(r.error.ok() ? Status::IoError("connection closed by server (Redis at " +
                                            transport_->where() + ")")
                          : r.error);
        return;
    }
  }
  out_.clear();  // keeps its capacity for the next commands
  out_offset_ = 0;
  write_want_ = 0;
}

void AsyncConnection::ReadReplies() {
  while (true) {
    IoResult r = transport_->Read(in_.get(), kReadBufferBytes);
    switch (r.kind) {
      case IoResult::Kind::kDone:
        break;
      case IoResult::Kind::kWouldBlock:
        read_want_ = r.wants;
        return;
      case IoResult::Kind::kEof:
        Fail(FromTransportError(REDIS_ERR_EOF, "Server closed the connection",
                                transport_->where()));
        return;
      case IoResult::Kind::kError:
        Fail(r.error);
        return;
    }
    read_want_ = kReadable;
    redisReaderFeed(reader_.get(), in_.get(), r.bytes);
    if (!DeliverReplies()) return;
    // More is waiting only if the buffer filled up (the poll reports the
    // rest anyway) or SSL holds decrypted bytes (the poll cannot see those).
    if (r.bytes < kReadBufferBytes && !transport_->has_buffered()) return;
  }
}

bool AsyncConnection::DeliverReplies() {
  uint64_t generation = generation_;
  // One clock read per batch of replies, not per reply (an ack round brings
  // dozens).
  bool stamped = false;
  while (true) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader_.get(), &raw) != REDIS_OK) {
      Fail(FromTransportError(REDIS_ERR_PROTOCOL, reader_->errstr, transport_->where()));
      return false;
    }
    if (raw == nullptr) return true;
    ReplyPtr reply(static_cast<redisReply*>(raw));
    if (on_message_ && IsPubSubMessage(reply)) {
      on_message_(reply);
      if (generation != generation_) return false;
      continue;
    }
    if (pending_.empty()) {
      Fail(Status::Protocol("a reply to no command from Redis at " + options_.Describe()));
      return false;
    }
    if (!stamped && reply->type != REDIS_REPLY_ERROR) {
      stamped = true;
      last_good_reply_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    }
    OnReply(std::move(reply));
    if (generation != generation_) return false;
  }
}

bool AsyncConnection::NoteMoved(const redisReply& reply) {
  if (discovery_ == nullptr || discovery_->slot() < 0) return false;
  std::optional<Redirect> moved = ParseRedirect(View(&reply));
  if (!moved || moved->ask || moved->slot != discovery_->slot()) return false;
  // The reply names the slot's owner now: taken as found, so the epoch
  // moves and every connection of the slot follows, this one first.
  discovery_->Moved(Endpoint{moved->host.empty() ? at_.host : moved->host, moved->port, {}});
  return true;
}

void AsyncConnection::OnReply(ReplyPtr reply) {
  Request& front = pending_.front();
  Status status = reply->type == REDIS_REPLY_ERROR
                      ? FromErrorReply(View(reply.get()), options_.cluster.seeds.empty())
                      : Status::OK();
  if (!status.ok()) errors_.fetch_add(1, std::memory_order_relaxed);
  // ASK and TRYAGAIN stay plain error replies (the command did not run;
  // the caller tries again); MOVED also drops the connection, like
  // READONLY, once the request had its answer.
  if (!status.ok() && NoteMoved(*reply)) front.moved = true;
  if (front.done) {
    front.integers.push_back(reply->type == REDIS_REPLY_INTEGER ? reply->integer : 0);
    front.statuses.push_back(std::move(status));
    if (front.statuses.size() < front.replies) return;
    Request request = std::move(front);
    pending_.pop_front();
    bool read_only = discovery_ != nullptr &&
                     std::any_of(request.statuses.begin(), request.statuses.end(),
                                 [](const Status& s) { return IsReadOnlyReply(s); });
    uint64_t generation = generation_;
    request.done(std::move(request.statuses), std::move(request.integers));
    if (request.moved && generation == generation_) {
      FailOnMoved();
    } else if (read_only && generation == generation_) {
      FailOnReplica();
    }
    return;
  }
  if (IsNoScript(status)) {
    // The cache was flushed under us (SCRIPT FLUSH). Commands sent after
    // this one may run while it did not, so the order callers rely on is
    // gone: drop the connection (this request fails first); the next
    // handshake loads the scripts.
    Fail(Status::IoError("Redis lost its scripts (SCRIPT FLUSH?); reconnecting"));
    return;
  }
  Request request = std::move(front);
  pending_.pop_front();
  uint64_t generation = generation_;
  if (request.callback) request.callback(status, status.ok() ? reply.get() : nullptr);
  if (request.moved && generation == generation_) {
    FailOnMoved();
  } else if (discovery_ != nullptr && generation == generation_ && IsReadOnlyReply(status)) {
    FailOnReplica();
  }
}

void AsyncConnection::FailOnMoved() {
  Fail(Status::IoError("slot " + std::to_string(discovery_->slot()) + " moved away from " +
                       transport_->where() + " (MOVED); reconnecting to its owner"));
}

void AsyncConnection::FailOnReplica() {
  discovery_->NotMaster(epoch_);
  Fail(Status::IoError("Redis at " + transport_->where() +
                       " is a replica now (READONLY); reconnecting to the master"));
}

void AsyncConnection::Fail(const Status& why) {
  if (transport_ == nullptr) return;
  if (!why.IsShutdown()) errors_.fetch_add(1, std::memory_order_relaxed);
  // A broken connection may be a failover: the next connect asks the
  // sentinels again.
  if (discovery_ != nullptr && !why.IsShutdown()) discovery_->Invalidate(epoch_);
  ++generation_;
  bool was_ready = state_ == State::kReady;
  bool was_connecting = state_ == State::kConnecting;
  ClosePoll();
  transport_.reset();
  reader_.reset();
  out_.clear();
  out_offset_ = 0;
  write_want_ = 0;
  read_want_ = kReadable;
  state_ = State::kIdle;
  client_id_ = 0;
  run_id_.clear();
  std::deque<Request> failed;
  failed.swap(pending_);
  std::function<void(const Status&)> on_ready;
  if (was_connecting) on_ready.swap(on_ready_);
  // Each callback exactly once, in the order sent. A callback may Connect
  // again: the new requests are in pending_, not here.
  for (Request& request : failed) {
    if (request.done) {
      while (request.statuses.size() < request.replies) {
        request.statuses.push_back(why);
        request.integers.push_back(0);
      }
      request.done(std::move(request.statuses), std::move(request.integers));
    } else if (request.callback) {
      request.callback(why, nullptr);
    }
  }
  if (on_ready) on_ready(why);
  if (was_ready && !user_close_ && on_disconnect_) on_disconnect_(why);
}

void AsyncConnection::Close() {
  user_close_ = true;
  on_ready_ = nullptr;
  Fail(Status::Shutdown("connection closed"));
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
    self->Fail(Status::Timeout("no connection to Redis at " + self->options_.Describe() +
                               " within " +
                               std::to_string(self->options_.connect_timeout.count()) + " ms"));
  } else if (!self->pending_.empty() && now >= self->pending_.front().deadline) {
    self->Fail(Status::Timeout("Redis at " + self->options_.Describe() +
                               " did not answer in time; connection dropped"));
  } else if (self->discovery_ != nullptr && self->state_ == State::kReady &&
             self->discovery_->epoch() != self->epoch_) {
    self->Fail(Status::IoError("the " + self->discovery_->Describe() + " moved; reconnecting"));
  }
  // With Sentinel the watchdog also watches the epoch while connected.
  bool watching = self->discovery_ != nullptr && self->state_ == State::kReady;
  if (self->pending_.empty() && self->state_ != State::kConnecting && !watching) {
    uv_timer_stop(timer);
  }
}

}  // namespace reliableq::redis
