// Reading journal files (record.h has the format): frames in file order
// through a buffer (FrameReader), one record at an offset, and a pass over a
// whole file that finds its drain state and how it ends (ScanJournal). Used
// by JournalFile, `spool status` and the tests; reading never changes a
// file.
//
// Thread safety: a FrameReader is one reader's; the functions are plain.

#ifndef RELIABLEQ_SPOOL_JOURNAL_READER_H_
#define RELIABLEQ_SPOOL_JOURNAL_READER_H_

#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "reliableq/status.h"
#include "spool/record.h"

namespace reliableq::spool {

// How much a pass over a whole file reads at once, and how much a drain
// reads at once (it takes a few hundred records per round trip: reading a
// whole megabyte for each would copy most of a large file many times).
inline constexpr uint64_t kReadChunk = 1 << 20;
inline constexpr uint64_t kDrainReadChunk = 64 << 10;

// kIoError "<what>: <strerror(error)>".
Status ErrnoStatus(const std::string& what, int error);

// Opens `path` with `flags` (O_RDONLY or O_RDWR; O_CLOEXEC is added) only if
// it is a regular file, and never through a symbolic link (O_NOFOLLOW, and
// O_NONBLOCK so that a FIFO planted under a journal's name cannot block the
// open), so that a drain never reads or appends to a file that lives
// elsewhere; *st, when given, gets its fstat. The fd, or kNotFound when it is
// gone, or kIoError: "PATH is a symbolic link, not a regular file", or the
// open's error.
Result<int> OpenRegular(const std::string& path, int flags, struct stat* st = nullptr);

// "a symbolic link", "a directory", ...: what a file of `mode` is, for
// messages about files that are not regular.
std::string FileTypeName(unsigned mode);

// Reads exactly n bytes at `offset`; a file that ends first is kIoError.
Status PreadAll(int fd, char* buf, size_t n, uint64_t offset, const std::string& path);

// Reads the frames of a file in order, from `from` up to `end`, `chunk`
// bytes at a time (more when one frame is larger).
class FrameReader {
 public:
  FrameReader(int fd, const std::string& path, uint64_t from, uint64_t end,
              uint64_t chunk = kReadChunk)
      : fd_(fd), path_(path), pos_(from), end_(end), chunk_(chunk) {}

  enum class Step {
    kFrame,       // body() is the next record's body
    kEnd,         // `end` reached after a whole frame
    kIncomplete,  // the frame at frame_offset() runs past `end`
    kBad,         // the frame at frame_offset() has a bad length or CRC
    kError,       // the file could not be read: error()
  };
  Step Next();

  uint64_t frame_offset() const { return frame_offset_; }
  // Where the next frame starts.
  uint64_t pos() const { return pos_; }
  // kFrame: valid until the next call.
  std::string_view body() const { return body_; }
  // kBad: the size the bad frame claims, or 0 when it claims none in range.
  uint64_t bad_size() const { return bad_size_; }
  const Status& error() const { return error_; }

 private:
  // The buffered bytes from pos_ on, at least `need` of them unless the
  // file ends first.
  std::string_view Window(uint64_t need);

  const int fd_;
  const std::string& path_;
  uint64_t pos_;
  const uint64_t end_;
  const uint64_t chunk_;
  std::string buf_;
  uint64_t start_ = 0;  // the file offset of buf_[0]
  uint64_t frame_offset_ = 0;
  uint64_t bad_size_ = 0;
  std::string_view body_;
  Status error_;
};

// The record whose frame starts at `offset` (before `end`).
Result<Record> ReadRecordAt(int fd, const std::string& path, uint64_t offset, uint64_t end);

// What a journal starts with (record.h): its format and, for format 2, the
// keyspace it was written for. It never changes once the file has its name
// (Create writes it first), so it may be read without the file's lock.
struct JournalStart {
  int format = 2;
  // Format 2's; none for format 1.
  std::optional<Keyspace> keyspace;
  // Where the records after it begin: the first job's offset.
  uint64_t records = kMagic.size();
};

// The start of the file open on `fd` (of `size` bytes). kCorruption when it
// is not a journal of a known format or its keyspace record is missing or
// damaged; kIoError when it cannot be read.
Result<JournalStart> ReadJournalStart(int fd, uint64_t size);

// The same for the file at `path`, opened for reading only: kNotFound when
// it is gone (drained and deleted since it was listed, say).
Result<JournalStart> ReadJournalStart(const std::string& path);

// What a pass over a whole file found (ScanJournal).
struct JournalScan {
  JournalStart start;
  // Where the readable frames end; the file's size when tail is kClean.
  uint64_t valid_end = 0;
  enum class Tail {
    kClean,
    // The last frame is cut short (a crash during an append) or the file
    // ends in zero bytes after its last whole frame: nothing it held was
    // ever reported spooled.
    kTorn,
    // A frame that is neither (a CRC mismatch or a bad length followed by
    // more data, or a record that does not decode): the file is damaged.
    kCorrupt,
  };
  Tail tail = Tail::kClean;
  // The drain state the records give (see record.h).
  uint64_t drained_upto = kMagic.size();
  std::map<uint64_t, std::string> held;   // job offset -> Redis's reason
  std::set<uint64_t> resolved;            // done job records at or after drained_upto
  uint64_t last_job_end = kMagic.size();  // where the last job record ends
  int64_t dropped = 0;                    // jobs dropped: a rule refused them
};

// Reads the file open on `fd` (of `size` bytes) from its start. kCorruption
// when its start is not a journal's (ReadJournalStart); kIoError when it
// cannot be read.
Result<JournalScan> ScanJournal(int fd, uint64_t size);

// For `spool status`: the pending jobs of a scanned file.
struct PendingSummary {
  int64_t jobs = 0;
  int64_t bytes = 0;             // of their payloads
  double oldest_spooled_at = 0;  // 0 when none
};
Result<PendingSummary> SummarizePending(int fd, const JournalScan& scan);

}  // namespace reliableq::spool

#endif  // RELIABLEQ_SPOOL_JOURNAL_READER_H_
