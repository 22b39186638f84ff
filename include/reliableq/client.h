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
//     Redis answered with an error        kRefused, reason as Redis said it
//                                         (kScript; kIoError for LOADING or
//                                         READONLY, kTimeout for BUSY)
//     could not connect or send           kRefused, reason kIoError/kTimeout
//     sent, and the reply was lost        kNotConfirmed, reason the transport
//                                         error: it may or may not be stored
//     a client middleware stopped it      kRefused, reason kRefused
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
};

class Client {
 public:
  // Connects (within options.connect_timeout). Fails with kIoError or
  // kTimeout naming where it tried.
  //
  // Side effect: if SIGPIPE still has its default action, it is set to
  // ignored. The connection writes with write(2), and a write to a socket
  // the server has closed would otherwise end the whole program instead of
  // failing the call with kIoError. A SIGPIPE handler the program installed
  // itself is left alone.
  static Result<std::unique_ptr<Client>> Open(const RedisOptions& options,
                                              ClientOptions client_options = {});

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
  // outcome. After the first batch that is not accepted, no further batch
  // is sent: their jobs are kRefused with the reason "not sent: an earlier
  // batch was <outcome>: <its reason>", keeping that reason's code. A job a
  // middleware stopped is kRefused with reason kRefused, wherever it is.
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
