#include "spool/journal_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace reliableq::spool {

namespace {

// True when the file holds only zero bytes from `from` to `end`: what a
// crash can leave after the last write that reached the disk.
Result<bool> ZeroFrom(int fd, const std::string& path, uint64_t from, uint64_t end) {
  std::string buf;
  while (from < end) {
    uint64_t n = std::min(end - from, kReadChunk);
    buf.resize(n);
    Status s = PreadAll(fd, buf.data(), n, from, path);
    if (!s.ok()) return s;
    if (buf.find_first_not_of('\0') != std::string::npos) return false;
    from += n;
  }
  return true;
}

}  // namespace

Status ErrnoStatus(const std::string& what, int error) {
  return Status::IoError(what + ": " + std::strerror(error));
}

std::string FileTypeName(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return "a regular file";
    case S_IFLNK:
      return "a symbolic link";
    case S_IFDIR:
      return "a directory";
    case S_IFIFO:
      return "a FIFO";
    case S_IFSOCK:
      return "a socket";
    default:
      return "a device";
  }
}

Result<int> OpenRegular(const std::string& path, int flags, struct stat* st) {
  int fd = open(path.c_str(), flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    int error = errno;
    if (error == ENOENT) return Status::NotFound("cannot open " + path + ": it is gone");
    if (error == ELOOP) return Status::IoError(path + " is a symbolic link, not a regular file");
    if (error == EISDIR) return Status::IoError(path + " is a directory, not a regular file");
    return ErrnoStatus("cannot open " + path, error);
  }
  struct stat own;
  if (st == nullptr) st = &own;
  if (fstat(fd, st) != 0) {
    int error = errno;
    close(fd);
    return ErrnoStatus("cannot stat " + path, error);
  }
  if (!S_ISREG(st->st_mode)) {
    close(fd);
    return Status::IoError(path + " is " + FileTypeName(st->st_mode) + ", not a regular file");
  }
  return fd;
}

Status PreadAll(int fd, char* buf, size_t n, uint64_t offset, const std::string& path) {
  while (n > 0) {
    ssize_t got = pread(fd, buf, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return ErrnoStatus("cannot read " + path, errno);
    if (got == 0) return Status::IoError("cannot read " + path + ": it ended early");
    buf += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return Status::OK();
}

FrameReader::Step FrameReader::Next() {
  frame_offset_ = pos_;
  if (pos_ >= end_) return Step::kEnd;
  std::string_view data = Window(kFrameHeader);
  if (!error_.ok()) return Step::kError;
  Frame frame = ParseFrame(data);
  if (frame.check == Frame::Check::kIncomplete) {
    if (pos_ + frame.size > end_) return Step::kIncomplete;
    data = Window(frame.size);
    if (!error_.ok()) return Step::kError;
    frame = ParseFrame(data);
  }
  if (frame.check != Frame::Check::kOk) {
    bad_size_ = frame.size;  // 0 when the length itself is out of range
    return Step::kBad;
  }
  body_ = frame.body;
  pos_ += frame.size;
  return Step::kFrame;
}

std::string_view FrameReader::Window(uint64_t need) {
  uint64_t have = 0;
  if (pos_ >= start_ && pos_ < start_ + buf_.size()) have = start_ + buf_.size() - pos_;
  if (have < need && pos_ + have < end_) {
    uint64_t want = std::min(end_ - pos_, std::max(need, chunk_));
    buf_.resize(want);
    error_ = PreadAll(fd_, buf_.data(), want, pos_, path_);
    if (!error_.ok()) return {};
    start_ = pos_;
    have = want;
  }
  return std::string_view(buf_.data() + (pos_ - start_), have);
}

Result<Record> ReadRecordAt(int fd, const std::string& path, uint64_t offset, uint64_t end) {
  FrameReader cursor(fd, path, offset, end, 4096);
  switch (cursor.Next()) {
    case FrameReader::Step::kFrame:
      return DecodeRecord(cursor.body());
    case FrameReader::Step::kError:
      return cursor.error();
    default:
      return Status::Corruption(path + ": no whole record at offset " + std::to_string(offset));
  }
}

Result<JournalStart> ReadJournalStart(int fd, uint64_t size) {
  const std::string path = "spool journal";
  char magic[kMagic.size()];
  if (size < kMagic.size()) return Status::Corruption("not a spool journal: too short");
  Status s = PreadAll(fd, magic, sizeof magic, 0, path);
  if (!s.ok()) return s;
  JournalStart start;
  std::string_view read(magic, sizeof magic);
  if (read == kMagicV1) {
    start.format = 1;
    return start;
  }
  if (read != kMagic) {
    return Status::Corruption("not a spool journal: it does not start with " + std::string(kMagic) +
                              " or " + std::string(kMagicV1));
  }
  FrameReader cursor(fd, path, kMagic.size(), size, 4096);
  Result<Record> record = Status::Corruption("");
  switch (cursor.Next()) {
    case FrameReader::Step::kFrame:
      record = DecodeRecord(cursor.body());
      break;
    case FrameReader::Step::kError:
      return cursor.error();
    default:
      break;
  }
  // Written and synced before the file got its name: a journal without a
  // whole one is damaged, not cut short by a crash.
  if (!record.ok() || record->type != RecordType::kKeyspace) {
    return Status::Corruption("a spool journal of format 2 without its keyspace record");
  }
  start.keyspace = std::move(record->keyspace);
  start.records = cursor.pos();
  return start;
}

Result<JournalStart> ReadJournalStart(const std::string& path) {
  struct stat st;
  Result<int> fd = OpenRegular(path, O_RDONLY, &st);
  if (!fd.ok()) return fd.status();
  Result<JournalStart> start = ReadJournalStart(*fd, static_cast<uint64_t>(st.st_size));
  close(*fd);
  if (!start.ok()) return start.status().WithContext(path);
  return start;
}

Result<JournalScan> ScanJournal(int fd, uint64_t size) {
  const std::string path = "spool journal";
  JournalScan scan;
  Result<JournalStart> start = ReadJournalStart(fd, size);
  if (!start.ok()) return start.status();
  scan.start = std::move(*start);
  scan.drained_upto = scan.last_job_end = scan.start.records;
  FrameReader cursor(fd, path, scan.start.records, size);
  for (;;) {
    FrameReader::Step step = cursor.Next();
    if (step == FrameReader::Step::kError) return cursor.error();
    if (step == FrameReader::Step::kEnd) break;
    if (step == FrameReader::Step::kFrame) {
      if (BodyType(cursor.body()) == static_cast<uint8_t>(RecordType::kJob)) {
        scan.last_job_end = cursor.pos();
        continue;
      }
      Result<Record> record = DecodeRecord(cursor.body());
      if (!record.ok()) {
        scan.tail = JournalScan::Tail::kCorrupt;
        break;
      }
      switch (record->type) {
        case RecordType::kProgress:
          scan.drained_upto = std::max(scan.drained_upto, record->offset);
          break;
        case RecordType::kHeld:
          scan.held[record->offset] = record->reason;
          break;
        case RecordType::kResolved:
          scan.held.erase(record->offset);
          scan.resolved.insert(record->offset);
          if (record->resolution == Resolution::kDropped) ++scan.dropped;
          break;
        case RecordType::kJob:
          break;
        case RecordType::kKeyspace:
          // Only as the first record: anywhere else the file is damaged.
          scan.tail = JournalScan::Tail::kCorrupt;
          break;
      }
      if (scan.tail != JournalScan::Tail::kClean) break;
      continue;
    }
    // A frame that claims to run past the end is what a crash during an
    // append leaves, and so are zero bytes after the last whole frame. A
    // frame that is whole and fails its CRC (the last one included) is
    // damage: its job was reported spooled after an fdatasync, and a
    // flipped bit does not make it less so.
    uint64_t at = cursor.frame_offset();
    bool torn = step == FrameReader::Step::kIncomplete;
    if (!torn) {
      Result<bool> zeros = ZeroFrom(fd, path, at, size);
      if (!zeros.ok()) return zeros.status();
      torn = *zeros;
    }
    scan.tail = torn ? JournalScan::Tail::kTorn : JournalScan::Tail::kCorrupt;
    break;
  }
  scan.valid_end = scan.tail == JournalScan::Tail::kClean ? size : cursor.frame_offset();
  // Resolutions below the drained part tell nothing more.
  scan.resolved.erase(scan.resolved.begin(), scan.resolved.lower_bound(scan.drained_upto));
  return scan;
}

Result<PendingSummary> SummarizePending(int fd, const JournalScan& scan) {
  const std::string path = "spool journal";
  PendingSummary summary;
  auto count = [&summary](const SpooledJob& job) {
    ++summary.jobs;
    summary.bytes += static_cast<int64_t>(job.payload.size());
    if (summary.oldest_spooled_at == 0 || job.spooled_at < summary.oldest_spooled_at) {
      summary.oldest_spooled_at = job.spooled_at;
    }
  };
  for (const auto& [offset, reason] : scan.held) {
    Result<Record> record = ReadRecordAt(fd, path, offset, scan.valid_end);
    if (!record.ok()) return record.status();
    count(record->job);
  }
  FrameReader cursor(fd, path, scan.drained_upto, scan.valid_end);
  for (;;) {
    FrameReader::Step step = cursor.Next();
    if (step == FrameReader::Step::kError) return cursor.error();
    if (step != FrameReader::Step::kFrame) break;
    if (BodyType(cursor.body()) != static_cast<uint8_t>(RecordType::kJob)) continue;
    uint64_t at = cursor.frame_offset();
    if (scan.resolved.count(at) != 0 || scan.held.count(at) != 0) continue;
    Result<Record> record = DecodeRecord(cursor.body());
    if (!record.ok()) return record.status();
    count(record->job);
  }
  return summary;
}

}  // namespace reliableq::spool
