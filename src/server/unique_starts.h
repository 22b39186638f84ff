// UniqueStarts: releases the unique keys of jobs pushed unique until they
// start (Job::unique with UniqueUntil::kStart, "unique_until":"start"), as
// the worker takes them: from then on the same job may be pushed again.
//
// The search happens here, on the worker, for each fetched payload (one
// substring search; only a payload that has the field is parsed), rather
// than in fetch.lua, where it cost every fetch about 6% more of Redis's
// time whether any job was unique or not. Each release is one
// release_unique.lua call (compare-and-delete) on the command connection,
// sent after the fetch that moved the job. A release that is lost (the
// connection broke, the worker died) leaves the key held a while longer,
// never a job lost: the job's success acknowledgement (ack_unique.lua), or
// its next fetch after a recovery, releases it.
//
// Thread safety: loop thread only.

#ifndef RELIABLEQ_SERVER_UNIQUE_STARTS_H_
#define RELIABLEQ_SERVER_UNIQUE_STARTS_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/log.h"
#include "redis/async_connection.h"
#include "server/worker_jobs.h"

namespace reliableq::server {

// The unique key and jid of a job unique until it starts; nullopt for any
// other payload (no such field, not JSON, a key or jid that is not a
// non-empty string, a key that does not start with `unique_prefix`,
// Keys::Unique("")). Pure.
std::optional<std::pair<std::string, std::string>> UniqueUntilStart(std::string_view payload,
                                                                    std::string_view unique_prefix);

class UniqueStarts {
 public:
  // Only keys that start with `unique_prefix` (Keys::Unique("")) are
  // released.
  UniqueStarts(redis::AsyncConnection& command, std::string unique_prefix, const base::Logger& log)
      : command_(command), unique_prefix_(std::move(unique_prefix)), log_(log) {}

  // Sends a release for each job of `jobs` that is unique until it starts.
  void OnFetched(const std::vector<FetchedJob>& jobs);

 private:
  void LogFailure(const std::string& key, const Status& why) const;

  redis::AsyncConnection& command_;
  const std::string unique_prefix_;
  const base::Logger& log_;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_UNIQUE_STARTS_H_
