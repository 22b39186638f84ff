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
//       running. Or, with ClientOptions::wait_replicas, the master stored it
//       but fewer replicas than asked confirmed it in time (or WAIT failed):
//       a failover may lose it. To try again, push it with the SAME jid
//       (set Job::jid to `result.jid`): at worst the same job is stored
//       twice and runs twice (at-least-once, as always), never two different
//       jobs. Pushing it without that jid risks two different jobs for one
//       intent.
//
//   duplicate
//       Nothing was stored: the job was pushed with Job::unique and another
//       job holds its key; `duplicate_of` is that job's jid. Pushing it
//       again is refused the same way while the holder lives (until it
//       succeeds or starts, as its UniqueUntil says, goes to dead, or is
//       discarded).
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
// kReplicated comes only from a client with ClientOptions::wait_replicas
// set (WAIT). kSpooled comes only from a client with
// ClientOptions::spool_dir: the push could not reach Redis (it would have
// been not confirmed, or refused with kIoError or kTimeout), and the job is
// on this host's disk; the client pushes it, same jid and payload, once
// Redis answers. A job that was not confirmed before it was spooled may be
// stored twice (and run twice), never not at all. With a spool, a push
// that cannot reach Redis is refused or not confirmed only when the spool
// cannot take it either (full, or a disk error): the reason then says both.
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
  // Stored, and `replicas` replicas (at least ClientOptions::wait_replicas)
  // confirmed it (WAIT).
  kReplicated,
  // Sent, but no reply came (timeout, broken connection): it may or may not
  // be stored. `reason` is the transport error. Or stored on the master but
  // not confirmed by enough replicas: `reason` is kTimeout ("only 0 of 1
  // replicas confirmed it within 1000 ms") or WAIT's error.
  kNotConfirmed,
  // Written to this host's durable spool (ClientOptions::spool_dir), on
  // disk, to be pushed later with the same jid and payload.
  kSpooled,
  // Definitely not stored; `reason` says why.
  kRefused,
  // Not stored: a unique job whose key another job holds (`duplicate_of`).
  kDuplicate,
};

struct PushResult {
  PushOutcome outcome = PushOutcome::kRefused;
  // The job's jid, whatever the outcome: the one given in Job::jid, else the
  // one the client made up (a refused job's too, so that it can be pushed
  // again under the same id).
  std::string jid;
  // kReplicated: how many replicas confirmed it; 0 otherwise.
  int replicas = 0;
  // kDuplicate: the jid of the job holding the unique key; empty otherwise.
  std::string duplicate_of;
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

// "accepted", "replicated", "not confirmed", "spooled", "refused" or
// "duplicate".
const char* PushOutcomeName(PushOutcome outcome);

}  // namespace reliableq

#endif  // RELIABLEQ_PUSH_RESULT_H_
