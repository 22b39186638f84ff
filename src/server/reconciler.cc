#include "server/reconciler.h"

#include <memory>

namespace reliableq::server {

Reconciler::Reconciler(Parts parts, std::function<void()> on_done)
    : parts_(parts), on_done_(std::move(on_done)) {}

void Reconciler::Request() {
  owed_ = true;
  Run();
}

void Reconciler::FenceStaleClients() {
  for (const StaleClient& stale : stale_clients_) {
    if (stale.run.empty() || stale.run != parts_.command.run_id()) continue;
    parts_.command.Command({"CLIENT", "KILL", "ID", std::to_string(stale.id)},
                           [](const Status&, redis::ReplyRef) {});
  }
  stale_clients_.clear();
}

void Reconciler::Run() {
  if (!owed_ || running_ > 0 || closed_ || !parts_.command.ready()) return;
  // Wait for every reply that may still bring a job.
  if (parts_.fetcher.in_flight()) return;
  owed_ = false;
  FenceStaleClients();
  // Outcomes first, on the same connection.
  parts_.outcomes.TakeFinished();
  parts_.outcomes.Send();
  PayloadsByQueue keep(parts_.queues.size());
  parts_.pool.HeldPayloads(/*include_ready=*/true, &keep);
  parts_.outcomes.AddUnconfirmed(&keep);
  if (parts_.add_held) parts_.add_held(&keep);
  ++running_;
  Requeue(protocol::RequeueMode::kKeep, std::move(keep), [this](const Status& s) {
    --running_;
    if (closed_) return;
    if (!s.ok()) {
      owed_ = true;
      if (!s.IsShutdown()) {
        std::string error = s.ToString();
        parts_.log.Log(LogLevel::kWarn, base::LogEvent("reconcile_failed").WithError(error),
                       "reconcile failed: %s", error.c_str());
      }
      return;
    }
    Run();
    on_done_();
  });
}

void Reconciler::Requeue(protocol::RequeueMode mode, PayloadsByQueue listed,
                         std::function<void(const Status&)> done) {
  size_t n = parts_.queues.size();
  auto remaining = std::make_shared<size_t>(n);
  auto first_error = std::make_shared<Status>();
  auto finish_one = [remaining, first_error, done](const Status& s) {
    if (!s.ok() && first_error->ok()) *first_error = s;
    if (--*remaining == 0) done(*first_error);
  };
  double now = parts_.clock.Now();
  for (uint32_t i = 0; i < n; ++i) {
    const ServedQueue& q = parts_.queues[i];
    ScriptCall call = protocol::RequeueCall(parts_.queues.keys(), q.working_key, q.name, mode, parts_.max_interruptions, now,
                                  parts_.dead_limits, std::move(listed[i]));
    Status sent =
        parts_.command.Eval(call, [this, i, finish_one](const Status& s, redis::ReplyRef r) {
          Result<protocol::RequeueReply> read = s.ok() ? protocol::ReadRequeueReply(r) : Result<protocol::RequeueReply>(s);
          if (read.ok() && (read->requeued > 0 || read->dead > 0)) {
            parts_.log.Log(LogLevel::kInfo,
                           base::LogEvent("reconcile_handed_back").WithQueue(parts_.queues[i].name),
                           "handed back to queue %s: %lld jobs, to the dead set: %lld",
                           parts_.queues[i].name.c_str(), static_cast<long long>(read->requeued),
                           static_cast<long long>(read->dead));
          }
          finish_one(s);
        });
    if (!sent.ok()) finish_one(sent);
  }
}

}  // namespace reliableq::server
