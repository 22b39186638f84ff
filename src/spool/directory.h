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
  enum class Kind {
    kJournal,
    kCorrupt,     // a damaged journal set aside
    kNotRegular,  // a journal's name on anything but a regular file: refused
  } kind = Kind::kJournal;
  // kNotRegular: what it is ("a symbolic link", "a directory", ...).
  std::string type;
};

// The journal files of `dir`, the damaged journals set aside
// ("<journal>.corrupt-<offset>") and the entries with a journal's name that
// are not regular files (lstat: a symbolic link is one, whatever it points
// to), sorted by name (journals: oldest first). kNotFound when `dir` does
// not exist; kIoError when it cannot be read.
Result<std::vector<DirectoryEntry>> ListDirectory(const std::string& dir);

// Creates `dir` (and its parents) when missing, and checks that it is a
// directory this process can write. kIoError naming it otherwise.
Status PrepareDirectory(const std::string& dir);

// A warning when the group or others may write `dir` (anyone who can write
// there can plant a journal, or a symbolic link named like one, for a drain
// to push); "" when only its owner can, or when it cannot be read. Not
// escaped.
std::string WritableByOthers(const std::string& dir);

// Deletes the temporary files of journal creations that were cut short
// (their creator is gone: its lock is free) and are older than a minute.
void RemoveStaleTemporaries(const std::string& dir);

}  // namespace reliableq::spool

#endif  // RELIABLEQ_SPOOL_DIRECTORY_H_
