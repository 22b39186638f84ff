#include "spool/client_spool.h"

#include <algorithm>
#include <utility>

#include "spool/directory.h"

namespace reliableq::spool {

namespace {

using SteadyClock = std::chrono::steady_clock;

// How long the sizes of the directory's other files are trusted.
constexpr auto kOthersFresh = std::chrono::seconds(1);

}  // namespace

ClientSpoolOptions SpoolOptionsOf(const ClientOptions& options) {
  ClientSpoolOptions out;
  out.dir = options.spool_dir;
  out.max_bytes = options.spool_max_bytes;
  out.prefix = options.prefix;
  out.wait_replicas = options.wait_replicas;
  out.wait_timeout = options.wait_timeout;
  out.replay_window = options.spool_replay_window;
  out.clock = options.clock;
  return out;
}

Result<std::unique_ptr<ClientSpool>> ClientSpool::Open(const RedisOptions& redis,
                                                       ClientSpoolOptions options) {
  // Options no connection can use are refused before the directory is
  // made: nothing is left behind by a call that fails.
  if (Status valid = redis.Validate(); !valid.ok()) return valid.WithContext(redis.Describe());
  Status s = PrepareDirectory(options.dir);
  if (!s.ok()) return s;
  Result<std::unique_ptr<redis::Connection>> connection = redis::Connection::Create(redis);
  if (!connection.ok()) return connection.status();
  std::unique_ptr<ClientSpool> spool(
      new ClientSpool(std::move(options), std::move(connection.value())));
  // Once per Client: the drainer lists the directory every few seconds.
  if (std::string warning = WritableByOthers(spool->options_.dir); !warning.empty()) {
    spool->log_.Log(LogLevel::kWarn, base::LogEvent("spool_dir_writable").WithError(warning),
                    "spool: %s", warning.c_str());
  }
  spool->thread_ = std::thread([raw = spool.get()] { raw->Run(); });
  return spool;
}

ClientSpool::ClientSpool(ClientSpoolOptions options, std::unique_ptr<redis::Connection> redis)
    : options_(std::move(options)),
      keyspace_{options_.prefix, redis->options().group},
      clock_(options_.clock ? options_.clock : SystemClock()),
      log_(options_.log_level),
      redis_(std::move(redis)) {
  drain_config_.keys = protocol::Keys::For(options_.prefix, redis_->options());
  drain_config_.wait_replicas = options_.wait_replicas;
  drain_config_.wait_timeout = options_.wait_timeout;
  drain_config_.replay_window = options_.replay_window;
  drain_config_.keep_waiting = true;
  drain_config_.held_retry = options_.held_retry;
  drain_config_.log = &log_;
}

ClientSpool::~ClientSpool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  adopted_.clear();
  std::lock_guard<std::mutex> lock(mu_);
  if (own_ != nullptr) {
    // No push is under way once the Client is being destroyed: a drained
    // file can go without racing its writer.
    Result<bool> removed = own_->RemoveIfDrained();
    if (!removed.ok()) {
      std::string error = removed.status().ToString();
      log_.Log(LogLevel::kWarn, base::LogEvent("spool_remove_failed").WithError(error), "spool: %s",
               error.c_str());
    }
    own_.reset();
  }
}

Status ClientSpool::why_bypassed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return why_;
}

void ClientSpool::Unreachable(const Status& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    why_ = why;
    wake_ = true;
    open_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

JournalFile* ClientSpool::own() {
  std::lock_guard<std::mutex> lock(mu_);
  return own_.get();
}

uint64_t ClientSpool::OtherBytes(bool fresh) {
  auto now = SteadyClock::now();
  if (!fresh && now - others_listed_ < kOthersFresh) return other_bytes_;
  JournalFile* mine = own();
  uint64_t bytes = 0;
  Result<std::vector<DirectoryEntry>> entries = ListDirectory(options_.dir);
  if (entries.ok()) {
    for (const DirectoryEntry& entry : *entries) {
      if (mine == nullptr || entry.path != mine->path()) bytes += entry.bytes;
    }
  }
  other_bytes_ = bytes;
  others_listed_ = now;
  return bytes;
}

Status ClientSpool::Write(std::vector<SpooledJob> jobs, bool* maybe_written) {
  *maybe_written = false;
  std::string frames;
  double now = clock_->Now();
  for (SpooledJob& job : jobs) {
    job.spooled_at = now;
    AppendJobRecord(&frames, job);
  }
  const uint64_t need = frames.size();
  {
    std::lock_guard<std::mutex> lock(size_mu_);
    JournalFile* mine = own();
    uint64_t own_bytes = mine != nullptr ? mine->size() : JournalHeader(keyspace_).size();
    auto used = [&](bool fresh) { return OtherBytes(fresh) + own_bytes + reserved_; };
    // Listed again before refusing: another process may have drained
    // files since.
    if (used(false) + need > options_.max_bytes && used(true) + need > options_.max_bytes) {
      return Status::IoError("spool " + options_.dir + " is full: " + std::to_string(used(false)) +
                             " bytes of " + std::to_string(options_.max_bytes));
    }
    reserved_ += need;
  }
  Status s;
  JournalFile* file = own();
  if (file == nullptr) {
    std::lock_guard<std::mutex> create(create_mu_);
    file = own();
    if (file == nullptr) {
      Result<std::unique_ptr<JournalFile>> created = JournalFile::Create(options_.dir, keyspace_);
      if (created.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        own_ = std::move(created.value());
        file = own_.get();
      } else {
        s = created.status();
      }
    }
  }
  if (s.ok()) s = file->Append(frames, nullptr, maybe_written);
  {
    std::lock_guard<std::mutex> lock(size_mu_);
    reserved_ -= need;
  }
  if (!s.ok()) return s.WithContext("spool " + options_.dir);
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_ = true;
  }
  cv_.notify_all();
  return Status::OK();
}

PushResult ClientSpool::Write(PushResult failed, std::vector<SpooledJob> jobs) {
  bool maybe_written = false;
  Status s = Write(std::move(jobs), &maybe_written);
  if (s.ok()) {
    failed.outcome = PushOutcome::kSpooled;
    failed.replicas = 0;
    failed.reason = Status::OK();
    return failed;
  }
  if (maybe_written) failed.outcome = PushOutcome::kNotConfirmed;
  failed.reason =
      Status::IoError(s.message() + " (not pushed to Redis: " + failed.reason.ToString() + ")");
  return failed;
}

PushResult ClientSpool::AfterPush(PushResult result, std::vector<SpooledJob> jobs) {
  bool unreachable = result.outcome == PushOutcome::kNotConfirmed ||
                     (result.outcome == PushOutcome::kRefused && result.reason.IsRetryable());
  if (!unreachable || jobs.empty()) return result;
  Unreachable(result.reason);
  return Write(std::move(result), std::move(jobs));
}

PushResult ClientSpool::AfterPush(PushResult result, std::optional<SpooledJob> job) {
  std::vector<SpooledJob> jobs;
  if (job) jobs.push_back(std::move(*job));
  return AfterPush(std::move(result), std::move(jobs));
}

PushResult ClientSpool::Instead(std::string jid, std::vector<SpooledJob> jobs) {
  PushResult failed;
  failed.outcome = PushOutcome::kRefused;
  failed.jid = std::move(jid);
  failed.reason = why_bypassed();
  return Write(std::move(failed), std::move(jobs));
}

PushResult ClientSpool::Instead(std::string jid, SpooledJob job) {
  std::vector<SpooledJob> jobs;
  jobs.push_back(std::move(job));
  return Instead(std::move(jid), std::move(jobs));
}

bool ClientSpool::HasWork(SteadyClock::time_point now) {
  if (bypass()) return true;
  if (JournalFile* mine = own(); mine != nullptr && mine->HasWork(now)) return true;
  for (const auto& file : adopted_) {
    if (file->HasWork(now)) return true;
  }
  return false;
}

void ClientSpool::Adopt() {
  RemoveStaleTemporaries(options_.dir);
  Result<std::vector<DirectoryEntry>> entries = ListDirectory(options_.dir);
  if (!entries.ok()) {
    std::string error = entries.status().ToString();
    log_.Log(LogLevel::kWarn, base::LogEvent("spool_list_failed").WithError(error), "spool: %s",
             error.c_str());
    return;
  }
  JournalFile* mine = own();
  // Forget the foreign journals that are gone (drained by their own).
  std::erase_if(foreign_, [&](const std::string& path) {
    return std::none_of(entries->begin(), entries->end(),
                        [&](const DirectoryEntry& entry) { return entry.path == path; });
  });
  for (const DirectoryEntry& entry : *entries) {
    if (entry.kind == DirectoryEntry::Kind::kCorrupt) continue;
    if (stalled_.count(entry.path) != 0 || foreign_.count(entry.path) != 0) continue;
    if (entry.kind == DirectoryEntry::Kind::kNotRegular) {
      std::string error = entry.path + " is " + entry.type + ", not a regular file";
      log_.Log(LogLevel::kError, base::LogEvent("spool_file_stalled").WithError(error),
               "spool: left alone: %s", error.c_str());
      stalled_.insert(entry.path);
      continue;
    }
    if (mine != nullptr && entry.path == mine->path()) continue;
    bool known = std::any_of(adopted_.begin(), adopted_.end(),
                             [&](const auto& file) { return file->path() == entry.path; });
    if (known) continue;
    // Its keyspace first, without its lock: a journal of another prefix or
    // group is neither pushed here (its jobs would land in this keyspace)
    // nor locked (its own clients could not drain it while this one lives).
    Result<JournalStart> start = ReadJournalStart(entry.path);
    if (!start.ok() && start.status().IsNotFound()) continue;  // drained meanwhile
    if (start.ok() && !Drains(start->keyspace, keyspace_)) {
      foreign_.insert(entry.path);
      continue;
    }
    JournalFile::TailRepair repair;
    Result<std::unique_ptr<JournalFile>> taken = JournalFile::TakeOver(entry.path, &repair);
    if (!taken.ok()) {
      std::string error = taken.status().ToString();
      log_.Log(LogLevel::kError, base::LogEvent("spool_file_stalled").WithError(error),
               "spool: left alone: %s", error.c_str());
      stalled_.insert(entry.path);
      continue;
    }
    if (*taken == nullptr) continue;  // its writer lives, or another drainer has it
    if (repair.tail == JournalScan::Tail::kCorrupt) {
      log_.Log(LogLevel::kError, base::LogEvent("spool_file_damaged").WithError(repair.what),
               "spool: %s: %s", entry.path.c_str(), repair.what.c_str());
    } else if (repair.tail == JournalScan::Tail::kTorn) {
      log_.Log(LogLevel::kWarn, base::LogEvent("spool_tail_dropped").WithError(repair.what),
               "spool: %s: %s", entry.path.c_str(), repair.what.c_str());
    }
    adopted_.push_back(std::move(taken.value()));
  }
}

Status ClientSpool::Pass() {
  auto stopping = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  };
  if (ping_first_) {
    // After a failed pass, Redis answers a PING before a batch is sent
    // again: a Redis that is stopped (SIGSTOP, a stalled host) would
    // otherwise queue one more copy of the same batch per attempt in its
    // socket buffers, and run every copy when it resumes.
    Result<redis::ReplyPtr> pong = redis_->Command({"PING"});
    if (!pong.ok()) return pong.status();
    ping_first_ = false;
  }
  auto now = SteadyClock::now();
  bool attempted = false;
  DrainCounts counts;
  // Files of processes that are gone first: their jobs are older.
  for (auto it = adopted_.begin(); it != adopted_.end();) {
    JournalFile* file = it->get();
    if (file->HasWork(now)) {
      attempted = true;
      Status s = DrainFile(file, redis_.get(), drain_config_, stopping, &counts);
      if (!s.ok() && !file->drain_stalled()) return s;
      if (!s.ok()) {
        std::string error = s.ToString();
        log_.Log(LogLevel::kError, base::LogEvent("spool_file_stalled").WithError(error),
                 "spool: left alone: %s", error.c_str());
        stalled_.insert(file->path());
        it = adopted_.erase(it);
        continue;
      }
    }
    Result<bool> removed = file->RemoveIfDrained();
    if (!removed.ok()) {
      std::string error = removed.status().ToString();
      log_.Log(LogLevel::kError, base::LogEvent("spool_remove_failed").WithError(error), "spool: %s",
               error.c_str());
      stalled_.insert(file->path());
      it = adopted_.erase(it);
    } else if (*removed) {
      it = adopted_.erase(it);
    } else {
      ++it;
    }
  }
  if (JournalFile* mine = own(); mine != nullptr && mine->HasWork(now)) {
    attempted = true;
    Status s = DrainFile(mine, redis_.get(), drain_config_, stopping, &counts);
    if (!s.ok() && !mine->drain_stalled()) return s;
    if (!s.ok()) {
      std::string error = s.ToString();
      log_.Log(LogLevel::kError, base::LogEvent("spool_drain_failed").WithError(error), "spool: %s",
               error.c_str());
    }
    s = mine->TruncateIfDrained();
    if (!s.ok()) {
      std::string error = s.ToString();
      log_.Log(LogLevel::kWarn, base::LogEvent("spool_truncate_failed").WithError(error), "spool: %s",
               error.c_str());
    }
  }
  if (!attempted && bypass()) {
    // Nothing to push, but pushes wait for a sign that Redis answers.
    Result<redis::ReplyPtr> pong = redis_->Command({"PING"});
    if (!pong.ok()) return pong.status();
  }
  return Status::OK();
}

void ClientSpool::Run() {
  base::SetLogThreadName("spool");
  std::chrono::milliseconds backoff{0};
  auto next_scan = SteadyClock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    auto now = SteadyClock::now();
    if (now >= next_scan) {
      Adopt();
      next_scan = now + options_.scan_interval;
    }
    bool work = HasWork(now);
    lock.lock();
    if (stop_) break;
    if (!work) {
      if (!wake_) cv_.wait_until(lock, next_scan, [this] { return stop_ || wake_; });
      wake_ = false;
      continue;
    }
    wake_ = false;
    lock.unlock();
    Status s = Pass();
    lock.lock();
    if (s.ok()) {
      open_.store(false, std::memory_order_release);
      backoff = std::chrono::milliseconds(0);
      continue;
    }
    if (s.IsShutdown()) break;
    ping_first_ = true;
    if (s.IsRetryable()) {
      // Redis did not answer (or could not serve): pushes keep going to the
      // spool, and the drainer tries again later.
      why_ = s;
      open_.store(true, std::memory_order_release);
    } else {
      // Redis answered, with an error the drain cannot get past now (NOSCRIPT
      // again after loading the scripts, say): pushes may try Redis; the
      // drain tries again later. Logged once per reason, not once a second.
      open_.store(false, std::memory_order_release);
      if (s.ToString() != last_logged_) {
        last_logged_ = s.ToString();
        log_.Log(LogLevel::kError, base::LogEvent("spool_drain_stopped").WithError(last_logged_),
                 "spool: the drain stopped: %s", last_logged_.c_str());
      }
    }
    backoff =
        backoff.count() == 0 ? options_.min_backoff : std::min(backoff * 2, options_.max_backoff);
    cv_.wait_for(lock, backoff, [this] { return stop_; });
  }
}

}  // namespace reliableq::spool
