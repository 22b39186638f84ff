// reliableq-bench recovery: how long the jobs of a crashed worker stay
// away from their queue.
//
// N long SleepJob are pushed to one queue. An idle worker that serves
// another queue starts first and stays up, so that a janitor runs; then
// the worker under test starts (with a concurrency of at least N), takes
// all N jobs into its working list and starts them. Once Redis has been up
// for --min-redis-uptime seconds (tools/bench kills on a Redis up for 31 s,
// longer than the heartbeat TTL, and on one it started 5 s before), it is
// killed with SIGKILL, and Redis is polled every --poll-ms until all N jobs are
// back in the queue and its working list is empty, for at most
// --cap-seconds. The idle worker serves another queue so that a recovered
// job stays in the queue where the poll sees it.
//
// The command line holds both workers: `-- WORKER... -- IDLE WORKER...`.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "queue_watch.h"
#include "worker_process.h"
#include "protocol/keys.h"
#include "redis/connection.h"
#include "redis/reply.h"
#include "reliableq/client.h"
#include "reliableq/job.h"

namespace reliableq::bench {

namespace {

// LLEN of the queue and of the killed worker's working list, in one round
// trip.
struct Lengths {
  int64_t queued = 0;
  int64_t working = 0;
};

Result<Lengths> ReadLengths(redis::Connection* redis, const std::string& queue_key,
                            const std::string& working_key) {
  Result<std::vector<redis::ReplyPtr>> replies =
      redis->Pipeline({{"LLEN", queue_key}, {"LLEN", working_key}});
  if (!replies.ok()) return replies.status();
  Result<int64_t> queued = redis::ToInteger((*replies)[0].get());
  Result<int64_t> working = redis::ToInteger((*replies)[1].get());
  if (!queued.ok()) return queued.status();
  if (!working.ok()) return working.status();
  return Lengths{*queued, *working};
}

}  // namespace

int RunRecovery(const Flags& flags) {
  Result<RedisOptions> options = OptionsFrom(flags);
  if (!options.ok()) return Fail(options.status(), "--redis");
  int64_t jobs = flags.Int("jobs", 10, 1);
  std::string queue = flags.Get("queue", "recovery");
  // Far longer than any wait here: the jobs are still running when killed.
  int64_t sleep_ms = flags.Int("sleep-ms", 600000, 1);
  auto cap = std::chrono::seconds(flags.Int("cap-seconds", 60, 1));
  auto poll = milliseconds(flags.Int("poll-ms", 10, 1));
  int64_t min_uptime = flags.Int("min-redis-uptime", 0, 0);
  std::string log = flags.Get("log", "");
  Keys keys = KeysFrom(flags, *options);
  const std::vector<std::string>& all = flags.command();
  auto split = std::find(all.begin(), all.end(), "--");
  std::vector<std::string> killed_command(all.begin(), split);
  std::vector<std::string> idle_command(split == all.end() ? split : split + 1, all.end());
  if (killed_command.empty() || idle_command.empty()) {
    std::fputs("reliableq-bench recovery: needs -- WORKER COMMAND -- IDLE WORKER COMMAND\n",
               stderr);
    return 2;
  }
  Result<std::unique_ptr<redis::Connection>> redis = redis::Connection::Open(*options);
  if (!redis.ok()) return Fail(redis.status(), "connect");
  Result<std::unique_ptr<Client>> client = Client::Open(*options);
  if (!client.ok()) return Fail(client.status(), "connect");
  Progress progress;

  std::vector<Job> sleepers(static_cast<size_t>(jobs));
  for (Job& job : sleepers) {
    job.job_class = "SleepJob";
    job.args = "[" + std::to_string(sleep_ms) + "]";
    job.queue = queue;
  }
  Status pushed = PushFailure((*client)->PushBulk(sleepers));
  if (!pushed.ok()) return Fail(pushed, "PushBulk");

  auto deadline = Clock::now() + std::chrono::seconds(60);
  WorkerProcess idle;
  Status started = idle.Start(idle_command, log, {});
  if (!started.ok()) return Fail(started, "start the idle worker");
  while (!FindIdentity(redis->get(), keys, idle.pid()).ok()) {
    if (g_interrupted) return 130;
    if (!idle.Running() || Clock::now() > deadline) {
      return Fail(Status::Timeout("the idle worker did not register (see its log)"), "recovery");
    }
    progress.Show("waiting for the idle worker to register");
    std::this_thread::sleep_for(milliseconds(10));
  }

  WorkerProcess worker;
  started = worker.Start(killed_command, log, {});
  if (!started.ok()) return Fail(started, "start the worker");
  std::string working_key;
  std::string heartbeat_key;
  while (true) {
    if (g_interrupted) return 130;
    if (!worker.Running() || Clock::now() > deadline) {
      return Fail(Status::Timeout("the worker did not take all jobs (see its log)"), "recovery");
    }
    Result<std::string> identity = FindIdentity(redis->get(), keys, worker.pid());
    if (identity.ok()) {
      working_key = keys.Working(*identity, queue);
      heartbeat_key = keys.Heartbeat(*identity);
      Result<Lengths> lengths = ReadLengths(redis->get(), keys.Queue(queue), working_key);
      if (!lengths.ok()) return Fail(lengths.status(), "LLEN");
      if (lengths->queued == 0 && lengths->working == jobs) break;
    }
    progress.Show("waiting for the worker to take every job");
    std::this_thread::sleep_for(milliseconds(10));
  }
  // A fetched job starts at once on a free thread; this leaves time for the
  // last of them.
  std::this_thread::sleep_for(milliseconds(300));
  // Steps of 20 ms: a kill that waited is within about that of the second
  // Redis's uptime reaches --min-redis-uptime (INFO counts whole seconds).
  double waited_for_uptime = 0;
  double uptime_at_kill = 0;
  while (true) {
    Result<double> uptime = ReadInfoField(redis->get(), "server", "uptime_in_seconds");
    if (!uptime.ok()) return Fail(uptime.status(), "INFO server");
    uptime_at_kill = *uptime;
    if (*uptime >= static_cast<double>(min_uptime)) break;
    progress.Show("waiting until Redis has been up " + std::to_string(min_uptime) + " s");
    if (!SleepUnlessInterrupted(milliseconds(20))) return 130;
    waited_for_uptime += 0.02;
  }
  Result<redis::ReplyPtr> ttl = (*redis)->Command({"PTTL", heartbeat_key});
  if (!ttl.ok()) return Fail(ttl.status(), "PTTL");

  auto killed_at = Clock::now();
  std::optional<int> killed_exit = worker.Kill();
  std::optional<Clock::duration> first_back;
  std::optional<Clock::duration> all_back;
  Lengths last;
  while (Clock::now() - killed_at <= cap) {
    if (g_interrupted) return 130;
    Result<Lengths> lengths = ReadLengths(redis->get(), keys.Queue(queue), working_key);
    auto now = Clock::now();
    if (!lengths.ok()) return Fail(lengths.status(), "LLEN");
    last = *lengths;
    if (!first_back && last.queued > 0) first_back = now - killed_at;
    if (last.queued == jobs && last.working == 0) {
      all_back = now - killed_at;
      break;
    }
    progress.Show(std::to_string(last.queued) + " of " + std::to_string(jobs) +
                  " jobs back in the queue");
    std::this_thread::sleep_for(poll);
  }
  progress.Done();
  std::optional<int> idle_exit = idle.Stop(milliseconds(30000));

  JsonLine line;
  line.Add("jobs", jobs)
      .Add("cap_seconds", static_cast<int64_t>(cap.count()))
      .Add("poll_ms", static_cast<int64_t>(poll.count()))
      .AddBool("recovered", all_back.has_value());
  if (all_back) line.Add("seconds", Seconds(*all_back));
  if (first_back) line.Add("first_back_seconds", Seconds(*first_back));
  line.Add("back", last.queued)
      .Add("heartbeat_ttl_left_ms",
           static_cast<int64_t>((*ttl)->type == REDIS_REPLY_INTEGER ? (*ttl)->integer : -1))
      .Add("waited_for_redis_uptime_seconds", waited_for_uptime)
      .Add("min_redis_uptime_seconds", min_uptime)
      .Add("redis_uptime_at_kill_seconds", uptime_at_kill)
      .Add("killed_exit", static_cast<int64_t>(killed_exit.value_or(-1)))
      .Add("worker_exit", static_cast<int64_t>(idle_exit.value_or(-1)))
      .Print();
  return 0;
}

}  // namespace reliableq::bench
