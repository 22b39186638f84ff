// reliableq-bench: the load generator behind tools/bench. It pushes jobs,
// starts a worker program, watches Redis until the worker has drained what
// was queued, and prints one JSON object with what it measured. All timing
// of the benchmark happens here; tools/bench only orchestrates the runs.
//
//   reliableq-bench push    --redis URL --jobs N [--queues a,b] [--class C]
//                           [--single --threads T]
//   reliableq-bench drain   --redis URL [--queues a,b] [--done-key K] [--log FILE]
//                           -- WORKER...
//   reliableq-bench latency --redis URL [--jobs N] [--interval-ms MS]
//                           [--ready blocked|registered] --record FILE
//                           [--log FILE] -- WORKER...
//
// Progress goes to stderr, the result to stdout. Exit status 0 on success,
// 1 on a failed run, 2 on bad usage, 130 when interrupted.

#include <signal.h>
#include <unistd.h>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/queue_watch.h"
#include "bench/worker_process.h"
#include "keys.h"
#include "redis/connection.h"
#include "reliableq/client.h"
#include "reliableq/job.h"
#include "reliableq/redis_options.h"

namespace reliableq::bench {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char kUsage[] =
    "usage: reliableq-bench push    --redis URL --jobs N [--queues Q1,Q2...] [--class CLASS]\n"
    "                               [--single --threads T]\n"
    "       reliableq-bench drain   --redis URL [--queues Q1,Q2...] [--poll-us US]\n"
    "                               [--done-key KEY] [--timeout SEC] [--log FILE]\n"
    "                               -- WORKER COMMAND...\n"
    "       reliableq-bench latency --redis URL [--jobs N] [--interval-ms MS] [--queue Q]\n"
    "                               [--ready blocked|registered] --record FILE\n"
    "                               [--timeout SEC] [--log FILE]\n"
    "                               -- WORKER COMMAND...\n"
    "Common options: --prefix P (reliableq's key prefix, default reliableq:).\n";

std::atomic<bool> g_interrupted{false};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// --name value options, --flag switches, and the command after "--".
class Flags {
 public:
  static std::optional<Flags> Parse(int argc, char** argv, int first) {
    Flags flags;
    for (int i = first; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg == "--") {
        for (++i; i < argc; ++i) flags.command_.push_back(argv[i]);
        break;
      }
      if (arg.rfind("--", 0) != 0) {
        std::fprintf(stderr, "reliableq-bench: unexpected argument '%s'\n", arg.c_str());
        return std::nullopt;
      }
      std::string name = arg.substr(2);
      if (name == "single") {
        flags.values_[name] = "1";
      } else if (i + 1 < argc) {
        flags.values_[name] = argv[++i];
      } else {
        std::fprintf(stderr, "reliableq-bench: %s needs a value\n", arg.c_str());
        return std::nullopt;
      }
    }
    return flags;
  }

  std::string Get(const std::string& name, std::string fallback) const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }

  // A whole number >= `min`; exits with a usage error otherwise.
  int64_t Int(const std::string& name, int64_t fallback, int64_t min) const {
    auto it = values_.find(name);
    if (it == values_.end()) return fallback;
    char* end = nullptr;
    long long n = std::strtoll(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end != '\0' || n < min) {
      std::fprintf(stderr, "reliableq-bench: --%s needs an integer >= %lld\n", name.c_str(),
                   static_cast<long long>(min));
      std::exit(2);
    }
    return n;
  }

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  const std::vector<std::string>& command() const { return command_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> command_;
};

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

int Fail(const Status& status, const char* what) {
  std::fprintf(stderr, "reliableq-bench: %s: %s\n", what, status.ToString().c_str());
  return 1;
}

// One JSON object on one line of stdout.
class JsonLine {
 public:
  JsonLine() : writer_(buffer_) { writer_.StartObject(); }
  JsonLine& Add(const char* key, double value) {
    writer_.Key(key);
    // Three decimals are plenty for every figure printed and keep lines short.
    writer_.Double(std::round(value * 1000) / 1000);
    return *this;
  }
  JsonLine& Add(const char* key, int64_t value) {
    writer_.Key(key);
    writer_.Int64(value);
    return *this;
  }
  JsonLine& Add(const char* key, const std::string& value) {
    writer_.Key(key);
    writer_.String(value.c_str(), static_cast<rapidjson::SizeType>(value.size()));
    return *this;
  }
  void Print() {
    writer_.EndObject();
    std::printf("%s\n", buffer_.GetString());
    std::fflush(stdout);
  }

 private:
  rapidjson::StringBuffer buffer_;
  rapidjson::Writer<rapidjson::StringBuffer> writer_;
};

// Progress on stderr: one line rewritten in place on a terminal, a new line
// every two seconds otherwise (logs).
class Progress {
 public:
  Progress() : tty_(::isatty(STDERR_FILENO) != 0) {}
  void Show(const std::string& text, bool force = false) {
    auto now = Clock::now();
    auto every = tty_ ? milliseconds(200) : milliseconds(2000);
    if (!force && now - last_ < every) return;
    last_ = now;
    if (tty_) {
      std::fprintf(stderr, "\r\033[K  %s", text.c_str());
    } else {
      std::fprintf(stderr, "  %s\n", text.c_str());
    }
    shown_ = true;
  }
  void Done() {
    if (tty_ && shown_) std::fprintf(stderr, "\r\033[K");
    shown_ = false;
  }

 private:
  bool tty_;
  bool shown_ = false;
  Clock::time_point last_{};
};

// OK when the push stored its job; otherwise why not, named by its outcome.
Status PushFailure(const Result<PushResult>& pushed) {
  if (!pushed.ok()) return pushed.status();
  if (pushed->stored()) return Status::OK();
  return pushed->reason.WithContext(PushOutcomeName(pushed->outcome));
}

// The same for a bulk push: the first job that was not stored.
Status PushFailure(const Result<std::vector<PushResult>>& pushed) {
  if (!pushed.ok()) return pushed.status();
  for (const PushResult& one : *pushed) {
    if (!one.stored()) return one.reason.WithContext(PushOutcomeName(one.outcome));
  }
  return Status::OK();
}

Result<RedisOptions> OptionsFrom(const Flags& flags) {
  Result<RedisOptions> options = RedisOptions::FromUrl(flags.Get("redis", ""));
  if (!options.ok()) return options;
  // A 1,000-job bulk push on a loaded two-core machine can take a while.
  options->command_timeout = milliseconds(30000);
  return options;
}

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
  Progress progress;

  // Job i goes to queue i mod #queues; the jobs differ only by their jid,
  // which each push makes anew.
  auto make_job = [&](int64_t i) {
    Job job;
    job.job_class = job_class;
    job.queue = queues[static_cast<size_t>(i) % queues.size()];
    return job;
  };

  std::atomic<int64_t> pushed{0};
  Status first_error;
  std::mutex error_mu;
  double seconds = 0;
  if (!single) {
    Result<std::unique_ptr<Client>> client = Client::Open(*options);
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
      Status pushed_chunk = PushFailure((*client)->PushBulk(chunk));
      if (!pushed_chunk.ok()) return Fail(pushed_chunk, "PushBulk");
      pushed += n;
      progress.Show("pushed " + std::to_string(pushed.load()) + "/" + std::to_string(total));
    }
    seconds = Seconds(Clock::now() - start);
  } else {
    // One client (one connection) per thread, all opened before the clock
    // starts; the threads then start together.
    std::vector<std::unique_ptr<Client>> clients;
    for (int t = 0; t < threads; ++t) {
      Result<std::unique_ptr<Client>> client = Client::Open(*options);
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
          Status pushed_one = PushFailure(clients[static_cast<size_t>(t)]->Push(make_job(i)));
          if (!pushed_one.ok()) {
            std::lock_guard<std::mutex> lock(error_mu);
            if (first_error.ok()) first_error = pushed_one;
            return;
          }
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
  JsonLine()
      .Add("mode", std::string(single ? "single" : "bulk"))
      .Add("threads", static_cast<int64_t>(single ? threads : 1))
      .Add("jobs", total)
      .Add("seconds", seconds)
      .Add("jobs_per_sec", total / seconds)
      .Print();
  return 0;
}

// ---------------------------------------------------------------------------
// drain

// Reads Redis's own CPU time, to tell whether Redis or the worker was the
// limit of a run.
double RedisCpuSeconds(redis::Connection* redis) {
  Result<double> user = ReadInfoField(redis, "cpu", "used_cpu_user");
  Result<double> sys = ReadInfoField(redis, "cpu", "used_cpu_sys");
  return (user.ok() ? *user : 0) + (sys.ok() ? *sys : 0);
}

int RunDrain(const Flags& flags) {
  Result<RedisOptions> options = OptionsFrom(flags);
  if (!options.ok()) return Fail(options.status(), "--redis");
  std::vector<std::string> queues = SplitCommas(flags.Get("queues", "default"));
  auto poll_interval = std::chrono::microseconds(flags.Int("poll-us", 1000, 0));
  auto timeout = std::chrono::seconds(flags.Int("timeout", 600, 1));
  // A worker that takes jobs out of Redis into its memory (Sidekiq's basic
  // fetch) is done only when it says so: it sets this key after its last job.
  std::string done_key = flags.Get("done-key", "");
  if (flags.command().empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  Result<std::unique_ptr<redis::Connection>> redis = redis::Connection::Open(*options);
  if (!redis.ok()) return Fail(redis.status(), "connect");
  Keys keys(flags.Get("prefix", "reliableq:"));
  if (!done_key.empty()) {
    Result<redis::ReplyPtr> deleted = (*redis)->Command({"DEL", done_key});
    if (!deleted.ok()) return Fail(deleted.status(), "DEL");
  }
  QueueWatch watch(redis->get(), queues, keys);

  Result<int64_t> processed_before = ReadCounter(redis->get(), Keys::kProcessed);
  Result<int64_t> failed_before = ReadCounter(redis->get(), Keys::kFailed);
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
  Result<int64_t> processed_after = ReadCounter(redis->get(), Keys::kProcessed);
  Result<int64_t> failed_after = ReadCounter(redis->get(), Keys::kFailed);
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

// ---------------------------------------------------------------------------
// latency

// Nearest-rank percentile of sorted values.
double Percentile(const std::vector<double>& sorted, double p) {
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size(), std::max<size_t>(rank, 1)) - 1];
}

std::vector<double> ReadRecords(const std::string& path) {
  std::vector<double> values;
  std::ifstream in(path);
  double v;
  while (in >> v) values.push_back(v);
  return values;
}

int RunLatency(const Flags& flags) {
  Result<RedisOptions> options = OptionsFrom(flags);
  if (!options.ok()) return Fail(options.status(), "--redis");
  int64_t total = flags.Int("jobs", 1000, 1);
  auto interval = std::chrono::microseconds(flags.Int("interval-ms", 5, 0) * 1000);
  std::string queue = flags.Get("queue", "default");
  std::string record = flags.Get("record", "");
  auto timeout = std::chrono::seconds(flags.Int("timeout", 120, 1));
  if (record.empty() || flags.command().empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  Result<std::unique_ptr<redis::Connection>> redis = redis::Connection::Open(*options);
  if (!redis.ok()) return Fail(redis.status(), "connect");
  Result<std::unique_ptr<Client>> client = Client::Open(*options);
  if (!client.ok()) return Fail(client.status(), "connect");
  std::remove(record.c_str());

  WorkerProcess worker;
  Status started = worker.Start(flags.command(), flags.Get("log", ""),
                                {"RELIABLEQ_BENCH_LATENCY_LOG=" + record});
  if (!started.ok()) return Fail(started, "start the worker");
  Progress progress;
  auto deadline = Clock::now() + timeout;

  // Idle means: waiting in a blocking command (BLMOVE, BRPOP) for a job.
  // After the first blocked client appears, a short pause lets the worker
  // finish starting up (the rest of its connections, its first beat). A
  // worker that polls instead (gitlab's reliable fetch) is idle once it has
  // registered in `processes` (--ready registered).
  bool by_registration = flags.Get("ready", "blocked") == "registered";
  while (true) {
    if (g_interrupted) return 130;
    if (!worker.Running()) {
      return Fail(Status::IoError("the worker exited during start-up (see its log)"), "latency");
    }
    if (Clock::now() > deadline) {
      return Fail(Status::Timeout("the worker never waited for jobs"), "latency");
    }
    if (by_registration) {
      Result<redis::ReplyPtr> members = (*redis)->Command({"SCARD", Keys::kProcesses});
      if (!members.ok()) return Fail(members.status(), "SCARD");
      if ((*members)->type == REDIS_REPLY_INTEGER && (*members)->integer >= 1) break;
    } else {
      Result<double> blocked = ReadInfoField(redis->get(), "clients", "blocked_clients");
      if (!blocked.ok()) return Fail(blocked.status(), "INFO clients");
      if (*blocked >= 1) break;
    }
    progress.Show("waiting for the worker to be idle");
    std::this_thread::sleep_for(milliseconds(10));
  }
  std::this_thread::sleep_for(milliseconds(500));
  Result<ProcessSample> idle = worker.Sample();
  if (!idle.ok()) return Fail(idle.status(), "read the worker's memory");

  // Pushes follow a fixed schedule (start + i * interval) so that a slow
  // push does not shift every later one.
  auto start = Clock::now();
  for (int64_t i = 0; i < total; ++i) {
    if (g_interrupted) return 130;
    std::this_thread::sleep_until(start + i * interval);
    Job job;
    job.job_class = "LatencyJob";
    job.queue = queue;
    Status pushed = PushFailure((*client)->Push(job));
    if (!pushed.ok()) return Fail(pushed, "Push");
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
  std::optional<int> exit_status = worker.Stop(milliseconds(30000));

  std::vector<double> ms;
  for (double us : micros) ms.push_back(us / 1000.0);
  std::sort(ms.begin(), ms.end());
  double mean = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
  JsonLine line;
  line.Add("jobs", total)
      .Add("interval_ms", std::chrono::duration<double, std::milli>(interval).count())
      .Add("p50_ms", Percentile(ms, 50))
      .Add("p90_ms", Percentile(ms, 90))
      .Add("p99_ms", Percentile(ms, 99))
      .Add("max_ms", ms.back())
      .Add("min_ms", ms.front())
      .Add("mean_ms", mean)
      .Add("idle_rss_kb", idle->vm_rss_kb);
  if (after.ok()) line.Add("rss_kb", after->vm_hwm_kb);
  line.Add("worker_exit", static_cast<int64_t>(exit_status.value_or(-1))).Print();
  return 0;
}

}  // namespace

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
  std::optional<Flags> flags = Flags::Parse(argc, argv, 2);
  if (!flags) return 2;
  if (!flags->Has("redis")) {
    std::fprintf(stderr, "reliableq-bench: --redis URL is required\n");
    return 2;
  }
  if (verb == "push") return reliableq::bench::RunPush(*flags);
  if (verb == "drain") return reliableq::bench::RunDrain(*flags);
  if (verb == "latency") return reliableq::bench::RunLatency(*flags);
  std::fputs(reliableq::bench::kUsage, stderr);
  return 2;
}
