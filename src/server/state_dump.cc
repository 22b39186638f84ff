#include "server/state_dump.h"

#include "codec/job_codec.h"

namespace reliableq::server {

void LogWorkerState(const base::Logger& log, const WorkerState& state, const QueueSet& queues) {
  log.Log(LogLevel::kInfo, "state_dump",
          "state: identity=%s phase=%s concurrency=%d running=%zu ready=%zu "
          "unacknowledged=%zu redis=%s",
          state.identity.c_str(), state.phase, state.concurrency, state.running.size(), state.ready,
          state.unacknowledged, state.connected ? "connected" : "disconnected");
  std::vector<bool> busy(static_cast<size_t>(state.concurrency), false);
  for (const RunningJob& job : state.running) {
    busy[static_cast<size_t>(job.slot)] = true;
    Result<codec::DecodedJob> decoded = codec::DecodeJob(job.payload);
    std::string cls = "?", jid = "?";
    if (decoded.ok()) {
      const auto& doc = decoded->document;
      if (doc["class"].IsString()) cls = doc["class"].GetString();
      auto it = doc.FindMember("jid");
      if (it != doc.MemberEnd() && it->value.IsString()) jid = it->value.GetString();
    }
    log.Log(LogLevel::kInfo, "state_processor",
            "processor p%d: running %s jid=%s from queue %s for %.3f s", job.slot, cls.c_str(),
            jid.c_str(), queues[job.queue].name.c_str(), state.now - job.started_at);
  }
  for (size_t i = 0; i < busy.size(); ++i) {
    if (!busy[i]) log.Log(LogLevel::kInfo, "state_processor", "processor p%zu: idle", i);
  }
}

}  // namespace reliableq::server
