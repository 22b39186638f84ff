// reliableq-bench latency: an idle worker, LatencyJob pushed at a fixed
// pace to one of its queues; the time from each job's enqueued_at to the
// start of its handler (LatencyJob writes it to $RELIABLEQ_BENCH_LATENCY_LOG).
//
// Before the pushes it also says what the idle worker costs: the Redis
// connections it holds (Redis's connected_clients before and after it
// started, and the clients carrying its CLIENT SETNAME), its RSS, and with
// --idle-seconds S the CPU time Redis spends on it over S seconds: Redis's
// CPU over S seconds with the idle worker, minus the same with no worker,
// measured once the worker has stopped. With --idle-traffic-per-sec R both
// windows carry the same steady traffic: R Sidekiq-format pushes a second
// (below) to --idle-traffic-queue, a queue the worker does not serve, from
// a connection of their own; the pushes' own cost is in both windows, so
// what is left is what that traffic costs Redis through the idle worker.
//
// Producers:
//   client   reliableq's Client::Push (push.lua, and whatever wake-up it
//            sends);
//   sidekiq  what Ruby's Sidekiq client sends: MULTI, SADD queues <q>,
//            LPUSH queue:<q> <json>, EXEC, as raw commands, so that no
//            wake-up but Redis's own keyspace notifications (if its
//            notify-keyspace-events enables them) can tell the worker.
// The result names Redis's notify-keyspace-events as it was at the end.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "worker_process.h"
#include "protocol/keys.h"
#include "redis/connection.h"
#include "redis/reply.h"
#include "reliableq/client.h"
#include "reliableq/job.h"

namespace reliableq::bench {

namespace {

// One job the way Sidekiq::Client#push stores it (Sidekiq 6: class, args,
// retry, queue, jid, created_at, enqueued_at; float epoch seconds).
Status PushLikeSidekiq(redis::Connection* redis, const std::string& job_class,
                       const std::string& queue) {
  char now[32];
  std::snprintf(now, sizeof now, "%.6f", EpochNow());
  std::string json = "{\"class\":\"" + job_class + "\",\"args\":[],\"retry\":true,\"queue\":\"" +
                     queue + "\",\"jid\":\"" + RandomJid() + "\",\"created_at\":" + now +
                     ",\"enqueued_at\":" + now + "}";
  Result<std::vector<redis::ReplyPtr>> replies = redis->Pipeline(
      {{"MULTI"}, {"SADD", QueuesKey(Keys()), queue}, {"LPUSH", Keys().Queue(queue), json}, {"EXEC"}});
  if (!replies.ok()) return replies.status();
  const redisReply* exec = replies->back().get();
  if (exec->type != REDIS_REPLY_ARRAY) {
    return Status::Protocol(
        std::string("EXEC answered ") + redis::TypeName(exec) +
        (exec->type == REDIS_REPLY_ERROR ? ": " + std::string(redis::View(exec)) : ""));
  }
  return Status::OK();
}

// Sidekiq-format pushes at a steady rate on a connection and a thread of
// their own, from construction to Stop().
class SteadyTraffic {
 public:
  SteadyTraffic(const RedisOptions& options, std::string queue, int64_t per_second)
      : options_(options), queue_(std::move(queue)), per_second_(per_second) {
    if (per_second_ > 0) thread_ = std::thread([this] { Run(); });
  }
  ~SteadyTraffic() { Stop(); }
  SteadyTraffic(const SteadyTraffic&) = delete;
  SteadyTraffic& operator=(const SteadyTraffic&) = delete;

  // Ends the pushes; the first failure, if any.
  Status Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return status_;
  }
  int64_t pushed() const { return pushed_; }

 private:
  void Run() {
    Result<std::unique_ptr<redis::Connection>> redis = redis::Connection::Open(options_);
    if (!redis.ok()) {
      status_ = redis.status();
      return;
    }
    // A fixed schedule, as the measured pushes: a slow push does not thin
    // out the traffic.
    auto every = std::chrono::microseconds(1000000 / per_second_);
    auto start = Clock::now();
    for (int64_t i = 0; !stop_ && !g_interrupted; ++i) {
      std::this_thread::sleep_until(start + i * every);
      status_ = PushLikeSidekiq(redis->get(), "NoopJob", queue_);
      if (!status_.ok()) return;
      ++pushed_;
    }
  }

  const RedisOptions options_;
  const std::string queue_;
  const int64_t per_second_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> pushed_{0};
  Status status_;
  std::thread thread_;
};

// notify-keyspace-events as Redis has it now ("?" when unreadable).
std::string NotifySetting(redis::Connection* redis) {
  Result<redis::ReplyPtr> reply = redis->Command({"CONFIG", "GET", "notify-keyspace-events"});
  if (!reply.ok() || (*reply)->type != REDIS_REPLY_ARRAY || (*reply)->elements != 2) return "?";
  return std::string(redis::View((*reply)->element[1]));
}

}  // namespace

int RunLatency(const Flags& flags) {
  Result<RedisOptions> options = OptionsFrom(flags);
  if (!options.ok()) return Fail(options.status(), "--redis");
  int64_t total = flags.Int("jobs", 1000, 1);
  auto interval = std::chrono::microseconds(flags.Int("interval-ms", 5, 0) * 1000);
  std::string queue = flags.Get("queue", "default");
  std::string producer = flags.Get("producer", "client");
  std::string record = flags.Get("record", "");
  std::string ready = flags.Get("ready", "blocked");
  int64_t idle_seconds = flags.Int("idle-seconds", 0, 0);
  int64_t traffic_per_second = flags.Int("idle-traffic-per-sec", 0, 0);
  std::string traffic_queue = flags.Get("idle-traffic-queue", "elsewhere");
  auto timeout = std::chrono::seconds(flags.Int("timeout", 120, 1));
  Keys keys = KeysFrom(flags, *options);
  if (record.empty() || flags.command().empty()) {
    std::fputs("reliableq-bench latency: needs --record FILE and -- WORKER COMMAND\n", stderr);
    return 2;
  }
  if (producer != "client" && producer != "sidekiq") {
    std::fputs("reliableq-bench latency: --producer is client or sidekiq\n", stderr);
    return 2;
  }
  Result<std::unique_ptr<redis::Connection>> redis = redis::Connection::Open(*options);
  if (!redis.ok()) return Fail(redis.status(), "connect");
  Result<std::unique_ptr<Client>> client = Client::Open(*options);
  if (!client.ok()) return Fail(client.status(), "connect");
  std::remove(record.c_str());
  Progress progress;

  // Every connection of ours is open by now: what grows from here is the
  // worker's.
  Result<ClientCount> clients_before = CountClients(redis->get(), "");
  if (!clients_before.ok()) return Fail(clients_before.status(), "INFO clients");

  WorkerProcess worker;
  Status started = worker.Start(flags.command(), flags.Get("log", ""),
                                {"RELIABLEQ_BENCH_LATENCY_LOG=" + record});
  if (!started.ok()) return Fail(started, "start the worker");
  Status idle = WaitReady(redis->get(), worker, ready, keys, Clock::now() + timeout, progress);
  if (g_interrupted) return 130;
  if (!idle.ok()) return Fail(idle, "latency");

  // A Sidekiq process has no registry entry, and so no named connections.
  Result<std::string> identity = FindIdentity(redis->get(), keys, worker.pid());
  std::string name = identity.ok() ? keys.ClientName(*identity) : "";
  Result<ClientCount> clients = CountClients(redis->get(), name);
  if (!clients.ok()) return Fail(clients.status(), "CLIENT LIST");
  Result<ProcessSample> idle_sample = worker.Sample();
  if (!idle_sample.ok()) return Fail(idle_sample.status(), "read the worker's memory");
  double idle_cpu = 0;
  double idle_worker_cpu = 0;
  int64_t traffic_pushed = 0;
  if (idle_seconds > 0) {
    progress.Show("Redis's idle CPU with the idle worker, " + std::to_string(idle_seconds) + " s",
                  true);
    SteadyTraffic traffic(*options, traffic_queue, traffic_per_second);
    double before = RedisCpuSeconds(redis->get());
    if (!SleepUnlessInterrupted(std::chrono::seconds(idle_seconds))) return 130;
    idle_cpu = RedisCpuSeconds(redis->get()) - before;
    Status traffic_ok = traffic.Stop();
    if (!traffic_ok.ok()) return Fail(traffic_ok, "idle traffic");
    traffic_pushed = traffic.pushed();
    Result<ProcessSample> after = worker.Sample();
    if (!after.ok()) return Fail(after.status(), "the worker exited while idle");
    idle_worker_cpu = after->cpu_seconds - idle_sample->cpu_seconds;
    // The RSS after a long idle stretch is the one that stays.
    idle_sample = after;
  }

  // Pushes follow a fixed schedule (start + i * interval) so that a slow
  // push does not shift every later one.
  auto start = Clock::now();
  for (int64_t i = 0; i < total; ++i) {
    if (g_interrupted) return 130;
    std::this_thread::sleep_until(start + i * interval);
    Status pushed;
    if (producer == "client") {
      Job job;
      job.job_class = "LatencyJob";
      job.queue = queue;
      pushed = PushFailure((*client)->Push(job));
    } else {
      pushed = PushLikeSidekiq(redis->get(), "LatencyJob", queue);
    }
    if (!pushed.ok()) return Fail(pushed, "push");
    progress.Show("pushed " + std::to_string(i + 1) + "/" + std::to_string(total));
  }
  std::vector<double> micros;
  auto wait_until = Clock::now() + std::chrono::seconds(30);
  while (true) {
    micros = ReadRecords(record);
    if (static_cast<int64_t>(micros.size()) >= total) break;
    if (g_interrupted) return 130;
    if (Clock::now() > wait_until || !worker.Running()) {
      return Fail(Status::Timeout("only " + std::to_string(micros.size()) + " of " +
                                  std::to_string(total) + " jobs recorded a start"),
                  "latency");
    }
    progress.Show("waiting for the last jobs to start");
    std::this_thread::sleep_for(milliseconds(20));
  }
  progress.Done();
  Result<ProcessSample> after = worker.Sample();
  std::string notify = NotifySetting(redis->get());
  std::optional<int> exit_status = worker.Stop(milliseconds(30000));
  // Redis's CPU with no worker is measured last, so that a worker that
  // fails to start fails the run at once.
  double baseline_cpu = 0;
  int64_t traffic_pushed_without = 0;
  if (idle_seconds > 0) {
    progress.Show("Redis's idle CPU with no worker, " + std::to_string(idle_seconds) + " s", true);
    SteadyTraffic traffic(*options, traffic_queue, traffic_per_second);
    double before = RedisCpuSeconds(redis->get());
    if (!SleepUnlessInterrupted(std::chrono::seconds(idle_seconds))) return 130;
    baseline_cpu = RedisCpuSeconds(redis->get()) - before;
    Status traffic_ok = traffic.Stop();
    if (!traffic_ok.ok()) return Fail(traffic_ok, "idle traffic");
    traffic_pushed_without = traffic.pushed();
    progress.Done();
  }

  std::vector<double> ms;
  for (double us : micros) ms.push_back(us / 1000.0);
  JsonLine line;
  line.Add("jobs", total)
      .Add("interval_ms", std::chrono::duration<double, std::milli>(interval).count())
      .Add("queue", queue)
      .Add("producer", producer)
      .Add("notify_keyspace_events", notify)
      .AddPercentiles("", ms)
      .Add("idle_rss_kb", idle_sample->vm_rss_kb)
      .Add("connections", clients->connected - clients_before->connected);
  if (!name.empty()) line.Add("named_connections", clients->named);
  if (idle_seconds > 0) {
    line.Add("idle_seconds", idle_seconds)
        .Add("idle_redis_cpu_ms", (idle_cpu - baseline_cpu) * 1000)
        .Add("idle_redis_cpu_with_worker_ms", idle_cpu * 1000)
        .Add("idle_redis_cpu_without_ms", baseline_cpu * 1000)
        .Add("idle_worker_cpu_ms", idle_worker_cpu * 1000);
    if (traffic_per_second > 0) {
      line.Add("idle_traffic_per_sec", traffic_per_second)
          .Add("idle_traffic_queue", traffic_queue)
          .Add("idle_traffic_pushed_with_worker", traffic_pushed)
          .Add("idle_traffic_pushed_without", traffic_pushed_without);
    }
  }
  if (after.ok()) line.Add("rss_kb", after->vm_hwm_kb);
  line.Add("worker_exit", static_cast<int64_t>(exit_status.value_or(-1))).Print();
  return 0;
}

}  // namespace reliableq::bench
