// The checks ServerOptions must pass before a Server opens. Pure.

#ifndef RELIABLEQ_SERVER_OPTIONS_CHECK_H_
#define RELIABLEQ_SERVER_OPTIONS_CHECK_H_

#include "reliableq/server.h"
#include "reliableq/status.h"

namespace reliableq {

// OK, or kInvalidArgument whose message names the option at fault.
Status CheckServerOptions(const ServerOptions& options);

}  // namespace reliableq

#endif  // RELIABLEQ_SERVER_OPTIONS_CHECK_H_
