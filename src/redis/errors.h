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
//   LOADING, READONLY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN, NOREPLICAS
//                       kIoError (the server cannot serve now; retry later;
//                       NOREPLICAS: min-replicas-to-write is not met)
//   BUSY                kTimeout (a script is running too long)
//   NOAUTH, WRONGPASS, NOPERM
//                       kInvalidArgument (fix the credentials)
//   anything else       kScript
// The message is the reply text with our RQ_ prefixes stripped.
Status FromErrorReply(std::string_view text);

// True when `status` came from a NOSCRIPT reply: the script cache was
// flushed and the script must be sent again.
bool IsNoScript(const Status& status);

}  // namespace reliableq::redis

#endif  // RELIABLEQ_REDIS_ERRORS_H_
