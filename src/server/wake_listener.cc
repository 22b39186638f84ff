#include "server/wake_listener.h"

#include <algorithm>

#include "redis/pubsub_message.h"

namespace reliableq::server {

namespace {

using std::chrono::milliseconds;

constexpr milliseconds kReconnectMin{100};
constexpr milliseconds kReconnectMax{2000};

// Where Redis sends a RESP2 client the keys its tracking invalidates.
constexpr std::string_view kInvalidateChannel = "__redis__:invalidate";

// Events of a list that may have made an empty queue non-empty.
bool IsPush(std::string_view event) {
  return event == "lpush" || event == "rpush" || event == "linsert";
}

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

}  // namespace

std::string KeyspaceChannel(int db, std::string_view key) {
  return "__keyspace@" + std::to_string(db) + "__:" + std::string(key);
}

std::string GlobEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

WakeListener::WakeListener(uv::EventLoop& loop, const RedisOptions& redis,
                           const std::string& client_name, const protocol::Keys& keys,
                           const QueueSet& queues, const base::Logger& log, Events events)
    : queues_(queues),
      log_(log),
      events_(std::move(events)),
      scheduled_channel_(keys.WakeScheduled()),
      schedule_keyspace_(KeyspaceChannel(redis.db, keys.Schedule())),
      retry_keyspace_(KeyspaceChannel(redis.db, keys.Retry())),
      paused_channel_(keys.WakePaused()),
      queue_key_prefix_(keys.Queue("")),
      wake_prefix_(keys.WakeQueue("")),
      keyspace_prefix_(KeyspaceChannel(redis.db, keys.Queue(""))),
      connection_(std::make_unique<redis::AsyncConnection>(loop.get(), redis)),
      reconnect_timer_(loop, [this] { Connect(); }),
      reconnect_delay_(kReconnectMin) {
  connection_->set_client_name(client_name);
  connection_->SetOnMessage([this](redis::ReplyRef m) { OnMessage(m); });
  connection_->SetOnDisconnect([this](const Status& s) {
    std::string error = s.ToString();
    log_.Log(LogLevel::kWarn, base::LogEvent("wake_connection_lost").WithError(error),
             "wake-up connection lost: %s", error.c_str());
    subscribed_idle_ = false;
    changing_ = false;
    subscribed_queues_ = 0;
    events_.on_disconnected();
    if (!stopped_) reconnect_timer_.Start(reconnect_delay_);
  });
}

void WakeListener::Start() {
  if (!stopped_) return;
  stopped_ = false;
  Connect();
}

void WakeListener::Stop() {
  stopped_ = true;
  reconnect_timer_.Stop();
  connection_->Close();
  subscribed_idle_ = false;
  changing_ = false;
  subscribed_queues_ = 0;
}

void WakeListener::ResetBackoff() {
  reconnect_delay_ = kReconnectMin;
  if (reconnect_timer_.active()) reconnect_timer_.Start(reconnect_delay_);
}

void WakeListener::Connect() {
  if (stopped_) return;
  connection_->Connect([this](const Status& s) {
    if (stopped_) return;
    if (!s.ok()) {
      std::string error = s.ToString();
      log_.Log(LogLevel::kWarn, base::LogEvent("wake_connect_failed").WithError(error),
               "wake-up connection: %s; retrying", error.c_str());
      reconnect_delay_ = std::min(reconnect_delay_ * 2, kReconnectMax);
      reconnect_timer_.Start(reconnect_delay_);
      return;
    }
    reconnect_delay_ = kReconnectMin;
    Subscribe(true);
    events_.on_connected();
  });
}

void WakeListener::Listen(bool idle) {
  want_idle_ = idle;
  Update();
}

void WakeListener::QueuesChanged() { Update(); }

void WakeListener::Update() {
  if (changing_ || !connection_->ready()) return;
  if (want_idle_ && (!subscribed_idle_ || subscribed_queues_ < queues_.size())) {
    Subscribe(false);
  } else if (!want_idle_ && subscribed_idle_) {
    Unsubscribe();
  }
}

void WakeListener::AddQueueChannels(size_t from, redis::CommandList* commands) {
  for (size_t i = from; i < queues_.size(); ++i) {
    const std::string& name = queues_[i].name;
    by_name_[name] = static_cast<uint32_t>(i);
    commands->Add({"SUBSCRIBE", wake_prefix_ + name});
    commands->Add({"SUBSCRIBE", keyspace_prefix_ + name});
  }
}

void WakeListener::Subscribe(bool permanent_too) {
  redis::CommandList commands;
  if (permanent_too) {
    commands.Add({"SUBSCRIBE", scheduled_channel_});
    commands.Add({"SUBSCRIBE", schedule_keyspace_});
    commands.Add({"SUBSCRIBE", retry_keyspace_});
    commands.Add({"SUBSCRIBE", paused_channel_});
    commands.Add({"SUBSCRIBE", kInvalidateChannel});
  }
  bool idle = want_idle_;
  size_t upto = queues_.size();
  if (idle) {
    // Only the queues not subscribed yet: a growing namespace adds some.
    AddQueueChannels(subscribed_idle_ ? subscribed_queues_ : 0, &commands);
    if (!subscribed_idle_) {
      for (const QueueNamespace& ns : queues_.namespaces()) {
        commands.Add({"PSUBSCRIBE", GlobEscape(wake_prefix_ + ns.prefix) + "*"});
        commands.Add({"PSUBSCRIBE", GlobEscape(keyspace_prefix_ + ns.prefix) + "*"});
      }
    }
  }
  if (commands.empty()) return;
  changing_ = true;
  Status sent = connection_->Pipeline(
      commands, [this, idle, upto](std::vector<Status> statuses, std::vector<int64_t>) {
        changing_ = false;
        for (const Status& s : statuses) {
          if (!s.ok()) {
            // The connection broke (its loss reconnects) or Redis refused
            // (an ACL without channel rights): the idle poll still runs.
            if (!s.IsShutdown()) {
              std::string error = s.ToString();
              log_.Log(LogLevel::kWarn, base::LogEvent("wake_subscribe_failed").WithError(error),
                       "wake-up subscription failed: %s", error.c_str());
            }
            return;
          }
        }
        if (idle) {
          bool first = !subscribed_idle_;
          subscribed_idle_ = true;
          subscribed_queues_ = upto;
          if (first) events_.on_listening();
        }
        Update();
      });
  if (!sent.ok()) changing_ = false;
}

void WakeListener::Unsubscribe() {
  redis::CommandList commands;
  for (size_t i = 0; i < subscribed_queues_; ++i) {
    commands.Add({"UNSUBSCRIBE", wake_prefix_ + queues_[i].name});
    commands.Add({"UNSUBSCRIBE", keyspace_prefix_ + queues_[i].name});
  }
  for (const QueueNamespace& ns : queues_.namespaces()) {
    commands.Add({"PUNSUBSCRIBE", GlobEscape(wake_prefix_ + ns.prefix) + "*"});
    commands.Add({"PUNSUBSCRIBE", GlobEscape(keyspace_prefix_ + ns.prefix) + "*"});
  }
  subscribed_idle_ = false;
  subscribed_queues_ = 0;
  if (commands.empty()) return;
  changing_ = true;
  Status sent = connection_->Pipeline(commands, [this](std::vector<Status>, std::vector<int64_t>) {
    changing_ = false;
    Update();
  });
  if (!sent.ok()) changing_ = false;
}

void WakeListener::Ping() {
  if (!connection_->ready()) return;
  connection_->Command({"PING"}, [](const Status&, redis::ReplyRef) {});
}

void WakeListener::OnMessage(redis::ReplyRef reply) {
  Result<redis::PubSubMessage> message = redis::ReadPubSubMessage(reply);
  if (!message.ok()) return;
  std::string_view channel = message->channel;
  if (!message->from_pattern && channel == kInvalidateChannel) {
    // The keys tracking invalidated; nil (FLUSHALL, FLUSHDB) names none,
    // and leaves no job to look for.
    for (std::string_view key : message->keys) {
      if (StartsWith(key, queue_key_prefix_)) {
        // The write may be a pop as well as a push: a maybe, which the fetch
        // it leads to settles.
        OnQueueEvent(key.substr(queue_key_prefix_.size()), "lpush");
      }
    }
    return;
  }
  std::string_view payload = message->payload;
  if (channel == scheduled_channel_) {
    events_.on_scheduled(payload);
  } else if (channel == paused_channel_) {
    events_.on_pauses(payload);
  } else if (channel == schedule_keyspace_ || channel == retry_keyspace_) {
    if (payload == "zadd" || payload == "zincrby") events_.on_scheduled({});
  } else if (StartsWith(channel, wake_prefix_)) {
    OnQueueEvent(channel.substr(wake_prefix_.size()), "lpush");
  } else if (StartsWith(channel, keyspace_prefix_)) {
    OnQueueEvent(channel.substr(keyspace_prefix_.size()), payload);
  }
}

void WakeListener::OnQueueEvent(std::string_view queue_name, std::string_view event) {
  if (!IsPush(event) || !want_idle_) return;
  auto it = by_name_.find(std::string(queue_name));
  if (it != by_name_.end()) {
    events_.on_queue(it->second);
  } else if (std::optional<uint32_t> known = queues_.Find(queue_name)) {
    // Added since the last subscription was built (its own is on its way).
    events_.on_queue(*known);
  } else if (queues_.Matches(queue_name)) {
    events_.on_new_queue(queue_name);
  }
}

}  // namespace reliableq::server
