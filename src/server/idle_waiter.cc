#include "server/idle_waiter.h"

namespace reliableq {

IdleWaiter::IdleWaiter(uv::EventLoop& loop, const RedisOptions& redis,
                       const std::string& client_name, const QueueSet& queues,
                       QueueHealth& health, std::chrono::milliseconds block_timeout,
                       const Logger& log, Events events)
    : queues_(queues),
      health_(health),
      block_timeout_(block_timeout),
      log_(log),
      events_(std::move(events)) {
  waiters_.resize(queues.size());
  for (uint32_t i = 0; i < waiters_.size(); ++i) {
    auto& connection = waiters_[i].connection;
    connection = std::make_unique<redis::AsyncConnection>(loop.get(), redis);
    connection->set_client_name(client_name);
    connection->SetOnDisconnect([this, i](const Status& s) {
      log_.Log(LogLevel::kWarn, "idle connection for queue %s lost: %s", queues_[i].name.c_str(),
               s.ToString().c_str());
      waiters_[i].waiting = false;
      // A BLMOVE reply may have been lost with a job in it.
      events_.on_lost(waiters_[i].connection->last_client_id());
    });
  }
}

IdleWaiter::Arm IdleWaiter::Start(uint32_t i, const std::function<bool(int64_t)>& published) {
  Waiter& w = waiters_[i];
  if (w.waiting) return Arm::kWaiting;
  if (health_.broken(i)) return Arm::kBroken;
  if (!w.connection->ready()) {
    if (w.connecting) return Arm::kConnecting;
    w.connecting = true;
    w.connection->Connect([this, i](const Status& s) {
      waiters_[i].connecting = false;
      if (!s.ok()) {
        log_.Log(LogLevel::kWarn, "idle connection for queue %s: %s", queues_[i].name.c_str(),
                 s.ToString().c_str());
        return;  // tried again when the worker is next idle
      }
      events_.on_connected();
    });
    return Arm::kConnecting;
  }
  if (!published(w.connection->client_id())) return Arm::kUnpublished;
  const ServedQueue& q = queues_[i];
  std::string timeout = std::to_string(block_timeout_.count() / 1000);
  w.waiting = true;
  w.unblock_sent = false;
  Status sent = w.connection->Command(
      {"BLMOVE", q.queue_key, q.working_key, "RIGHT", "LEFT", timeout},
      [this, i](const Status& s, redisReply* reply) {
        waiters_[i].waiting = false;
        if (s.ok() && reply->type == REDIS_REPLY_STRING) {
          events_.on_job(i, std::string(reply->str, reply->len));
        } else {
          if (s.message().rfind("WRONGTYPE", 0) == 0) health_.Broken(i, s.message());
          events_.on_empty(i, s);
        }
      },
      block_timeout_);
  if (!sent.ok()) w.waiting = false;
  return Arm::kWaiting;
}

bool IdleWaiter::waiting() const {
  for (const Waiter& w : waiters_) {
    if (w.waiting) return true;
  }
  return false;
}

void IdleWaiter::Interrupt(redis::AsyncConnection& command) {
  for (Waiter& w : waiters_) {
    if (!w.waiting || w.unblock_sent || w.connection->client_id() == 0) continue;
    w.unblock_sent = true;
    command.Command({"CLIENT", "UNBLOCK", std::to_string(w.connection->client_id())},
                    [](const Status&, redisReply*) {});
  }
}

void IdleWaiter::CloseAll() {
  for (Waiter& w : waiters_) {
    w.connection->Close();
    w.waiting = false;
  }
}

void IdleWaiter::AppendClientIds(std::vector<int64_t>* ids) const {
  for (const Waiter& w : waiters_) {
    if (w.connection->client_id() != 0) ids->push_back(w.connection->client_id());
  }
}

}  // namespace reliableq
