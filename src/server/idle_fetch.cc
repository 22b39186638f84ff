#include "server/idle_fetch.h"

#include "redis/reply.h"

namespace reliableq::server {

namespace {

// How long the worker stays subscribed while it finds backlog.
constexpr std::chrono::milliseconds kListenAfterBusy{1000};

}  // namespace

IdleFetch::IdleFetch(uv::EventLoop& loop, const RedisOptions& redis,
                     const std::string& client_name, const protocol::Keys& keys, const QueueSet& queues,
                     const QueueHealth& health, redis::AsyncConnection& command, Fetcher& fetcher,
                     Intervals intervals, const base::Logger& log, Hooks hooks)
    : queues_(queues),
      health_(health),
      command_(command),
      fetcher_(fetcher),
      intervals_(intervals),
      hooks_(std::move(hooks)),
      poll_timer_(loop, [this] { OnPoll(); }),
      unlisten_timer_(loop, [this] {
        if (!idle_) Listen(false);
      }),
      tracking_(command, keys.Queue(""), log) {
  listener_ = std::make_unique<WakeListener>(
      loop, redis, client_name, keys, queues, log,
      WakeListener::Events{[this](uint32_t q) { OnWoken(q); },
                           [this](std::string_view name) { hooks_.on_new_queue(name); },
                           [this](std::string_view score) { hooks_.on_scheduled(score); },
                           // Jobs pushed before the subscription sent no
                           // message: every queue counts as woken, which a
                           // fetch on its way or a full pool only defers.
                           [this] {
                             for (uint32_t q = 0; q < queues_.published(); ++q) MarkWoken(q);
                             if (idle_) FetchWoken();
                           },
                           [this] {
                             hooks_.on_connected();
                             tracking_.ListenerConnected(listener_->client_id());
                           },
                           [this] { tracking_.ListenerConnected(0); },
                           [this](std::string_view message) { hooks_.on_pauses(message); }});
}

void IdleFetch::Start() { listener_->Start(); }

void IdleFetch::Stop() {
  Leave();
  listener_->Stop();
}

void IdleFetch::OnFetched(bool drained) {
  if (drained) {
    Enter();
  } else {
    idle_ = false;
    if (!unlisten_timer_.active()) unlisten_timer_.Start(kListenAfterBusy);
  }
}

void IdleFetch::Listen(bool idle) {
  listener_->Listen(idle);
  tracking_.Want(idle);
}

void IdleFetch::Enter() {
  idle_ = true;
  unlisten_timer_.Stop();
  Listen(true);
  if (!poll_timer_.active()) poll_timer_.Start(PollInterval());
  FetchWoken();
}

void IdleFetch::Leave() {
  idle_ = false;
  poll_timer_.Stop();
  unlisten_timer_.Stop();
  Listen(false);
  ClearWoken();
}

void IdleFetch::OnFinished() {
  if (!idle_) {
    hooks_.fetch_all();
  } else if (EveryPushWakes()) {
    // Every push since the subscription sent a message: only the queues
    // they named can have jobs.
    FetchWoken();
  } else {
    // A Ruby push sends none: look at every queue, cheaply.
    LookAtQueues();
  }
}

void IdleFetch::OnWoken(uint32_t queue) {
  MarkWoken(queue);
  if (idle_) FetchWoken();
}

void IdleFetch::MarkWoken(uint32_t queue) {
  if (queue >= woken_.size()) woken_.resize(queues_.size(), false);
  if (!woken_[queue]) {
    woken_[queue] = true;
    woken_list_.push_back(queue);
  }
}

void IdleFetch::FetchWoken() {
  // Otherwise the fetch's reply, the reconcile or a finished job comes back
  // here.
  if (woken_list_.empty() || fetcher_.in_flight() || !hooks_.may_fetch()) return;
  if (fetcher_.Fetch(&woken_list_)) ClearWoken();
}

void IdleFetch::FetchedAll() { ClearWoken(); }

void IdleFetch::ClearWoken() {
  for (uint32_t q : woken_list_) woken_[q] = false;
  woken_list_.clear();
}

bool IdleFetch::EveryPushWakes() const {
  // The keyspace channels may be refused (an ACL) though the server sends.
  return (tracking_.active() || list_notifications_) && listener_->listening();
}

std::chrono::milliseconds IdleFetch::PollInterval() const {
  return EveryPushWakes() ? intervals_.safety_poll : intervals_.poll;
}

void IdleFetch::OnPoll() {
  if (!idle_) return;
  poll_timer_.Start(PollInterval());
  LookAtQueues();
}

void IdleFetch::LookAtQueues() {
  if (look_in_flight_ || !command_.ready() || fetcher_.in_flight() || fetcher_.Wanted() == 0) {
    return;
  }
  // EXISTS of every queue costs Redis far less than a fetch of every queue
  // (a lookup each, no script); a fetch follows only when one has jobs.
  std::vector<std::string_view> argv{"EXISTS"};
  argv.reserve(1 + queues_.published());
  for (uint32_t i = 0; i < queues_.published(); ++i) {
    if (!health_.broken(i)) argv.push_back(queues_[i].queue_key);
  }
  if (argv.size() == 1) return;
  Status sent = command_.Command(argv, [this](const Status& s, redis::ReplyRef reply) {
    look_in_flight_ = false;
    Result<int64_t> existing = s.ok() ? redis::ToInteger(reply) : Result<int64_t>(s);
    if (existing.ok() && *existing > 0) hooks_.fetch_all();
  });
  look_in_flight_ = sent.ok();
}

void IdleFetch::OnBeat() {
  listener_->Ping();
  tracking_.Check();
  if (!command_.ready()) return;
  command_.Command({"CONFIG", "GET", "notify-keyspace-events"},
                   [this](const Status& s, redis::ReplyRef reply) {
                     // Refused (a managed Redis, an ACL): taken as off.
                     bool on = false;
                     Result<std::string> flags =
                         s.ok() ? redis::ReadConfigValue(reply) : Result<std::string>(s);
                     if (flags.ok()) {
                       bool lists = flags->find('l') != std::string::npos ||
                                    flags->find('A') != std::string::npos;
                       on = flags->find('K') != std::string::npos && lists;
                     }
                     list_notifications_ = on;
                   });
}

}  // namespace reliableq::server
