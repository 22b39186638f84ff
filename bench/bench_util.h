// What every verb of reliableq-bench shares: its command-line flags, its one
// line of JSON, progress on stderr, the checks of push outcomes, reading
// Redis's CPU time, waiting for a worker to be idle, and the verbs
// themselves (one file each: bench_main.cc has push and drain,
// latency_run.cc, recovery_run.cc and schedule_run.cc the others).
//
// Thread safety: one thread at a time, except g_interrupted.

#ifndef RELIABLEQ_BENCH_BENCH_UTIL_H_
#define RELIABLEQ_BENCH_BENCH_UTIL_H_

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "worker_process.h"
#include "protocol/keys.h"
#include "redis/connection.h"
#include "reliableq/push_result.h"
#include "reliableq/redis_options.h"
#include "reliableq/status.h"

// The key names are in reliableq::protocol, in older revisions in reliableq
// itself: named unqualified, they are found in either (see meson.build on
// building against older revisions).
namespace reliableq::protocol {}

namespace reliableq::bench {

using namespace reliableq::protocol;

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Set by SIGINT and SIGTERM: every loop ends its run and returns 130.
extern std::atomic<bool> g_interrupted;

double Seconds(Clock::duration d);

// The system clock as float epoch seconds, as job timestamps are written.
double EpochNow();

// --name value options, --single and --shared-client, and the command
// after "--".
class Flags {
 public:
  static std::optional<Flags> Parse(int argc, char** argv, int first);

  std::string Get(const std::string& name, std::string fallback) const;
  // A whole number >= `min`; exits with a usage error otherwise.
  int64_t Int(const std::string& name, int64_t fallback, int64_t min) const;
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  const std::vector<std::string>& command() const { return command_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> command_;
};

std::vector<std::string> SplitCommas(const std::string& text);

// Prints "reliableq-bench: <what>: <status>" and returns 1 (a failed run).
int Fail(const Status& status, const char* what);

// One JSON object on one line of stdout.
class JsonLine {
 public:
  JsonLine() : writer_(buffer_) { writer_.StartObject(); }
  // Three decimals are plenty for every figure printed and keep lines short.
  JsonLine& Add(const std::string& key, double value);
  JsonLine& Add(const std::string& key, int64_t value);
  JsonLine& Add(const std::string& key, const std::string& value);
  JsonLine& AddBool(const std::string& key, bool value);
  // p50, p90, p99, max, min and mean of `ms` (milliseconds), as
  // <prefix>p50_ms and so on; `ms` must not be empty.
  JsonLine& AddPercentiles(const std::string& prefix, std::vector<double> ms);
  void Print();

 private:
  rapidjson::StringBuffer buffer_;
  rapidjson::Writer<rapidjson::StringBuffer> writer_;
};

// Progress on stderr: one line rewritten in place on a terminal, a new line
// every two seconds otherwise (logs).
class Progress {
 public:
  Progress();
  void Show(const std::string& text, bool force = false);
  void Done();

 private:
  bool tty_;
  bool shown_ = false;
  Clock::time_point last_{};
};

// OK when the push stored its job; otherwise why not, named by its outcome.
Status PushFailure(const Result<PushResult>& pushed);
// The same for a bulk push: the first job that was not stored.
Status PushFailure(const Result<std::vector<PushResult>>& pushed);

// --redis (and --group, the queue group: layout 2), with a command timeout
// long enough for a big bulk push on a loaded machine.
Result<RedisOptions> OptionsFrom(const Flags& flags);

// The key names the workers under test use: --prefix (default reliableq:)
// and the group of `options`.
Keys KeysFrom(const Flags& flags, const RedisOptions& options);

// Sidekiq's keys through `keys`. The load generator also builds against
// revisions whose Keys spelled them as static constants, without groups
// (tools/bench --baseline), hence the templates.
template <typename K>
std::string QueuesKey(const K& keys) {
  if constexpr (requires { keys.Queues(); }) {
    return keys.Queues();
  } else {
    return std::string(K::kQueues);
  }
}
template <typename K>
std::string ScheduleKey(const K& keys) {
  if constexpr (requires { keys.Schedule(); }) {
    return keys.Schedule();
  } else {
    return std::string(K::kSchedule);
  }
}
template <typename K>
std::string ProcessesKey(const K& keys) {
  if constexpr (requires { keys.Processes(); }) {
    return keys.Processes();
  } else {
    return std::string(K::kProcesses);
  }
}
template <typename K>
std::string ProcessedKey(const K& keys) {
  if constexpr (requires { keys.Processed(); }) {
    return keys.Processed();
  } else {
    return std::string(K::kProcessed);
  }
}
template <typename K>
std::string FailedKey(const K& keys) {
  if constexpr (requires { keys.Failed(); }) {
    return keys.Failed();
  } else {
    return std::string(K::kFailed);
  }
}

// Redis's own CPU time so far (INFO cpu, user + system), 0 when unreadable.
double RedisCpuSeconds(redis::Connection* redis);

// Sleeps `d` in short steps; false when interrupted meanwhile.
bool SleepUnlessInterrupted(Clock::duration d);

// Nearest-rank percentile of sorted values.
double Percentile(const std::vector<double>& sorted, double p);

// The numbers of a file the jobs append to, one per line.
std::vector<double> ReadRecords(const std::string& path);

// 24 lowercase hex digits, as Sidekiq's jids.
std::string RandomJid();

// The registered identity ("<host>:<pid>:<hex>") of the reliableq worker
// with process id `pid`; kNotFound while it has not registered.
Result<std::string> FindIdentity(redis::Connection* redis, const Keys& keys, pid_t pid);

// Redis's connected_clients, and how many of its clients carry `name`
// (CLIENT LIST; 0 when `name` is empty).
struct ClientCount {
  int64_t connected = 0;
  int64_t named = 0;
};
Result<ClientCount> CountClients(redis::Connection* redis, const std::string& name);

// How the load generator tells that a freshly started worker waits for jobs:
//   blocked     a client waits in a blocking command (BLMOVE, BRPOP):
//               Sidekiq's fetch, and reliableq's while it blocks per queue;
//   registered  a process is in `processes` (gitlab's fetch, which polls);
//   idle        the reliableq worker with this pid is in the registry, and
//               Redis's connected_clients has not changed for a second:
//               whatever way the worker waits (blocking commands, pub/sub,
//               polling), it has opened every connection it waits with.
// Then, for every mode, half a second for the rest of the start-up (its
// first beat, the janitor's first pass).
Status WaitReady(redis::Connection* redis, WorkerProcess& worker, const std::string& mode,
                 const Keys& keys, Clock::time_point deadline, Progress& progress);

// The verbs; each returns the program's exit status.
int RunPush(const Flags& flags);
int RunDrain(const Flags& flags);
int RunLatency(const Flags& flags);
int RunRecovery(const Flags& flags);
int RunSchedule(const Flags& flags);

}  // namespace reliableq::bench

#endif  // RELIABLEQ_BENCH_BENCH_UTIL_H_
