// chaos_producer: pushes ChaosJob jobs for tools/chaos and writes down which
// pushes Redis acknowledged.
//
//   chaos_producer --redis URL --first-id N --count N --rate JOBS_PER_S
//                  --queues Q1,Q2 --accepted FILE --unknown FILE
//                  [--deadline SECONDS] [--backlog JOBS]
//                  [--wait-replicas N] [--wait-timeout MS] [--spool DIR]
//                  [--sequence-keys K [--sequence-window W]]
//
// Each attempt pushes one job {"class":"ChaosJob","args":[id],...} with a
// new id (first-id, first-id + 1, ...) through reliableq::Client, to queue
// Q[id % number of queues]. The push's outcome decides where its id goes:
// stored (accepted, replicated or spooled), "id<TAB>time<TAB>outcome\n" to
// the accepted file; not confirmed (the reply was lost while Redis restarts,
// or WAIT heard from fewer replicas than asked), "id<TAB>time<TAB>reason\n"
// to the unknown file: that job may or may not be stored, so it is not
// counted as accepted; refused (nothing stored: Redis unreachable, or an
// error reply), neither file, so that tools/chaos reports the job as a
// phantom execution if it ever runs. `time` is when the push returned, epoch
// seconds. Either way the next attempt uses the next id. Attempts go on until
// `count` pushes were stored, paced at `rate` stored pushes per second.
//
// With --sequence-keys K, every job names a sequence key (Job::sequence):
// the n-th push (n = id - first-id) gets the key "<first-id>.<slot>", slot
// n mod K, and the args [id, key, index], index n div K, its place within its
// key, so that each key's jobs are pushed in the order of their index; all of
// a key's jobs go to one queue (Q[slot % number of queues]). With
// --sequence-window W, the keys take turns W at a time: the first W keys get
// all their jobs (count / K, rounded up, each), interleaved, then the next W,
// so that jobs of one key sit close together in the queue and meet each
// other at the fetch. A push whose reply was lost still used its index: its
// key's order is that of the pushes Redis stored.
//
// --wait-replicas and --wait-timeout set ClientOptions::wait_replicas and
// wait_timeout (a push is stored only when replicated); --spool sets
// ClientOptions::spool_dir, and then the producer, once done, waits (within
// the deadline) until the spool directory holds no job (its own journal and
// those of other producers sharing it) before it ends, since a Client drains
// its own journal only while it lives. With
// --backlog, pushes also wait while the queues hold that many jobs or more (a
// standing backlog: the workers never run dry, and neither does Redis fill
// up).
//
// SIGTERM ends the run between two pushes, never inside one, so that every
// push made is written down.
//
// Both files are flushed after every line, so a reader sees every push that
// was acknowledged before it looked.
//
// Prints "accepted A unknown U refused R" (A counts every stored push) and
// "outcomes: accepted a replicated r spooled s", and exits 0 when `count`
// pushes were stored or SIGTERM stopped it; exits 1 when the deadline passed
// first (or the spool did not empty within it), 2 on bad arguments.

#include <sys/time.h>

#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "reliableq/admin.h"
#include "reliableq/client.h"
#include "reliableq/spool.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string redis;
  long long first_id = -1;
  long long count = -1;
  double rate = 0;
  std::vector<std::string> queues;
  std::string accepted;
  std::string unknown;
  double deadline = 3600;
  long long backlog = 0;  // 0: no limit
  long long wait_replicas = 0;
  long long wait_timeout_ms = 1000;
  std::string spool;
  long long sequence_keys = 0;    // 0: plain jobs
  long long sequence_window = 0;  // 0: every key at once
};

volatile std::sig_atomic_t stop_requested = 0;

int Usage(const std::string& problem) {
  std::fprintf(stderr,
               "chaos_producer: %s\n"
               "usage: chaos_producer --redis URL --first-id N --count N --rate JOBS_PER_S\n"
               "                      --queues Q1,Q2 --accepted FILE --unknown FILE\n"
               "                      [--deadline SECONDS] [--backlog JOBS]\n"
               "                      [--wait-replicas N] [--wait-timeout MS] [--spool DIR]\n"
               "                      [--sequence-keys K [--sequence-window W]]\n",
               problem.c_str());
  return 2;
}

bool ParseNumber(const char* text, double* out) {
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || errno != 0) return false;
  *out = value;
  return true;
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) parts.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return parts;
}

// Returns the usage problem, or "" when the options are complete.
std::string ParseOptions(int argc, char** argv, Options* options) {
  for (int i = 1; i < argc; i += 2) {
    std::string name = argv[i];
    if (i + 1 >= argc) return "option " + name + " needs a value";
    const char* value = argv[i + 1];
    double number = 0;
    if (name == "--redis") {
      options->redis = value;
    } else if (name == "--queues") {
      options->queues = SplitCommas(value);
    } else if (name == "--accepted") {
      options->accepted = value;
    } else if (name == "--unknown") {
      options->unknown = value;
    } else if (name == "--spool") {
      options->spool = value;
    } else if (name == "--first-id" || name == "--count" || name == "--rate" ||
               name == "--deadline" || name == "--backlog" || name == "--wait-replicas" ||
               name == "--wait-timeout" || name == "--sequence-keys" ||
               name == "--sequence-window") {
      if (!ParseNumber(value, &number) || number < 0) {
        return name + " needs a non-negative number, not '" + value + "'";
      }
      if (name == "--first-id") options->first_id = static_cast<long long>(number);
      if (name == "--count") options->count = static_cast<long long>(number);
      if (name == "--rate") options->rate = number;
      if (name == "--deadline") options->deadline = number;
      if (name == "--backlog") options->backlog = static_cast<long long>(number);
      if (name == "--wait-replicas") options->wait_replicas = static_cast<long long>(number);
      if (name == "--wait-timeout") options->wait_timeout_ms = static_cast<long long>(number);
      if (name == "--sequence-keys") options->sequence_keys = static_cast<long long>(number);
      if (name == "--sequence-window") options->sequence_window = static_cast<long long>(number);
    } else {
      return "unknown option " + name;
    }
  }
  if (options->redis.empty() || options->first_id < 0 || options->count < 0 || options->rate <= 0 ||
      options->queues.empty() || options->accepted.empty() || options->unknown.empty()) {
    return "--redis, --first-id, --count, --rate (> 0), --queues, --accepted and --unknown "
           "are required";
  }
  return "";
}

// Appends one line and flushes it; a record that cannot be written makes
// the whole count meaningless, so it ends the program.
void AppendLine(FILE* file, const std::string& line, const std::string& path) {
  if (std::fputs(line.c_str(), file) == EOF || std::fputc('\n', file) == EOF ||
      std::fflush(file) != 0) {
    std::fprintf(stderr, "chaos_producer: cannot write %s: %s\n", path.c_str(),
                 std::strerror(errno));
    std::exit(1);
  }
}

// The jobs in `queues` now, or -1 when Redis does not answer. `admin` is
// opened on first use and kept (its connection reconnects by itself).
long long QueuedJobs(const reliableq::RedisOptions& redis, const std::vector<std::string>& queues,
                     std::unique_ptr<reliableq::Admin>* admin) {
  if (*admin == nullptr) {
    reliableq::Result<std::unique_ptr<reliableq::Admin>> opened = reliableq::Admin::Open(redis);
    if (!opened.ok()) return -1;
    *admin = std::move(opened.value());
  }
  reliableq::Result<std::vector<reliableq::QueueStats>> listed = (*admin)->ListQueues();
  if (!listed.ok()) return -1;
  long long total = 0;
  for (const reliableq::QueueStats& queue : *listed) {
    for (const std::string& name : queues) {
      if (queue.name == name) total += queue.size;
    }
  }
  return total;
}

// Epoch seconds with microseconds, as the job records write them, so that
// tools/chaos can put a push beside a failover.
std::string NowText() {
  timeval tv;
  gettimeofday(&tv, nullptr);
  char text[32];
  std::snprintf(text, sizeof text, "%lld.%06ld", static_cast<long long>(tv.tv_sec),
                static_cast<long>(tv.tv_usec));
  return text;
}

// Waits until the spool directory holds no job, or the deadline passes: the
// Client drains its own journal only while it lives. True when it emptied.
bool WaitForEmptySpool(const std::string& dir, Clock::time_point deadline) {
  while (true) {
    reliableq::Result<reliableq::SpoolStatus> status = reliableq::ReadSpoolStatus(dir);
    if (status.ok() && status->pending_jobs == 0) return true;
    if (Clock::now() >= deadline) {
      std::fprintf(stderr, "chaos_producer: spool %s still holds jobs at the deadline: %s\n",
                   dir.c_str(),
                   status.ok() ? std::to_string(status->pending_jobs).c_str()
                               : status.status().ToString().c_str());
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// The key slot and the index within it of the n-th push (see the top).
void SequencePlace(const Options& options, long long n, long long* slot, long long* index) {
  const long long keys = options.sequence_keys;
  const long long window = options.sequence_window;
  if (window <= 0 || window >= keys) {
    *slot = n % keys;
    *index = n / keys;
    return;
  }
  // Jobs per key, and the pushes of one turn of `window` keys; a turn of
  // fewer keys (the last) gives each more. Pushes past `count` (those whose
  // reply was lost used ids too) start the keys over, at higher indices.
  const long long per_key = (options.count + keys - 1) / keys;
  const long long turns = (keys + window - 1) / window;
  const long long turn = n / (window * per_key);
  const long long within = n % (window * per_key);
  const long long first = turn % turns * window;
  const long long width = std::min(window, keys - first);
  *slot = first + within % width;
  *index = turn / turns * window * per_key + within / width;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  std::string problem = ParseOptions(argc, argv, &options);
  if (!problem.empty()) return Usage(problem);
  reliableq::Result<reliableq::RedisOptions> redis =
      reliableq::RedisOptions::FromUrl(options.redis);
  if (!redis.ok()) return Usage(redis.status().ToString());
  // Short timeouts: while Redis restarts, an attempt should fail fast and be
  // counted as unknown rather than hold the producer.
  redis->connect_timeout = std::chrono::milliseconds(1000);
  redis->command_timeout = std::chrono::milliseconds(2000);
  reliableq::ClientOptions client_options;
  client_options.wait_replicas = static_cast<int>(options.wait_replicas);
  client_options.wait_timeout = std::chrono::milliseconds(options.wait_timeout_ms);
  client_options.spool_dir = options.spool;

  FILE* accepted = std::fopen(options.accepted.c_str(), "a");
  FILE* unknown = std::fopen(options.unknown.c_str(), "a");
  if (accepted == nullptr || unknown == nullptr) {
    std::fprintf(stderr, "chaos_producer: cannot open %s or %s: %s\n", options.accepted.c_str(),
                 options.unknown.c_str(), std::strerror(errno));
    return 1;
  }

  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(options.deadline));
  std::unique_ptr<reliableq::Client> client;
  long long next_id = options.first_id;
  long long accepted_count = 0;
  long long unknown_count = 0;
  long long refused_count = 0;
  // Stored pushes by outcome: accepted, replicated, spooled.
  long long by_outcome[3] = {0, 0, 0};
  std::signal(SIGTERM, [](int) { stop_requested = 1; });
  // Pushes left before the backlog is looked at again.
  long long unchecked = 0;
  std::unique_ptr<reliableq::Admin> admin;
  auto print_counts = [&] {
    std::printf("accepted %lld unknown %lld refused %lld\n", accepted_count, unknown_count,
                refused_count);
    std::printf("outcomes: accepted %lld replicated %lld spooled %lld\n", by_outcome[0],
                by_outcome[1], by_outcome[2]);
  };
  while (accepted_count < options.count && !stop_requested) {
    if (Clock::now() >= deadline) {
      std::fprintf(stderr, "chaos_producer: deadline passed after %lld of %lld pushes\n",
                   accepted_count, options.count);
      print_counts();
      return 1;
    }
    // Pace by accepted pushes, so that a Redis outage is caught up after.
    auto due = start + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(accepted_count / options.rate));
    std::this_thread::sleep_until(due);
    if (options.backlog > 0 && unchecked-- <= 0) {
      long long queued = QueuedJobs(*redis, options.queues, &admin);
      if (queued < 0 || queued >= options.backlog) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        unchecked = 0;
        continue;
      }
      // Up to a tenth of the room left before the next look.
      unchecked = (options.backlog - queued) / 10;
    }
    if (client == nullptr) {
      reliableq::Result<std::unique_ptr<reliableq::Client>> opened =
          reliableq::Client::Open(*redis, client_options);
      if (!opened.ok()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;  // nothing was sent: no id is used up
      }
      client = std::move(opened.value());
    }
    const long long id = next_id++;
    reliableq::Job job;
    job.job_class = "ChaosJob";
    if (options.sequence_keys > 0) {
      long long slot = 0;
      long long index = 0;
      SequencePlace(options, id - options.first_id, &slot, &index);
      const std::string key = std::to_string(options.first_id) + "." + std::to_string(slot);
      job.args = "[" + std::to_string(id) + ",\"" + key + "\"," + std::to_string(index) + "]";
      job.queue = options.queues[static_cast<size_t>(slot) % options.queues.size()];
      job.sequence = reliableq::Sequence{key, false};
    } else {
      job.args = "[" + std::to_string(id) + "]";
      job.queue = options.queues[static_cast<size_t>(id) % options.queues.size()];
    }
    reliableq::Result<reliableq::PushResult> pushed = client->Push(job);
    if (!pushed.ok()) {
      // The job is built above and is always valid: a bug, not a fault.
      std::fprintf(stderr, "chaos_producer: %s\n", pushed.status().ToString().c_str());
      return 2;
    }
    const std::string head = std::to_string(id) + "\t" + NowText() + "\t";
    if (pushed->stored()) {
      AppendLine(accepted, head + reliableq::PushOutcomeName(pushed->outcome), options.accepted);
      ++accepted_count;
      ++by_outcome[pushed->outcome == reliableq::PushOutcome::kAccepted     ? 0
                   : pushed->outcome == reliableq::PushOutcome::kReplicated ? 1
                                                                            : 2];
    } else if (pushed->outcome == reliableq::PushOutcome::kNotConfirmed) {
      std::string reason = pushed->reason.ToString();
      for (char& c : reason) {
        if (c == '\n' || c == '\t') c = ' ';
      }
      AppendLine(unknown, head + reason, options.unknown);
      ++unknown_count;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } else {
      // Refused: nothing was stored, so the id is written nowhere. Should
      // the job run all the same, tools/chaos reports it as a phantom
      // execution: a refusal that was not true is caught.
      ++refused_count;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  std::fclose(accepted);
  std::fclose(unknown);
  int status = 0;
  if (client != nullptr && !options.spool.empty() && !WaitForEmptySpool(options.spool, deadline)) {
    status = 1;
  }
  if (refused_count > 0) {
    std::fprintf(stderr, "chaos_producer: %lld pushes refused\n", refused_count);
  }
  print_counts();
  return status;
}
