#include "server/sentinel_watch.h"

#include <cstdlib>
#include <sstream>

#include "base/text_escape.h"
#include "redis/pubsub_message.h"

namespace reliableq::server {

namespace {

// A sentinel that did not answer is tried again after this; the next one
// is tried at once.
constexpr std::chrono::milliseconds kRetryDelay{1000};

// How often the subscribed sentinel must show it still answers.
constexpr std::chrono::milliseconds kPingInterval{5000};

}  // namespace

SentinelWatch::SentinelWatch(uv::EventLoop& loop, std::shared_ptr<redis::Discovery> discovery,
                             const base::Logger& log, std::function<void()> on_switch)
    : loop_(loop),
      discovery_(std::move(discovery)),
      log_(log),
      on_switch_(std::move(on_switch)),
      retry_timer_(loop, [this] { Connect(); }),
      ping_timer_(loop, [this] {
        // Unanswered within the sentinel timeout, the connection drops
        // (its watchdog) and the next sentinel is tried.
        if (connection_ != nullptr && connection_->ready()) {
          (void)connection_->Command({"PING"}, [](const Status&, redis::ReplyRef) {});
        }
      }) {}

SentinelWatch::~SentinelWatch() { Stop(); }

void SentinelWatch::Start() {
  if (!stopped_ || discovery_->options().sentinels.empty()) return;
  stopped_ = false;
  ping_timer_.Start(kPingInterval, kPingInterval);
  Connect();
}

void SentinelWatch::Stop() {
  stopped_ = true;
  retry_timer_.Stop();
  ping_timer_.Stop();
  if (connection_ != nullptr) connection_->Close();
}

void SentinelWatch::Close() {
  Stop();
  retry_timer_.Close();
  ping_timer_.Close();
}

void SentinelWatch::Retry() {
  if (stopped_) return;
  next_ = (next_ + 1) % discovery_->options().sentinels.size();
  // Around the list at once; a pause once every sentinel was tried.
  retry_timer_.Start(next_ == 0 ? kRetryDelay : std::chrono::milliseconds(1));
}

void SentinelWatch::Connect() {
  if (stopped_) return;
  // A connection is made once per sentinel: the object is replaced, never
  // reconnected from inside its own callbacks.
  connection_ =
      std::make_unique<redis::AsyncConnection>(loop_.get(), discovery_->SentinelOptions(next_));
  connection_->set_sentinel_handshake();
  connection_->SetOnMessage([this](redis::ReplyRef m) { OnMessage(m); });
  connection_->SetOnDisconnect([this](const Status&) { Retry(); });
  connection_->Connect([this](const Status& s) {
    if (stopped_) return;
    if (!s.ok()) {
      Retry();
      return;
    }
    Status sent = connection_->Command(
        {"SUBSCRIBE", "+switch-master"}, [this](const Status& status, redis::ReplyRef) {
          // A broken connection retries through on_disconnect; an error
          // reply (an ACL, say) on a live one: another sentinel may take it.
          if (status.ok() || stopped_ || !connection_->ready()) return;
          connection_->Close();
          Retry();
        });
    if (!sent.ok()) Retry();
  });
}

void SentinelWatch::OnMessage(redis::ReplyRef message) {
  Result<redis::PubSubMessage> read = redis::ReadPubSubMessage(message);
  if (!read.ok()) return;
  std::istringstream fields(std::string(read->payload));
  std::string name, old_host, old_port, new_host, new_port;
  if (!(fields >> name >> old_host >> old_port >> new_host >> new_port)) return;
  if (name != discovery_->options().master_name) return;
  int port = std::atoi(new_port.c_str());
  if (port <= 0 || port > 65535) return;
  log_.Log(LogLevel::kWarn, "sentinel_switched",
           "sentinels switched master '%s' to %s:%d; moving every connection",
           base::Escaped(name).c_str(), base::Escaped(new_host).c_str(), port);
  discovery_->Announce(redis::Endpoint{new_host, port, {}});
  on_switch_();
}

}  // namespace reliableq::server
