// Server: runs registered handlers for jobs taken from Redis queues with
// reliable fetch, so that no job is lost when a worker process dies.
//
//   reliableq::ServerOptions options;
//   options.redis = *reliableq::RedisOptions::FromEnvironment();
//   options.queues = {{"critical", 0}, {"default", 0}};
//   auto server = reliableq::Server::Open(options, std::move(registry));
//   if (!server.ok()) { ... }
//   reliableq::Status s = (*server)->Run();   // until Stop() or a signal
//
// What a running server does (the protocol is in reliableq-schema(7)):
// - moves each job atomically from `queue:<q>` into its own working list
//   (LMOVE, or one script for a batch) and runs it on one of `concurrency`
//   processor threads;
// - acknowledges a finished job by removing that exact payload from its
//   working list (one LREM per job, pipelined with the stats counters);
// - beats every heartbeat_interval: its heartbeat key (with heartbeat_ttl)
//   and the Sidekiq process records, so Sidekiq's Web UI and API see it;
// - about every janitor_interval returns to their queues the jobs of
//   processes whose heartbeat expired or whose connections are all gone.
//
// Thread safety: Quiet() and Stop() may be called from any thread, and from
// a signal handler (they only set an atomic and call uv_async_send), any
// number of times, from Open until the Server is destroyed. Run() may be
// called once.

#ifndef RELIABLEQ_SERVER_H_
#define RELIABLEQ_SERVER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reliableq/clock.h"
#include "reliableq/dead_set.h"
#include "reliableq/external_handler.h"
#include "reliableq/handler.h"
#include "reliableq/limits.h"
#include "reliableq/logging.h"
#include "reliableq/periodic.h"
#include "reliableq/redis_options.h"
#include "reliableq/status.h"

namespace reliableq {

// One `-q name[,weight]`. Without any weight the queues are strict: a job is
// always taken from the first non-empty queue in the order given. With
// weights, each fetch picks queue q with probability weight_q / sum.
struct QueueSpec {
  std::string name;
  int weight = 0;
};

// Wraps the execution of every job, like Sidekiq's server middleware:
// call `next()` to run the rest of the chain and the handler; an exception
// from `next()` is the job's failure, which a middleware may catch, look at,
// and rethrow (or not: then the job succeeded). Not calling `next()` skips
// the job, which then counts as done. Runs on processor threads.
using ServerMiddleware = std::function<void(const JobView& job, const std::function<void()>& next)>;

// Called for every job that goes to the dead set after failing, or that is
// dropped because its `retry` is false (Sidekiq's death handlers).
using DeathHandler = std::function<void(const JobView& job, const JobError& error)>;

// What a server does with a C++ handler still running when its job's
// timeout has passed and the grace after it (ServerOptions::on_overrun).
enum class OverrunAction {
  // Log it (job_overrun; it was counted in reliableq_jobs_timed_out_total
  // at its timeout), and let the thread run on: the job finishes when its
  // handler returns. The default, because exiting also interrupts every
  // other job of the process.
  kKeepRunning,
  // Log it and end the process at once (exit status 70): the janitor gives
  // this process's jobs back to their queues, the stuck one included, and a
  // supervisor (systemd) starts a new worker. For handlers that must never
  // run for long, where a stuck one is worth the others' retry.
  kExitProcess,
};

// A class's own retry schedule, for a class without a C++ retry_in
// (command and HTTP handlers among them): the worker's --backoff
// (reliableq(1), RETRIES). Sidekiq's jitter, rand(10) * (count + 1) seconds,
// is added to each delay, as to any custom delay.
struct Backoff {
  enum class Curve {
    kTable,        // table[count], its last entry for every later count
    kLinear,       // step * (count + 1)
    kExponential,  // step * 2^count
  };
  Curve curve = Curve::kTable;
  std::vector<double> table;  // seconds, each > 0
  double step = 0;            // seconds > 0
  double max = 0;             // seconds; 0: no bound (kLinear, kExponential)
};

// How a class's failed jobs are retried, over the defaults.
struct ClassRetry {
  std::optional<Backoff> backoff;
  // Sidekiq's retry_for, for jobs of the class that carry none of their
  // own: retried until failed_at + retry_for has passed, however many
  // retries that takes (their `retry` count is then not looked at).
  std::optional<std::chrono::seconds> retry_for;
};

// Which finished jobs keep a final record, and for how long
// (reliableq(1), JOB RECORDS; reliableq-schema(7), "Job records"): a record
// says how the job's life ended (done, dead, discarded, expired), when,
// on which process, after how many attempts, with its last error, its
// result and its arguments, and expires by its Redis TTL. Off by default:
// each record holds its job's arguments, so the memory it costs grows with
// the job rate times the retention.
struct JobRecords {
  // Every class's retention; 0: no records.
  std::chrono::seconds retention{0};
  // Per class, over `retention`; 0: none for that class.
  std::map<std::string, std::chrono::seconds, std::less<>> class_retention;
  // The most bytes of a record: a result or arguments that would make it
  // larger are left out, their size said instead.
  size_t max_bytes = 8192;

  // The retention of `job_class` (0: no record).
  std::chrono::seconds For(std::string_view job_class) const {
    auto it = class_retention.find(job_class);
    return it != class_retention.end() ? it->second : retention;
  }
  bool any() const {
    if (retention.count() > 0) return true;
    for (const auto& [name, seconds] : class_retention) {
      if (seconds.count() > 0) return true;
    }
    return false;
  }
};

struct ServerOptions {
  // Where Redis is.
  RedisOptions redis;
  // The queues to work, in order. Duplicate names are an error.
  std::vector<QueueSpec> queues = {{"default", 0}};
  // Number of processor threads, i.e. jobs run at once.
  int concurrency = 10;
  // How long TERM waits for running jobs before handing them back.
  std::chrono::milliseconds shutdown_timeout{25000};
  // Lifetime of the heartbeat key; a process silent this long is dead.
  std::chrono::milliseconds heartbeat_ttl{30000};
  // How often the process beats. Must be at most heartbeat_ttl / 2.
  std::chrono::milliseconds heartbeat_interval{5000};
  // How often, about, the workers sharing a prefix look for dead processes
  // between them (each waits this long plus up to 20% between its tries of
  // the lease; see reliableq-schema(7)). A process that crashed (all its
  // connections closed) is recovered within about 1.2 times this; one that
  // went silent, within heartbeat_ttl plus that. A pass costs a handful of
  // Redis commands plus one per registered process.
  std::chrono::milliseconds janitor_interval{1000};
  // A job whose process died while running it more than this many times
  // goes to the dead set instead of back to its queue.
  int max_interruptions = 3;
  // The retries of a job whose `retry` is true (Sidekiq's max_retries).
  int max_retries = 25;
  // The most times a job may snooze (JobSnooze, a command handler's
  // "snooze", an HTTP Retry-After) before a snooze fails it instead; a
  // class may set its own (JobClassOptions::max_snoozes).
  int max_snoozes = 100;
  // Per class: its backoff and retry_for (--backoff, --retry-for).
  std::map<std::string, ClassRetry, std::less<>> class_retries;
  // Final records of finished jobs (--records, --record).
  JobRecords records;
  // The dead set keeps at most dead_set.max_jobs jobs (Sidekiq's
  // dead_max_jobs; the trim leaves one fewer), none older than
  // dead_set.timeout (dead_timeout_in_seconds).
  DeadSetLimits dead_set;
  // The fallback of the scheduled-job poller. Each worker sleeps until the
  // earliest score of `schedule` and `retry` and is woken when an earlier
  // one is announced, so jobs scheduled through Client::PushAt/PushIn and
  // retries start at their time whatever this is. When nothing is
  // announced (a Ruby client without keyspace notifications) the whole
  // cluster still reads the earliest scores about this often: each process
  // waits (number of processes x this), uniformly in [0.5, 1.5) of that, so
  // such a job is late by at most 1.5 x processes x this (Sidekiq's
  // average_scheduled_poll_interval is 5 s). reliableq-schema(7), promote.lua.
  std::chrono::milliseconds scheduled_poll_interval{500};
  // The randomness of retry jitter: a uniform integer in [0, n). Empty: a
  // generator per thread seeded from std::random_device. Set it to make
  // retry times predictable (tests). Called on processor threads.
  std::function<int(int n)> random_below;
  // Outermost first.
  std::vector<ServerMiddleware> middleware;
  std::vector<DeathHandler> death_handlers;
  // Sidekiq's tag and labels, shown in the Web UI.
  std::string tag;
  std::vector<std::string> labels;
  // Prefix of reliableq's own keys (working lists, heartbeats, registry).
  std::string prefix = "reliableq:";
  // How often an idle worker looks at its queues when nothing tells it of
  // a push: jobs a Ruby client pushes while the server's
  // notify-keyspace-events lacks K and l (keyspace notifications for
  // lists) start within about this long. With them on, or for jobs pushed
  // by reliableq's client, a pub/sub message wakes the worker at once and
  // this look runs only every heartbeat_interval, as a safety net.
  std::chrono::milliseconds idle_poll_interval{100};
  // Install handlers on the server's loop for TERM and INT (stop), TSTP and
  // USR1 (quiet), TTIN (dump state), HUP (reload) and USR2 (reopen logs);
  // reliableq(1) says what each does. Off by default for embedding programs.
  bool handle_signals = false;
  // Messages at this level and above go to log_sink.
  LogLevel log_level = LogLevel::kInfo;
  // Where this server's log lines go; empty: stderr (see logging.h).
  LogSink log_sink;
  // Text in Sidekiq's shape, or one JSON object a line (logging.h;
  // reliableq(1), LOGS).
  LogFormat log_format = LogFormat::kText;
  // Where the worker serves its metrics and health over HTTP: "PORT"
  // (127.0.0.1, loopback only), "HOST:PORT" or "[IPV6]:PORT" (that address;
  // "0.0.0.0:PORT" for every interface). Empty: no endpoint, and no cost.
  // GET /metrics answers in Prometheus's text format; GET /healthz answers
  // 200 "ok" while the event loop turns and Redis answered within
  // heartbeat_ttl, else 503 with the reason (reliableq(1), METRICS). Port 0
  // asks the system for a free port (the log names it). An address that does
  // not parse fails Open with kInvalidArgument, one that cannot be bound (a
  // port in use) with kIoError; both name the address.
  std::string http_address;
  // Job classes run by programs and URLs (external_handler.h). The key "*"
  // stands for every class with no other handler. A class may have one
  // handler only: in the registry, here, or in http_handlers.
  std::map<std::string, CommandHandler, std::less<>> command_handlers;
  std::map<std::string, HttpHandler, std::less<>> http_handlers;
  // The command handlers' environment, besides the job's RELIABLEQ_*
  // variables: "NAME=VALUE", or "NAME" for this process's value of NAME.
  // Nothing else of this process's environment reaches them; PATH is
  // /usr/local/bin:/usr/bin:/bin unless given here.
  std::vector<std::string> handler_environment;
  // How long a job may run, by class; "*": every class with no timeout of
  // its own (JobClassOptions::timeout). A job's `timeout` field (seconds)
  // wins over both. No entry: no timeout. reliableq(1), TIMEOUTS.
  std::map<std::string, std::chrono::milliseconds, std::less<>> job_timeouts;
  // At its timeout a command handler's process group gets SIGTERM, and
  // SIGKILL this much later; a C++ handler is asked to stop (JobView's
  // stop_token), and one still running this much later has overrun.
  std::chrono::milliseconds kill_grace{5000};
  // Concurrency and rate limits across every worker of the Redis
  // (limits.h; reliableq(1), LIMITS). Empty: none, and no job is looked
  // at before it starts.
  std::vector<Limit> limits;
  OverrunAction on_overrun = OverrunAction::kKeepRunning;
  // Where the server reads the time (see clock.h); empty: SystemClock().
  // Job timestamps, retry and schedule times, the dated stats, and the
  // deadlines inside the process (the shutdown timeout, the 10 s the
  // hand-back at stop keeps trying, the heartbeat lease that lets jobs
  // start) follow it; the loop's timers run on real time, so a clock that
  // stands still also stops those deadlines.
  std::shared_ptr<const Clock> clock;

  // Periodic jobs this worker pushes on their cron ticks, with every other
  // worker that declares them: exactly one push per tick across them all
  // (periodic.h; reliableq(1), "PERIODIC JOBS"). Names must be distinct;
  // each declaration must pass CheckPeriodicJob. Empty: no scheduler runs.
  std::vector<PeriodicJob> periodic_jobs;
};

class Server {
 public:
  // Checks the options, connects to Redis and loads the scripts. Fails with
  // kInvalidArgument for bad options (the message names the option) and
  // kIoError/kTimeout when Redis is unreachable. `registry` may be empty
  // (jobs of unknown classes then fail), but that is usually a mistake.
  static Result<std::unique_ptr<Server>> Open(const ServerOptions& options,
                                              HandlerRegistry registry);

  virtual ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Runs on the calling thread until the server has stopped: after Stop()
  // (or TERM/INT) and the hand-back of unfinished jobs. Failures while it
  // runs (Redis down or refusing a command, a script error) are logged and
  // retried, since jobs are safe in Redis meanwhile; they are not fatal.
  // Returns OK after a stop that handed every job back and unregistered
  // the process. Otherwise the first fatal error: kIoError when the
  // hand-back could not finish within 10 s (Redis unreachable, or refusing
  // it); the jobs then stay in this process's working lists, and a janitor
  // returns them once its heartbeat expires.
  //
  // After a hard stop (the shutdown timeout, or a second Stop) Run returns
  // without waiting for handlers that are still running: their jobs are
  // already back in their queues, and their threads are detached. They
  // keep what the server gave them (the registry, middleware, hooks, the
  // log sink and the clock) alive until they finish, but anything else a
  // handler uses must outlive them: after Run returns from a hard stop, a
  // program should exit rather than unload the code of its handlers.
  virtual Status Run() = 0;

  // Stops fetching; jobs fetched but not started go back to their queues;
  // running jobs finish. The process keeps beating with quiet=true.
  virtual void Quiet() = 0;

  // Quiet, then wait up to shutdown_timeout for running jobs, then hand the
  // rest back and make Run() return. A second call stops at once (jobs still
  // go back first).
  virtual void Stop() = 0;

  // This process's identity: "<hostname>:<pid>:<12 hex>".
  virtual const std::string& identity() const = 0;

 protected:
  Server() = default;
};

}  // namespace reliableq

#endif  // RELIABLEQ_SERVER_H_
