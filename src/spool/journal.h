// JournalFile: one journal file of a spool directory (record.h has its
// format), open and locked with flock(LOCK_EX) by this process for as long
// as the object lives. Either the file this process writes (Create), or one
// that a process that is gone left behind (TakeOver): a writer holds its
// lock from before the file has its name until it closes it, so a lock that
// can be taken means its writer is gone, whether it exited or crashed.
//
// Besides appending, the object keeps what is known of the file's drain:
// where the drained part ends, the jobs held (Redis refused them with an
// error reply) and the jobs resolved beyond the drained part. The drainer
// reads pending jobs with ReadPending and DueHeld and records what became
// of them with RecordOutcomes; both append to the same file, so that one lock
// covers everything.
//
// Thread safety: every method may be called from any thread. Append may be
// called from many threads at once (they share fdatasyncs); the drain
// methods (ReadPending, DueHeld, RecordOutcomes, TruncateIfDrained,
// RemoveIfDrained) by one thread at a time.

#ifndef RELIABLEQ_SPOOL_JOURNAL_H_
#define RELIABLEQ_SPOOL_JOURNAL_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "reliableq/status.h"
#include "spool/journal_reader.h"
#include "spool/record.h"

namespace reliableq::spool {

// The journal files of a directory are named
// "journal-<13-digit epoch ms>-<pid>-<8 hex>.spool", so that their names sort
// in the order they were created.
bool IsJournalName(std::string_view name);

class JournalFile {
 public:
  // Creates a new journal file in `dir` (which must exist) for the jobs of
  // `keyspace`, and locks it. It is written (with its keyspace record) and
  // locked under a hidden temporary name first and renamed after, so that
  // no other process can take it for one whose writer is gone, nor find it
  // without its keyspace. Fails with kIoError naming the file.
  static Result<std::unique_ptr<JournalFile>> Create(const std::string& dir,
                                                     const Keyspace& keyspace);

  // What TakeOver did about a file that did not end cleanly.
  struct TailRepair {
    JournalScan::Tail tail = JournalScan::Tail::kClean;
    // For messages: what was found and done; "" when kClean.
    std::string what;
  };

  // Opens and locks the journal file `path` that another process left. A
  // null pointer when its writer (or another drainer) still holds it or it
  // is gone. Anything but a regular file is refused (kIoError), and so is a
  // symbolic link: a drain never appends to a file that lives elsewhere. A
  // torn tail is cut off (a crash during an append: never reported
  // spooled). A damaged one (JournalScan::Tail::kCorrupt) is set aside: the
  // whole file as it was is copied to "<path>.corrupt-<offset>" (kept for a
  // person to look at; never read again), and the file is cut back to the
  // whole records before the damage, so that they are drained and records
  // can be appended again. *repair, when given, says which and what was
  // done. It does not look at the file's keyspace: a drainer checks it first
  // (ReadJournalStart, Drains), so that it never locks a journal of another
  // keyspace, which would keep it from that keyspace's own drainers.
  static Result<std::unique_ptr<JournalFile>> TakeOver(const std::string& path,
                                                       TailRepair* repair = nullptr);

  // Closes the file, which releases the lock. Never deletes it.
  ~JournalFile();
  JournalFile(const JournalFile&) = delete;
  JournalFile& operator=(const JournalFile&) = delete;

  const std::string& path() const { return path_; }
  // The keyspace it was written for; none for a journal of format 1.
  const std::optional<Keyspace>& keyspace() const { return start_.keyspace; }
  // The file's size in bytes, appends under way included.
  uint64_t size() const;

  // Appends `frames` (whole job records) and returns once they are on disk
  // (fdatasync). Threads that append at the same time share one fdatasync
  // (group commit). On failure nothing of `frames` is left in the file,
  // except when the fdatasync failed: then they may or may not be there
  // (*maybe_written is set), and the file takes no more appends. *at, when
  // given, is the offset the first frame got.
  Status Append(std::string_view frames, uint64_t* at = nullptr, bool* maybe_written = nullptr);

  // A job to drain, with the offset of its record.
  struct Pending {
    uint64_t offset = 0;
    SpooledJob job;
  };

  // Up to `max_jobs` pending jobs (and about `max_bytes` of payload) from
  // `*from` on, in file order, skipping held and resolved ones; *from moves
  // past what was read. Start with *from = drained_upto(). Only records on
  // disk are read. A part read with no pending job in it counts as drained
  // from then on.
  Status ReadPending(uint64_t* from, size_t max_jobs, size_t max_bytes, std::vector<Pending>* out);

  // The held jobs that are due for another try at `now` (oldest first);
  // each is then not due again for `retry_after`.
  Status DueHeld(std::chrono::steady_clock::time_point now, std::chrono::milliseconds retry_after,
                 std::vector<Pending>* out);

  // What became of a job the drainer tried.
  enum class Fate {
    kPushed,   // Redis stored it (or may have: see reliableq-schema(7))
    kDropped,  // a rule refused it; refused again on every try
    kHeld,     // Redis refused it with an error reply (`reason`)
    kPending,  // not pushed (Redis could not be reached or could not serve)
  };
  struct Outcome {
    uint64_t offset = 0;
    Fate fate = Fate::kPending;
    std::string reason;  // kHeld
  };

  // Records, durably, what became of `chunk` (the jobs one ReadPending
  // returned, in that order; it read up to `chunk_end`) and of
  // `held` (jobs DueHeld returned). A failure here stalls the file: the
  // drainer must leave it (drain_stalled()), since pushing its jobs again
  // after every failure would repeat them.
  // Jobs newly held are not due again before `next_try`.
  Status RecordOutcomes(uint64_t chunk_end, const std::vector<Outcome>& chunk,
                        const std::vector<Outcome>& held,
                        std::chrono::steady_clock::time_point next_try);

  uint64_t drained_upto() const;
  // True when no job is pending and none is held.
  bool Drained() const;
  // True when there is a job to push now: pending, or held and due.
  bool HasWork(std::chrono::steady_clock::time_point now) const;
  // Appends failed for good, or recording a drain did: leave the file.
  bool drain_stalled() const;
  size_t held_count() const;

  // The file this process writes: once drained, with no append under way,
  // it is cut back to its header, so that drained jobs take no space.
  Status TruncateIfDrained();

  // A file taken over: once drained, it is deleted (its writer is gone, and
  // no writer ever opens an existing file). True when deleted.
  Result<bool> RemoveIfDrained();

 private:
  JournalFile(std::string path, int fd, uint64_t size, JournalStart start);
  // Append for job records (`jobs`) and for the drain's own records.
  Status AppendFrames(std::string_view frames, bool jobs, uint64_t* at, bool* maybe_written);
  // Adopts the drain state of a scan.
  void SetState(const JournalScan& scan);
  bool DrainedLocked() const;

  const std::string path_;
  const int fd_;
  // What precedes the records: a drained file is cut back to it.
  const JournalStart start_;

  mutable std::mutex mu_;
  std::condition_variable synced_cv_;
  uint64_t end_;  // guarded by mu_: the file's size
  // Bytes appended and bytes known on disk since the object was made; never
  // reset, unlike offsets, so that a waiter's target stays valid when the
  // file is cut back.
  uint64_t appended_total_ = 0;  // guarded by mu_
  uint64_t synced_total_ = 0;    // guarded by mu_
  uint64_t synced_end_;          // guarded by mu_: the file's size on disk
  bool syncing_ = false;         // guarded by mu_: an fdatasync is under way
  Status broken_;                // guarded by mu_: why appends fail for good
  bool drain_stalled_ = false;   // guarded by mu_

  struct Held {
    std::string reason;
    std::chrono::steady_clock::time_point due;
  };
  uint64_t drained_upto_;          // guarded by mu_
  uint64_t last_job_end_;          // guarded by mu_
  std::map<uint64_t, Held> held_;  // guarded by mu_
  std::set<uint64_t> resolved_;    // guarded by mu_
};

}  // namespace reliableq::spool

#endif  // RELIABLEQ_SPOOL_JOURNAL_H_
