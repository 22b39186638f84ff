#include "spool/directory.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string_view>

#include "spool/journal.h"

namespace reliableq::spool {

namespace {

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// "journal-....spool.corrupt-<offset>"
bool IsCorruptName(std::string_view name) {
  size_t at = name.find(".spool.corrupt-");
  return at != std::string_view::npos && IsJournalName(name.substr(0, at + 6));
}

// How old a temporary file must be before a drainer removes it: far longer
// than a Create takes, so that one under way is never taken for stale.
constexpr time_t kStaleTemporarySeconds = 60;

}  // namespace

Result<std::vector<DirectoryEntry>> ListDirectory(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    int error = errno;
    std::string why = "cannot read spool directory " + dir + ": " + std::strerror(error);
    if (error == ENOENT) return Status::NotFound(why);
    return Status::IoError(why);
  }
  std::vector<DirectoryEntry> entries;
  while (dirent* e = readdir(d)) {
    std::string_view name = e->d_name;
    DirectoryEntry entry;
    if (IsJournalName(name)) {
      entry.kind = DirectoryEntry::Kind::kJournal;
    } else if (IsCorruptName(name)) {
      entry.kind = DirectoryEntry::Kind::kCorrupt;
    } else {
      continue;
    }
    entry.name = std::string(name);
    entry.path = dir + "/" + entry.name;
    struct stat st;
    // A file deleted since readdir (drained by another process) is gone.
    if (lstat(entry.path.c_str(), &st) != 0) continue;
    if (S_ISREG(st.st_mode)) {
      entry.bytes = static_cast<uint64_t>(st.st_size);
    } else {
      entry.kind = DirectoryEntry::Kind::kNotRegular;
      entry.type = FileTypeName(st.st_mode);
    }
    entries.push_back(std::move(entry));
  }
  closedir(d);
  std::sort(entries.begin(), entries.end(),
            [](const DirectoryEntry& a, const DirectoryEntry& b) { return a.name < b.name; });
  return entries;
}

Status PrepareDirectory(const std::string& dir) {
  if (dir.empty()) return Status::InvalidArgument("the spool directory is empty");
  // mkdir -p: each missing parent in turn.
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at < dir.size() && dir[at] != '/') continue;
    std::string part = dir.substr(0, at);
    if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) {
      return Status::IoError("cannot create spool directory " + part + ": " + std::strerror(errno));
    }
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    return Status::IoError("cannot use spool directory " + dir + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::IoError("cannot use spool directory " + dir + ": not a directory");
  }
  if (access(dir.c_str(), R_OK | W_OK | X_OK) != 0) {
    return Status::IoError("cannot use spool directory " + dir + ": " + std::strerror(errno));
  }
  return Status::OK();
}

std::string WritableByOthers(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)) == 0) return {};
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  const char* who = (st.st_mode & S_IWOTH) != 0 ? "others" : "its group";
  return "spool directory " + dir + " can be written by " + who + " (mode " + mode +
         "): they could plant a journal for a drain to push; make it 0700";
}

void RemoveStaleTemporaries(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  time_t now = time(nullptr);
  while (dirent* e = readdir(d)) {
    std::string_view name = e->d_name;
    if (!StartsWith(name, ".journal-") || !EndsWith(name, ".spool.tmp")) continue;
    std::string path = dir + "/" + std::string(name);
    struct stat st;
    Result<int> fd = OpenRegular(path, O_RDONLY, &st);
    if (!fd.ok()) continue;
    // Its creator holds the lock for as long as it lives.
    if (now - st.st_mtime >= kStaleTemporarySeconds && flock(*fd, LOCK_EX | LOCK_NB) == 0) {
      unlink(path.c_str());
    }
    close(*fd);
  }
  closedir(d);
}

}  // namespace reliableq::spool
