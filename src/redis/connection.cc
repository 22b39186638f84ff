#include "redis/connection.h"

#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "redis/errors.h"
#include "redis/key_slot.h"

namespace reliableq::redis {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

Argv ScriptArgv(std::string_view command, std::string_view body, const std::string& numkeys,
                const Argv& keys, const Argv& args) {
  Argv argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.push_back(command);
  argv.push_back(body);
  argv.push_back(numkeys);
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

void IgnoreSigpipe() {
  struct sigaction current;
  if (sigaction(SIGPIPE, nullptr, &current) != 0) return;
  if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_DFL) {
    struct sigaction ignore = {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, nullptr);
  }
}

Result<std::unique_ptr<Connection>> Connection::Create(const RedisOptions& options) {
  IgnoreSigpipe();
  Status valid = options.Validate();
  if (!valid.ok()) return valid.WithContext(options.Describe());
  std::unique_ptr<Connection> connection(new Connection(options));
  connection->discovery_ = Discovery::For(options);
  if (options.tls.enabled) {
    Result<std::shared_ptr<const TlsContext>> tls = TlsContext::Create(options.tls);
    if (!tls.ok()) return tls.status();
    connection->tls_ = std::move(*tls);
  }
  connection->buffer_.reset(new char[kReadBufferBytes]);
  return connection;
}

Result<std::unique_ptr<Connection>> Connection::Open(const RedisOptions& options) {
  Result<std::unique_ptr<Connection>> connection = Create(options);
  if (!connection.ok()) return connection;
  Status s = (*connection)->Connect();
  if (!s.ok()) return s;
  return connection;
}

Connection::Connection(const RedisOptions& options) : options_(options), cluster_(this) {}

Connection::~Connection() = default;

Status Connection::TransportError(Status why) {
  transport_.reset();
  reader_.reset();
  // A broken connection may be a failover: the next connect asks the
  // sentinels again.
  if (discovery_ != nullptr) discovery_->Invalidate(epoch_);
  return why;
}

void Connection::NoteErrorReply(std::string_view text) {
  if (discovery_ == nullptr) return;
  if (discovery_->slot() >= 0) {
    // MOVED for this connection's slot: the slot map is stale and the
    // reply names the owner now; every connection of the slot follows.
    std::optional<Redirect> moved = ParseRedirect(text);
    if (!moved || moved->ask || moved->slot != discovery_->slot()) return;
    discovery_->Moved(Endpoint{moved->host.empty() ? at_.host : moved->host, moved->port, {}});
  } else {
    if (!IsReadOnlyReply(FromErrorReply(text))) return;
    discovery_->NotMaster(epoch_);
  }
  transport_.reset();
  reader_.reset();
}

Status Connection::Connect() {
  connecting_ = true;
  Status s = discovery_ == nullptr ? ConnectTo(Endpoint::Of(options_)) : ConnectToMaster();
  connecting_ = false;
  return s;
}

Status Connection::ConnectToMaster() {
  int attempts = std::max(1, options_.sentinel.role_checks);
  std::string replica;
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    Result<Discovery::Master> master = discovery_->Find();
    if (!master.ok()) return master.status();
    epoch_ = master->epoch;
    Status s = ConnectTo(master->endpoint);
    if (!s.ok()) {
      discovery_->Invalidate(epoch_);
      return s.WithContext("the " + discovery_->Describe() + " is at " +
                           master->endpoint.Describe());
    }
    // The sentinels may still name a master that was just demoted, or one
    // that is not yet promoted: only ROLE tells.
    Result<ReplyPtr> role = Command({"ROLE"});
    if (!role.ok() && role.status().IsRetryable()) return role.status();
    std::string named = role.ok() ? RoleOf(role->get()) : "master";  // an ACL may refuse ROLE
    if (named == "master") return Status::OK();
    replica = master->endpoint.Describe() + " (ROLE: " + named + ")";
    discovery_->NotMaster(epoch_);
    TransportError(Status::OK());
    if (attempt < attempts) {
      // Sentinels agree on a promotion within a second or so; each look
      // waits a little longer.
      std::this_thread::sleep_for(std::chrono::milliseconds(100 * attempt));
    }
  }
  return Status::IoError("the " + discovery_->Describe() + " is not a master: it was found at " +
                         replica + " " + std::to_string(attempts) + " times");
}

Status Connection::ConnectTo(const Endpoint& endpoint) {
  Result<std::unique_ptr<Transport>> transport =
      Transport::Connect(endpoint, tls_, Clock::now() + options_.connect_timeout);
  if (!transport.ok()) {
    if (!transport.status().IsTimeout()) return transport.status();
    return Status::Timeout("no connection to Redis at " + endpoint.Describe() + " within " +
                           std::to_string(options_.connect_timeout.count()) + " ms");
  }
  reader_ = NewReader();
  if (reader_ == nullptr) return Status::IoError("out of memory for a Redis reply reader");
  transport_ = std::move(*transport);
  at_ = endpoint;
  std::string db = std::to_string(options_.db);
  if (!options_.password.empty()) {
    Argv auth = options_.username.empty()
                    ? Argv{"AUTH", options_.password}
                    : Argv{"AUTH", options_.username, options_.password};
    Result<ReplyPtr> reply = Command(auth);
    // Not kept half set up: the next call must not run unauthenticated.
    if (!reply.ok()) {
      return TransportError(reply.status().WithContext("AUTH at " + options_.Describe()));
    }
  }
  if (options_.db != 0) {
    Result<ReplyPtr> reply = Command({"SELECT", db});
    if (!reply.ok()) return TransportError(reply.status().WithContext("SELECT " + db));
  }
  return Status::OK();
}

void Connection::NoteErrorReplies(const std::vector<ReplyPtr>& replies) {
  if (discovery_ == nullptr) return;
  for (const ReplyPtr& reply : replies) {
    if (reply->type == REDIS_REPLY_ERROR) NoteErrorReply(View(reply.get()));
  }
}

Status Connection::EnsureConnected() {
  if (transport_ != nullptr && discovery_ != nullptr && !connecting_ &&
      discovery_->epoch() != epoch_) {
    // The master moved since this connection was made.
    transport_.reset();
    reader_.reset();
  }
  if (transport_ != nullptr) return Status::OK();
  return Connect();
}

Result<ReplyPtr> Connection::ReadReply() {
  while (true) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader_.get(), &raw) != REDIS_OK) {
      return TransportError(
          FromTransportError(REDIS_ERR_PROTOCOL, reader_->errstr, transport_->where()));
    }
    if (raw != nullptr) return ReplyPtr(static_cast<redisReply*>(raw));
    // No whole reply yet. The deadline restarts with every read that
    // brings bytes: a large reply is slow, a silent server is late.
    Result<size_t> n = transport_->ReadSome(buffer_.get(), kReadBufferBytes,
                                            Clock::now() + options_.command_timeout);
    if (!n.ok()) return TransportError(n.status());
    if (*n == 0) {
      return TransportError(FromTransportError(REDIS_ERR_EOF, "Server closed the connection",
                                               transport_->where()));
    }
    redisReaderFeed(reader_.get(), buffer_.get(), *n);
  }
}

Status Connection::RoundTrip(size_t count, std::vector<ReplyPtr>* replies) {
  // Set after the (re)connect, whose AUTH and SELECT come through here too.
  last_progress_ = Progress::kNotSent;
  Status written = transport_->WriteAll(wire_, Clock::now() + options_.command_timeout);
  if (!written.ok()) {
    // A write cut short leaves its last command incomplete, which Redis
    // never runs; the commands before it in a pipeline may have gone.
    if (count > 1) last_progress_ = Progress::kSent;
    return TransportError(written);
  }
  last_progress_ = Progress::kSent;
  for (size_t i = 0; i < count; ++i) {
    Result<ReplyPtr> reply = ReadReply();
    if (!reply.ok()) return reply.status();
    replies->push_back(std::move(*reply));
  }
  last_progress_ = Progress::kAnswered;
  NoteErrorReplies(*replies);
  return Status::OK();
}

Status Connection::WriteCounted(std::string_view data, size_t* sent) {
  *sent = 0;
  Clock::time_point deadline = Clock::now() + options_.command_timeout;
  while (*sent < data.size()) {
    IoResult r = transport_->Write(data.data() + *sent, data.size() - *sent);
    switch (r.kind) {
      case IoResult::Kind::kDone:
        *sent += r.bytes;
        break;
      case IoResult::Kind::kEof:
        return FromTransportError(REDIS_ERR_EOF, "Server closed the connection",
                                  transport_->where());
      case IoResult::Kind::kError:
        return r.error;
      case IoResult::Kind::kWouldBlock: {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) {
          return Status::Timeout("no answer in time writing (Redis at " + transport_->where() +
                                 ")");
        }
        pollfd p{transport_->fd(),
                 static_cast<short>(((r.wants & kReadable) ? POLLIN : 0) |
                                    ((r.wants & kWritable) ? POLLOUT : 0)),
                 0};
        // Rounded up; POLLERR and POLLHUP wake it too, and the next Write
        // says why.
        if (poll(&p, 1, static_cast<int>(left.count()) + 1) < 0 && errno != EINTR) {
          return Status::IoError(std::string("waiting to write to Redis at ") +
                                 transport_->where() + ": " + std::strerror(errno));
        }
        break;
      }
    }
  }
  return Status::OK();
}

Status Connection::Send(std::string_view wire, const std::vector<size_t>& ends,
                        std::vector<ReplyPtr>* replies, size_t* written,
                        const std::function<void()>& while_redis_works) {
  last_writer_ = this;
  *written = 0;
  Status s = EnsureConnected();
  // Set after the (re)connect, whose AUTH and SELECT set it too.
  last_progress_ = Progress::kNotSent;
  if (!s.ok()) return s;
  size_t sent = 0;
  s = WriteCounted(wire, &sent);
  *written = static_cast<size_t>(std::upper_bound(ends.begin(), ends.end(), sent) - ends.begin());
  if (*written > 0) last_progress_ = Progress::kSent;
  if (!s.ok()) return TransportError(s);
  if (while_redis_works) while_redis_works();
  for (size_t i = 0; i < ends.size(); ++i) {
    Result<ReplyPtr> reply = ReadReply();
    if (!reply.ok()) return reply.status();
    replies->push_back(std::move(*reply));
  }
  last_progress_ = Progress::kAnswered;
  NoteErrorReplies(*replies);
  return Status::OK();
}

Status Connection::Exchange(const Argv& argv, ReplyPtr* reply) {
  last_writer_ = this;
  Status s = EnsureConnected();
  if (!s.ok()) {
    last_progress_ = Progress::kNotSent;
    return s;
  }
  wire_.clear();
  AppendCommand(&wire_, argv.data(), argv.size());
  std::vector<ReplyPtr> replies;
  s = RoundTrip(1, &replies);
  if (!s.ok()) return s;
  *reply = std::move(replies.front());
  return Status::OK();
}

Result<ReplyPtr> Connection::Command(const Argv& argv) {
  // A Status and a ReplyPtr rather than a Result in between: this is the
  // path of every blocking command, with or without a cluster.
  ReplyPtr reply;
  Status s = Exchange(argv, &reply);
  if (!s.ok()) return s;
  if (reply->type != REDIS_REPLY_ERROR) return reply;
  if (discovery_ != nullptr && discovery_->slot() >= 0) {
    return cluster_.Follow(argv, std::move(reply));
  }
  return ErrorOf(reply.get());
}

Status Connection::FirstError(const std::vector<ReplyPtr>& replies,
                              const std::vector<Argv>& commands) const {
  for (size_t i = 0; i < replies.size(); ++i) {
    if (!IsErrorReply(replies[i])) continue;
    std::string what;
    for (size_t k = 0; k < commands[i].size() && k < 2; ++k) {
      if (k > 0) what += " ";
      what += commands[i][k];
    }
    return ErrorOf(replies[i]).WithContext(what);
  }
  return Status::OK();
}

namespace {

// The arguments of one command in Redis's protocol (as AppendCommand writes
// it: an array of bulk strings); false when `wire` is not one.
bool SplitCommand(std::string_view wire, Argv* argv) {
  auto number = [&](char kind, size_t* at, long long* out) {
    if (*at >= wire.size() || wire[*at] != kind) return false;
    size_t end = wire.find("\r\n", *at);
    if (end == std::string_view::npos) return false;
    *out = 0;
    for (size_t i = *at + 1; i < end; ++i) {
      if (wire[i] < '0' || wire[i] > '9') return false;
      *out = *out * 10 + (wire[i] - '0');
    }
    *at = end + 2;
    return true;
  };
  size_t at = 0;
  long long count = 0;
  if (!number('*', &at, &count)) return false;
  for (long long i = 0; i < count; ++i) {
    long long length = 0;
    if (!number('$', &at, &length) || at + length + 2 > wire.size()) return false;
    argv->push_back(wire.substr(at, length));
    at += length + 2;
  }
  return at == wire.size();
}

}  // namespace

Result<ReplyPtr> Connection::Resend(std::string_view command, ReplyPtr error_reply) {
  Argv argv;
  if (discovery_ == nullptr || discovery_->slot() < 0 || !SplitCommand(command, &argv)) {
    return ErrorOf(error_reply.get());
  }
  return cluster_.Follow(argv, std::move(error_reply));
}

Result<std::vector<ReplyPtr>> Connection::Pipeline(const std::vector<Argv>& commands) {
  last_writer_ = this;
  Status s = EnsureConnected();
  if (!s.ok()) {
    last_progress_ = Progress::kNotSent;
    return s;
  }
  wire_.clear();
  for (const Argv& argv : commands) AppendCommand(&wire_, argv.data(), argv.size());
  std::vector<ReplyPtr> replies;
  replies.reserve(commands.size());
  s = RoundTrip(commands.size(), &replies);
  if (!s.ok()) return s;
  NoteErrorReplies(replies);
  if (discovery_ == nullptr || discovery_->slot() < 0) return replies;
  // With a cluster, a command answered with a redirection (it did not run)
  // goes again where its slot is, as Command sends it; but not in a
  // transaction, where a command queued after MULTI must not run outside
  // it (EXEC then aborts, and the caller decides).
  for (const Argv& argv : commands) {
    if (argv.size() == 1 && (argv[0] == "MULTI" || argv[0] == "multi")) return replies;
  }
  for (size_t i = 0; i < replies.size(); ++i) {
    if (replies[i]->type != REDIS_REPLY_ERROR) continue;
    std::string_view text = View(replies[i].get());
    if (!ParseRedirect(text) && !IsTryAgainReply(text)) continue;
    Result<ReplyPtr> followed = cluster_.Follow(commands[i], std::move(replies[i]));
    if (!followed.ok()) return followed.status();
    replies[i] = std::move(*followed);
  }
  return replies;
}

Result<ReplyPtr> Connection::Eval(ScriptId id, const Argv& keys, const Argv& args) {
  const LuaScript& script = GetScript(id);
  std::string numkeys = std::to_string(keys.size());
  Result<ReplyPtr> reply = Command(ScriptArgv("EVALSHA", script.sha1, numkeys, keys, args));
  if (reply.ok() || !IsNoScript(reply.status())) return reply;
  return Command(ScriptArgv("EVAL", script.source, numkeys, keys, args));
}

Result<ReplyPtr> Connection::Eval(const ScriptCall& call) {
  Argv keys(call.keys.begin(), call.keys.end());
  Argv args(call.args.begin(), call.args.end());
  return Eval(call.script, keys, args);
}

Status Connection::LoadScripts() {
  for (size_t i = 0; i < kScriptCount; ++i) {
    const LuaScript& script = kScripts[i];
    Result<ReplyPtr> reply = Command({"SCRIPT", "LOAD", script.source});
    if (!reply.ok()) return reply.status().WithContext(std::string("loading ") + script.name);
    if (View(reply->get()) != script.sha1) {
      return Status::Protocol(std::string("Redis computed another SHA1 for ") + script.name);
    }
  }
  return Status::OK();
}

}  // namespace reliableq::redis
