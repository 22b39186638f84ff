// Client: pushes jobs into Redis, the way Sidekiq::Client does.
//
//   auto client = reliableq::Client::Open(*reliableq::RedisOptions::FromEnvironment());
//   if (!client.ok()) { ...client.status().ToString()... }
//   reliableq::Job job;
//   job.job_class = "HardJob";
//   job.args = R"([1,"bob"])";
//   auto jid = (*client)->Push(job);
//
// An immediate push is `SADD queues <q>` and `LPUSH queue:<q> <json>` in one
// script (push.lua) that checks both keys' types first, so a job is in its
// queue and its queue is listed, or neither: a push that fails (say, with
// WRONGTYPE naming the key at fault) wrote nothing and may be retried. A
// scheduled push is `ZADD schedule <at> <json>`.
//
// Invalid input (empty class or queue, args that are not a JSON array, extra
// that is not a JSON object) is kInvalidArgument and writes nothing. A push
// whose reply is lost to a broken connection is reported as kIoError or
// kTimeout; it may or may not have been stored (as with any network client).
//
// Thread safety: a Client is safe to use from many threads at once; calls
// are serialized on one connection. Open several clients for parallel pushes.

#ifndef RELIABLEQ_CLIENT_H_
#define RELIABLEQ_CLIENT_H_

#include <rapidjson/document.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "reliableq/clock.h"
#include "reliableq/job.h"
#include "reliableq/redis_options.h"
#include "reliableq/status.h"

namespace reliableq {

// Sidekiq's client middleware: called in the order added, with the job JSON
// as it is about to be stored, before every push (immediate, scheduled or
// bulk). It may change any field, the queue included. Return false to stop
// the push: nothing is written, and Push/PushAt/PushIn return an empty jid
// (PushBulk an empty jid in that job's place). A job a middleware leaves
// without a string class, an array args or a non-empty queue is
// kInvalidArgument. Called on the pushing thread.
using ClientMiddleware = std::function<bool(rapidjson::Document& job)>;

struct ClientOptions {
  std::vector<ClientMiddleware> middleware;
  // Where created_at, enqueued_at and "now" for PushIn/PushAt come from;
  // empty: SystemClock().
  std::shared_ptr<const Clock> clock;
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

  // Pushes one job for immediate execution. Returns its jid.
  virtual Result<std::string> Push(const Job& job) = 0;

  // Pushes many jobs; each batch of up to 1,000 jobs is one push.lua call
  // in one round trip, all or nothing. Returns the jids in input order. Every job is validated
  // before anything is written; a batch that fails leaves earlier batches
  // written (the error says how many jobs were pushed).
  virtual Result<std::vector<std::string>> PushBulk(const std::vector<Job>& jobs) = 0;

  // Schedules a job to run at `epoch_seconds` (ZADD schedule). A time that
  // is not in the future pushes it now, as Sidekiq does.
  virtual Result<std::string> PushAt(const Job& job, double epoch_seconds) = 0;

  // Schedules a job to run `seconds` from now.
  virtual Result<std::string> PushIn(const Job& job, double seconds) = 0;

 protected:
  Client() = default;
};

}  // namespace reliableq

#endif  // RELIABLEQ_CLIENT_H_
