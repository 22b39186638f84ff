// PushResult: what became of one push, and what the caller may safely do
// next.
//
// Every push that was attempted (Client::Push, PushAt, PushIn, and each job
// of PushBulk) ends in exactly one PushOutcome. The outcome answers the one
// question a caller has after a push: "is the job stored, and may I push it
// again?"
//
//   accepted, replicated, spooled
//       Done: the job will run (at least once). Pushing it again makes a
//       second job.
//
//   not confirmed
//       The push was sent and no reply came (a timeout, a broken
//       connection): the job may or may not be stored, and may already be
//       running. To try again, push it with the SAME jid (set Job::jid to
//       `result.jid`): at worst the same job is stored twice and runs twice
//       (at-least-once, as always), never two different jobs. Pushing it
//       without that jid risks two different jobs for one intent.
//
//   refused
//       Nothing was stored. Pushing it again is safe, and succeeds once the
//       reason is gone. `reason.code()` says which reason:
//         kIoError, kTimeout  Redis could not take the job now: it could not
//                             be reached before anything was sent, or it
//                             answered that it cannot serve (LOADING,
//                             READONLY, BUSY, ...). Retry later.
//         kScript             Redis answered with an error (WRONGTYPE naming
//                             the key at fault, OOM, ...). Fix Redis first;
//                             until then every push is refused the same way.
//         kRefused            A rule refused this job (a client middleware
//                             stopped it). Pushing it again unchanged is
//                             refused again.
//         other codes         as Status documents them.
//
// kReplicated and kSpooled are not produced yet: they are reserved for
// pushes confirmed by replicas (WAIT) and for a durable client spool.
//
// Thread safety: plain values.

#ifndef RELIABLEQ_PUSH_RESULT_H_
#define RELIABLEQ_PUSH_RESULT_H_

#include <string>

#include "reliableq/status.h"

namespace reliableq {

enum class PushOutcome {
  // Redis stored it: one atomic script put the job in its queue (and its
  // queue in `queues`), or in the schedule. No replica has confirmed it yet.
  kAccepted,
  // Stored, and `replicas` replicas confirmed it (WAIT). Not produced yet.
  kReplicated,
  // Sent, but no reply came (timeout, broken connection): it may or may not
  // be stored. `reason` is the transport error.
  kNotConfirmed,
  // Written to this host's durable spool, to be pushed later with the same
  // jid. Not produced yet.
  kSpooled,
  // Definitely not stored; `reason` says why.
  kRefused,
};

struct PushResult {
  PushOutcome outcome = PushOutcome::kRefused;
  // The job's jid, whatever the outcome: the one given in Job::jid, else the
  // one the client made up (a refused job's too, so that it can be pushed
  // again under the same id).
  std::string jid;
  // kReplicated: how many replicas confirmed it; 0 otherwise.
  int replicas = 0;
  // OK when the job is stored; otherwise why it is not, or may not be (the
  // transport error, Redis's error reply, the rule that refused it).
  Status reason;

  // True for kAccepted, kReplicated and kSpooled: the job will run, and
  // pushing it again makes a second job.
  bool stored() const {
    return outcome == PushOutcome::kAccepted || outcome == PushOutcome::kReplicated ||
           outcome == PushOutcome::kSpooled;
  }
};

// "accepted", "replicated", "not confirmed", "spooled" or "refused".
const char* PushOutcomeName(PushOutcome outcome);

}  // namespace reliableq

#endif  // RELIABLEQ_PUSH_RESULT_H_
