// QueueWatch: counts the jobs waiting in queues and held in the working
// lists of every reliableq process, in one round trip, so that a benchmark
// can tell when a drain started and when it ended.
//
// A reliableq worker registers itself (reliableq:registry) before it moves
// any job, so reading the registry in the same round trip as the lists finds
// every working list that can hold a job. An identity first seen in a poll
// is counted from the next poll on; until then the snapshot says it is not
// `complete`. Sidekiq's basic fetch has no working lists: only its queues are
// counted.
//
// Thread safety: one thread at a time.

#ifndef RELIABLEQ_BENCH_QUEUE_WATCH_H_
#define RELIABLEQ_BENCH_QUEUE_WATCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/keys.h"
#include "redis/connection.h"
#include "reliableq/status.h"

// The key names are in reliableq::protocol, in older revisions in reliableq
// itself: named unqualified, they are found in either (see meson.build on
// building against older revisions).
namespace reliableq::protocol {}

namespace reliableq::bench {

using namespace reliableq::protocol;

struct QueueSnapshot {
  int64_t queued = 0;    // LLEN of every queue:<q>, summed
  int64_t working = 0;   // LLEN of every known working list, summed
  bool complete = true;  // false when a new process appeared in this poll
};

class QueueWatch {
 public:
  // `redis` must outlive the watch.
  QueueWatch(redis::Connection* redis, std::vector<std::string> queues, Keys keys);

  Result<QueueSnapshot> Poll();

 private:
  redis::Connection* redis_;
  std::vector<std::string> queue_keys_;
  std::vector<std::string> queues_;
  Keys keys_;
  std::vector<std::string> working_keys_;
  std::vector<std::string> identities_;
};

// Reads an integer counter (GET; a missing key is 0).
Result<int64_t> ReadCounter(redis::Connection* redis, std::string_view key);

// Reads a numeric field of INFO (for example "blocked_clients" from INFO
// clients, "used_cpu_user" from INFO cpu).
Result<double> ReadInfoField(redis::Connection* redis, std::string_view section,
                             std::string_view field);

}  // namespace reliableq::bench

#endif  // RELIABLEQ_BENCH_QUEUE_WATCH_H_
