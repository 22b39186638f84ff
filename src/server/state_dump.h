// The state dump TTIN asks for: one line for the process, then one per
// processor thread with the job it runs (class, jid, queue, for how long).
// Job data is untrusted: it is logged through the logger's formatting only.

#ifndef RELIABLEQ_SERVER_STATE_DUMP_H_
#define RELIABLEQ_SERVER_STATE_DUMP_H_

#include <cstddef>
#include <string>
#include <vector>

#include "base/log.h"
#include "server/queue_set.h"
#include "server/worker_jobs.h"

namespace reliableq::server {

struct WorkerState {
  std::string identity;
  const char* phase = "";
  int concurrency = 0;
  std::vector<RunningJob> running;
  size_t ready = 0;           // fetched, not started
  size_t unacknowledged = 0;  // outcomes Redis has not confirmed
  bool connected = false;
  double now = 0;             // epoch seconds
};

void LogWorkerState(const base::Logger& log, const WorkerState& state, const QueueSet& queues);

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_STATE_DUMP_H_
