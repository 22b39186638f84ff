// reliableq-bench schedule: how late scheduled jobs start on an idle
// worker.
//
// Once the worker is idle, N DueJob are scheduled at times drawn uniformly
// from [now + ahead, now + ahead + spread), each pushed between
// --min-lead-ms and ahead before its time, in push-time order: pushes come
// all through the run, and a new job is often due before the ones already
// waiting. Each DueJob carries its due time and writes, when its handler
// starts, how late it started in microseconds to
// $RELIABLEQ_BENCH_LATENCY_LOG.
//
// Producers:
//   client  reliableq's Client::PushAt (and whatever wake-up it sends);
//   ruby    what Sidekiq's Ruby client sends for perform_at: a plain
//           ZADD schedule <at> <json>, with no wake-up at all, so these
//           jobs start when a look at `schedule` finds them.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
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

std::string SecondsText(double epoch_seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6f", epoch_seconds);
  return text;
}

// Sidekiq 6's scheduled payload: no enqueued_at (set when the job is
// enqueued), and the time only as the score.
std::string RubyScheduledJson(const std::string& queue, const std::string& due) {
  return "{\"class\":\"DueJob\",\"args\":[" + due + "],\"retry\":true,\"queue\":\"" + queue +
         "\",\"jid\":\"" + RandomJid() + "\",\"created_at\":" + SecondsText(EpochNow()) + "}";
}

}  // namespace

int RunSchedule(const Flags& flags) {
  Result<RedisOptions> options = OptionsFrom(flags);
  if (!options.ok()) return Fail(options.status(), "--redis");
  int64_t total = flags.Int("jobs", 1000, 1);
  std::string queue = flags.Get("queue", "default");
  auto ahead = milliseconds(flags.Int("ahead-ms", 1000, 0));
  auto min_lead = milliseconds(flags.Int("min-lead-ms", 50, 0));
  auto spread = milliseconds(flags.Int("spread-ms", 5000, 1));
  std::string producer = flags.Get("producer", "client");
  std::string record = flags.Get("record", "");
  auto timeout = std::chrono::seconds(flags.Int("timeout", 120, 1));
  Keys keys = KeysFrom(flags, *options);
  if (record.empty() || flags.command().empty()) {
    std::fputs("reliableq-bench schedule: needs --record FILE and -- WORKER COMMAND\n", stderr);
    return 2;
  }
  if (producer != "client" && producer != "ruby") {
    std::fputs("reliableq-bench schedule: --producer is client or ruby\n", stderr);
    return 2;
  }
  Result<std::unique_ptr<redis::Connection>> redis = redis::Connection::Open(*options);
  if (!redis.ok()) return Fail(redis.status(), "connect");
  Result<std::unique_ptr<Client>> client = Client::Open(*options);
  if (!client.ok()) return Fail(client.status(), "connect");
  std::remove(record.c_str());
  Progress progress;

  WorkerProcess worker;
  Status started = worker.Start(flags.command(), flags.Get("log", ""),
                                {"RELIABLEQ_BENCH_LATENCY_LOG=" + record});
  if (!started.ok()) return Fail(started, "start the worker");
  Status idle = WaitReady(redis->get(), worker, flags.Get("ready", "idle"), keys,
                          Clock::now() + timeout, progress);
  if (g_interrupted) return 130;
  if (!idle.ok()) return Fail(idle, "schedule");

  // Job i is due at first_due + U(0, spread) and is pushed U(min_lead,
  // ahead) before that: pushes arrive all through the run, while the worker
  // waits for the jobs it knows of, and a new job is often due before them.
  // A fixed seed: every run, and both builds of a --baseline run, schedule
  // the same pattern of times.
  struct Planned {
    double due;      // epoch seconds
    double push_at;  // seconds after the start
  };
  std::mt19937_64 generator(20261124);
  const double ahead_s = std::chrono::duration<double>(ahead).count();
  const double min_lead_s = std::min(ahead_s, std::chrono::duration<double>(min_lead).count());
  std::uniform_real_distribution<double> offset(0, std::chrono::duration<double>(spread).count());
  std::uniform_real_distribution<double> lead(min_lead_s, ahead_s);
  auto push_start = Clock::now();
  const double start_epoch = EpochNow();
  const double first_due = start_epoch + ahead_s;
  std::vector<Planned> plan;
  for (int64_t i = 0; i < total; ++i) {
    double due = first_due + offset(generator);
    plan.push_back({due, due - lead(generator) - start_epoch});
  }
  std::sort(plan.begin(), plan.end(),
            [](const Planned& a, const Planned& b) { return a.push_at < b.push_at; });
  // How far behind its plan the latest push was sent (a loaded machine).
  double push_lag_max = 0;
  for (const Planned& job_plan : plan) {
    if (g_interrupted) return 130;
    auto planned = push_start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(job_plan.push_at));
    std::this_thread::sleep_until(planned);
    push_lag_max = std::max(push_lag_max, Seconds(Clock::now() - planned));
    std::string due = SecondsText(job_plan.due);
    Status pushed;
    if (producer == "client") {
      Job job;
      job.job_class = "DueJob";
      job.args = "[" + due + "]";
      job.queue = queue;
      pushed = PushFailure((*client)->PushAt(job, std::stod(due)));
    } else {
      Result<redis::ReplyPtr> added =
          (*redis)->Command({"ZADD", ScheduleKey(keys), due, RubyScheduledJson(queue, due)});
      pushed = added.status();
    }
    if (!pushed.ok()) return Fail(pushed, producer == "client" ? "PushAt" : "ZADD");
  }
  double last_due = first_due + std::chrono::duration<double>(spread).count();

  std::vector<double> micros;
  while (true) {
    micros = ReadRecords(record);
    if (static_cast<int64_t>(micros.size()) >= total) break;
    if (g_interrupted) return 130;
    if (EpochNow() > last_due + 30 || !worker.Running()) {
      return Fail(Status::Timeout("only " + std::to_string(micros.size()) + " of " +
                                  std::to_string(total) + " scheduled jobs started"),
                  "schedule");
    }
    progress.Show(std::to_string(micros.size()) + "/" + std::to_string(total) +
                  " scheduled jobs started");
    std::this_thread::sleep_for(milliseconds(20));
  }
  progress.Done();
  std::optional<int> exit_status = worker.Stop(milliseconds(30000));

  std::vector<double> ms;
  int64_t early = 0;
  for (double us : micros) {
    ms.push_back(us / 1000.0);
    if (us < 0) ++early;
  }
  JsonLine()
      .Add("jobs", total)
      .Add("producer", producer)
      .Add("ahead_ms", static_cast<int64_t>(ahead.count()))
      .Add("spread_ms", static_cast<int64_t>(spread.count()))
      .Add("min_lead_ms", static_cast<int64_t>(min_lead.count()))
      .Add("push_lag_max_ms", push_lag_max * 1000)
      .AddPercentiles("", ms)
      .Add("early", early)
      .Add("worker_exit", static_cast<int64_t>(exit_status.value_or(-1)))
      .Print();
  return 0;
}

}  // namespace reliableq::bench
