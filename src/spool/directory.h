// The files of a spool directory: which are journals, how many bytes they
// take, and the stale temporary files a crash during Create can leave.
//
// Thread safety: plain functions; the directory may change under them
// (other processes write, drain and delete files), which they tolerate.

#ifndef RELIABLEQ_SPOOL_DIRECTORY_H_
#define RELIABLEQ_SPOOL_DIRECTORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "reliableq/status.h"

namespace reliableq::spool {

struct DirectoryEntry {
  std::string name;
  std::string path;
  uint64_t bytes = 0;
  enum class Kind { kJournal, kCorrupt } kind = Kind::kJournal;
};

// The journal files of `dir` and the damaged tails moved aside
// ("<journal>.corrupt-<offset>"), sorted by name (journals: oldest first).
// kNotFound when `dir` does not exist; kIoError when it cannot be read.
Result<std::vector<DirectoryEntry>> ListDirectory(const std::string& dir);

// Creates `dir` (and its parents) when missing, and checks that it is a
// directory this process can write. kIoError naming it otherwise.
Status PrepareDirectory(const std::string& dir);

// Deletes the temporary files of journal creations that were cut short
// (their creator is gone: its lock is free) and are older than a minute.
void RemoveStaleTemporaries(const std::string& dir);

}  // namespace reliableq::spool

#endif  // RELIABLEQ_SPOOL_DIRECTORY_H_
