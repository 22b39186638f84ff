#include "redis/connection.h"

#include <signal.h>
#include <sys/time.h>

#include <chrono>

#include "redis/errors.h"

namespace reliableq::redis {

namespace {

timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv;
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

void ToArgv(const Argv& argv, std::vector<const char*>* ptrs, std::vector<size_t>* lens) {
  ptrs->clear();
  lens->clear();
  for (std::string_view arg : argv) {
    ptrs->push_back(arg.data());
    lens->push_back(arg.size());
  }
}

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

Result<std::unique_ptr<Connection>> Connection::Open(const RedisOptions& options) {
  IgnoreSigpipe();
  std::unique_ptr<Connection> connection(new Connection(options));
  Status s = connection->Connect();
  if (!s.ok()) return s;
  return connection;
}

Connection::~Connection() {
  if (context_ != nullptr) redisFree(context_);
}

Status Connection::TransportError() {
  Status s = FromTransportError(context_->err, context_->errstr, options_.Describe());
  redisFree(context_);
  context_ = nullptr;
  return s;
}

Status Connection::Connect() {
  timeval connect_tv = ToTimeval(options_.connect_timeout);
  context_ = options_.unix_path.empty()
                 ? redisConnectWithTimeout(options_.host.c_str(), options_.port, connect_tv)
                 : redisConnectUnixWithTimeout(options_.unix_path.c_str(), connect_tv);
  if (context_ == nullptr) {
    return Status::IoError("cannot allocate a connection to Redis at " + options_.Describe());
  }
  if (context_->err != 0) {
    return TransportError().WithContext("cannot connect");
  }
  if (redisSetTimeout(context_, ToTimeval(options_.command_timeout)) != REDIS_OK) {
    return TransportError().WithContext("cannot set the command timeout");
  }
  std::string db = std::to_string(options_.db);
  if (!options_.password.empty()) {
    Argv auth = options_.username.empty()
                    ? Argv{"AUTH", options_.password}
                    : Argv{"AUTH", options_.username, options_.password};
    Result<ReplyPtr> reply = Command(auth);
    if (!reply.ok()) return reply.status().WithContext("AUTH at " + options_.Describe());
  }
  if (options_.db != 0) {
    Result<ReplyPtr> reply = Command({"SELECT", db});
    if (!reply.ok()) return reply.status().WithContext("SELECT " + db);
  }
  return Status::OK();
}

Status Connection::EnsureConnected() {
  if (context_ != nullptr) return Status::OK();
  return Connect();
}

Result<ReplyPtr> Connection::Command(const Argv& argv) {
  Status s = EnsureConnected();
  if (!s.ok()) return s;
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  ToArgv(argv, &ptrs, &lens);
  void* raw = redisCommandArgv(context_, static_cast<int>(ptrs.size()), ptrs.data(), lens.data());
  if (raw == nullptr) return TransportError();
  ReplyPtr reply(static_cast<redisReply*>(raw));
  if (reply->type == REDIS_REPLY_ERROR) return FromErrorReply(View(reply.get()));
  return reply;
}

Result<std::vector<ReplyPtr>> Connection::Pipeline(const std::vector<Argv>& commands) {
  Status s = EnsureConnected();
  if (!s.ok()) return s;
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const Argv& argv : commands) {
    ToArgv(argv, &ptrs, &lens);
    if (redisAppendCommandArgv(context_, static_cast<int>(ptrs.size()), ptrs.data(),
                               lens.data()) != REDIS_OK) {
      return TransportError();
    }
  }
  std::vector<ReplyPtr> replies;
  replies.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) return TransportError();
    replies.emplace_back(static_cast<redisReply*>(raw));
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
