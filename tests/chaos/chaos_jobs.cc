// chaos_jobs: the job class of tools/chaos, the fault-injection run. Loaded
// with
//
//   reliableq worker -r build/tests/chaos/libchaos_jobs.so
//
//   ChaosJob [id]   records that it ran, sleeps a random short time, and on
//                   its first attempt may throw or abort() its process
//   ChaosJob [id, key, index]
//                   the same, for a job of sequence `key` (tools/chaos
//                   --sequences): it also records its start, see below
//
// Every attempt writes one record to Redis, inside the job, before the
// handler returns, throws or aborts, through the plugin's own connection
// (one per processor thread):
//   HASH <prefix>log   field = a random token per attempt, value = JSON
//                      {"id":7,"pid":123,"ic":0,"rc":-1,"start":...,
//                       "end":...,"ms":...,"me":...,
//                       "outcome":"ok"|"throw"|"abort"|"stopped"|"snooze"|
//                                 "discard"}
//                      (start, end: the wall clock, faked under
//                       --clock-skew; ms, me: the same on the monotonic
//                       clock, which is not)
//                      ("stopped": its stop token was stopped while it
//                       slept, by a fence or a stop past the timeout; it
//                       returned at once, and its outcome was dropped)
//                      (ic: the payload's interrupted_count, 0 when absent;
//                       rc: its retry_count, -1 when absent)
//   HASH <prefix>runs  field = id, value = the number of attempts that
//                      completed ("ok")
// Both are written by one script that adds to `runs` only when the token was
// new, so an attempt whose reply was lost (Redis killed under it) and that
// is therefore written again still counts once.
//
// A job of a sequence also writes, before anything else it does, the start
// of its attempt under the same token:
//   HASH <prefix>starts field = the token, value = JSON
//                      {"id":7,"key":"10000000.3","ix":4,"pid":123,"ic":0,
//                       "rc":-1,"start":...,"ms":...}
// so that an attempt cut short by a SIGKILL, which writes no record, is seen
// to have started, and tools/chaos can tell which attempts of one key ran at
// once (from start to record; an attempt without a record ran until its
// process ended).
//
// A record that cannot be written (Redis down) is tried again, reconnecting,
// until it succeeds or RELIABLEQ_CHAOS_RECORD_PATIENCE_MS passes; then the
// job fails with std::runtime_error, so that it is never counted as run
// without a record.
//
// Which jobs misbehave is decided from the job's own fields: a hash of its
// id against the fractions below, and its interrupted_count and retry_count
// (so a job aborts its worker only on its first attempt, and throws only
// before its first retry).
//
// Environment (read once, when the worker loads the plugin):
//   RELIABLEQ_CHAOS_REDIS           required: a unix socket path, or host:port
//   RELIABLEQ_CHAOS_PREFIX          key prefix of the records (default chaos:)
//   RELIABLEQ_CHAOS_SLEEP_MS        longest random sleep of a job (default 20)
//   RELIABLEQ_CHAOS_THROW_FRACTION  jobs that throw on their first attempt (0)
//   RELIABLEQ_CHAOS_ABORT_FRACTION  jobs that abort() their worker on their
//                                   first attempt (0)
//   RELIABLEQ_CHAOS_LONG_FRACTION   jobs that sleep RELIABLEQ_CHAOS_LONG_MS
//                                   (default 3000) on their first two
//                                   attempts, to be running when a worker is
//                                   stopped past its timeout (0)
//   RELIABLEQ_CHAOS_SNOOZE_FRACTION  jobs that snooze (JobSnooze, 0.1 to
//                                   0.6 s) on their first two snoozes (0)
//   RELIABLEQ_CHAOS_DISCARD_FRACTION jobs whose first attempt discards them
//                                   (JobDiscard): they never run again (0)
//   RELIABLEQ_CHAOS_RECORD_PATIENCE_MS  see above (default 60000)

#include <hiredis/hiredis.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>

#include "reliableq/handler.h"
#include "reliableq/plugin.h"

namespace {

using reliableq::JobView;

// Records an attempt once per token; counts it in `runs` when ARGV[4] is 1.
constexpr const char* kRecordScript =
    "if redis.call('HSETNX', KEYS[2], ARGV[2], ARGV[3]) == 1 and ARGV[4] == '1' then "
    "  redis.call('HINCRBY', KEYS[1], ARGV[1], 1) "
    "end "
    "return 1";

// Records the start of an attempt of a sequence's job.
constexpr const char* kStartScript = "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) return 1";

struct Settings {
  std::string unix_path;
  std::string host;
  int port = 0;
  std::string runs_key;
  std::string log_key;
  std::string starts_key;
  int sleep_max_ms = 20;
  int long_ms = 3000;
  double throw_fraction = 0;
  double abort_fraction = 0;
  double long_fraction = 0;
  double snooze_fraction = 0;
  double discard_fraction = 0;
  int record_patience_ms = 60000;
};

// Written once by reliableq_register on the main thread before any job runs;
// read-only afterwards.
Settings g_settings;

double EnvNumber(const char* name, double fallback, double low, double high) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(value >= low && value <= high)) {
    throw std::invalid_argument(std::string(name) + " must be a number in [" + std::to_string(low) +
                                ", " + std::to_string(high) + "]");
  }
  return value;
}

void LoadSettings() {
  const char* where = std::getenv("RELIABLEQ_CHAOS_REDIS");
  if (where == nullptr || *where == '\0') {
    throw std::invalid_argument("RELIABLEQ_CHAOS_REDIS is not set");
  }
  std::string text = where;
  size_t colon = text.rfind(':');
  if (text.find('/') != std::string::npos || colon == std::string::npos) {
    g_settings.unix_path = text;
  } else {
    g_settings.host = text.substr(0, colon);
    g_settings.port = std::atoi(text.c_str() + colon + 1);
    if (g_settings.port <= 0 || g_settings.port > 65535) {
      throw std::invalid_argument("RELIABLEQ_CHAOS_REDIS: bad port in '" + text + "'");
    }
  }
  const char* prefix = std::getenv("RELIABLEQ_CHAOS_PREFIX");
  std::string p = prefix != nullptr && *prefix != '\0' ? prefix : "chaos:";
  g_settings.runs_key = p + "runs";
  g_settings.log_key = p + "log";
  g_settings.starts_key = p + "starts";
  g_settings.sleep_max_ms = static_cast<int>(EnvNumber("RELIABLEQ_CHAOS_SLEEP_MS", 20, 1, 60000));
  g_settings.long_ms = static_cast<int>(EnvNumber("RELIABLEQ_CHAOS_LONG_MS", 3000, 1, 600000));
  g_settings.throw_fraction = EnvNumber("RELIABLEQ_CHAOS_THROW_FRACTION", 0, 0, 1);
  g_settings.abort_fraction = EnvNumber("RELIABLEQ_CHAOS_ABORT_FRACTION", 0, 0, 1);
  g_settings.long_fraction = EnvNumber("RELIABLEQ_CHAOS_LONG_FRACTION", 0, 0, 1);
  g_settings.snooze_fraction = EnvNumber("RELIABLEQ_CHAOS_SNOOZE_FRACTION", 0, 0, 1);
  g_settings.discard_fraction = EnvNumber("RELIABLEQ_CHAOS_DISCARD_FRACTION", 0, 0, 1);
  g_settings.record_patience_ms =
      static_cast<int>(EnvNumber("RELIABLEQ_CHAOS_RECORD_PATIENCE_MS", 60000, 100, 3600000));
}

// splitmix64: spreads consecutive ids evenly, so "the first f of all jobs"
// becomes "a fraction f of the jobs, everywhere in the run".
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Whether job `id` is among the `fraction` chosen for the behaviour `salt`.
bool Chosen(int64_t id, uint64_t salt, double fraction) {
  if (fraction <= 0) return false;
  double u = static_cast<double>(Mix(static_cast<uint64_t>(id) ^ salt) >> 11) * 0x1.0p-53;
  return u < fraction;
}

double NowSeconds() {
  timeval tv;
  gettimeofday(&tv, nullptr);
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

// The monotonic clock (CLOCK_MONOTONIC, the same in every process of the
// machine), which libfaketime leaves alone in the chaos run: tools/chaos
// turns it into real time even where a stepped wall clock is ambiguous.
double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::mt19937_64& Random() {
  thread_local std::mt19937_64 generator{std::random_device{}() ^
                                         (static_cast<uint64_t>(getpid()) << 32) ^
                                         std::hash<std::thread::id>{}(std::this_thread::get_id())};
  return generator;
}

// This thread's connection for the records. Redis is killed and restarted
// during a chaos run, so any error drops the connection and the next try
// makes a new one.
class RecordConnection {
 public:
  ~RecordConnection() { Drop(); }

  // Runs the record script once. True when Redis answered it without error.
  bool TryRecord(const std::string& id, const std::string& token, const std::string& details,
                 bool counts) {
    const char* argv[] = {"EVAL",
                          kRecordScript,
                          "2",
                          g_settings.runs_key.c_str(),
                          g_settings.log_key.c_str(),
                          id.c_str(),
                          token.c_str(),
                          details.c_str(),
                          counts ? "1" : "0"};
    return TryCommand(argv, std::extent_v<decltype(argv)>);
  }

  // Runs the start script once; true when Redis answered it without error.
  bool TryStart(const std::string& token, const std::string& details) {
    const char* argv[] = {"EVAL", kStartScript, "1", g_settings.starts_key.c_str(),
                          token.c_str(), details.c_str()};
    return TryCommand(argv, std::extent_v<decltype(argv)>);
  }

 private:
  bool TryCommand(const char** argv, size_t count) {
    if (context_ == nullptr && !Connect()) return false;
    size_t lengths[16];
    for (size_t i = 0; i < count; ++i) lengths[i] = std::char_traits<char>::length(argv[i]);
    auto* reply = static_cast<redisReply*>(
        redisCommandArgv(context_, static_cast<int>(count), argv, lengths));
    if (reply == nullptr) {
      Drop();
      return false;
    }
    // An error reply (LOADING while Redis reads its AOF back) is tried again
    // on the same connection.
    bool ok = reply->type != REDIS_REPLY_ERROR;
    freeReplyObject(reply);
    return ok;
  }

  bool Connect() {
    timeval connect_timeout = {1, 0};
    context_ =
        g_settings.unix_path.empty()
            ? redisConnectWithTimeout(g_settings.host.c_str(), g_settings.port, connect_timeout)
            : redisConnectUnixWithTimeout(g_settings.unix_path.c_str(), connect_timeout);
    if (context_ == nullptr || context_->err != 0) {
      Drop();
      return false;
    }
    timeval command_timeout = {2, 0};
    redisSetTimeout(context_, command_timeout);
    return true;
  }

  void Drop() {
    if (context_ != nullptr) redisFree(context_);
    context_ = nullptr;
  }

  redisContext* context_ = nullptr;
};

RecordConnection& ThreadConnection() {
  thread_local RecordConnection connection;
  return connection;
}

// A new token for one attempt's records.
std::string NewToken() {
  char token[17];
  std::snprintf(token, sizeof token, "%016llx", static_cast<unsigned long long>(Random()()));
  return token;
}

// Runs `attempt` until it succeeds or the patience passes; throws then,
// naming `what`.
template <typename Attempt>
void Patiently(const std::string& what, Attempt attempt) {
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(g_settings.record_patience_ms);
  while (!attempt()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      throw std::runtime_error("chaos: cannot record " + what + " in Redis");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// Writes the start record of an attempt of a sequence's job (see the top).
void RecordStart(const std::string& token, int64_t id, const std::string& key, int64_t index,
                 int64_t interrupted, int64_t retried, double start, double start_mono) {
  char details[1024];
  std::snprintf(details, sizeof details,
                "{\"id\":%lld,\"key\":\"%s\",\"ix\":%lld,\"pid\":%d,\"ic\":%lld,\"rc\":%lld,"
                "\"start\":%.6f,\"ms\":%.6f}",
                static_cast<long long>(id), key.c_str(), static_cast<long long>(index),
                static_cast<int>(getpid()), static_cast<long long>(interrupted),
                static_cast<long long>(retried), start, start_mono);
  Patiently("the start of job " + std::to_string(id),
            [&] { return ThreadConnection().TryStart(token, details); });
}

// Writes the record of one attempt, retrying within the patience. Throws
// when it cannot.
void Record(const std::string& token, int64_t id, int64_t interrupted, int64_t retried,
            double start, double start_mono, const char* outcome) {
  char details[256];
  std::snprintf(details, sizeof details,
                "{\"id\":%lld,\"pid\":%d,\"ic\":%lld,\"rc\":%lld,\"start\":%.6f,\"end\":%.6f,"
                "\"ms\":%.6f,\"me\":%.6f,\"outcome\":\"%s\"}",
                static_cast<long long>(id), static_cast<int>(getpid()),
                static_cast<long long>(interrupted), static_cast<long long>(retried), start,
                NowSeconds(), start_mono, MonotonicSeconds(), outcome);
  const std::string id_text = std::to_string(id);
  const bool counts = std::string_view(outcome) == "ok";
  Patiently("job " + id_text,
            [&] { return ThreadConnection().TryRecord(id_text, token, details, counts); });
}

int64_t IntegerField(const JobView& job, const char* name, int64_t absent) {
  const rapidjson::Value& payload = job.payload();
  auto it = payload.FindMember(name);
  if (it == payload.MemberEnd() || !it->value.IsInt64()) return absent;
  return it->value.GetInt64();
}

// Distinct salts keep the three choices independent of each other.
constexpr uint64_t kThrowSalt = 0x7468726f77ULL;
constexpr uint64_t kAbortSalt = 0x61626f7274ULL;
constexpr uint64_t kLongSalt = 0x6c6f6e67ULL;
constexpr uint64_t kSnoozeSalt = 0x736e6f6f7a65ULL;
constexpr uint64_t kDiscardSalt = 0x64697363617264ULL;

// Sleeps `duration` unless the job's stop token is stopped first (a worker
// that fenced itself, or stopped past its timeout), as a well-behaved
// handler waits; true when it slept the whole time.
bool SleepUnlessStopped(const JobView& job, std::chrono::microseconds duration) {
  std::mutex mutex;
  std::condition_variable_any wake;
  std::unique_lock<std::mutex> lock(mutex);
  wake.wait_for(lock, job.stop_token(), duration, [] { return false; });
  return !job.stop_requested();
}

void ChaosJob(const JobView& job) {
  const rapidjson::Value& args = job.args();
  if (args.Empty() || !args[0].IsInt64()) {
    throw std::invalid_argument("ChaosJob expects args [id]");
  }
  const double start = NowSeconds();
  const double start_mono = MonotonicSeconds();
  const int64_t id = args[0].GetInt64();
  const int64_t interrupted = IntegerField(job, "interrupted_count", 0);
  const int64_t retried = job.retry_count().value_or(-1);
  const bool first_attempt = interrupted == 0 && retried < 0;
  const std::string token = NewToken();
  if (args.Size() >= 3 && args[1].IsString() && args[2].IsInt64()) {
    RecordStart(token, id, std::string(args[1].GetString(), args[1].GetStringLength()),
                args[2].GetInt64(), interrupted, retried, start, start_mono);
  }
  // Every record of this attempt carries its token.
  auto record = [&](const char* outcome) {
    Record(token, id, interrupted, retried, start, start_mono, outcome);
  };

  if (first_attempt && Chosen(id, kAbortSalt, g_settings.abort_fraction)) {
    record("abort");
    std::abort();
  }
  std::uniform_int_distribution<int> sleep_us(1000, g_settings.sleep_max_ms * 1000);
  bool slept = SleepUnlessStopped(job, std::chrono::microseconds(sleep_us(Random())));
  if (slept && interrupted < 2 && Chosen(id, kLongSalt, g_settings.long_fraction)) {
    slept = SleepUnlessStopped(job, std::chrono::milliseconds(g_settings.long_ms));
  }
  if (!slept) {
    // Its outcome is dropped and the job handed back: not a run.
    record("stopped");
    return;
  }
  // Snoozes twice, 0.1 to 0.6 s each, then runs; spends no retry.
  if (IntegerField(job, "snooze_count", 0) < 2 && Chosen(id, kSnoozeSalt, g_settings.snooze_fraction)) {
    record("snooze");
    std::uniform_int_distribution<int> snooze_ms(100, 600);
    throw reliableq::JobSnooze(std::chrono::milliseconds(snooze_ms(Random())));
  }
  // Its first attempt ends its life: dropped, never run again.
  if (first_attempt && Chosen(id, kDiscardSalt, g_settings.discard_fraction)) {
    record("discard");
    throw reliableq::JobDiscard("chaos: planned discard of job " + std::to_string(id));
  }
  if (retried < 0 && Chosen(id, kThrowSalt, g_settings.throw_fraction)) {
    record("throw");
    throw std::runtime_error("chaos: planned failure of job " + std::to_string(id));
  }
  record("ok");
}

}  // namespace

// The module is built with hidden visibility; this is its one exported symbol.
extern "C" __attribute__((visibility("default"))) int reliableq_register(
    reliableq::HandlerRegistry* registry, int abi_version) {
  if (abi_version != RELIABLEQ_PLUGIN_ABI_VERSION || registry == nullptr) return 1;
  // No exception may cross the C entry point; a bad setting says why and
  // refuses to load.
  try {
    LoadSettings();
    registry->Register("ChaosJob", ChaosJob);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chaos_jobs: %s\n", e.what());
    return 1;
  } catch (...) {
    return 1;
  }
  return 0;
}

static_assert(std::is_same_v<decltype(&reliableq_register), reliableq_register_fn>,
              "reliableq_register must match plugin.h");
