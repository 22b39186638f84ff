// Connection: one blocking hiredis connection with connect and command
// timeouts, used by Client, Admin, the janitor pass and the CLI.
//
// Every call returns a Status on failure and never throws. A transport error
// closes the connection; the next call reconnects once before it sends
// anything, so a restarted Redis is picked up without a new object. A command
// whose reply was lost is not resent: the caller decides.
//
// Thread safety: one thread at a time.

#ifndef RELIABLEQ_REDIS_CONNECTION_H_
#define RELIABLEQ_REDIS_CONNECTION_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lua_scripts.h"
#include "redis/reply.h"
#include "redis/script_call.h"
#include "reliableq/redis_options.h"
#include "reliableq/status.h"

namespace reliableq::redis {

using Argv = std::vector<std::string_view>;

class Connection {
 public:
  // Connects, authenticates and selects the database, all within
  // options.connect_timeout.
  static Result<std::unique_ptr<Connection>> Open(const RedisOptions& options);
  ~Connection();

  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends one command and reads its reply. An error reply is returned as a
  // non-OK Status (see errors.h), never as a reply.
  Result<ReplyPtr> Command(const Argv& argv);

  // Sends every command, then reads every reply: one round trip. Error
  // replies are returned in place as replies of type REDIS_REPLY_ERROR; a
  // transport error fails the whole call.
  Result<std::vector<ReplyPtr>> Pipeline(const std::vector<Argv>& commands);

  // Runs an embedded script with EVALSHA; on NOSCRIPT sends the source with
  // EVAL, which also puts it back in the script cache.
  Result<ReplyPtr> Eval(ScriptId script, const Argv& keys, const Argv& args);
  Result<ReplyPtr> Eval(const ScriptCall& call);


  // Loads every embedded script with SCRIPT LOAD and checks that Redis
  // computed the same SHA1 as the build did.
  Status LoadScripts();

  const RedisOptions& options() const { return options_; }

 private:
  explicit Connection(const RedisOptions& options) : options_(options) {}
  Status Connect();
  Status EnsureConnected();
  Status TransportError();

  RedisOptions options_;
  redisContext* context_ = nullptr;  // owned; null while disconnected
};

// Sets SIGPIPE to ignored if it still has its default action. Connections
// write with write(2), and a write to a socket the server has closed would
// otherwise end the whole program instead of failing the call. A handler
// the program installed itself is left alone. Every connection calls this
// before it connects: it is the one place the library touches SIGPIPE.
void IgnoreSigpipe();

// Builds EVALSHA/EVAL argv: {cmd, sha_or_source, numkeys, keys..., args...}.
// `numkeys` must outlive the returned vector.
Argv ScriptArgv(std::string_view command, std::string_view body, const std::string& numkeys,
                const Argv& keys, const Argv& args);

}  // namespace reliableq::redis

#endif  // RELIABLEQ_REDIS_CONNECTION_H_
