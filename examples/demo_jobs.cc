// demo_jobs: the example plugin, loaded with
//
//   reliableq worker -r build/examples/libdemo_jobs.so
//
// Its job classes serve the quick start, the tests and the benchmarks:
//
//   EmailJob    [to, subject]             sleeps 2-5 ms, logs one line to stderr,
//                                         records its jid (see RecordJob)
//   PaymentJob  [order_id, amount_cents]  sleeps 2-5 ms, logs one line to stderr,
//                                         records its jid (see RecordJob), gives
//                                         {"charge":"ch_<jid>","amount_cents":N}
//                                         as its result
//   NoopJob     any args                  does nothing
//   SleepJob    [milliseconds]            sleeps that long
//   FailingJob  any args                  throws std::runtime_error
//   CrashJob    any args                  abort(): kills its worker process
//   RecordJob   [anything, ms?]           sleeps ms (if given), then appends
//                                         "<jid>\n" to $RELIABLEQ_DEMO_LOG
//   LatencyJob  any args                  appends "<microseconds>\n", the time
//                                         from the job's enqueued_at to the
//                                         start of its handler, to
//                                         $RELIABLEQ_BENCH_LATENCY_LOG
//                                         (tools/bench's pickup latency)
//   DueJob      [due_epoch_seconds]       appends "<microseconds>\n", the time
//                                         from its due time to the start of
//                                         its handler, to the same file
//                                         (tools/bench's scheduled-job
//                                         lateness)
//
// A job whose args do not have the shape above fails with
// std::invalid_argument (and is retried like any other failure).
//
// The module uses only the public headers: HandlerRegistry is header-only,
// so it needs no symbol of the library.

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
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

// Handlers run on many processor threads at once; one generator per thread
// needs no lock.
void SleepTwoToFiveMillis() {
  thread_local std::mt19937 generator{std::random_device{}()};
  std::uniform_int_distribution<int> micros(2000, 5000);
  std::this_thread::sleep_for(std::chrono::microseconds(micros(generator)));
}

// One write(2) per line, so that lines of concurrent jobs never interleave.
void LogLine(std::string line) {
  line.push_back('\n');
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

std::string_view StringArg(const JobView& job, rapidjson::SizeType index, const char* usage) {
  const rapidjson::Value& args = job.args();
  if (args.Size() <= index || !args[index].IsString()) throw std::invalid_argument(usage);
  return {args[index].GetString(), args[index].GetStringLength()};
}

// A non-negative number of milliseconds (integer or float).
std::chrono::microseconds MillisArg(const rapidjson::Value& value, const char* usage) {
  if (!value.IsNumber()) throw std::invalid_argument(usage);
  double millis = value.GetDouble();
  // The upper bound keeps the conversion below defined: a day is plenty.
  if (!(millis >= 0 && millis <= 86400000.0)) throw std::invalid_argument(usage);
  return std::chrono::microseconds(static_cast<int64_t>(millis * 1000));
}

void RecordExecution(const JobView& job);

void EmailJob(const JobView& job) {
  constexpr const char* kUsage = "EmailJob expects args [to, subject]";
  std::string_view to = StringArg(job, 0, kUsage);
  std::string_view subject = StringArg(job, 1, kUsage);
  SleepTwoToFiveMillis();
  LogLine("EmailJob " + std::string(job.jid()) + ": sent \"" + std::string(subject) + "\" to " +
          std::string(to));
  RecordExecution(job);
}

void PaymentJob(const JobView& job) {
  constexpr const char* kUsage = "PaymentJob expects args [order_id, amount_cents]";
  const rapidjson::Value& args = job.args();
  if (args.Size() < 2 || !(args[0].IsString() || args[0].IsInt64()) || !args[1].IsInt64()) {
    throw std::invalid_argument(kUsage);
  }
  std::string order = args[0].IsString()
                          ? std::string(args[0].GetString(), args[0].GetStringLength())
                          : std::to_string(args[0].GetInt64());
  SleepTwoToFiveMillis();
  LogLine("PaymentJob " + std::string(job.jid()) + ": charged " +
          std::to_string(args[1].GetInt64()) + " cents for order " + order);
  RecordExecution(job);
  // What a payment provider would answer, kept in the job's final record
  // when the worker keeps records (reliableq worker --records). (tools/bench
  // builds this file against older revisions' headers too.)
#if RELIABLEQ_PLUGIN_ABI_VERSION >= 5
  job.SetResult("{\"charge\":\"ch_" + std::string(job.jid()) +
                "\",\"amount_cents\":" + std::to_string(args[1].GetInt64()) + "}");
#endif
}

void NoopJob(const JobView&) {}

void SleepJob(const JobView& job) {
  constexpr const char* kUsage = "SleepJob expects args [milliseconds]";
  const rapidjson::Value& args = job.args();
  if (args.Empty()) throw std::invalid_argument(kUsage);
  std::this_thread::sleep_for(MillisArg(args[0], kUsage));
}

void FailingJob(const JobView&) { throw std::runtime_error("FailingJob failed on purpose"); }

void CrashJob(const JobView&) { std::abort(); }

// Appends `line` and a newline to the file named by the environment
// variable `variable`, if it is set. One write with O_APPEND, so lines of
// concurrent jobs and processes never interleave. The variable is read on
// every call: each worker process writes to its own environment's file.
void AppendLine(const char* variable, std::string line) {
  const char* path = std::getenv(variable);
  if (path == nullptr || *path == '\0') return;
  line.push_back('\n');
  int fd = ::open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw std::runtime_error("cannot open " + std::string(path) + ": " + std::strerror(errno));
  }
  ssize_t written;
  do {
    written = ::write(fd, line.data(), line.size());
  } while (written < 0 && errno == EINTR);
  int write_errno = errno;
  ::close(fd);
  if (written != static_cast<ssize_t>(line.size())) {
    throw std::runtime_error("cannot write " + std::string(path) + ": " +
                             (written < 0 ? std::strerror(write_errno) : "short write"));
  }
}

// Records the jid in $RELIABLEQ_DEMO_LOG, so that tests and the quick start
// can count how often each job ran.
void RecordExecution(const JobView& job) {
  AppendLine("RELIABLEQ_DEMO_LOG", std::string(job.jid()));
}

void RecordJob(const JobView& job) {
  constexpr const char* kUsage = "RecordJob expects args [anything, milliseconds?]";
  const rapidjson::Value& args = job.args();
  if (args.Size() >= 2 && args[1].IsNumber()) {
    std::this_thread::sleep_for(MillisArg(args[1], kUsage));
  }
  RecordExecution(job);
}

// The clock is read first: the latency is the time until the handler starts,
// not until its record is written. enqueued_at is float epoch seconds with
// microsecond precision, as the client writes it.
void LatencyJob(const JobView& job) {
  double now = std::chrono::duration<double>(
                   std::chrono::system_clock::now().time_since_epoch()).count();
  auto it = job.payload().FindMember("enqueued_at");
  if (it == job.payload().MemberEnd() || !it->value.IsNumber()) {
    throw std::invalid_argument("LatencyJob needs a numeric enqueued_at");
  }
  AppendLine("RELIABLEQ_BENCH_LATENCY_LOG",
             std::to_string(std::llround((now - it->value.GetDouble()) * 1e6)));
}

// As LatencyJob, against the due time the job carries (the time it was
// scheduled for, float epoch seconds) instead of enqueued_at, which a
// scheduled job gets only when it is moved to its queue.
void DueJob(const JobView& job) {
  double now = std::chrono::duration<double>(
                   std::chrono::system_clock::now().time_since_epoch()).count();
  const rapidjson::Value& args = job.args();
  if (args.Empty() || !args[0].IsNumber()) {
    throw std::invalid_argument("DueJob expects args [due_epoch_seconds]");
  }
  AppendLine("RELIABLEQ_BENCH_LATENCY_LOG",
             std::to_string(std::llround((now - args[0].GetDouble()) * 1e6)));
}

}  // namespace

// The module is built with hidden visibility; this is its one exported symbol.
extern "C" __attribute__((visibility("default"))) int reliableq_register(
    reliableq::HandlerRegistry* registry, int abi_version) {
  if (abi_version != RELIABLEQ_PLUGIN_ABI_VERSION || registry == nullptr) return 1;
  // No exception may cross the C entry point.
  try {
    registry->Register("EmailJob", EmailJob);
    registry->Register("PaymentJob", PaymentJob);
    registry->Register("NoopJob", NoopJob);
    registry->Register("SleepJob", SleepJob);
    registry->Register("FailingJob", FailingJob);
    registry->Register("CrashJob", CrashJob);
    registry->Register("RecordJob", RecordJob);
    registry->Register("LatencyJob", LatencyJob);
    registry->Register("DueJob", DueJob);
  } catch (...) {
    return 1;
  }
  return 0;
}

static_assert(std::is_same_v<decltype(&reliableq_register), reliableq_register_fn>,
              "reliableq_register must match plugin.h");
