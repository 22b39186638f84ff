// Connection: one blocking connection to Redis with connect and command
// timeouts, used by Client, Admin, the janitor pass and the CLI. It runs on
// a Transport (TCP, unix socket or TLS; see transport.h) and parses replies
// with hiredis's redisReader.
//
// connect_timeout bounds the connect (and the TLS handshake);
// command_timeout bounds writing a call's commands and each wait for more
// of its replies.
//
// With Sentinel (options.sentinel), the connection goes to the master its
// Discovery names and checks ROLE after connecting; it reconnects before a
// call once the master moved (the Discovery's epoch), and after a READONLY
// reply (see discovery.h).
//
// With Redis Cluster (options.cluster), the connection serves one hash
// slot (of "{group}" or cluster.route_key) and goes to the primary its
// Discovery says owns it, checking ROLE the same way. Command, Eval and
// Pipeline follow MOVED, ASK and TRYAGAIN within command_timeout
// (redirect_follower.h), each command of a Pipeline on its own, except in a
// transaction (a Pipeline with MULTI). Send leaves those error replies in
// place (its caller resends them: Resend), but a MOVED for the slot still
// moves the Discovery, so the next call reconnects to the new owner.
//
// Every call returns a Status on failure and never throws. A transport error
// closes the connection; the next call reconnects once before it sends
// anything, so a restarted Redis is picked up without a new object. A command
// whose reply was lost is not resent: the caller decides.
//
// Thread safety: one thread at a time.

#ifndef RELIABLEQ_REDIS_CONNECTION_H_
#define RELIABLEQ_REDIS_CONNECTION_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lua_scripts.h"
#include "redis/discovery.h"
#include "redis/errors.h"
#include "redis/redirect_follower.h"
#include "redis/reply.h"
#include "redis/script_call.h"
#include "redis/tls.h"
#include "redis/transport.h"
#include "reliableq/redis_options.h"
#include "reliableq/status.h"

namespace reliableq::redis {

using Argv = std::vector<std::string_view>;

class Connection {
 public:
  // Connects, authenticates and selects the database, all within
  // options.connect_timeout.
  static Result<std::unique_ptr<Connection>> Open(const RedisOptions& options);
  // The same without connecting: the first call connects. For a caller that
  // must exist while Redis is down (a client with a spool). Fails only when
  // the options fail RedisOptions::Validate or the TLS settings are
  // unusable.
  static Result<std::unique_ptr<Connection>> Create(const RedisOptions& options);
  ~Connection();

  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends one command and reads its reply. An error reply is returned as a
  // non-OK Status (see errors.h), never as a reply.
  Result<ReplyPtr> Command(const Argv& argv);

  // Sends every command, then reads every reply: one round trip. Error
  // replies are returned in place as replies of type REDIS_REPLY_ERROR; a
  // transport error fails the whole call. With a cluster, a command
  // redirected (MOVED, ASK, TRYAGAIN) is sent again as Command sends it,
  // unless the pipeline holds MULTI; a redirection it cannot follow fails
  // the whole call.
  Result<std::vector<ReplyPtr>> Pipeline(const std::vector<Argv>& commands);

  // Sends commands already in Redis's protocol (AppendCommand), back to
  // back in `wire`, command i ending at offset ends[i], in one write, then
  // reads their replies in order, appending each to *replies (error
  // replies in place, as Pipeline). For callers that encode outside their
  // lock and batch many callers' commands into one round trip (Client).
  // Reconnects first, as every call does. Unlike Pipeline, a failure keeps
  // what is known command by command: *replies holds the replies read
  // before it, and *written how many commands were written whole. A
  // command written whole without a reply may have run; one not written
  // whole never ran (Redis runs no command it has not read to the end).
  // Returns the failure, or OK once every reply was read. `while_redis_works`,
  // when given, runs once the write succeeded, before the first read: work
  // the caller can do while Redis runs the commands.
  Status Send(std::string_view wire, const std::vector<size_t>& ends,
              std::vector<ReplyPtr>* replies, size_t* written,
              const std::function<void()>& while_redis_works = nullptr);

  // For a command of a Send batch (`command`: its bytes in the batch's
  // wire) whose reply was `error_reply`: with a cluster, a redirection
  // (MOVED, ASK, TRYAGAIN: the command did not run) is followed as Command
  // follows it, and the reply the command gets in the end is returned, or
  // its failure (last_progress() tells whether it may have run). Any other
  // error reply comes back as its Status, the command not sent again.
  Result<ReplyPtr> Resend(std::string_view command, ReplyPtr error_reply);

  // Runs an embedded script with EVALSHA; on NOSCRIPT sends the source with
  // EVAL, which also puts it back in the script cache.
  Result<ReplyPtr> Eval(ScriptId script, const Argv& keys, const Argv& args);
  Result<ReplyPtr> Eval(const ScriptCall& call);

  // Loads every embedded script with SCRIPT LOAD and checks that Redis
  // computed the same SHA1 as the build did.
  Status LoadScripts();

  const RedisOptions& options() const { return options_; }

  // The connection that ran the last Command, Eval or Resend, or a Pipeline
  // or Send whose commands were not redirected: this one, or with a cluster
  // the connection to the target of the ASK that the command followed
  // (redirect_follower.h).
  // A WAIT that must count the replicas holding that command's writes goes
  // there: WAIT counts the writes of the connection it is sent on (Client's
  // replica acknowledgement, migrate). Valid until the next call.
  Connection& LastWriter() { return *last_writer_; }

  // An error reply this connection read (a Pipeline's or a Send's) as a
  // Status: FromErrorReply, told whether this connection was made without
  // cluster options, so that MOVED and ASK then say that the server is a
  // cluster node.
  Status ErrorOf(ReplyRef reply) const {
    return FromErrorReply(View(reply.raw()), options_.cluster.seeds.empty());
  }
  // The first error reply of a Pipeline's `replies` (of `commands`), as
  // ErrorOf, named by its command and first argument ("LLEN queue:a");
  // OK when there is none.
  Status FirstError(const std::vector<ReplyPtr>& replies,
                    const std::vector<Argv>& commands) const;

  // How far the last Command, Pipeline or Eval got (for Eval, its last
  // command), so that a caller can tell a command Redis cannot have run
  // from one it may have run. kNotSent: it failed before all of its bytes
  // were written (in the (re)connect, or in the write). kSent: written, and
  // the connection failed before every reply was read: Redis may have run
  // it. kAnswered: every reply was read, error replies included.
  enum class Progress { kNotSent, kSent, kAnswered };
  Progress last_progress() const { return last_progress_; }

 private:
  friend class RedirectFollower;
  explicit Connection(const RedisOptions& options);
  // Sends one command and reads its reply into *reply as it came, error
  // reply or not.
  Status Exchange(const Argv& argv, ReplyPtr* reply);
  Status Connect();
  // Connects to `endpoint`, authenticates and selects the database.
  Status ConnectTo(const Endpoint& endpoint);
  // With Sentinel: the master the sentinels name, checked with ROLE.
  Status ConnectToMaster();
  Status EnsureConnected();
  // An error reply (its text) that says the server is a replica
  // (READONLY), or with a cluster that the slot moved (MOVED for this
  // slot), drops the connection and moves the Discovery on.
  void NoteErrorReply(std::string_view text);
  void NoteErrorReplies(const std::vector<ReplyPtr>& replies);
  // Drops the transport after a transport failure and returns `why`.
  Status TransportError(Status why);
  // Writes wire_ and reads `count` replies into *replies.
  Status RoundTrip(size_t count, std::vector<ReplyPtr>* replies);
  // Writes all of `data` within the command timeout; *sent counts the
  // bytes written, also when it fails.
  Status WriteCounted(std::string_view data, size_t* sent);
  Result<ReplyPtr> ReadReply();

  RedisOptions options_;
  std::shared_ptr<Discovery> discovery_;   // null without Sentinel or a cluster
  uint64_t epoch_ = 0;                     // the Discovery's epoch at the connect
  bool connecting_ = false;                // inside Connect: no epoch check
  std::shared_ptr<const TlsContext> tls_;  // null without TLS
  std::unique_ptr<Transport> transport_;   // null while disconnected
  ReaderPtr reader_;                       // one per transport
  std::string wire_;                       // the commands of one call, reused
  std::unique_ptr<char[]> buffer_;         // what a read brings, reused
  Progress last_progress_ = Progress::kNotSent;
  Endpoint at_;                     // where the last connect went
  Connection* last_writer_ = this;  // LastWriter(): this, or the ASK target's
  RedirectFollower cluster_;        // used with a cluster only
};

// Sets SIGPIPE to ignored if it still has its default action. Plain
// sockets are written with MSG_NOSIGNAL, but OpenSSL writes with write(2),
// and a write to a socket the server has closed would
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
