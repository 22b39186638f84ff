#include "server/push_tracking.h"

#include <string>
#include <vector>

#include "redis/reply.h"

namespace reliableq::server {

namespace {

// Whether CLIENT TRACKINGINFO's flags say that tracking is on and its
// redirect connection is still there.
bool TrackingSound(const std::vector<std::string>& flags) {
  bool on = false;
  for (const std::string& flag : flags) {
    if (flag == "broken_redirect" || flag == "off") return false;
    if (flag == "on") on = true;
  }
  return on;
}

}  // namespace

PushTracking::PushTracking(redis::AsyncConnection& command, std::string prefix, const base::Logger& log)
    : command_(command), prefix_(std::move(prefix)), log_(log) {}

void PushTracking::Want(bool on) {
  want_ = on;
  Update();
}

void PushTracking::ListenerConnected(int64_t id) {
  listener_ = id;
  Update();
}

void PushTracking::CommandConnected() {
  // A new connection tracks nothing.
  armed_ = 0;
  changing_ = false;
  Update();
}

void PushTracking::Update() {
  if (refused_ || changing_ || !command_.ready()) return;
  const int64_t target = want_ ? listener_ : 0;
  if (target == armed_) return;
  // Always off first: turning it on again while on (another redirect, a
  // state this side lost track of) is refused, and off while off is fine.
  redis::CommandList commands;
  commands.Add({"CLIENT", "TRACKING", "off"});
  const std::string redirect = std::to_string(target);
  if (target != 0) {
    commands.Add({"CLIENT", "TRACKING", "on", "REDIRECT", redirect, "BCAST", "PREFIX", prefix_,
                  "NOLOOP"});
  }
  changing_ = true;
  Status sent = command_.Pipeline(commands, [this, target](std::vector<Status> statuses,
                                                           std::vector<int64_t>) {
    changing_ = false;
    armed_ = 0;
    for (const Status& s : statuses) {
      if (s.ok()) continue;
      // The connection broke or cannot serve now: CommandConnected or the
      // next change tries again.
      if (s.IsShutdown() || s.IsRetryable()) return;
      // The listener reconnected meanwhile: its new id comes with
      // ListenerConnected.
      if (s.message().find("does not exist") != std::string::npos) {
        if (listener_ == target) listener_ = 0;
        return;
      }
      Refused(s);
      return;
    }
    armed_ = target;
    Update();  // the wanted state may have moved on meanwhile
  });
  if (!sent.ok()) changing_ = false;
}

void PushTracking::Check() {
  if (refused_ || changing_ || armed_ == 0 || !command_.ready()) return;
  const int64_t armed = armed_;
  command_.Command({"CLIENT", "TRACKINGINFO"}, [this, armed](const Status& s,
                                                             redis::ReplyRef reply) {
    if (!s.ok() || changing_ || armed_ != armed) return;
    Result<std::vector<std::string>> flags = redis::ReadTrackingFlags(reply);
    if (flags.ok() && TrackingSound(*flags)) return;
    log_.Log(LogLevel::kInfo, "tracking_rearmed",
             "push tracking was off or its redirect broken: turning it on again");
    armed_ = 0;
    Update();
  });
}

void PushTracking::Refused(const Status& why) {
  refused_ = true;
  std::string error = why.ToString();
  log_.Log(LogLevel::kWarn, base::LogEvent("tracking_refused").WithError(error),
           "CLIENT TRACKING refused (%s): pushes that publish no wake-up (Sidekiq's client) "
           "reach an idle worker at its next look at every queue (--idle-poll)",
           error.c_str());
}

}  // namespace reliableq::server
