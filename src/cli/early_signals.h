// The signals that reach `reliableq worker` before its Server handles them:
// while the plugins load and Server::Open connects, probes Redis and loads
// the scripts. Their default actions would end the process with no log line
// (TERM, INT) or stop it (TSTP, TTIN); here they keep the meaning the
// server gives them (control.h, reliableq(1)) and take effect once it runs:
// TERM and INT stop it, TSTP and USR1 quiet it. HUP, USR2 and TTIN are
// ignored until then (nothing to reload, reopen or dump yet).
//
// Thread safety: Install on the main thread before any other thread starts;
// the handlers only set flags (async-signal-safe).

#ifndef RELIABLEQ_CLI_EARLY_SIGNALS_H_
#define RELIABLEQ_CLI_EARLY_SIGNALS_H_

#include "reliableq/server.h"

namespace reliableq::cli {

// Installs the handlers. Idempotent.
void InstallEarlySignals();

// Passes the stop or quiet that arrived so far to `server`, whose Open has
// installed its own handlers by then (they replace these), so that no
// signal falls between the two.
void ForwardEarlySignals(Server& server);

}  // namespace reliableq::cli

#endif  // RELIABLEQ_CLI_EARLY_SIGNALS_H_
