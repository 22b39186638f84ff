// The one place where Redis failures become Status values.
//
// Two planes, kept apart as hiredis keeps them:
// - transport: a failed connect, read or write (I/O, EOF, timeout) or bytes
//   the reply parser cannot read (protocol), named with hiredis's `err`
//   codes; the connection is unusable and a new one may succeed;
// - server: an error reply ("ERR ...", "NOSCRIPT ...", "RQ_NOTFOUND ..."), after
//   which the connection is fine.

#ifndef RELIABLEQ_REDIS_ERRORS_H_
#define RELIABLEQ_REDIS_ERRORS_H_

#include <optional>
#include <string>
#include <string_view>

#include "reliableq/status.h"

namespace reliableq::redis {

// A transport failure: hiredis `err` code and `errstr`, and where we tried.
// REDIS_ERR_IO with EAGAIN/ETIMEDOUT in errstr, or REDIS_ERR_TIMEOUT where
// hiredis has it, becomes kTimeout; other I/O and EOF become kIoError;
// protocol errors become kProtocol.
Status FromTransportError(int err, std::string_view errstr, const std::string& where);

// An error reply from the server, by its first word:
//   NOSCRIPT            kScript (see IsNoScript)
//   RQ_NOTFOUND         kNotFound      (our scripts' own prefixes)
//   RQ_INVALID          kInvalidArgument
//   LOADING, READONLY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN, NOREPLICAS,
//   MOVED, ASK          kIoError (the server cannot serve now; retry later;
//                       NOREPLICAS: min-replicas-to-write is not met; MOVED,
//                       ASK: the key's slot is served elsewhere, and the
//                       command did not run)
//   BUSY                kTimeout (a script is running too long)
//   NOAUTH, WRONGPASS, NOPERM
//                       kInvalidArgument (fix the credentials)
//   anything else       kScript
// The message is the reply text with our RQ_ prefixes stripped. `plain`:
// the reply was read on a connection made without cluster options (a
// redis://, rediss://, unix:// or Sentinel URL: RedisOptions::cluster
// empty), which follows no redirection; MOVED and ASK there mean that the
// server is a node of a Redis Cluster, and the message says so and that a
// redis+cluster:// URL reaches the cluster.
Status FromErrorReply(std::string_view text, bool plain = false);

// True when `status` came from a NOSCRIPT reply: the script cache was
// flushed and the script must be sent again.
bool IsNoScript(const Status& status);

// A cluster redirection, from the text of an error reply: "MOVED 3999
// 127.0.0.1:6381" (the slot is served there now) or "ASK 3999
// 127.0.0.1:6381" (the slot is migrating there: send this one command
// there, after ASKING). The address may be "[::1]:6381" or, from a node
// that does not know its own address, ":6381" (empty host).
struct Redirect {
  bool ask = false;
  int slot = 0;
  std::string host;
  int port = 0;
};
// The redirection `text` names; nullopt when it is not a well-formed MOVED
// or ASK reply.
std::optional<Redirect> ParseRedirect(std::string_view text);

// True when the error reply `text` is TRYAGAIN: a multi-key command met a
// slot whose keys are split by a migration; it did not run.
bool IsTryAgainReply(std::string_view text);

}  // namespace reliableq::redis

#endif  // RELIABLEQ_REDIS_ERRORS_H_
