// ReadSpoolStatus and DrainSpool (include/reliableq/spool.h): the spool
// seen from a process of its own.

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "protocol/keys.h"
#include "redis/connection.h"
#include "reliableq/spool.h"
#include "spool/directory.h"
#include "spool/drain.h"
#include "spool/journal.h"

namespace reliableq {

namespace {

// One journal, read without its lock: a live writer may be appending, so a
// record cut short at the end is expected then.
SpoolFileStatus ReadOne(const spool::DirectoryEntry& entry) {
  SpoolFileStatus file;
  file.name = entry.name;
  file.bytes = entry.bytes;
  Result<int> opened = spool::OpenRegular(entry.path, O_RDONLY);
  if (!opened.ok()) {
    file.problem = opened.status().ToString();
    return file;
  }
  int fd = *opened;
  // A lock that cannot be shared is held by a writer or a drainer.
  if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
    flock(fd, LOCK_UN);
  } else {
    file.live = errno == EWOULDBLOCK;
  }
  struct stat st;
  if (fstat(fd, &st) == 0) file.bytes = static_cast<uint64_t>(st.st_size);
  Result<spool::JournalScan> scan = spool::ScanJournal(fd, file.bytes);
  if (!scan.ok()) {
    file.problem = scan.status().ToString();
    close(fd);
    return file;
  }
  file.format = scan->start.format;
  if (const std::optional<spool::Keyspace>& keyspace = scan->start.keyspace) {
    file.keyspace_recorded = true;
    file.prefix = keyspace->prefix;
    file.group = keyspace->group;
  }
  if (scan->tail == spool::JournalScan::Tail::kTorn) {
    file.problem =
        "a record cut short at offset " + std::to_string(scan->valid_end) +
        (file.live ? " (being written)" : " (a crash during a write; dropped when drained)");
  } else if (scan->tail == spool::JournalScan::Tail::kCorrupt) {
    file.problem = "damaged at offset " + std::to_string(scan->valid_end) +
                   " (a drain sets the file aside and drains the jobs before it)";
  }
  Result<spool::PendingSummary> pending = spool::SummarizePending(fd, *scan);
  close(fd);
  if (!pending.ok()) {
    if (file.problem.empty()) file.problem = pending.status().ToString();
    return file;
  }
  file.pending_jobs = pending->jobs;
  file.pending_bytes = pending->bytes;
  file.oldest_spooled_at = pending->oldest_spooled_at;
  file.held_jobs = static_cast<int64_t>(scan->held.size());
  if (!scan->held.empty()) file.held_reason = scan->held.rbegin()->second;
  file.dropped_jobs = scan->dropped;
  return file;
}

// Why a journal's name on something else is never read or drained.
std::string NotRegular(const spool::DirectoryEntry& entry) {
  return "it is " + entry.type + ", not a regular file: refused, never read or drained";
}

}  // namespace

Result<SpoolStatus> ReadSpoolStatus(const std::string& dir) {
  Result<std::vector<spool::DirectoryEntry>> entries = spool::ListDirectory(dir);
  if (!entries.ok()) return entries.status();
  SpoolStatus status;
  status.dir = dir;
  status.warning = spool::WritableByOthers(dir);
  for (const spool::DirectoryEntry& entry : *entries) {
    status.total_bytes += entry.bytes;
    if (entry.kind == spool::DirectoryEntry::Kind::kCorrupt) {
      status.corrupt_files.push_back(entry.name);
      continue;
    }
    if (entry.kind == spool::DirectoryEntry::Kind::kNotRegular) {
      SpoolFileStatus file;
      file.name = entry.name;
      file.problem = NotRegular(entry);
      status.files.push_back(std::move(file));
      continue;
    }
    status.files.push_back(ReadOne(entry));
    status.pending_jobs += status.files.back().pending_jobs;
  }
  return status;
}

Result<SpoolDrainReport> DrainSpool(const std::string& dir, const RedisOptions& redis,
                                    const SpoolDrainOptions& options) {
  if (options.wait_replicas < 0 || options.wait_timeout.count() <= 0) {
    return Status::InvalidArgument(
        "wait_replicas must be 0 or more, and wait_timeout more than 0 ms (WAIT 0 waits forever)");
  }
  if (options.replay_window.count() < 1) {
    return Status::InvalidArgument("replay_window must be at least 1 s");
  }
  if (Status s = protocol::CheckKeyLayout(options.prefix, redis.group); !s.ok()) return s;
  Result<std::vector<spool::DirectoryEntry>> entries = spool::ListDirectory(dir);
  if (!entries.ok()) return entries.status();
  RedisOptions connection_options = redis;
  // WAIT may take its whole timeout: not a Redis that stopped answering.
  if (options.wait_replicas > 0) connection_options.command_timeout += options.wait_timeout;
  Result<std::unique_ptr<redis::Connection>> connection =
      redis::Connection::Create(connection_options);
  if (!connection.ok()) return connection.status();
  spool::RemoveStaleTemporaries(dir);

  const spool::Keyspace keyspace{options.prefix, redis.group};
  spool::DrainConfig config;
  config.keys = protocol::Keys::For(options.prefix, redis);
  config.wait_replicas = options.wait_replicas;
  config.wait_timeout = options.wait_timeout;
  config.replay_window = options.replay_window;
  // Held jobs of earlier drains get one more try now, not after a wait.
  config.held_retry = std::chrono::milliseconds(0);
  SpoolDrainReport report;
  report.warning = spool::WritableByOthers(dir);
  spool::DrainCounts counts;
  for (const spool::DirectoryEntry& entry : *entries) {
    if (entry.kind == spool::DirectoryEntry::Kind::kNotRegular) {
      report.failed_files.push_back(entry.name + ": " + NotRegular(entry));
      continue;
    }
    if (entry.kind == spool::DirectoryEntry::Kind::kCorrupt) {
      report.corrupt_files.push_back(entry.name);
      continue;
    }
    // Its keyspace first, without taking its lock (record.h, Drains).
    Result<spool::JournalStart> start = spool::ReadJournalStart(entry.path);
    if (!start.ok() && start.status().IsNotFound()) continue;  // drained meanwhile
    if (start.ok() && !spool::Drains(start->keyspace, keyspace)) {
      // Reported while it holds jobs: drained ones are no one's concern.
      SpoolFileStatus other = ReadOne(entry);
      if (other.pending_jobs > 0) {
        report.other_keyspace_files.push_back(
            entry.name + ": " + std::to_string(other.pending_jobs) +
            (other.pending_jobs == 1 ? " job" : " jobs") + " spooled for " +
            spool::KeyspaceText(start->keyspace));
      }
      continue;
    }
    spool::JournalFile::TailRepair repair;
    Result<std::unique_ptr<spool::JournalFile>> taken =
        spool::JournalFile::TakeOver(entry.path, &repair);
    if (!taken.ok()) {
      report.failed_files.push_back(entry.name + ": " + taken.status().ToString());
      continue;
    }
    if (*taken == nullptr) {
      // Deleted since the listing (another drain finished it) or held.
      if (access(entry.path.c_str(), F_OK) == 0) report.live_files.push_back(entry.name);
      continue;
    }
    if (repair.tail == spool::JournalScan::Tail::kCorrupt) {
      report.damaged_files.push_back(entry.name + ": " + repair.what);
    } else if (repair.tail == spool::JournalScan::Tail::kTorn) {
      report.dropped_tails.push_back(entry.name + ": " + repair.what);
    }
    spool::JournalFile* file = taken->get();
    if (report.stopped.ok() && file->HasWork(std::chrono::steady_clock::now())) {
      int64_t held_before = counts.held;
      Status s = spool::DrainFile(file, connection->get(), config, nullptr, &counts);
      if (!s.ok() && file->drain_stalled()) {
        report.failed_files.push_back(entry.name + ": " + s.ToString());
      } else if (!s.ok()) {
        report.stopped = s;
      }
      report.held += counts.held - held_before;
    }
    Result<bool> removed = file->RemoveIfDrained();
    if (removed.ok() && *removed) {
      ++report.files_removed;
      continue;
    }
    if (!removed.ok())
      report.failed_files.push_back(entry.name + ": " + removed.status().ToString());
    // What is left in it: scan again, as `spool status` would.
    struct stat st;
    Result<int> fd = spool::OpenRegular(file->path(), O_RDONLY, &st);
    if (fd.ok()) {
      Result<spool::JournalScan> scan = spool::ScanJournal(*fd, static_cast<uint64_t>(st.st_size));
      if (scan.ok()) {
        Result<spool::PendingSummary> pending = spool::SummarizePending(*fd, *scan);
        if (pending.ok()) report.left += pending->jobs;
      }
      close(*fd);
    }
  }
  report.pushed = counts.pushed;
  report.already_stored = counts.already_stored;
  report.dropped = counts.dropped;
  report.held_reason = counts.last_held_reason;
  return report;
}

}  // namespace reliableq
