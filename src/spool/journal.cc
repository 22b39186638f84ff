#include "spool/journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>

namespace reliableq::spool {

namespace {

using SteadyClock = std::chrono::steady_clock;

Status PwriteAll(int fd, std::string_view data, uint64_t offset, const std::string& path) {
  while (!data.empty()) {
    ssize_t put = pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) return ErrnoStatus("cannot write " + path, errno);
    data.remove_prefix(static_cast<size_t>(put));
    offset += static_cast<uint64_t>(put);
  }
  return Status::OK();
}

std::string JournalName() {
  uint32_t random = 0;
  if (getrandom(&random, sizeof random, 0) != sizeof random) {
    random = static_cast<uint32_t>(SteadyClock::now().time_since_epoch().count());
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::system_clock::now().time_since_epoch())
                .count();
  char name[96];
  std::snprintf(name, sizeof name, "journal-%013lld-%d-%08x.spool", static_cast<long long>(ms),
                static_cast<int>(getpid()), random);
  return name;
}

Status SyncDirectory(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open " + dir, errno);
  int rc = fsync(fd);
  int error = errno;
  close(fd);
  if (rc != 0) return ErrnoStatus("cannot sync " + dir, error);
  return Status::OK();
}

// Copies the first `size` bytes of `fd` into a new file `to`, on disk when
// it returns.
Status CopyFile(int fd, const std::string& path, uint64_t size, const std::string& to) {
  int out = open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (out < 0) return ErrnoStatus("cannot create " + to, errno);
  std::string buf;
  Status s;
  for (uint64_t at = 0; at < size && s.ok();) {
    uint64_t n = std::min(size - at, kReadChunk);
    buf.resize(n);
    s = PreadAll(fd, buf.data(), n, at, path);
    if (s.ok()) s = PwriteAll(out, buf, at, to);
    at += n;
  }
  if (s.ok() && fsync(out) != 0) s = ErrnoStatus("cannot sync " + to, errno);
  close(out);
  return s;
}

}  // namespace

bool IsJournalName(std::string_view name) {
  return name.size() > 14 && name.substr(0, 8) == "journal-" &&
         name.substr(name.size() - 6) == ".spool";
}

JournalFile::JournalFile(std::string path, int fd, uint64_t size, JournalStart start)
    : path_(std::move(path)),
      fd_(fd),
      start_(std::move(start)),
      end_(size),
      synced_end_(size),
      drained_upto_(start_.records),
      last_job_end_(start_.records) {}

JournalFile::~JournalFile() { close(fd_); }

Result<std::unique_ptr<JournalFile>> JournalFile::Create(const std::string& dir,
                                                         const Keyspace& keyspace) {
  std::string name = JournalName();
  std::string path = dir + "/" + name;
  std::string temporary = dir + "/." + name + ".tmp";
  int fd = open(temporary.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus("cannot create spool journal " + temporary, errno);
  auto fail = [&](Status why) {
    unlink(temporary.c_str());
    close(fd);
    return why;
  };
  if (flock(fd, LOCK_EX | LOCK_NB) != 0)
    return fail(ErrnoStatus("cannot lock " + temporary, errno));
  const std::string header = JournalHeader(keyspace);
  Status s = PwriteAll(fd, header, 0, temporary);
  if (!s.ok()) return fail(s);
  if (fdatasync(fd) != 0) return fail(ErrnoStatus("cannot sync " + temporary, errno));
  if (rename(temporary.c_str(), path.c_str()) != 0) {
    return fail(ErrnoStatus("cannot rename " + temporary + " to " + name, errno));
  }
  // The name must outlast a crash before the first job is reported
  // spooled: a job in a file nobody can find is lost.
  s = SyncDirectory(dir);
  if (!s.ok()) {
    unlink(path.c_str());
    close(fd);
    return s;
  }
  JournalStart start;
  start.keyspace = keyspace;
  start.records = header.size();
  return std::unique_ptr<JournalFile>(new JournalFile(path, fd, header.size(), std::move(start)));
}

Result<std::unique_ptr<JournalFile>> JournalFile::TakeOver(const std::string& path,
                                                           TailRepair* repair) {
  if (repair != nullptr) *repair = TailRepair{};
  Result<int> opened_fd = OpenRegular(path, O_RDWR);
  if (!opened_fd.ok()) {
    if (opened_fd.status().IsNotFound()) return std::unique_ptr<JournalFile>();
    return opened_fd.status();
  }
  int fd = *opened_fd;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int error = errno;
    close(fd);
    if (error == EWOULDBLOCK) return std::unique_ptr<JournalFile>();
    return ErrnoStatus("cannot lock " + path, error);
  }
  // Another drainer may have drained and deleted it between the open and
  // the lock: then this is no longer the file of that name.
  struct stat opened, named;
  if (fstat(fd, &opened) != 0 || lstat(path.c_str(), &named) != 0 ||
      opened.st_ino != named.st_ino || opened.st_dev != named.st_dev) {
    close(fd);
    return std::unique_ptr<JournalFile>();
  }
  uint64_t size = static_cast<uint64_t>(opened.st_size);
  Result<JournalScan> scan = ScanJournal(fd, size);
  if (!scan.ok()) {
    close(fd);
    return scan.status().WithContext(path);
  }
  if (scan->tail != JournalScan::Tail::kClean) {
    // Records can be appended again only after a clean end.
    const std::string at = std::to_string(scan->valid_end);
    const std::string bytes = std::to_string(size - scan->valid_end);
    std::string what;
    if (scan->tail == JournalScan::Tail::kTorn) {
      what = "a record cut short at offset " + at + " (" + bytes +
             " bytes: a crash while it was written; never reported spooled) was dropped";
    } else {
      // The whole file as it was, its keyspace record included, so that a
      // person can tell where its jobs belong.
      std::string kept = path + ".corrupt-" + at;
      Status s = CopyFile(fd, path, size, kept);
      // Its name must outlast a crash before the damaged part is cut off.
      size_t slash = path.find_last_of('/');
      if (s.ok()) s = SyncDirectory(slash == std::string::npos ? "." : path.substr(0, slash + 1));
      if (!s.ok()) {
        close(fd);
        return s.WithContext(path + " is damaged at offset " + at);
      }
      what = "damaged at offset " + at + " (the " + bytes +
             " bytes from there are not drained): the file as it was is kept as " + kept +
             "; the jobs before the damage are drained";
    }
    if (ftruncate(fd, static_cast<off_t>(scan->valid_end)) != 0 || fsync(fd) != 0) {
      Status s = ErrnoStatus("cannot cut " + path + " back to its whole records", errno);
      close(fd);
      return s;
    }
    if (repair != nullptr) *repair = {scan->tail, std::move(what)};
    size = scan->valid_end;
  }
  std::unique_ptr<JournalFile> file(new JournalFile(path, fd, size, scan->start));
  file->SetState(*scan);
  return file;
}

void JournalFile::SetState(const JournalScan& scan) {
  std::lock_guard<std::mutex> lock(mu_);
  drained_upto_ = scan.drained_upto;
  last_job_end_ = scan.last_job_end;
  resolved_ = scan.resolved;
  held_.clear();
  // Held jobs of an earlier process are tried again at once.
  for (const auto& [offset, reason] : scan.held)
    held_[offset] = {reason, SteadyClock::time_point()};
}

uint64_t JournalFile::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return end_;
}

Status JournalFile::Append(std::string_view frames, uint64_t* at, bool* maybe_written) {
  return AppendFrames(frames, /*jobs=*/true, at, maybe_written);
}

Status JournalFile::AppendFrames(std::string_view frames, bool jobs, uint64_t* at,
                                 bool* maybe_written) {
  if (maybe_written != nullptr) *maybe_written = false;
  std::unique_lock<std::mutex> lock(mu_);
  if (!broken_.ok()) return broken_;
  uint64_t offset = end_;
  Status s = PwriteAll(fd_, frames, offset, path_);
  if (!s.ok()) {
    // A part of a record left in the file would hide every record after
    // it from readers.
    if (ftruncate(fd_, static_cast<off_t>(offset)) != 0) {
      broken_ = ErrnoStatus("cannot cut " + path_ + " back after a failed write", errno);
    }
    return s;
  }
  if (at != nullptr) *at = offset;
  end_ += frames.size();
  appended_total_ += frames.size();
  if (jobs) last_job_end_ = end_;
  const uint64_t target = appended_total_;
  while (synced_total_ < target) {
    if (!broken_.ok()) {
      if (maybe_written != nullptr) *maybe_written = true;
      return broken_;
    }
    if (syncing_) {
      synced_cv_.wait(lock);
      continue;
    }
    // This thread syncs for every append made so far; those made while it
    // syncs wait for the next one.
    syncing_ = true;
    uint64_t total = appended_total_;
    uint64_t end = end_;
    lock.unlock();
    int rc = fdatasync(fd_);
    int error = errno;
    lock.lock();
    syncing_ = false;
    if (rc != 0) {
      // After a failed fdatasync the kernel may have dropped the pages it
      // could not write: nothing since the last good sync is known to be on
      // disk, and nothing later can be trusted either.
      broken_ = ErrnoStatus("cannot sync " + path_, error);
    } else {
      synced_total_ = total;
      synced_end_ = end;
    }
    synced_cv_.notify_all();
  }
  return Status::OK();
}

Status JournalFile::ReadPending(uint64_t* from, size_t max_jobs, size_t max_bytes,
                                std::vector<Pending>* out) {
  out->clear();
  uint64_t end;
  std::set<uint64_t> skip;
  bool at_drained;
  {
    std::lock_guard<std::mutex> lock(mu_);
    end = synced_end_;
    skip = resolved_;
    for (const auto& held : held_) skip.insert(held.first);
    at_drained = *from == drained_upto_;
  }
  FrameReader cursor(fd_, path_, *from, end, kDrainReadChunk);
  size_t bytes = 0;
  while (out->size() < max_jobs && bytes < max_bytes) {
    FrameReader::Step step = cursor.Next();
    if (step == FrameReader::Step::kEnd) break;
    if (step == FrameReader::Step::kError) return cursor.error();
    if (step != FrameReader::Step::kFrame) {
      std::lock_guard<std::mutex> lock(mu_);
      drain_stalled_ = true;
      return Status::Corruption(path_ + ": a bad record at offset " +
                                std::to_string(cursor.frame_offset()));
    }
    if (BodyType(cursor.body()) != static_cast<uint8_t>(RecordType::kJob)) continue;
    if (skip.count(cursor.frame_offset()) != 0) continue;
    Result<Record> record = DecodeRecord(cursor.body());
    if (!record.ok()) return record.status().WithContext(path_);
    bytes += record->job.payload.size();
    out->push_back({cursor.frame_offset(), std::move(record->job)});
  }
  *from = cursor.pos();
  if (at_drained) {
    // What lies before the first pending job holds none.
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t upto = out->empty() ? *from : out->front().offset;
    drained_upto_ = std::max(drained_upto_, upto);
  }
  return Status::OK();
}

Status JournalFile::DueHeld(SteadyClock::time_point now, std::chrono::milliseconds retry_after,
                            std::vector<Pending>* out) {
  out->clear();
  std::vector<uint64_t> due;
  uint64_t end;
  {
    std::lock_guard<std::mutex> lock(mu_);
    end = synced_end_;
    for (auto& [offset, held] : held_) {
      if (held.due > now) continue;
      held.due = now + retry_after;
      due.push_back(offset);
    }
  }
  for (uint64_t offset : due) {
    Result<Record> record = ReadRecordAt(fd_, path_, offset, end);
    if (!record.ok()) return record.status();
    out->push_back({offset, std::move(record->job)});
  }
  return Status::OK();
}

Status JournalFile::RecordOutcomes(uint64_t chunk_end, const std::vector<Outcome>& chunk,
                                   const std::vector<Outcome>& held,
                                   SteadyClock::time_point next_try) {
  std::string frames;
  std::optional<uint64_t> first_pending;
  for (const Outcome& o : chunk) {
    switch (o.fate) {
      case Fate::kPushed:
        // Below the first job left pending, the progress record says it.
        if (first_pending) AppendResolvedRecord(&frames, o.offset, Resolution::kPushed);
        break;
      case Fate::kDropped:
        AppendResolvedRecord(&frames, o.offset, Resolution::kDropped);
        break;
      case Fate::kHeld:
        AppendHeldRecord(&frames, o.offset, o.reason);
        break;
      case Fate::kPending:
        if (!first_pending) first_pending = o.offset;
        break;
    }
  }
  uint64_t upto = first_pending.value_or(chunk_end);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (upto > drained_upto_) AppendProgressRecord(&frames, upto);
  }
  for (const Outcome& o : held) {
    if (o.fate == Fate::kPushed || o.fate == Fate::kDropped) {
      AppendResolvedRecord(&frames, o.offset,
                           o.fate == Fate::kPushed ? Resolution::kPushed : Resolution::kDropped);
    }
  }
  if (!frames.empty()) {
    Status s = AppendFrames(frames, /*jobs=*/false, nullptr, nullptr);
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      drain_stalled_ = true;
      return s.WithContext("recording the drain of " + path_);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  drained_upto_ = std::max(drained_upto_, upto);
  for (const Outcome& o : chunk) {
    if (o.fate == Fate::kHeld) {
      held_[o.offset] = {o.reason, next_try};
    } else if (o.fate != Fate::kPending && o.offset >= drained_upto_) {
      resolved_.insert(o.offset);
    }
  }
  for (const Outcome& o : held) {
    if (o.fate == Fate::kPushed || o.fate == Fate::kDropped) {
      held_.erase(o.offset);
      if (o.offset >= drained_upto_) resolved_.insert(o.offset);
    } else if (o.fate == Fate::kHeld) {
      auto it = held_.find(o.offset);
      if (it != held_.end()) it->second.reason = o.reason;
    }
  }
  resolved_.erase(resolved_.begin(), resolved_.lower_bound(drained_upto_));
  return Status::OK();
}

uint64_t JournalFile::drained_upto() const {
  std::lock_guard<std::mutex> lock(mu_);
  return drained_upto_;
}

bool JournalFile::DrainedLocked() const { return held_.empty() && drained_upto_ >= last_job_end_; }

bool JournalFile::Drained() const {
  std::lock_guard<std::mutex> lock(mu_);
  return DrainedLocked();
}

bool JournalFile::HasWork(SteadyClock::time_point now) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (drain_stalled_) return false;
  if (drained_upto_ < std::min(last_job_end_, synced_end_)) return true;
  for (const auto& [offset, held] : held_) {
    if (held.due <= now) return true;
  }
  return false;
}

bool JournalFile::drain_stalled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return drain_stalled_;
}

size_t JournalFile::held_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_.size();
}

Status JournalFile::TruncateIfDrained() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!DrainedLocked() || syncing_ || synced_total_ != appended_total_ || !broken_.ok() ||
      end_ == start_.records) {
    return Status::OK();
  }
  if (ftruncate(fd_, static_cast<off_t>(start_.records)) != 0) {
    return ErrnoStatus("cannot cut back " + path_, errno);
  }
  // fsync, not fdatasync: the size is what changed.
  if (fsync(fd_) != 0) {
    broken_ = ErrnoStatus("cannot sync " + path_, errno);
    return broken_;
  }
  end_ = synced_end_ = drained_upto_ = last_job_end_ = start_.records;
  resolved_.clear();
  return Status::OK();
}

Result<bool> JournalFile::RemoveIfDrained() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!DrainedLocked()) return false;
  if (unlink(path_.c_str()) != 0) return ErrnoStatus("cannot delete " + path_, errno);
  return true;
}

}  // namespace reliableq::spool
