// ClientSpool: the durable spool of one Client (ClientOptions::spool_dir).
// It owns three things:
// - the journal file this Client writes, created at the first job spooled
//   (one file per Client, locked while it lives; journal.h);
// - a circuit breaker: once a push found Redis unreachable (Unreachable),
//   pushes go straight to the spool (bypass()) until the drainer has seen
//   Redis answer, so that a producer keeps its pace during an outage instead
//   of waiting out a connect or command timeout per push;
// - the drainer thread, which pushes spooled jobs (its own file's, and those
//   of the files processes that are gone left for the same keyspace, which
//   it takes over) as soon as Redis answers, probing every
//   min_backoff..max_backoff while it does not (drain.h says how each job is
//   pushed and recorded). Journals of another keyspace (record.h, Drains:
//   another prefix or queue group) are left to clients of theirs.
//
// The size bound (max_bytes) covers every file of the directory: this
// Client's own file exactly, the others as last listed (at most a second
// ago, and listed again before a job is refused).
//
// Thread safety: every public method may be called from any thread at once.

#ifndef RELIABLEQ_SPOOL_CLIENT_SPOOL_H_
#define RELIABLEQ_SPOOL_CLIENT_SPOOL_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "redis/connection.h"
#include "reliableq/client.h"
#include "reliableq/clock.h"
#include "reliableq/push_result.h"
#include "reliableq/redis_options.h"
#include "reliableq/status.h"
#include "spool/drain.h"
#include "spool/journal.h"
#include "spool/record.h"

namespace reliableq::spool {

struct ClientSpoolOptions {
  std::string dir;
  uint64_t max_bytes = uint64_t{1} << 30;
  // The prefix of the wake-up channels (ClientOptions::prefix); with the
  // RedisOptions' group, the keyspace of the journals it writes and drains.
  std::string prefix = "reliableq:";
  // As ClientOptions: drained jobs count as pushed once this many replicas
  // have them.
  int wait_replicas = 0;
  std::chrono::milliseconds wait_timeout{1000};
  // As ClientOptions::spool_replay_window: how long Redis keeps the record
  // of each jid drained (DrainConfig).
  std::chrono::seconds replay_window{3600};
  // Where spooled_at comes from.
  std::shared_ptr<const Clock> clock;
  // The drainer's probe interval while Redis does not answer: it starts at
  // min_backoff and doubles up to max_backoff.
  std::chrono::milliseconds min_backoff{100};
  std::chrono::milliseconds max_backoff{1000};
  // How often the directory is listed for files whose writer is gone.
  std::chrono::milliseconds scan_interval{2000};
  // How long a held job waits before it is tried again.
  std::chrono::milliseconds held_retry{30000};
  // Drops and holds; errors that stall a file.
  LogLevel log_level = LogLevel::kWarn;
};

// The spool's options of a Client's options.
ClientSpoolOptions SpoolOptionsOf(const ClientOptions& options);

class ClientSpool {
 public:
  // Creates the directory when missing and starts the drainer, which drains
  // at once what earlier processes left. kIoError naming the directory when
  // it cannot be created or written; kInvalidArgument for options no
  // connection can use (RedisOptions::Validate; checked before the
  // directory is made) or unusable TLS settings. Does not need Redis.
  static Result<std::unique_ptr<ClientSpool>> Open(const RedisOptions& redis,
                                                   ClientSpoolOptions options);

  // Stops the drainer (between two round trips; a round trip under way
  // ends within the connection's timeouts) and closes the files. The own
  // file is deleted when drained; otherwise it stays for the next process.
  ~ClientSpool();
  ClientSpool(const ClientSpool&) = delete;
  ClientSpool& operator=(const ClientSpool&) = delete;

  // True while Redis is taken for unreachable: push to the spool without
  // trying Redis.
  bool bypass() const { return open_.load(std::memory_order_acquire); }
  // The failure that made Redis unreachable, for messages.
  Status why_bypassed() const;

  // A push found Redis unreachable (`why`): bypass until the drainer has
  // seen Redis answer, and have it probe now.
  void Unreachable(const Status& why);

  // Writes `jobs` (spooled_at is set here) to this Client's journal, all or
  // none, and returns once they are on disk. kIoError "spool DIR is full: N
  // bytes of M" when they do not fit, with nothing written; kIoError for a
  // failed write, with *maybe_written set when they may still be in the
  // file (a failed fdatasync).
  Status Write(std::vector<SpooledJob> jobs, bool* maybe_written);

  const std::string& dir() const { return options_.dir; }

  // The Client's side. `result` is what became of a push of `jobs` (one
  // job, or one batch of a bulk push; its jid set). When it says Redis could
  // not be reached, that is kNotConfirmed (it may have landed: the drain
  // pushes it again under the same jid) or kRefused for a reason that may
  // pass (kIoError, kTimeout: no connection, a timeout, LOADING, READONLY,
  // BUSY, ...), the breaker opens and the jobs are written: kSpooled.
  // Anything else is returned as it is: a push Redis refused for the job's
  // own sake (kScript) or a rule refused would be refused again.
  PushResult AfterPush(PushResult result, std::vector<SpooledJob> jobs);
  PushResult AfterPush(PushResult result, std::optional<SpooledJob> job);
  // While bypass(): the jobs of a push (with `jid`) go to the spool without
  // trying Redis.
  PushResult Instead(std::string jid, std::vector<SpooledJob> jobs);
  PushResult Instead(std::string jid, SpooledJob job);

  // kSpooled once `jobs` are written. When the spool cannot take them (full,
  // a failed write) `failed` keeps its outcome, or becomes kNotConfirmed
  // when they may be in the file after all (a failed fdatasync), and its
  // reason says both why.
  PushResult Write(PushResult failed, std::vector<SpooledJob> jobs);

 private:
  ClientSpool(ClientSpoolOptions options, std::unique_ptr<redis::Connection> redis);

  // The drainer thread.
  void Run();
  // Takes over the journals of its keyspace whose writers are gone.
  void Adopt();
  // One pass over every file that has work; the Redis failure that stopped
  // it (file failures stall their file and are logged, not returned).
  Status Pass();
  bool HasWork(std::chrono::steady_clock::time_point now);
  // Bytes of the directory's other files, listed again when older than a
  // second or when `fresh`.
  uint64_t OtherBytes(bool fresh);
  JournalFile* own();

  const ClientSpoolOptions options_;
  // Of the journal it writes, and of those it takes over.
  const Keyspace keyspace_;
  const std::shared_ptr<const Clock> clock_;
  const base::Logger log_;
  DrainConfig drain_config_;
  std::unique_ptr<redis::Connection> redis_;  // the drainer's

  std::atomic<bool> open_{false};  // the breaker

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                 // guarded by mu_
  bool wake_ = false;                 // guarded by mu_
  Status why_;                        // guarded by mu_
  std::unique_ptr<JournalFile> own_;  // guarded by mu_ (set once, then read freely)

  std::mutex create_mu_;  // serializes creating own_

  std::mutex size_mu_;
  uint64_t reserved_ = 0;                                // guarded by size_mu_: bytes being written
  uint64_t other_bytes_ = 0;                             // guarded by size_mu_
  std::chrono::steady_clock::time_point others_listed_;  // guarded by size_mu_

  // The drainer thread's alone.
  std::vector<std::unique_ptr<JournalFile>> adopted_;
  std::set<std::string> stalled_;  // paths left alone for good
  std::set<std::string> foreign_;  // paths of journals of another keyspace
  std::string last_logged_;        // the last drain failure logged
  bool ping_first_ = false;        // the last pass failed: PING before a batch

  std::thread thread_;
};

}  // namespace reliableq::spool

#endif  // RELIABLEQ_SPOOL_CLIENT_SPOOL_H_
