#include "server/hand_back.h"

#include "protocol/script_calls.h"

namespace reliableq::server {

namespace {

// A hand-back that cannot reach Redis gives up after this long.
constexpr std::chrono::milliseconds kPatience{10000};
// How soon a hand-back looks again for the connection to be back.
constexpr std::chrono::milliseconds kReconnectLook{50};
// The pause after Redis refused the requeue: it would refuse it every time.
constexpr std::chrono::milliseconds kRefusedPause{200};
// Forget refuses while a job arrived meanwhile; each refusal hands back once
// more, this many times at most.
constexpr int kMaxAttempts = 20;

}  // namespace

HandBack::HandBack(uv::EventLoop& loop, redis::AsyncConnection& command, const QueueSet& queues,
                   Reconciler& reconciler, Outcomes& outcomes, const protocol::Keys& keys,
                   std::string identity, const Clock& clock, const base::Logger& log,
                   std::function<void(const Status&)> on_over)
    : command_(command),
      queues_(queues),
      reconciler_(reconciler),
      outcomes_(outcomes),
      keys_(keys),
      identity_(std::move(identity)),
      clock_(clock),
      log_(log),
      on_over_(std::move(on_over)),
      timer_(loop, [this] { Attempt(); }) {}

void HandBack::Start(bool hard, PayloadsByQueue running) {
  hard_ = hard;
  running_ = std::move(running);
  running_.resize(queues_.size());
  deadline_ = clock_.Monotonic() + kPatience;
  Attempt();
}

void HandBack::AttemptLater(std::chrono::milliseconds delay) { timer_.Start(delay); }

void HandBack::Attempt() {
  if (in_flight_) return;
  if (clock_.Monotonic() >= deadline_) {
    Status why = Status::IoError(
        "cannot reach Redis to hand jobs back; they stay in this process's working lists and "
        "a janitor returns them once the heartbeat expires");
    log_.Log(LogLevel::kError, base::LogEvent("hand_back_gave_up").WithError(why.message()), "%s",
             why.message().c_str());
    on_over_(why);
    return;
  }
  if (!command_.ready()) {
    AttemptLater(kReconnectLook);  // the shell's reconnect brings it back
    return;
  }
  in_flight_ = true;
  ++attempts_;
  reconciler_.FenceStaleClients();
  outcomes_.Send();
  PayloadsByQueue listed(queues_.size());
  if (hard_) {
    listed = running_;
  } else {
    outcomes_.AddUnconfirmed(&listed);
  }
  reconciler_.Requeue(hard_ ? protocol::RequeueMode::kInterrupt : protocol::RequeueMode::kKeep, std::move(listed),
                      [this](const Status& s) {
                        if (!s.ok()) {
                          in_flight_ = false;
                          std::string error = s.ToString();
                          log_.Log(LogLevel::kWarn, base::LogEvent("hand_back_failed").WithError(error),
                                   "hand-back failed: %s", error.c_str());
                          AttemptLater(kRefusedPause);
                          return;
                        }
                        Forget();
                      });
}

void HandBack::Forget() {
  Status sent = command_.Eval(
      protocol::ForgetCall(keys_, identity_, queues_.names(), /*force=*/true),
      [this](const Status& s, redis::ReplyRef r) {
        in_flight_ = false;
        Result<bool> forgotten = s.ok() ? protocol::ReadForgetReply(r) : Result<bool>(s);
        if (forgotten.ok() && *forgotten) {
          log_.Log(LogLevel::kInfo, "stopped", "stopped %s", identity_.c_str());
          on_over_(Status::OK());
        } else if (attempts_ < kMaxAttempts) {
          Attempt();  // a job arrived meanwhile: hand it back too
        } else {
          Status why = Status::IoError(
              "could not empty the working lists; leaving them to the janitor" +
              (s.ok() ? std::string() : " (" + s.ToString() + ")"));
          log_.Log(LogLevel::kError, base::LogEvent("hand_back_gave_up").WithError(why.message()), "%s",
                   why.message().c_str());
          on_over_(why);
        }
      });
  if (!sent.ok()) {
    in_flight_ = false;
    Attempt();
  }
}

}  // namespace reliableq::server
