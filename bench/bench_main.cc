// reliableq-bench: the load generator behind tools/bench. It pushes jobs,
// starts worker programs, watches Redis while they work, and prints one
// JSON object with what it measured. All timing of the benchmark happens
// here; tools/bench only orchestrates the runs.
//
//   reliableq-bench push     --redis URL --jobs N [--queues a,b] [--class C]
//                            [--single --threads T [--shared-client] [--unique]]
//                            [--wait-replicas N [--wait-timeout MS]] [--sequence-keys K]
//   reliableq-bench drain    --redis URL [--queues a,b] [--done-key K] [--until-gone K]
//                            [--log FILE]
//                            -- WORKER...
//   reliableq-bench latency  --redis URL [--jobs N] [--interval-ms MS] [--queue Q]
//                            [--producer client|sidekiq] [--idle-seconds S]
//                            [--idle-traffic-per-sec R [--idle-traffic-queue Q]]
//                            [--ready blocked|registered|idle] --record FILE
//                            [--log FILE] -- WORKER...
//   reliableq-bench recovery --redis URL [--jobs N] [--queue Q] [--cap-seconds S]
//                            [--min-redis-uptime S] [--log FILE]
//                            -- WORKER... -- IDLE WORKER...
//   reliableq-bench schedule --redis URL [--jobs N] [--ahead-ms MS] [--spread-ms MS]
//                            [--min-lead-ms MS] [--producer client|ruby]
//                            --record FILE [--log FILE] -- WORKER...
//   reliableq-bench http-sink
//
// http-sink answers 200 to every POST /jobs on a free port of 127.0.0.1,
// which it prints, until TERM: the local server of the HTTP handlers' rate.
//
// Progress goes to stderr, the result to stdout. Exit status 0 on success,
// 1 on a failed run, 2 on bad usage, 130 when interrupted.

#include <signal.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "queue_watch.h"
#include "worker_process.h"
#include "http/listener.h"
#include "protocol/keys.h"
#include "redis/connection.h"
#include "redis/reply.h"
#include "reliableq/client.h"
#include "reliableq/job.h"
#include "reliableq/redis_options.h"

// The HTTP layer's classes are in reliableq::http, in older revisions in
// reliableq itself: named unqualified, they are found in either (see
// meson.build on building against older revisions).
namespace reliableq::http {}

namespace reliableq::bench {

using namespace reliableq::http;

namespace {

constexpr const char kUsage[] =
    "usage: reliableq-bench push     --redis URL --jobs N [--queues Q1,Q2...] [--class CLASS]\n"
    "                                [--single --threads T [--shared-client] [--unique]]\n"
    "                                [--wait-replicas N [--wait-timeout MS]] [--sequence-keys K]\n"
    "       reliableq-bench drain    --redis URL [--queues Q1,Q2...] [--poll-us US]\n"
    "                                [--done-key KEY] [--until-gone KEY] [--timeout SEC]\n"
    "                                [--log FILE]\n"
    "                                -- WORKER COMMAND...\n"
    "       reliableq-bench latency  --redis URL [--jobs N] [--interval-ms MS] [--queue Q]\n"
    "                                [--producer client|sidekiq] [--idle-seconds S]\n"
    "                                [--idle-traffic-per-sec R [--idle-traffic-queue Q]]\n"
    "                                [--ready blocked|registered|idle] --record FILE\n"
    "                                [--timeout SEC] [--log FILE]\n"
    "                                -- WORKER COMMAND...\n"
    "       reliableq-bench recovery --redis URL [--jobs N] [--queue Q] [--sleep-ms MS]\n"
    "                                [--cap-seconds S] [--poll-ms MS] [--min-redis-uptime S]\n"
    "                                [--log FILE]\n"
    "                                -- WORKER COMMAND... -- IDLE WORKER COMMAND...\n"
    "       reliableq-bench schedule --redis URL [--jobs N] [--queue Q] [--ahead-ms MS]\n"
    "                                [--spread-ms MS] [--min-lead-ms MS]\n"
    "                                [--producer client|ruby]\n"
    "                                --record FILE [--log FILE] -- WORKER COMMAND...\n"
    "       reliableq-bench http-sink\n"
    "Common options: --prefix P (reliableq's key prefix, default reliableq:), --group G\n"
    "(the queue group of the workers: layout 2).\n";

// The average size of the payloads at the head of `queue` (up to 1,000),
// so that a reference benchmark can push values of the same size.
Result<double> AveragePayloadBytes(redis::Connection* redis, const Keys& keys,
                                   const std::string& queue) {
  Result<redis::ReplyPtr> items = redis->Command({"LRANGE", keys.Queue(queue), "0", "999"});
  if (!items.ok()) return items.status();
  const redisReply* reply = items->get();
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements == 0) {
    return Status::NotFound("queue:" + queue + " holds no job to measure");
  }
  double bytes = 0;
  for (size_t i = 0; i < reply->elements; ++i) bytes += redis::View(reply->element[i]).size();
  return bytes / static_cast<double>(reply->elements);
}

// Sets replica acknowledgement on `options`; false when this build's
// client has none. ClientOptions::wait_replicas came with issue 16, and the
// load generator also builds against older revisions (tools/bench
// --baseline), hence the template.
template <typename Options>
bool SetWaitReplicas(Options* options, int replicas, milliseconds timeout) {
  if constexpr (requires { options->wait_replicas; options->wait_timeout; }) {
    options->wait_replicas = replicas;
    options->wait_timeout = timeout;
    return true;
  } else {
    return false;
  }
}

// Gives `job` the sequence key `key`; false when this build's Job has no
// sequences (Job::sequence came with 8cdb7c6; see SetWaitReplicas).
template <typename AnyJob>
bool SetSequence(AnyJob* job, const std::string& key) {
  if constexpr (requires { job->sequence; }) {
    job->sequence.emplace();
    job->sequence->key = key;
    return true;
  } else {
    return false;
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// push

int RunPush(const Flags& flags) {
  Result<RedisOptions> options = OptionsFrom(flags);
  if (!options.ok()) return Fail(options.status(), "--redis");
  int64_t total = flags.Int("jobs", 100000, 1);
  std::vector<std::string> queues = SplitCommas(flags.Get("queues", "default"));
  if (queues.empty()) return Fail(Status::InvalidArgument("no queue"), "--queues");
  std::string job_class = flags.Get("class", "NoopJob");
  bool single = flags.Has("single");
  int threads = static_cast<int>(flags.Int("threads", 1, 1));
  // All threads on one Client, whose round trips then carry many threads'
  // pushes (and, with --wait-replicas, one WAIT for all of them).
  bool shared = flags.Has("shared-client");
  // Each job unique (its own key, held until it succeeds): its ack is then
  // a script instead of the plain LREM. Single pushes only (PushBulk
  // refuses unique jobs).
  bool unique = flags.Has("unique");
  if (unique && !single) {
    return Fail(Status::InvalidArgument("--unique needs --single"), "--unique");
  }
  std::atomic<int64_t> unique_keys{0};
  // Job i names the sequence key "bench-<i mod K>" (0: none): keys
  // interleaved, each key's jobs in push order.
  int64_t sequence_keys = flags.Int("sequence-keys", 0, 0);
  if (sequence_keys > 0) {
    Job probe;
    if (!SetSequence(&probe, "bench-0")) {
      return Fail(Status::InvalidArgument("this build's client has no sequences"),
                  "--sequence-keys");
    }
  }
  // With --wait-replicas every round trip ends with a WAIT, and every push
  // must come back replicated (a push that is not fails the run).
  int wait_replicas = static_cast<int>(flags.Int("wait-replicas", 0, 0));
  ClientOptions client_options;
  if (wait_replicas > 0 &&
      !SetWaitReplicas(&client_options, wait_replicas,
                       milliseconds(flags.Int("wait-timeout", 5000, 1)))) {
    return Fail(Status::InvalidArgument("this build's client cannot wait for replicas"),
                "--wait-replicas");
  }
  std::atomic<int64_t> replicated{0};
  Progress progress;

  // Job i goes to queue i mod #queues; the jobs differ only by their jid,
  // which each push makes anew.
  auto make_job = [&](int64_t i) {
    Job job;
    job.job_class = job_class;
    job.queue = queues[static_cast<size_t>(i) % queues.size()];
    if (unique) {
      job.unique = Uniqueness{};
      job.unique->key = "bench-" + std::to_string(unique_keys.fetch_add(1));
    }
    if (sequence_keys > 0) SetSequence(&job, "bench-" + std::to_string(i % sequence_keys));
    return job;
  };

  std::atomic<int64_t> pushed{0};
  Status first_error;
  std::mutex error_mu;
  double seconds = 0;
  if (!single) {
    Result<std::unique_ptr<Client>> client = Client::Open(*options, client_options);
    if (!client.ok()) return Fail(client.status(), "connect");
    // PushBulk is called with chunks of this many jobs, so that a million
    // jobs never sit in memory at once; it sends 1,000 per round trip.
    constexpr int64_t kChunk = 50000;
    std::vector<Job> chunk;
    for (int64_t i = 0; i < std::min(kChunk, total); ++i) chunk.push_back(make_job(i));
    auto start = Clock::now();
    while (pushed < total) {
      if (g_interrupted) return 130;
      int64_t n = std::min<int64_t>(kChunk, total - pushed);
      if (static_cast<int64_t>(chunk.size()) > n) chunk.resize(static_cast<size_t>(n));
      Result<std::vector<PushResult>> results = (*client)->PushBulk(chunk);
      Status pushed_chunk = PushFailure(results);
      if (!pushed_chunk.ok()) return Fail(pushed_chunk, "PushBulk");
      for (const PushResult& one : *results) {
        if (one.outcome == PushOutcome::kReplicated) ++replicated;
      }
      pushed += n;
      progress.Show("pushed " + std::to_string(pushed.load()) + "/" + std::to_string(total));
    }
    seconds = Seconds(Clock::now() - start);
  } else {
    // One client (one connection) per thread, or one for all with
    // --shared-client, all opened before the clock starts; the threads then
    // start together.
    std::vector<std::unique_ptr<Client>> clients;
    for (int t = 0; t < (shared ? 1 : threads); ++t) {
      Result<std::unique_ptr<Client>> client = Client::Open(*options, client_options);
      if (!client.ok()) return Fail(client.status(), "connect");
      clients.push_back(std::move(client.value()));
    }
    std::mutex go_mu;
    std::condition_variable go_cv;
    bool go = false;
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        int64_t share = total / threads + (t < total % threads ? 1 : 0);
        {
          std::unique_lock<std::mutex> lock(go_mu);
          go_cv.wait(lock, [&] { return go; });
        }
        for (int64_t i = 0; i < share && !g_interrupted; ++i) {
          Client& client = *clients[shared ? 0 : static_cast<size_t>(t)];
          Result<PushResult> result = client.Push(make_job(i));
          Status pushed_one = PushFailure(result);
          if (!pushed_one.ok()) {
            std::lock_guard<std::mutex> lock(error_mu);
            if (first_error.ok()) first_error = pushed_one;
            return;
          }
          if (result->outcome == PushOutcome::kReplicated) ++replicated;
          ++pushed;
        }
      });
    }
    auto start = Clock::now();
    {
      std::lock_guard<std::mutex> lock(go_mu);
      go = true;
    }
    go_cv.notify_all();
    // The main thread only reports progress; the clock stops when the last
    // thread has pushed its share.
    std::thread progress_thread([&] {
      while (pushed < total && !g_interrupted) {
        {
          std::lock_guard<std::mutex> lock(error_mu);
          if (!first_error.ok()) return;
        }
        progress.Show("pushed " + std::to_string(pushed.load()) + "/" + std::to_string(total));
        std::this_thread::sleep_for(milliseconds(50));
      }
    });
    for (std::thread& w : workers) w.join();
    seconds = Seconds(Clock::now() - start);
    progress_thread.join();
    if (!first_error.ok()) return Fail(first_error, "Push");
    if (g_interrupted) return 130;
  }
  progress.Done();
  // What the jobs weigh in Redis, read back once the clock has stopped.
  Result<std::unique_ptr<redis::Connection>> redis = redis::Connection::Open(*options);
  if (!redis.ok()) return Fail(redis.status(), "connect");
  Result<double> payload =
      AveragePayloadBytes(redis->get(), KeysFrom(flags, *options), queues.front());
  if (!payload.ok()) return Fail(payload.status(), "payload size");
  JsonLine()
      .Add("mode", std::string(single ? "single" : "bulk"))
      .Add("threads", static_cast<int64_t>(single ? threads : 1))
      .Add("jobs", total)
      .Add("seconds", seconds)
      .Add("jobs_per_sec", total / seconds)
      .Add("payload_bytes", *payload)
      .AddBool("shared_client", single && shared)
      .Add("wait_replicas", static_cast<int64_t>(wait_replicas))
      .Add("replicated", replicated.load())
      .Print();
  return 0;
}

// ---------------------------------------------------------------------------
// drain

int RunDrain(const Flags& flags) {
  Result<RedisOptions> options = OptionsFrom(flags);
  if (!options.ok()) return Fail(options.status(), "--redis");
  std::vector<std::string> queues = SplitCommas(flags.Get("queues", "default"));
  auto poll_interval = std::chrono::microseconds(flags.Int("poll-us", 1000, 0));
  auto timeout = std::chrono::seconds(flags.Int("timeout", 600, 1));
  // A worker that takes jobs out of Redis into its memory (Sidekiq's basic
  // fetch) is done only when it says so: it sets this key after its last job.
  std::string done_key = flags.Get("done-key", "");
  // Done also only once this key is gone: with sequences, the holders'
  // hash (reliableq:sequences), since a job waiting for its key is in
  // neither a queue nor a working list, and the holder that hands the key
  // on moves it to the queue between two reads of the lengths.
  std::string until_gone = flags.Get("until-gone", "");
  if (flags.command().empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  Result<std::unique_ptr<redis::Connection>> redis = redis::Connection::Open(*options);
  if (!redis.ok()) return Fail(redis.status(), "connect");
  Keys keys = KeysFrom(flags, *options);
  if (!done_key.empty()) {
    Result<redis::ReplyPtr> deleted = (*redis)->Command({"DEL", done_key});
    if (!deleted.ok()) return Fail(deleted.status(), "DEL");
  }
  QueueWatch watch(redis->get(), queues, keys);

  Result<int64_t> processed_before = ReadCounter(redis->get(), ProcessedKey(keys));
  Result<int64_t> failed_before = ReadCounter(redis->get(), FailedKey(keys));
  if (!processed_before.ok()) return Fail(processed_before.status(), "GET stat:processed");
  if (!failed_before.ok()) return Fail(failed_before.status(), "GET stat:failed");
  Result<QueueSnapshot> initial = watch.Poll();
  if (!initial.ok()) return Fail(initial.status(), "poll");
  int64_t total = initial->queued + initial->working;
  if (total == 0) return Fail(Status::InvalidArgument("no job is queued"), "drain");

  WorkerProcess worker;
  auto spawned = Clock::now();
  Status started = worker.Start(flags.command(), flags.Get("log", ""), {});
  if (!started.ok()) return Fail(started, "start the worker");

  // The drain starts at the first poll that finds a queue shorter than it
  // was, and ends at the first poll that finds every queue and working list
  // empty (and the done key set, if one was given). Both instants are late by
  // at most one poll interval (plus a round trip or two), so the duration is
  // off by at most that much.
  std::optional<Clock::time_point> first_taken;
  std::optional<Clock::time_point> emptied;
  double redis_cpu_start = 0;
  double worker_cpu_start = 0;
  int64_t switches_start = 0;
  int64_t rss_max_kb = 0;
  Progress progress;
  auto last_sample = Clock::time_point{};
  auto deadline = spawned + timeout;
  while (!emptied) {
    if (g_interrupted) return 130;
    if (Clock::now() > deadline) {
      return Fail(Status::Timeout("the worker did not drain the queues in time"), "drain");
    }
    if (!worker.Running()) {
      return Fail(Status::IoError("the worker exited before the queues were empty (see its log)"),
                  "drain");
    }
    Result<QueueSnapshot> snap = watch.Poll();
    auto now = Clock::now();
    if (!snap.ok()) return Fail(snap.status(), "poll");
    if (!first_taken && snap->queued < initial->queued) {
      first_taken = now;
      // CPU counters are read once the drain has started, so that start-up
      // (loading Ruby, say) is not charged to the drain.
      redis_cpu_start = RedisCpuSeconds(redis->get());
      Result<ProcessSample> s = worker.Sample();
      if (s.ok()) {
        worker_cpu_start = s->cpu_seconds;
        switches_start = s->context_switches;
      }
    }
    if (first_taken && snap->complete && snap->queued == 0 && snap->working == 0) {
      bool done = true;
      if (!done_key.empty()) {
        Result<redis::ReplyPtr> exists = (*redis)->Command({"EXISTS", done_key});
        if (!exists.ok()) return Fail(exists.status(), "EXISTS");
        done = (*exists)->type == REDIS_REPLY_INTEGER && (*exists)->integer == 1;
      }
      if (done && !until_gone.empty()) {
        Result<redis::ReplyPtr> exists = (*redis)->Command({"EXISTS", until_gone});
        if (!exists.ok()) return Fail(exists.status(), "EXISTS");
        done = (*exists)->type == REDIS_REPLY_INTEGER && (*exists)->integer == 0;
      }
      if (done) {
        emptied = Clock::now();
        break;
      }
    }
    if (now - last_sample >= milliseconds(20)) {
      last_sample = now;
      Result<ProcessSample> s = worker.Sample();
      if (s.ok()) rss_max_kb = std::max(rss_max_kb, s->vm_rss_kb);
    }
    if (first_taken) {
      int64_t left = snap->queued + snap->working;
      progress.Show("drained " + std::to_string(total - left) + "/" + std::to_string(total) +
                    " (" + std::to_string(snap->working) + " in working lists)");
    } else {
      progress.Show("waiting for the worker to take its first job");
    }
    std::this_thread::sleep_for(poll_interval);
  }
  progress.Done();
  double redis_cpu = RedisCpuSeconds(redis->get()) - redis_cpu_start;
  Result<ProcessSample> final_sample = worker.Sample();
  std::optional<int> exit_status = worker.Stop(milliseconds(30000));
  // Sidekiq counts processed jobs in memory and writes them at exit, so the
  // counters are read after the worker has stopped.
  Result<int64_t> processed_after = ReadCounter(redis->get(), ProcessedKey(keys));
  Result<int64_t> failed_after = ReadCounter(redis->get(), FailedKey(keys));
  if (!processed_after.ok()) return Fail(processed_after.status(), "GET stat:processed");
  if (!failed_after.ok()) return Fail(failed_after.status(), "GET stat:failed");

  double seconds = Seconds(*emptied - *first_taken);
  JsonLine line;
  line.Add("jobs", total)
      .Add("seconds", seconds)
      .Add("jobs_per_sec", total / seconds)
      .Add("startup_seconds", Seconds(*first_taken - spawned))
      .Add("poll_interval_ms", std::chrono::duration<double, std::milli>(poll_interval).count())
      .Add("processed", *processed_after - *processed_before)
      .Add("failed", *failed_after - *failed_before)
      .Add("redis_cpu_seconds", redis_cpu);
  if (final_sample.ok()) {
    line.Add("rss_kb", std::max(final_sample->vm_hwm_kb, rss_max_kb))
        .Add("rss_end_kb", final_sample->vm_rss_kb)
        .Add("worker_cpu_seconds", final_sample->cpu_seconds - worker_cpu_start)
        .Add("worker_context_switches", final_sample->context_switches - switches_start);
  }
  line.Add("worker_exit", static_cast<int64_t>(exit_status.value_or(-1))).Print();
  return 0;
}

// Serves POST /jobs with 200 on 127.0.0.1 (a free port, printed) until
// TERM or INT. A worker -c 25 keeps up to 25 connections alive and posts on
// them at once: a handler thread each.
int RunHttpSink() {
  HttpRoutes routes;
  routes.Post("/jobs", [](const HttpRequest&, HttpResponse& response) {
    response.SetContent("ok", "text/plain");
  });
  HttpAddress where;
  Result<std::unique_ptr<HttpListener>> listener = HttpListener::Start(where, 32, std::move(routes));
  if (!listener.ok()) return Fail(listener.status(), "http-sink");
  std::printf("%d\n", (*listener)->port());
  std::fflush(stdout);
  while (!g_interrupted) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return 0;
}

}  // namespace reliableq::bench


int main(int argc, char** argv) {
  using reliableq::bench::Flags;
  if (argc < 2) {
    std::fputs(reliableq::bench::kUsage, stderr);
    return 2;
  }
  // Ctrl-C or TERM ends the current run cleanly: the worker is stopped and
  // nothing is printed on stdout.
  struct sigaction on_stop = {};
  on_stop.sa_handler = [](int) { reliableq::bench::g_interrupted = true; };
  sigemptyset(&on_stop.sa_mask);
  sigaction(SIGINT, &on_stop, nullptr);
  sigaction(SIGTERM, &on_stop, nullptr);

  std::string verb = argv[1];
  if (verb == "http-sink") return reliableq::bench::RunHttpSink();
  std::optional<Flags> flags = Flags::Parse(argc, argv, 2);
  if (!flags) return 2;
  if (!flags->Has("redis")) {
    std::fprintf(stderr, "reliableq-bench: --redis URL is required\n");
    return 2;
  }
  if (verb == "push") return reliableq::bench::RunPush(*flags);
  if (verb == "drain") return reliableq::bench::RunDrain(*flags);
  if (verb == "latency") return reliableq::bench::RunLatency(*flags);
  if (verb == "recovery") return reliableq::bench::RunRecovery(*flags);
  if (verb == "schedule") return reliableq::bench::RunSchedule(*flags);
  std::fputs(reliableq::bench::kUsage, stderr);
  return 2;
}
