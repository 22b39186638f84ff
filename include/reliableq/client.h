// Client: pushes jobs into Redis, the way Sidekiq::Client does.
//
//   auto client = reliableq::Client::Open(*reliableq::RedisOptions::FromEnvironment());
//   if (!client.ok()) { ...client.status().ToString()... }
//   reliableq::Job job;
//   job.job_class = "HardJob";
//   job.args = R"([1,"bob"])";
//   reliableq::Result<reliableq::PushResult> pushed = (*client)->Push(job);
//   if (!pushed.ok()) { ...invalid input: pushed.status()... }
//   else if (pushed->stored()) { ...done: pushed->jid... }
//   else if (pushed->outcome == reliableq::PushOutcome::kNotConfirmed) {
//     job.jid = pushed->jid;  // may exist: push again only under the same jid
//   } else { ...refused: nothing stored, pushed->reason says why... }
//
// An immediate push is `SADD queues <q>` and `LPUSH queue:<q> <json>` in one
// script (push.lua), all or nothing, so a job is in its queue and its queue
// is listed, or neither: a push Redis answers with an error (say, WRONGTYPE
// naming the key at fault) wrote nothing. A scheduled push is
// `ZADD schedule <at> <json>` in one script (schedule.lua). Both wake idle
// workers: a push that finds its queue empty, or a scheduled job that is
// due before every other, publishes a wake-up signal (reliableq-schema(7)).
//
// What a push reports, in two layers:
// - The Result's error Status is only kInvalidArgument, for invalid input
//   (empty class or queue, args that are not a JSON array, extra that is not
//   a JSON object, a time that is not finite). Nothing was attempted.
// - Everything that happens once a push is attempted is a PushResult (see
//   push_result.h for what the caller may do after each outcome):
//     stored                              kAccepted, with the jid
//     stored, and wait_replicas replicas  kReplicated, with their count
//     confirmed it (WAIT)
//     stored, fewer replicas confirmed    kNotConfirmed, reason kTimeout
//     it in time, or WAIT failed          ("only 0 of 1 replicas ..."), or
//                                         WAIT's error: it may be lost in a
//                                         failover
//     Redis answered with an error        kRefused, reason as Redis said it
//                                         (kScript; kIoError for LOADING or
//                                         READONLY, kTimeout for BUSY)
//     could not connect or send           kRefused, reason kIoError/kTimeout
//     sent, and the reply was lost        kNotConfirmed, reason the transport
//                                         error: it may or may not be stored
//     a client middleware stopped it      kRefused, reason kRefused
//     with spool_dir: could not reach     kSpooled, once on disk (see
//     Redis (kNotConfirmed, or kRefused   ClientOptions::spool_dir)
//     with kIoError/kTimeout)
//
// A lost reply is never resent by the client: a retry belongs to the caller,
// who pushes again under the same jid.
//
// Thread safety: a Client is safe to use from many threads at once, on one
// connection. Calls made at the same time share round trips (automatic
// pipelining): the calls that wait while one round trip is under way go
// together in the next one, each still its own script call with its own
// PushResult. A call blocks its thread until its own reply is read.

#ifndef RELIABLEQ_CLIENT_H_
#define RELIABLEQ_CLIENT_H_

#include <rapidjson/document.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "reliableq/clock.h"
#include "reliableq/job.h"
#include "reliableq/push_result.h"
#include "reliableq/redis_options.h"
#include "reliableq/status.h"

namespace reliableq {

// Sidekiq's client middleware: called in the order added, with the job JSON
// as it is about to be stored, before every push (immediate, scheduled or
// bulk). It may change any field, the queue and jid included. Return false
// to stop the push: nothing is written, and that job's PushResult is
// kRefused with reason kRefused ("stopped by client middleware") and the jid
// the job had when it was stopped (the one given or made up, or as an
// earlier middleware changed it; never empty). A job a middleware leaves
// without a string class, an array args or a non-empty queue is
// kInvalidArgument. Called on the pushing thread.
using ClientMiddleware = std::function<bool(rapidjson::Document& job)>;

struct ClientOptions {
  std::vector<ClientMiddleware> middleware;
  // Where created_at, enqueued_at and "now" for PushIn/PushAt come from;
  // empty: SystemClock().
  std::shared_ptr<const Clock> clock;
  // The prefix of reliableq's own keys, as in ServerOptions: the wake-up
  // signals go to the channels the workers of that prefix listen to.
  std::string prefix = "reliableq:";
  // Sequences switched on by class or by queue (reliableq(1), SEQUENCES):
  // a job pushed without Job::sequence whose class is in sequence_classes
  // gets the key "class:<class>", one whose queue is in sequence_queues
  // "queue:<queue>" (the class wins), so that every job of that class, or
  // every job of that queue, runs one at a time in push order. Checked at
  // Open (kInvalidArgument for an empty name).
  std::vector<std::string> sequence_classes;
  std::vector<std::string> sequence_queues;
  // Replica acknowledgement. 0 (the default): a push is kAccepted once the
  // master stored it, and asynchronous replication may lose it in a
  // failover. N > 0: every round trip of the client (one group of calls,
  // see "Thread safety" above; one batch of a bulk push) ends with one
  // `WAIT N wait_timeout`, and each push in it that Redis stored is
  // kReplicated, with `replicas` set to WAIT's count, once WAIT reports at
  // least N replicas have it; otherwise it is kNotConfirmed: stored on the
  // master but confirmed by fewer replicas within wait_timeout (or WAIT
  // failed, say on a managed Redis that refuses it), so a failover may lose
  // it: push it again under the same jid. Which N survives what under
  // Sentinel: reliableq-schema(7), "Replica acknowledgement". Negative is
  // kInvalidArgument at Open.
  int wait_replicas = 0;
  // How long WAIT waits for the replicas: more than 0 (kInvalidArgument at
  // Open otherwise; WAIT 0 would wait forever). With wait_replicas > 0 the
  // connection's command_timeout is lengthened by this much, so that a WAIT
  // that waits is not taken for a Redis that stopped answering.
  std::chrono::milliseconds wait_timeout{1000};
  // The durable spool. Empty (the default): none. A directory: a push
  // (Push, PushAt, PushIn, each batch of PushBulk) that cannot reach Redis
  // is written to a journal file there, on disk (fdatasync) before it
  // returns, and is kSpooled with its jid; a thread of the Client pushes
  // it to Redis (the same jid and payload, with the same script) as soon as
  // Redis answers. "Cannot reach" means: a kNotConfirmed push, and a push
  // kRefused with reason kIoError or kTimeout (no connection, a timeout,
  // LOADING, READONLY, MASTERDOWN, BUSY, ...). Never spooled: a push Redis
  // refused with an error that is the job's or the data's fault (kScript,
  // say WRONGTYPE at its queue's key), a push a middleware stopped, and
  // invalid input: those would be refused again. After one push found Redis
  // unreachable, later pushes go straight to the spool, without trying
  // Redis, until the spool's thread has seen Redis answer (it tries every
  // 100 ms to 1 s): an outage costs the producer one timeout, not one per
  // push. The directory is created if missing; Open fails (kIoError) when
  // it cannot be created or written. With a spool, Open does not need Redis
  // to be up.
  //
  // The Client also drains the journals that Clients that are gone left in
  // the directory (a crash, or Redis away until they were destroyed), those
  // of its own keyspace only: each journal records the prefix and the queue
  // group (RedisOptions::group) it was written for, and a journal of another
  // is left to Clients of that one (spool.h). Any number of processes may
  // share the directory: each writes its own file, locked while it lives.
  // Use a local filesystem (flock), and one directory per Redis deployment:
  // the address is not recorded (a spool outlives a failover or a new
  // address), so a drain pushes to the Redis of whoever drains. What a
  // drain does with a job already in Redis or one Redis refuses: spool.h.
  //
  // A push that was not confirmed may have landed, or may still land: a
  // send that sits unanswered in a stalled Redis's socket buffer is run
  // when Redis resumes, whatever became of its sender. So with a spool,
  // every push of the Client (Push, PushAt, PushIn, PushBulk) and of every
  // drain records in Redis that its jid was stored, in the same script as
  // the push, and a push of a jid recorded within spool_replay_window is a
  // no-op that reports success: the spool's pushes run a job once however
  // often they are sent, unless a send comes later than that
  // (reliableq-schema(7), "Client spool"). A Client without a spool pushes
  // without the record.
  std::string spool_dir;
  // With spool_dir: how long the record of each pushed jid lives in Redis,
  // whole seconds, at least 1 (kInvalidArgument at Open otherwise). A push
  // sent again after it expired (a journal drained more than this after its
  // push ran) stores the job a second time. The default, an hour, outlasts
  // every automatic resend (a live drainer resends within seconds of Redis
  // answering; another client of the directory at its start or within its
  // next 2 s scan) with room for a person to run `reliableq spool drain`
  // after an incident. Each record costs Redis about 130 bytes (key, value
  // and expiry; the default prefix and a 24-digit jid) for the whole
  // window: lower it for a client that pushes thousands of jobs a second
  // (an hour at 1,000 a second keeps 3.6 million records, about 470 MB).
  std::chrono::seconds spool_replay_window{3600};
  // The most bytes the files of spool_dir may take, all processes' files
  // together (others' as last listed, at most a second ago). A push that
  // would go over is not spooled: it keeps the outcome it had (kRefused, or
  // kNotConfirmed when it may have landed), with the reason "spool DIR is
  // full: N bytes of M" (kIoError).
  uint64_t spool_max_bytes = uint64_t{1} << 30;
};

class Client {
 public:
  // Connects (within options.connect_timeout). Fails with kIoError or
  // kTimeout naming where it tried. With ClientOptions::spool_dir it does
  // not connect (the first push does) and does not fail for Redis: it
  // creates the directory and starts the spool's thread, and fails only
  // when the directory cannot be used (kIoError naming it) or for invalid
  // options (kInvalidArgument).
  //
  // Side effect: if SIGPIPE still has its default action, it is set to
  // ignored. The connection writes with write(2), and a write to a socket
  // the server has closed would otherwise end the whole program instead of
  // failing the call with kIoError. A SIGPIPE handler the program installed
  // itself is left alone.
  static Result<std::unique_ptr<Client>> Open(const RedisOptions& options,
                                              ClientOptions client_options = {});

  // With a spool, stops its thread (between two round trips; one under way
  // ends within the connection's timeouts). Jobs still spooled stay in the
  // directory, for the next Client (or `reliableq spool drain`) to push.
  virtual ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Pushes one job for immediate execution. Returns kInvalidArgument for
  // invalid input (nothing attempted); otherwise the PushResult, whatever
  // became of the push (see the top of this file and push_result.h).
  virtual Result<PushResult> Push(const Job& job) = 0;

  // Pushes many jobs: one PushResult per job, in input order. Every job is
  // validated (and passed through the middleware) before anything is sent;
  // invalid input anywhere is kInvalidArgument, naming the job's index, and
  // nothing is sent.
  //
  // The jobs go in batches of up to 1,000 jobs, each one push.lua call in
  // one round trip, all or nothing; every job of a batch gets that batch's
  // outcome (with wait_replicas, each batch ends with its own WAIT). After
  // the first batch that is not stored (accepted or replicated), no further
  // batch is sent: their jobs are kRefused with the reason "not sent: an
  // earlier batch was <outcome>: <its reason>", keeping that reason's code.
  // A job a middleware stopped is kRefused with reason kRefused, wherever it
  // is.
  virtual Result<std::vector<PushResult>> PushBulk(const std::vector<Job>& jobs) = 0;

  // Schedules a job to run at `epoch_seconds` (ZADD schedule). A time that
  // is not in the future pushes it now, as Sidekiq does. Reports as Push
  // does; a time that is not finite is kInvalidArgument.
  virtual Result<PushResult> PushAt(const Job& job, double epoch_seconds) = 0;

  // Schedules a job to run `seconds` from now, as PushAt.
  virtual Result<PushResult> PushIn(const Job& job, double seconds) = 0;

 protected:
  Client() = default;
};

}  // namespace reliableq

#endif  // RELIABLEQ_CLIENT_H_
