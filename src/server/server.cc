// The reliable worker. Everything that talks to Redis runs on one libuv loop
// thread; handlers run on the ProcessorPool's threads. Protocol and keys:
// man/reliableq-schema.7.
//
// The loop keeps three kinds of Redis connection:
// - `command_`: pipelined scripts (fetch, ack, fail, heartbeat, requeue) in
//   the order they must take effect; ordering on this one connection is what
//   makes "ack before hand-back" and "register before fetch" hold;
// - one blocking connection per queue, used only while the worker is idle,
//   each running BLMOVE so that a pushed job starts about a millisecond later;
// - the janitor's own blocking-API connection, used on libuv's thread pool so
//   that a long recovery never stalls the loop.
//
// No job ever exists only in this process's memory: it is moved by LMOVE,
// BLMOVE or a script, and whenever the process is unsure what Redis holds
// (a lost reply, a lost heartbeat, quiet, stop) it reconciles from Redis: the
// jobs in its working lists that it is not running go back to their queues.

#include <signal.h>
#include <sys/types.h>
#include <unistd.h>
#include <uv.h>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>
#include <set>

#include "job_codec.h"
#include "keys.h"
#include "log.h"
#include "recovery.h"
#include "redis/async_connection.h"
#include "redis/connection.h"
#include "redis/reply.h"
#include "reliableq/server.h"
#include "server/processor_pool.h"

namespace reliableq {

Server::~Server() = default;

namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Due members promoted per script call; a full batch makes the poller go
// again at once, alternating between schedule and retry, so a huge retry
// set never keeps scheduled jobs waiting (Sidekiq issue 3889).
constexpr size_t kPromoteBatch = 100;
// The longest a janitor pass holds the lease.
constexpr int64_t kJanitorLeaseCapMillis = 5000;
// Reconnect back-off bounds.
constexpr uint64_t kReconnectMinMillis = 100;
constexpr uint64_t kReconnectMaxMillis = 2000;
// Outcomes Redis refused with an error reply are sent again after this.
constexpr uint64_t kCompletionsRetryMillis = 200;
// Sidekiq keeps its dated stat counters for 5 years.
constexpr std::string_view kStatsTtlSeconds = "157680000";
// How often the stop sequence looks whether running jobs have finished.
constexpr uint64_t kStopPollMillis = 20;
// A hand-back that cannot reach Redis gives up after this long; the janitor
// of another process then recovers the jobs once the heartbeat expires.
constexpr milliseconds kHandBackPatience{10000};

double NowSeconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string Hostname() {
  if (const char* dyno = std::getenv("DYNO"); dyno != nullptr && *dyno) return dyno;
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

int64_t RssKilobytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long pages_total = 0, pages_resident = 0;
  int n = std::fscanf(f, "%ld %ld", &pages_total, &pages_resident);
  std::fclose(f);
  if (n != 2) return 0;
  return static_cast<int64_t>(pages_resident) * (sysconf(_SC_PAGESIZE) / 1024);
}

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void WriteString(JsonWriter& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

std::string ReplyText(const redisReply* r) {
  return r != nullptr && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)
             ? std::string(r->str, r->len)
             : std::string();
}

class ServerImpl final : public Server {
 public:
  ServerImpl(const ServerOptions& options, HandlerRegistry registry);
  ~ServerImpl() override;

  Status Init();
  Status Run() override;
  void Quiet() override { Request(&quiet_requested_); }
  void Stop() override { Request(&stop_requested_); }
  const std::string& identity() const override { return identity_; }

 private:
  enum class Phase { kStarting, kRunning, kQuiet, kStopping, kFinishing, kStopped };

  struct Queue {
    std::string name;
    int weight = 0;
    std::string queue_key;
    std::string working_key;
    std::unique_ptr<redis::AsyncConnection> blocking;
    bool blocking_armed = false;
    bool blocking_connecting = false;
    bool unblock_sent = false;
  };

  // Cross-thread requests (Quiet/Stop from any thread or a signal).
  void Request(std::atomic<int>* counter);
  void OnControl();

  // Connections.
  void ConnectCommand();
  void OnCommandReady(const Status& status);
  void OnCommandLost(const Status& status);
  void ScheduleReconnect();

  // Heartbeat.
  void Beat();
  void OnBeat(const Status& status, redisReply* reply, bool first, std::set<int64_t> published,
              Clock::time_point sent_at);
  std::string RegistryEntry() const;
  std::string InfoJson() const;
  void HandleSignal(const std::string& name);
  void DumpState();

  // Fetch, run, acknowledge.
  void FetchMore();
  void AdaptPrefetch(Clock::time_point sent);
  void OnFetched(const Status& status, redisReply* reply, std::vector<uint32_t> order,
                 size_t wanted);
  std::vector<uint32_t> FetchOrder();
  // Hands jobs from a fetch or BLMOVE reply to the processors. False when
  // the caller must not go on fetching: quiet or stop began, or a
  // reconcile is owed.
  bool Accept(std::vector<FetchedJob>* jobs);
  void ArmBlocking();
  void ArmBlocking(uint32_t index);
  void OnBlockingLost(int64_t old_client_id);
  void OnFinished();
  void SendCompletions();
  size_t Wanted() const;

  // Reconciliation and hand-back.
  void Reconcile(bool drop_ready);
  void MaybeReconcile();
  void SendRequeue(const char* mode, std::vector<std::vector<std::string>> listed,
                   std::function<void(const Status&)> done);
  void KillBlocking();
  // Appends, per queue index, the payloads of outcomes Redis has not
  // confirmed: not sent yet, or carried by a script on its way. A requeue
  // keeps them, since an ack refused after it would leave them to run again.
  void AddUnconfirmed(std::vector<std::vector<std::string>>* per_queue) const;
  // How many outcomes that is.
  size_t Unconfirmed() const;

  // Scheduled jobs and retries.
  void SchedulePoll(bool now);
  void Poll();
  void PromoteDue(std::string_view set, redisReply* members, std::function<void(bool)> done);

  // Janitor.
  void ScheduleJanitor(bool now);
  static void JanitorWork(uv_work_t* work);
  static void JanitorDone(uv_work_t* work, int status);

  // Shutdown.
  void EnterQuiet();
  void BeginStop();
  void OnStopPoll();
  void FinishStop(bool hard);
  void HandBack();
  void CloseAll();
  // CloseAll on the next loop turn: never from inside a hiredis callback,
  // where the connection objects must outlive the call.
  void RequestClose();

  ServerOptions options_;
  Keys keys_;
  std::string identity_;
  std::string hostname_;
  double started_at_ = 0;
  // Jobs held beyond the thread count; between min_prefetch_ and
  // max_prefetch_, following the jobs that finish during a fetch's round
  // trip (OnFetched).
  int prefetch_ = 1;
  int min_prefetch_ = 1;
  int max_prefetch_ = 1;
  Clock::time_point last_fetch_reply_;
  uint64_t finished_at_last_fetch_ = 0;
  std::vector<Queue> queues_;
  bool weighted_ = false;
  std::mt19937_64 random_;

  uv_loop_t loop_;
  bool loop_initialized_ = false;
  uv_async_t control_async_;
  uv_async_t finished_async_;
  uv_timer_t heartbeat_timer_;
  uv_timer_t janitor_timer_;
  uv_timer_t reconnect_timer_;
  uv_timer_t completions_retry_timer_;
  uv_timer_t fetch_retry_timer_;
  uv_timer_t stop_timer_;
  uv_timer_t poll_timer_;
  uv_timer_t close_timer_;
  std::vector<uv_signal_t*> signals_;
  uv_work_t janitor_work_;

  std::mutex control_mu_;
  bool control_open_ = false;  // guarded by control_mu_
  std::atomic<int> quiet_requested_{0};
  std::atomic<int> stop_requested_{0};
  int stop_seen_ = 0;

  std::unique_ptr<redis::AsyncConnection> command_;
  std::unique_ptr<ProcessorPool> pool_;
  Phase phase_ = Phase::kStarting;
  bool registered_ = false;
  bool beat_inflight_ = false;
  bool beat_again_ = false;
  std::set<int64_t> published_clients_;
  int64_t rtt_us_ = 0;
  bool fetch_inflight_ = false;
  bool poll_inflight_ = false;
  int64_t process_count_ = 1;
  bool idle_ = false;
  int reconciling_ = 0;
  // A reconcile is owed: set when this process may have jobs in its
  // working lists that it does not know of (a lost reply, a lost heartbeat,
  // quiet). No fetch starts while it is owed, and it is sent only once no
  // fetch or BLMOVE reply can still arrive, so nothing fetched can be
  // handed back and run as well.
  bool reconcile_pending_ = false;
  // Ids of our own connections that broke: killed before the next
  // reconcile, so that nothing they still had queued runs after it.
  std::vector<int64_t> stale_clients_;
  uint64_t reconnect_delay_ = kReconnectMinMillis;
  // The pause before the next fetch after Redis answered one with an error;
  // 0 while fetches succeed.
  uint64_t fetch_retry_delay_ = 0;

  // Outcomes taken from the pool and not yet confirmed by Redis.
  std::vector<FinishedJob> unsent_;
  // The outcomes each ack pipeline or fail script on its way carries, one
  // entry per pipeline or script.
  std::vector<std::shared_ptr<std::vector<FinishedJob>>> carried_;
  // Acknowledged jobs whose count Redis refused (INCRBY refused while out of
  // memory); added to the next ack's.
  int64_t uncounted_processed_ = 0;

  // Janitor (its work runs on the thread pool; these are touched there only
  // while janitor_running_ is true, and by the loop otherwise).
  bool janitor_running_ = false;
  std::unique_ptr<redis::Connection> janitor_redis_;
  Result<RecoveryReport> janitor_result_ = RecoveryReport{};
  bool janitor_ran_pass_ = false;

  // Stop.
  Clock::time_point stop_deadline_;
  Clock::time_point handback_deadline_;
  bool hard_stop_ = false;
  bool handback_inflight_ = false;
  int handback_attempts_ = 0;
  std::vector<std::vector<std::string>> hard_running_;
};

ServerImpl::ServerImpl(const ServerOptions& options, HandlerRegistry registry)
    : options_(options), keys_(options.prefix), random_(std::random_device{}()) {
  hostname_ = Hostname();
  identity_ = hostname_ + ":" + std::to_string(getpid()) + ":" + NewJid().substr(0, 12);
  std::vector<std::string> names;
  for (const QueueSpec& spec : options_.queues) {
    Queue q;
    q.name = spec.name;
    q.weight = spec.weight;
    q.queue_key = Keys::Queue(spec.name);
    q.working_key = keys_.Working(identity_, spec.name);
    if (spec.weight > 0) weighted_ = true;
    names.push_back(spec.name);
    queues_.push_back(std::move(q));
  }
  // A few jobs beyond the thread count keep threads busy across the round
  // trip of the next fetch without holding many jobs back from other
  // workers. Short jobs need more of them: enough to cover the fetch's
  // round trip and the ack's before it, up to eight times the thread count.
  min_prefetch_ = std::max(1, options_.concurrency / 4);
  max_prefetch_ = std::max(min_prefetch_, 8 * options_.concurrency);
  prefetch_ = min_prefetch_;
  ProcessorConfig config;
  config.threads = options_.concurrency;
  config.registry = std::move(registry);
  config.queue_names = std::move(names);
  config.max_retries = options_.max_retries;
  config.random_below = options_.random_below;
  config.middleware = options_.middleware;
  config.death_handlers = options_.death_handlers;
  pool_ = std::make_unique<ProcessorPool>(std::move(config),
                                          [this] { uv_async_send(&finished_async_); });
}

ServerImpl::~ServerImpl() {
  {
    std::lock_guard<std::mutex> lock(control_mu_);
    control_open_ = false;
  }
  pool_->Shutdown(milliseconds(0));
  if (loop_initialized_) {
    // Run() closes every handle before it returns; a server that was opened
    // and never run closes them here.
    if (phase_ != Phase::kStopped) CloseAll();
    uv_run(&loop_, UV_RUN_DEFAULT);
    uv_loop_close(&loop_);
  }
  // Only now: libuv may use a handle until its close has run.
  for (uv_signal_t* s : signals_) delete s;
}

Status ServerImpl::Init() {
  if (options_.queues.empty()) return Status::InvalidArgument("no queues to work");
  std::set<std::string> seen;
  for (const QueueSpec& q : options_.queues) {
    if (q.name.empty()) return Status::InvalidArgument("a queue name is empty");
    if (q.weight < 0) return Status::InvalidArgument("queue weights must be >= 0");
    if (!seen.insert(q.name).second) {
      return Status::InvalidArgument("queue '" + q.name + "' is given twice");
    }
  }
  if (options_.concurrency < 1) return Status::InvalidArgument("concurrency must be >= 1");
  if (options_.heartbeat_interval.count() <= 0 ||
      options_.heartbeat_ttl < 2 * options_.heartbeat_interval) {
    return Status::InvalidArgument("heartbeat ttl must be at least twice the heartbeat interval");
  }
  if (options_.janitor_interval.count() <= 0) {
    return Status::InvalidArgument("janitor interval must be positive");
  }
  if (options_.shutdown_timeout.count() < 0) {
    return Status::InvalidArgument("shutdown timeout must be >= 0");
  }
  if (options_.idle_block_timeout < milliseconds(1000)) {
    // BLMOVE takes whole seconds on Redis 6.2.
    return Status::InvalidArgument("idle block timeout must be at least 1 s");
  }
  SetLogLevel(options_.log_level);

  // Fail fast, with where we tried, when Redis is not there; and make sure
  // the server speaks LMOVE and BLMOVE (Redis >= 6.2).
  Result<std::unique_ptr<redis::Connection>> probe = redis::Connection::Open(options_.redis);
  if (!probe.ok()) return probe.status();
  Result<redis::ReplyPtr> info = (*probe)->Command({"INFO", "server"});
  if (!info.ok()) return info.status().WithContext("INFO server");
  std::string_view text = redis::View(info->get());
  size_t at = text.find("redis_version:");
  int major = 0, minor = 0;
  if (at == std::string_view::npos ||
      std::sscanf(std::string(text.substr(at + 14, 16)).c_str(), "%d.%d", &major, &minor) != 2) {
    return Status::Protocol("cannot read redis_version from INFO at " +
                            options_.redis.Describe());
  }
  if (major < 6 || (major == 6 && minor < 2)) {
    return Status::InvalidArgument("Redis at " + options_.redis.Describe() + " is version " +
                                   std::to_string(major) + "." + std::to_string(minor) +
                                   "; reliable fetch needs LMOVE, Redis 6.2 or later");
  }
  Status loaded = (*probe)->LoadScripts();
  if (!loaded.ok()) return loaded;
  Result<redis::ReplyPtr> policy = (*probe)->Command({"CONFIG", "GET", "maxmemory-policy"});
  if (policy.ok() && (*policy)->type == REDIS_REPLY_ARRAY && (*policy)->elements == 2) {
    std::string value = ReplyText((*policy)->element[1]);
    if (value != "noeviction") {
      Log(LogLevel::kWarn,
          "Redis maxmemory-policy is '%s': Redis may evict jobs; set it to noeviction",
          value.c_str());
    }
  }
  janitor_redis_ = std::move(probe.value());

  if (uv_loop_init(&loop_) != 0) return Status::IoError("cannot create the event loop");
  loop_initialized_ = true;
  loop_.data = this;
  uv_async_init(&loop_, &control_async_, [](uv_async_t* h) {
    static_cast<ServerImpl*>(h->loop->data)->OnControl();
  });
  uv_async_init(&loop_, &finished_async_, [](uv_async_t* h) {
    static_cast<ServerImpl*>(h->loop->data)->OnFinished();
  });
  uv_timer_init(&loop_, &heartbeat_timer_);
  uv_timer_init(&loop_, &janitor_timer_);
  uv_timer_init(&loop_, &reconnect_timer_);
  uv_timer_init(&loop_, &completions_retry_timer_);
  uv_timer_init(&loop_, &fetch_retry_timer_);
  uv_timer_init(&loop_, &stop_timer_);
  uv_timer_init(&loop_, &poll_timer_);
  uv_timer_init(&loop_, &close_timer_);
  {
    std::lock_guard<std::mutex> lock(control_mu_);
    control_open_ = true;
  }
  command_ = std::make_unique<redis::AsyncConnection>(&loop_, options_.redis);
  command_->set_client_name(keys_.ClientName(identity_));
  command_->SetOnDisconnect([this](const Status& s) { OnCommandLost(s); });
  for (uint32_t i = 0; i < queues_.size(); ++i) {
    queues_[i].blocking = std::make_unique<redis::AsyncConnection>(&loop_, options_.redis);
    queues_[i].blocking->set_client_name(keys_.ClientName(identity_));
    queues_[i].blocking->SetOnDisconnect([this, i](const Status& s) {
      Log(LogLevel::kWarn, "idle connection for queue %s lost: %s", queues_[i].name.c_str(),
          s.ToString().c_str());
      queues_[i].blocking_armed = false;
      OnBlockingLost(queues_[i].blocking->last_client_id());
    });
  }
  if (options_.handle_signals) {
    for (int signum : {SIGTERM, SIGINT, SIGTSTP, SIGTTIN}) {
      auto* handle = new uv_signal_t;
      uv_signal_init(&loop_, handle);
      signals_.push_back(handle);
      uv_signal_start(handle, [](uv_signal_t* h, int sig) {
        auto* self = static_cast<ServerImpl*>(h->loop->data);
        if (sig == SIGTSTP) {
          self->HandleSignal("TSTP");
        } else if (sig == SIGTTIN) {
          self->HandleSignal("TTIN");
        } else {
          self->HandleSignal("TERM");
        }
      }, signum);
    }
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------
// Control

void ServerImpl::Request(std::atomic<int>* counter) {
  counter->fetch_add(1);
  std::lock_guard<std::mutex> lock(control_mu_);
  if (control_open_) uv_async_send(&control_async_);
}

void ServerImpl::OnControl() {
  if (quiet_requested_.exchange(0) > 0) HandleSignal("TSTP");
  int stops = stop_requested_.exchange(0);
  for (int i = 0; i < stops; ++i) HandleSignal("TERM");
}

void ServerImpl::HandleSignal(const std::string& name) {
  if (name == "TSTP") {
    Log(LogLevel::kInfo, "quiet: no new jobs; jobs not started go back to their queues");
    EnterQuiet();
  } else if (name == "TERM") {
    if (++stop_seen_ == 1) {
      Log(LogLevel::kInfo, "stopping: waiting up to %.1f s for %zu running jobs",
          options_.shutdown_timeout.count() / 1000.0, pool_->running());
      BeginStop();
    } else if (phase_ == Phase::kStopping) {
      Log(LogLevel::kWarn, "second stop request: handing running jobs back now");
      FinishStop(true);
    }
  } else if (name == "TTIN") {
    DumpState();
  } else {
    Log(LogLevel::kWarn, "ignoring unknown signal '%s'", name.c_str());
  }
}

void ServerImpl::DumpState() {
  std::vector<RunningJob> running = pool_->Running();
  Log(LogLevel::kInfo, "state: identity=%s phase=%d concurrency=%d running=%zu ready=%zu "
      "unacknowledged=%zu redis=%s",
      identity_.c_str(), static_cast<int>(phase_), options_.concurrency, running.size(),
      pool_->ready(), Unconfirmed(),
      command_->ready() ? "connected" : "disconnected");
  double now = NowSeconds();
  std::vector<bool> busy(static_cast<size_t>(options_.concurrency), false);
  for (const RunningJob& job : running) {
    busy[static_cast<size_t>(job.slot)] = true;
    Result<DecodedJob> decoded = DecodeJob(job.payload);
    std::string cls = "?", jid = "?";
    if (decoded.ok()) {
      const auto& doc = decoded->document;
      if (doc["class"].IsString()) cls = doc["class"].GetString();
      auto it = doc.FindMember("jid");
      if (it != doc.MemberEnd() && it->value.IsString()) jid = it->value.GetString();
    }
    Log(LogLevel::kInfo, "processor p%d: running %s jid=%s from queue %s for %.3f s", job.slot,
        cls.c_str(), jid.c_str(), queues_[job.queue].name.c_str(), now - job.started_at);
  }
  for (size_t i = 0; i < busy.size(); ++i) {
    if (!busy[i]) Log(LogLevel::kInfo, "processor p%zu: idle", i);
  }
}

// ---------------------------------------------------------------------------
// Connections

void ServerImpl::ConnectCommand() {
  command_->Connect([this](const Status& s) { OnCommandReady(s); });
}

void ServerImpl::OnCommandReady(const Status& status) {
  if (phase_ == Phase::kStopped) return;
  if (!status.ok()) {
    Log(LogLevel::kWarn, "Redis unreachable: %s; retrying", status.ToString().c_str());
    ScheduleReconnect();
    return;
  }
  reconnect_delay_ = kReconnectMinMillis;
  // Register (or confirm registration) before anything is fetched: a working
  // list must always belong to a registered process.
  Beat();
}

void ServerImpl::OnCommandLost(const Status& status) {
  Log(LogLevel::kWarn, "lost the Redis connection: %s", status.ToString().c_str());
  beat_inflight_ = false;
  // A fetch reply may have been lost with jobs in it: they sit in our
  // working lists unseen until we reconcile.
  if (command_->last_client_id() != 0) stale_clients_.push_back(command_->last_client_id());
  Reconcile(false);
  ScheduleReconnect();
}

void ServerImpl::ScheduleReconnect() {
  if (phase_ == Phase::kStopped) return;
  uint64_t delay = reconnect_delay_;
  reconnect_delay_ = std::min<uint64_t>(reconnect_delay_ * 2, kReconnectMaxMillis);
  uv_timer_start(&reconnect_timer_, [](uv_timer_t* t) {
    static_cast<ServerImpl*>(t->loop->data)->ConnectCommand();
  }, delay, 0);
}

// ---------------------------------------------------------------------------
// Heartbeat

std::string ServerImpl::RegistryEntry() const {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  w.Key("identity");
  WriteString(w, identity_);
  w.Key("hostname");
  WriteString(w, hostname_);
  w.Key("pid");
  w.Int(static_cast<int>(getpid()));
  w.Key("started_at");
  std::string started = FormatEpoch(started_at_);
  w.RawValue(started.c_str(), started.size(), rapidjson::kNumberType);
  w.Key("queues");
  w.StartArray();
  for (const Queue& q : queues_) WriteString(w, q.name);
  w.EndArray();
  // The janitor kills these connections before it recovers this process, so
  // that a stopped-but-alive process cannot move a job into a working list
  // after its registration is gone.
  w.Key("clients");
  w.StartArray();
  if (command_->client_id() != 0) w.Int64(command_->client_id());
  for (const Queue& q : queues_) {
    if (q.blocking->client_id() != 0) w.Int64(q.blocking->client_id());
  }
  w.EndArray();
  w.EndObject();
  return buf.GetString();
}

std::string ServerImpl::InfoJson() const {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  w.Key("hostname");
  WriteString(w, hostname_);
  w.Key("started_at");
  std::string started = FormatEpoch(started_at_);
  w.RawValue(started.c_str(), started.size(), rapidjson::kNumberType);
  w.Key("pid");
  w.Int(static_cast<int>(getpid()));
  w.Key("tag");
  WriteString(w, options_.tag);
  w.Key("concurrency");
  w.Int(options_.concurrency);
  w.Key("queues");
  w.StartArray();
  for (const Queue& q : queues_) WriteString(w, q.name);
  w.EndArray();
  w.Key("labels");
  w.StartArray();
  for (const std::string& label : options_.labels) WriteString(w, label);
  w.EndArray();
  w.Key("identity");
  WriteString(w, identity_);
  w.Key("version");
  WriteString(w, "reliableq 0.1.0");
  w.EndObject();
  return buf.GetString();
}

void ServerImpl::Beat() {
  // Not while finishing: a beat landing after forget.lua would register
  // the stopped process again.
  if (phase_ == Phase::kFinishing || phase_ == Phase::kStopped || !command_->ready()) return;
  if (beat_inflight_) {
    beat_again_ = true;
    return;
  }
  beat_inflight_ = true;
  beat_again_ = false;
  bool first = !registered_;
  std::set<int64_t> published;
  if (command_->client_id() != 0) published.insert(command_->client_id());
  for (const Queue& q : queues_) {
    if (q.blocking->client_id() != 0) published.insert(q.blocking->client_id());
  }

  auto ping_sent = Clock::now();
  command_->Command({"PING"}, [this, ping_sent](const Status& s, redisReply*) {
    if (s.ok()) {
      rtt_us_ = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - ping_sent)
                    .count();
    }
  });

  std::vector<RunningJob> running = pool_->Running();
  std::string id = identity_;
  std::vector<std::string> keys = {keys_.Heartbeat(id), keys_.Registry(),
                                   std::string(Keys::kProcesses), Keys::Process(id),
                                   Keys::Work(id), Keys::Workers(id), Keys::Signals(id)};
  bool quiet = phase_ != Phase::kStarting && phase_ != Phase::kRunning;
  std::vector<std::string> args = {id,
                                   std::to_string(options_.heartbeat_ttl.count()),
                                   RegistryEntry(),
                                   InfoJson(),
                                   std::to_string(running.size()),
                                   FormatEpoch(NowSeconds()),
                                   quiet ? "true" : "false",
                                   std::to_string(RssKilobytes()),
                                   std::to_string(rtt_us_)};
  for (const RunningJob& job : running) {
    rapidjson::StringBuffer buf;
    JsonWriter w(buf);
    w.StartObject();
    w.Key("queue");
    WriteString(w, queues_[job.queue].name);
    w.Key("payload");
    WriteString(w, job.payload);
    w.Key("run_at");
    w.Int64(static_cast<int64_t>(job.started_at));
    w.EndObject();
    args.push_back("p" + std::to_string(job.slot));
    args.push_back(buf.GetString());
  }
  auto sent_at = Clock::now();
  Status sent = command_->Eval(
      ScriptId::kHeartbeat, std::move(keys), std::move(args),
      [this, first, published, sent_at](const Status& s, redisReply* r) {
        OnBeat(s, r, first, published, sent_at);
      });
  if (!sent.ok()) beat_inflight_ = false;
}

void ServerImpl::OnBeat(const Status& status, redisReply* reply, bool first,
                        std::set<int64_t> published, Clock::time_point sent_at) {
  beat_inflight_ = false;
  if (phase_ == Phase::kStopped) return;
  if (!status.ok()) {
    Log(LogLevel::kWarn, "heartbeat failed: %s", status.ToString().c_str());
    return;  // the connection's own recovery will beat again
  }
  bool existed = reply->type == REDIS_REPLY_ARRAY && reply->elements >= 1 &&
                 reply->element[0]->type == REDIS_REPLY_INTEGER && reply->element[0]->integer == 1;
  std::string signal = reply->type == REDIS_REPLY_ARRAY && reply->elements >= 2
                           ? ReplyText(reply->element[1])
                           : std::string();
  published_clients_ = std::move(published);
  bool was_registered = registered_;
  registered_ = true;
  if (first) {
    Log(LogLevel::kInfo, "started %s: concurrency %d, queues %zu, heartbeat ttl %.1f s",
        identity_.c_str(), options_.concurrency, queues_.size(),
        options_.heartbeat_ttl.count() / 1000.0);
    ScheduleJanitor(true);
    SchedulePoll(false);
    if (phase_ == Phase::kStarting) phase_ = Phase::kRunning;
    // Jobs left in our (brand new) working lists cannot exist, but a
    // reconcile costs one round trip and makes start-up uniform.
    Reconcile(false);
  } else if (!existed && was_registered) {
    Log(LogLevel::kWarn,
        "heartbeat key was gone: this process was taken for dead and its jobs may have been "
        "recovered by a janitor; re-registered, dropping jobs not yet started");
    Reconcile(true);
  } else {
    MaybeReconcile();
  }
  // The key lives until at least sent_at + ttl, so no janitor can take our
  // jobs before then (a tenth is kept back for clock drift). Extended only
  // now, after the jobs a lost heartbeat invalidated were dropped above.
  pool_->SetLease(sent_at + options_.heartbeat_ttl * 9 / 10);
  if (!signal.empty()) HandleSignal(signal);
  if (beat_again_) Beat();
  ArmBlocking();
}

// ---------------------------------------------------------------------------
// Fetch

size_t ServerImpl::Wanted() const {
  size_t held = pool_->held();
  size_t limit = static_cast<size_t>(options_.concurrency + prefetch_);
  return held >= limit ? 0 : limit - held;
}

std::vector<uint32_t> ServerImpl::FetchOrder() {
  std::vector<uint32_t> order;
  if (!weighted_) {
    for (uint32_t i = 0; i < queues_.size(); ++i) order.push_back(i);
    return order;
  }
  // Sidekiq's weighted order: each queue repeated `weight` times, shuffled,
  // first occurrences kept.
  std::vector<uint32_t> repeated;
  for (uint32_t i = 0; i < queues_.size(); ++i) {
    for (int w = 0; w < std::max(1, queues_[i].weight); ++w) repeated.push_back(i);
  }
  std::shuffle(repeated.begin(), repeated.end(), random_);
  std::vector<bool> seen(queues_.size(), false);
  for (uint32_t i : repeated) {
    if (!seen[i]) {
      seen[i] = true;
      order.push_back(i);
    }
  }
  return order;
}

void ServerImpl::FetchMore() {
  if (phase_ != Phase::kRunning || !registered_ || !command_->ready() || fetch_inflight_ ||
      reconciling_ > 0 || reconcile_pending_ ||
      uv_is_active(reinterpret_cast<uv_handle_t*>(&fetch_retry_timer_))) {
    return;
  }
  size_t wanted = Wanted();
  if (wanted == 0) return;
  std::vector<uint32_t> order = FetchOrder();
  std::vector<std::string> keys;
  keys.reserve(order.size() * 2);
  for (uint32_t i : order) {
    keys.push_back(queues_[i].queue_key);
    keys.push_back(queues_[i].working_key);
  }
  fetch_inflight_ = true;
  Clock::time_point sent_at = Clock::now();
  Status sent = command_->Eval(
      ScriptId::kFetch, std::move(keys), {std::to_string(wanted)},
      [this, order, wanted, sent_at](const Status& s, redisReply* r) {
        AdaptPrefetch(sent_at);
        OnFetched(s, r, order, wanted);
      });
  if (!sent.ok()) fetch_inflight_ = false;
}

void ServerImpl::AdaptPrefetch(Clock::time_point sent) {
  // Enough jobs to keep every thread busy for four round trips at the rate
  // jobs finished since the last fetch (Little's law): the next fetch goes
  // out only when the ack on its way comes back, so a refill waits for up
  // to two round trips, and a bigger batch takes Redis longer. The rate
  // is taken over the whole time between fetches, not over one round trip:
  // long jobs that end together must not look like a fast stream.
  Clock::time_point now = Clock::now();
  uint64_t finished = pool_->finished_total();
  double elapsed = std::chrono::duration<double>(now - last_fetch_reply_).count();
  double round_trip = std::chrono::duration<double>(now - sent).count();
  if (elapsed > 0 && last_fetch_reply_ != Clock::time_point()) {
    double rate = static_cast<double>(finished - finished_at_last_fetch_) / elapsed;
    double target = std::clamp(4 * rate * round_trip, static_cast<double>(min_prefetch_),
                               static_cast<double>(max_prefetch_));
    // Halfway each time: one odd interval moves it only so far.
    prefetch_ = static_cast<int>((prefetch_ + target) / 2);
  }
  last_fetch_reply_ = now;
  finished_at_last_fetch_ = finished;
}

void ServerImpl::OnFetched(const Status& status, redisReply* reply, std::vector<uint32_t> order,
                           size_t wanted) {
  fetch_inflight_ = false;
  if (!status.ok()) {
    if (!status.IsShutdown()) Log(LogLevel::kWarn, "fetch failed: %s", status.ToString().c_str());
    if (!status.IsIoError() && !status.IsTimeout() && !status.IsShutdown()) {
      // Redis answered with an error: the same fetch would fail again at
      // once, so fetching pauses, doubling from 0.1 s to 2 s, until one
      // succeeds. (A lost connection has the reconnect's own back-off.)
      fetch_retry_delay_ = fetch_retry_delay_ == 0
                               ? kReconnectMinMillis
                               : std::min(fetch_retry_delay_ * 2, kReconnectMaxMillis);
      uv_timer_start(&fetch_retry_timer_, [](uv_timer_t* t) {
        static_cast<ServerImpl*>(t->loop->data)->FetchMore();
      }, fetch_retry_delay_, 0);
    }
    Reconcile(false);
    return;
  }
  fetch_retry_delay_ = 0;
  std::vector<FetchedJob> jobs;
  if (reply->type == REDIS_REPLY_ARRAY) {
    jobs.reserve(reply->elements / 2);
    for (size_t i = 0; i + 1 < reply->elements; i += 2) {
      int64_t pair = reply->element[i]->integer;  // 1-based index into `order`
      if (pair < 1 || static_cast<size_t>(pair) > order.size()) continue;
      jobs.push_back({order[static_cast<size_t>(pair - 1)],
                      std::string(reply->element[i + 1]->str, reply->element[i + 1]->len)});
    }
  }
  size_t got = jobs.size();
  if (!Accept(&jobs)) return;
  idle_ = got < wanted;
  if (idle_) {
    ArmBlocking();
  } else {
    FetchMore();
  }
}

bool ServerImpl::Accept(std::vector<FetchedJob>* jobs) {
  if (phase_ != Phase::kRunning) {
    // Quiet or stop began while the reply was on its way: these jobs go
    // back with the reconcile (they are in our working lists meanwhile).
    Reconcile(false);
    return false;
  }
  pool_->Submit(jobs);
  if (reconcile_pending_) {
    // Submitted first, so the owed reconcile keeps them.
    MaybeReconcile();
    return false;
  }
  return true;
}

void ServerImpl::ArmBlocking() {
  if (!idle_) return;
  for (uint32_t i = 0; i < queues_.size(); ++i) ArmBlocking(i);
}

void ServerImpl::ArmBlocking(uint32_t index) {
  Queue& q = queues_[index];
  if (phase_ != Phase::kRunning || !registered_ || !idle_ || q.blocking_armed ||
      reconciling_ > 0 || reconcile_pending_ || Wanted() == 0) {
    return;
  }
  if (!q.blocking->ready()) {
    if (q.blocking_connecting) return;
    q.blocking_connecting = true;
    q.blocking->Connect([this, index](const Status& s) {
      queues_[index].blocking_connecting = false;
      if (!s.ok()) {
        Log(LogLevel::kWarn, "idle connection for queue %s: %s", queues_[index].name.c_str(),
            s.ToString().c_str());
        return;  // tried again when the worker is next idle
      }
      // Publish the new connection's id in the registry before it may move
      // a job; the beat's reply arms it.
      Beat();
    });
    return;
  }
  if (published_clients_.count(q.blocking->client_id()) == 0) {
    Beat();
    return;
  }
  std::string timeout = std::to_string(options_.idle_block_timeout.count() / 1000);
  q.blocking_armed = true;
  q.unblock_sent = false;
  Status sent = q.blocking->Command(
      {"BLMOVE", q.queue_key, q.working_key, "RIGHT", "LEFT", timeout},
      [this, index](const Status& s, redisReply* reply) {
        Queue& queue = queues_[index];
        queue.blocking_armed = false;
        if (!s.ok()) {
          MaybeReconcile();
          return;  // OnBlockingLost handles broken connections
        }
        if (reply->type == REDIS_REPLY_STRING) {
          std::vector<FetchedJob> jobs;
          jobs.push_back({index, std::string(reply->str, reply->len)});
          if (!Accept(&jobs)) return;
          // More may be waiting on this or other queues: a batch fetch
          // decides whether the worker is still idle.
          idle_ = false;
          FetchMore();
          return;
        }
        if (reconcile_pending_) {
          MaybeReconcile();
          return;
        }
        ArmBlocking(index);  // timed out: wait again
      },
      options_.idle_block_timeout);
  if (!sent.ok()) q.blocking_armed = false;
}

void ServerImpl::OnBlockingLost(int64_t old_client_id) {
  // A BLMOVE reply may have been lost, leaving a job in our working list
  // that we never saw. Reconcile once Redis surely dropped that client.
  if (old_client_id != 0) stale_clients_.push_back(old_client_id);
  Reconcile(false);
}

// ---------------------------------------------------------------------------
// Completions

void ServerImpl::OnFinished() {
  if (phase_ == Phase::kStopped) return;
  // One round of outcome scripts at a time: outcomes that finish while it
  // is on its way gather for the next, so a busy worker acks dozens of jobs
  // per script and the processors do not wake the loop for each. Bounded:
  // a turn either sends (its reply calls back here) or arms the wake-up.
  for (int turn = 0; turn < 3; ++turn) {
    pool_->TakeFinished(&unsent_);
    if (carried_.empty()) SendCompletions();
    if (!carried_.empty()) break;
    bool waiting = !pool_->ArmWake();
    if (!waiting || !command_->ready()) break;
  }
  FetchMore();
}

void ServerImpl::SendCompletions() {
  if (unsent_.empty() || !command_->ready()) return;
  std::vector<FinishedJob> batch;
  batch.swap(unsent_);
  std::string date = UtcDate(NowSeconds());
  std::string processed_day = std::string(Keys::kProcessed) + ":" + date;
  std::string failed_day = std::string(Keys::kFailed) + ":" + date;

  // Each script or pipeline owns the outcomes it carries until Redis
  // answers: the ones it did not confirm go back to unsent_ and are sent
  // again (after reconnecting, before any reconcile could mistake a finished
  // job for a stray). `issue` sends it and calls the Settle it is given
  // once, with why and the indexes of the outcomes not confirmed.
  using Settle = std::function<void(const Status& why, const std::vector<size_t>& refused)>;
  auto send = [this](std::vector<FinishedJob> carried, auto issue) {
    auto owned = std::make_shared<std::vector<FinishedJob>>(std::move(carried));
    carried_.push_back(owned);
    Status sent = issue(Settle([this, owned](const Status& why, const std::vector<size_t>& refused) {
      carried_.erase(std::find(carried_.begin(), carried_.end(), owned));
      if (phase_ == Phase::kStopped) return;
      if (refused.empty()) {
        if (carried_.empty()) OnFinished();
        return;
      }
      Log(LogLevel::kWarn, "outcome of %zu jobs not confirmed (%s); will send again",
          refused.size(), why.ToString().c_str());
      for (size_t i : refused) unsent_.push_back(std::move((*owned)[i]));
      // A lost connection sends them again once it is back (the reconcile);
      // an error reply on a live one (READONLY after a failover, MISCONF)
      // needs a later try of its own, since no processor wakes the loop
      // while a round is out. A pause, so a refusing Redis is not flooded.
      if (carried_.empty()) {
        uv_timer_start(&completions_retry_timer_, [](uv_timer_t* t) {
          static_cast<ServerImpl*>(t->loop->data)->OnFinished();
        }, kCompletionsRetryMillis, 0);
      }
    }));
    if (!sent.ok()) {
      carried_.pop_back();
      for (FinishedJob& job : *owned) unsent_.push_back(std::move(job));
    }
    return sent.ok();
  };

  // Every success: LREM each exact payload once, searching from the tail,
  // where the oldest fetched job (most often the one finishing) sits; then
  // count them as Sidekiq does, the dated counter kept for 5 years. Plain
  // pipelined commands: Redis copies and hashes every string a script
  // touches, which made a scripted ack cost about twice the Redis time per
  // job, and when Redis is out of memory it refuses every command queued in
  // a MULTI, while LREM (which frees memory) still runs on its own. Each
  // LREM is one atomic step; the counters are not jobs, and a count Redis
  // refuses (OOM refuses INCRBY) is added to the next round's.
  redis::CommandList ack;
  std::vector<FinishedJob> acked;
  for (FinishedJob& job : batch) {
    if (job.outcome != Outcome::kSucceeded) continue;
    ack.Add({"LREM", queues_[job.queue].working_key, "-1", job.payload});
    acked.push_back(std::move(job));
  }
  if (!acked.empty()) {
    size_t jobs = acked.size();
    int64_t earlier = uncounted_processed_;
    int64_t count = earlier + static_cast<int64_t>(jobs);
    std::string count_text = std::to_string(count);
    ack.Add({"INCRBY", Keys::kProcessed, count_text});
    ack.Add({"INCRBY", processed_day, count_text});
    ack.Add({"EXPIRE", processed_day, kStatsTtlSeconds});
    uncounted_processed_ = 0;
    bool sent = send(std::move(acked), [&](Settle settle) {
      return command_->Pipeline(ack, [this, settle = std::move(settle), jobs, count,
                                      earlier](std::vector<Status> statuses) {
        std::vector<size_t> refused;
        Status why;
        for (size_t i = 0; i < jobs; ++i) {
          if (statuses[i].ok()) continue;
          if (why.ok()) why = statuses[i];
          refused.push_back(i);
        }
        const Status& counted = statuses[jobs];
        if (!counted.ok()) {
          // Logged when counts start to be refused, not on every round.
          if (earlier == 0 && refused.size() < jobs) {
            Log(LogLevel::kWarn, "stat:processed not counted (%s); counting later",
                counted.ToString().c_str());
          }
          // Jobs sent again are counted again when they are.
          uncounted_processed_ += count - static_cast<int64_t>(refused.size());
        }
        settle(why, refused);
      });
    });
    // Not sent: the jobs go back to unsent_ and are counted with it.
    if (!sent) uncounted_processed_ = earlier;
  }

  for (FinishedJob& job : batch) {
    if (job.outcome == Outcome::kSucceeded) continue;
    bool invalid = job.outcome == Outcome::kInvalid;
    FailureAction action = invalid ? FailureAction::kDead : job.action;
    const char* mode = action == FailureAction::kRetry  ? "retry"
                       : action == FailureAction::kDead ? "dead"
                                                        : "drop";
    if (invalid) {
      Log(LogLevel::kWarn, "not a job, to the dead set as it is: %s", job.error.c_str());
    } else if (action == FailureAction::kRetry) {
      Log(LogLevel::kInfo, "will retry in %.0f s: %s", job.score - NowSeconds(),
          job.error.c_str());
    } else {
      Log(LogLevel::kWarn, "%s: %s", action == FailureAction::kDead ? "to the dead set" : "dropped",
          job.error.c_str());
    }
    std::string now = FormatEpoch(NowSeconds());
    std::vector<std::string> keys = {
        queues_[job.queue].working_key,
        std::string(action == FailureAction::kRetry ? Keys::kRetry : Keys::kDead),
        std::string(Keys::kProcessed), processed_day, std::string(Keys::kFailed), failed_day};
    std::vector<std::string> args = {job.payload,
                                     invalid ? job.payload : job.failed_payload,
                                     action == FailureAction::kRetry ? FormatEpoch(job.score) : now,
                                     mode,
                                     now,
                                     std::to_string(options_.dead_max_jobs),
                                     std::to_string(options_.dead_timeout.count()),
                                     invalid ? "0" : "1"};
    std::vector<FinishedJob> carried;
    carried.push_back(std::move(job));
    send(std::move(carried), [&](Settle settle) {
      return command_->Eval(ScriptId::kFail, std::move(keys), std::move(args),
                            [settle = std::move(settle)](const Status& s, redisReply*) {
                              settle(s, s.ok() ? std::vector<size_t>{}
                                               : std::vector<size_t>{0});
                            });
    });
  }
}

// ---------------------------------------------------------------------------
// Reconciliation and hand-back

void ServerImpl::SendRequeue(const char* mode, std::vector<std::vector<std::string>> listed,
                             std::function<void(const Status&)> done) {
  auto remaining = std::make_shared<size_t>(queues_.size());
  auto first_error = std::make_shared<Status>();
  std::string now = FormatEpoch(NowSeconds());
  for (uint32_t i = 0; i < queues_.size(); ++i) {
    std::vector<std::string> keys = {queues_[i].working_key, queues_[i].queue_key,
                                     std::string(Keys::kDead), std::string(Keys::kQueues)};
    std::vector<std::string> args = {mode,
                                     std::to_string(options_.max_interruptions),
                                     now,
                                     std::to_string(options_.dead_max_jobs),
                                     std::to_string(options_.dead_timeout.count()),
                                     queues_[i].name};
    for (std::string& payload : listed[i]) args.push_back(std::move(payload));
    auto on_reply = [this, i, remaining, first_error, done](const Status& s, redisReply* r) {
      if (!s.ok() && first_error->ok()) *first_error = s;
      if (s.ok() && r->type == REDIS_REPLY_ARRAY && r->elements >= 2 &&
          (r->element[0]->integer > 0 || r->element[1]->integer > 0)) {
        Log(LogLevel::kInfo, "handed back to queue %s: %lld jobs, to the dead set: %lld",
            queues_[i].name.c_str(), r->element[0]->integer, r->element[1]->integer);
      }
      if (--*remaining == 0) done(*first_error);
    };
    Status sent = command_->Eval(ScriptId::kRequeue, std::move(keys), std::move(args), on_reply);
    if (!sent.ok()) {
      if (first_error->ok()) *first_error = sent;
      if (--*remaining == 0) done(*first_error);
    }
  }
}

void ServerImpl::Reconcile(bool drop_ready) {
  if (phase_ == Phase::kFinishing || phase_ == Phase::kStopped) return;
  if (drop_ready || phase_ != Phase::kRunning) {
    // Even while disconnected: these must not start. They are in our
    // working lists, and the reconcile (or the janitor) hands them back.
    std::vector<FetchedJob> dropped = pool_->TakeNotStarted();
    if (!dropped.empty()) {
      Log(LogLevel::kInfo, "%zu fetched jobs not started: back to their queues",
          dropped.size());
    }
  }
  reconcile_pending_ = true;
  MaybeReconcile();
}

void ServerImpl::MaybeReconcile() {
  if (!reconcile_pending_ || reconciling_ > 0 || !command_->ready() ||
      phase_ == Phase::kFinishing || phase_ == Phase::kStopped) {
    return;  // OnBeat comes back here once the connection is up
  }
  // Wait for every reply that may still bring a job: such a job would be
  // handed back by the requeue and run here as well. Idle BLMOVEs are cut
  // short with CLIENT UNBLOCK.
  bool waiting = fetch_inflight_;
  for (Queue& q : queues_) {
    if (!q.blocking_armed) continue;
    waiting = true;
    if (!q.unblock_sent && q.blocking->client_id() != 0) {
      q.unblock_sent = true;
      command_->Command({"CLIENT", "UNBLOCK", std::to_string(q.blocking->client_id())},
                        [](const Status&, redisReply*) {});
    }
  }
  if (waiting) return;
  reconcile_pending_ = false;
  // Connections of ours that broke may still have commands queued in Redis
  // (a half-open socket); killing them first means none runs after the
  // requeue.
  for (int64_t id : stale_clients_) {
    command_->Command({"CLIENT", "KILL", "ID", std::to_string(id)},
                      [](const Status&, redisReply*) {});
  }
  stale_clients_.clear();
  // Outcomes first, on the same connection: a finished job must be
  // acknowledged before the reconcile could mistake it for a stray.
  pool_->TakeFinished(&unsent_);
  SendCompletions();
  std::vector<std::vector<std::string>> keep(queues_.size());
  pool_->HeldPayloads(/*include_ready=*/true, &keep);
  AddUnconfirmed(&keep);
  ++reconciling_;
  SendRequeue("keep", std::move(keep), [this](const Status& s) {
    --reconciling_;
    if (!s.ok()) {
      reconcile_pending_ = true;
      if (!s.IsShutdown()) Log(LogLevel::kWarn, "reconcile failed: %s", s.ToString().c_str());
      return;
    }
    if (phase_ == Phase::kRunning) {
      MaybeReconcile();
      FetchMore();
      ArmBlocking();
    }
  });
}

void ServerImpl::AddUnconfirmed(std::vector<std::vector<std::string>>* per_queue) const {
  for (const FinishedJob& job : unsent_) (*per_queue)[job.queue].push_back(job.payload);
  for (const auto& round : carried_) {
    for (const FinishedJob& job : *round) (*per_queue)[job.queue].push_back(job.payload);
  }
}

size_t ServerImpl::Unconfirmed() const {
  size_t n = unsent_.size();
  for (const auto& round : carried_) n += round->size();
  return n;
}

void ServerImpl::KillBlocking() {
  for (Queue& q : queues_) {
    int64_t id = q.blocking->client_id();
    q.blocking->Close();
    q.blocking_armed = false;
    // Closing our end does not tell us when Redis has dropped the client;
    // the CLIENT KILL that the next reconcile or hand-back sends first on
    // the command connection makes sure no BLMOVE completes after it.
    if (id != 0) stale_clients_.push_back(id);
  }
}

// ---------------------------------------------------------------------------
// Scheduled jobs and retries

void ServerImpl::SchedulePoll(bool now) {
  if (phase_ != Phase::kRunning && phase_ != Phase::kStarting) return;
  uint64_t delay = 0;
  if (!now) {
    // Sidekiq's spread: each process waits about process_count x the
    // interval, uniformly in [0.5, 1.5) of that, so the cluster as a whole
    // polls about once per interval whatever its size.
    std::uniform_real_distribution<double> spread(0.5, 1.5);
    double average = static_cast<double>(options_.scheduled_poll_interval.count()) *
                     static_cast<double>(std::max<int64_t>(1, process_count_));
    delay = static_cast<uint64_t>(average * spread(random_));
  }
  uv_timer_start(&poll_timer_, [](uv_timer_t* t) {
    static_cast<ServerImpl*>(t->loop->data)->Poll();
  }, delay, 0);
}

void ServerImpl::Poll() {
  if (phase_ != Phase::kRunning || poll_inflight_ || !command_->ready()) {
    SchedulePoll(false);
    return;
  }
  poll_inflight_ = true;
  command_->Command({"SCARD", Keys::kProcesses}, [this](const Status& s, redisReply* r) {
    if (s.ok() && r->type == REDIS_REPLY_INTEGER) process_count_ = r->integer;
  });
  // Both sets, one batch each, schedule first: a huge retry set can never
  // keep due scheduled jobs waiting behind it.
  std::string now = FormatEpoch(NowSeconds());
  std::string limit = std::to_string(kPromoteBatch);
  auto full = std::make_shared<bool>(false);
  auto remaining = std::make_shared<int>(2);
  auto finished = [this, full, remaining](bool batch_was_full) {
    *full = *full || batch_was_full;
    if (--*remaining > 0) return;
    poll_inflight_ = false;
    SchedulePoll(*full);
  };
  for (std::string_view set : {Keys::kSchedule, Keys::kRetry}) {
    Status sent = command_->Command(
        {"ZRANGEBYSCORE", set, "-inf", now, "LIMIT", "0", limit},
        [this, set, finished](const Status& s, redisReply* r) {
          if (!s.ok() || r->type != REDIS_REPLY_ARRAY || r->elements == 0) {
            finished(false);
            return;
          }
          PromoteDue(set, r, finished);
        });
    if (!sent.ok()) finished(false);
  }
}

void ServerImpl::PromoteDue(std::string_view set, redisReply* members,
                            std::function<void(bool)> done) {
  bool full = members->elements >= kPromoteBatch;
  std::vector<std::string> keys = {std::string(set), std::string(Keys::kQueues),
                                   std::string(Keys::kDead)};
  std::vector<std::string> args = {FormatEpoch(NowSeconds()),
                                   std::to_string(options_.dead_max_jobs),
                                   std::to_string(options_.dead_timeout.count())};
  for (size_t i = 0; i < members->elements; ++i) {
    std::string member(members->element[i]->str, members->element[i]->len);
    rapidjson::Document doc;
    doc.Parse(member.data(), member.size());
    std::string queue;
    if (!doc.HasParseError() && doc.IsObject()) {
      auto it = doc.FindMember("queue");
      queue = it != doc.MemberEnd() && it->value.IsString() && it->value.GetStringLength() > 0
                  ? std::string(it->value.GetString(), it->value.GetStringLength())
                  : "default";
    }
    size_t index = 0;  // 0: not a job, to the dead set
    if (!queue.empty()) {
      std::string key = Keys::Queue(queue);
      auto found = std::find(keys.begin() + 3, keys.end(), key);
      index = static_cast<size_t>(found - keys.begin()) + 1;
      if (found == keys.end()) keys.push_back(std::move(key));
    }
    args.push_back(std::to_string(index));
    args.push_back(queue);
    args.push_back(std::move(member));
  }
  Status sent = command_->Eval(
      ScriptId::kPromote, std::move(keys), std::move(args),
      [this, set, full, done](const Status& s, redisReply* r) {
        if (!s.ok()) {
          Log(LogLevel::kWarn, "moving due jobs of %.*s failed: %s", static_cast<int>(set.size()),
              set.data(), s.ToString().c_str());
        } else if (r->type == REDIS_REPLY_ARRAY && r->elements == 3) {
          Log(LogLevel::kDebug, "%.*s: %lld due jobs enqueued, %lld to the dead set",
              static_cast<int>(set.size()), set.data(), r->element[0]->integer,
              r->element[1]->integer);
        }
        done(s.ok() && full);
      });
  if (!sent.ok()) done(false);
}

// ---------------------------------------------------------------------------
// Janitor

void ServerImpl::ScheduleJanitor(bool now) {
  if (phase_ == Phase::kStopped || phase_ == Phase::kFinishing) return;
  uint64_t delay = 0;
  if (!now) {
    // Jitter spreads the passes of many workers; it only ever shortens the
    // wait, so recovery stays within heartbeat ttl + janitor interval (I3).
    std::uniform_real_distribution<double> jitter(0.5, 1.0);
    delay = static_cast<uint64_t>(options_.janitor_interval.count() * jitter(random_));
  }
  uv_timer_start(&janitor_timer_, [](uv_timer_t* t) {
    auto* self = static_cast<ServerImpl*>(t->loop->data);
    if (self->janitor_running_ || self->phase_ == Phase::kStopped ||
        self->phase_ == Phase::kFinishing) {
      return;
    }
    self->janitor_running_ = true;
    self->janitor_work_.data = self;
    uv_queue_work(&self->loop_, &self->janitor_work_, &ServerImpl::JanitorWork,
                  &ServerImpl::JanitorDone);
  }, delay, 0);
}

void ServerImpl::JanitorWork(uv_work_t* work) {
  auto* self = static_cast<ServerImpl*>(work->data);
  self->janitor_ran_pass_ = false;
  if (!self->janitor_redis_) {
    auto connection = redis::Connection::Open(self->options_.redis);
    if (!connection.ok()) {
      self->janitor_result_ = connection.status();
      return;
    }
    self->janitor_redis_ = std::move(connection.value());
  }
  // About one pass per interval across all workers. The lease expires on
  // its own, so a janitor that dies holding it delays the next pass by at
  // most the lease; the cap keeps a worker with a long interval from
  // holding back the others.
  std::string lease_ms = std::to_string(
      std::min<int64_t>(self->options_.janitor_interval.count(), kJanitorLeaseCapMillis));
  auto lease = self->janitor_redis_->Command(
      {"SET", self->keys_.JanitorLease(), self->identity_, "NX", "PX", lease_ms});
  if (!lease.ok()) {
    self->janitor_result_ = lease.status();
    return;
  }
  if ((*lease)->type == REDIS_REPLY_NIL) {
    self->janitor_result_ = RecoveryReport{};
    return;
  }
  RecoveryConfig config;
  config.keys = self->keys_;
  config.max_interruptions = self->options_.max_interruptions;
  config.skip_identity = self->identity_;
  config.dead_max_jobs = self->options_.dead_max_jobs;
  config.dead_timeout_seconds = self->options_.dead_timeout.count();
  self->janitor_ran_pass_ = true;
  self->janitor_result_ = RunRecoveryPass(*self->janitor_redis_, config, NowSeconds());
}

void ServerImpl::JanitorDone(uv_work_t* work, int) {
  auto* self = static_cast<ServerImpl*>(work->data);
  self->janitor_running_ = false;
  if (!self->janitor_result_.ok()) {
    Log(LogLevel::kWarn, "janitor pass failed: %s",
        self->janitor_result_.status().ToString().c_str());
  } else {
    for (const IdentityRecovery& id : self->janitor_result_->identities) {
      if (!id.error.empty()) {
        Log(LogLevel::kWarn, "janitor: cannot recover all jobs of dead process %s: %s",
            id.identity.c_str(), id.error.c_str());
      }
      if (id.alive) continue;
      int64_t requeued = 0, dead = 0;
      for (const QueueRecovery& q : id.queues) {
        requeued += q.requeued;
        dead += q.dead;
      }
      Log(LogLevel::kInfo, "janitor: process %s is dead: %lld jobs back to their queues, "
          "%lld to the dead set", id.identity.c_str(), static_cast<long long>(requeued),
          static_cast<long long>(dead));
    }
  }
  if (self->phase_ == Phase::kFinishing || self->phase_ == Phase::kStopped) {
    if (self->phase_ == Phase::kStopped) self->RequestClose();
    return;
  }
  self->ScheduleJanitor(false);
}

// ---------------------------------------------------------------------------
// Quiet and stop

void ServerImpl::EnterQuiet() {
  if (phase_ == Phase::kStarting || phase_ == Phase::kRunning) phase_ = Phase::kQuiet;
  else if (phase_ != Phase::kQuiet) return;
  idle_ = false;
  KillBlocking();
  Reconcile(true);
  Beat();  // tell the Web UI at once
}

void ServerImpl::BeginStop() {
  if (phase_ == Phase::kStopping || phase_ == Phase::kFinishing || phase_ == Phase::kStopped) {
    return;
  }
  EnterQuiet();
  phase_ = Phase::kStopping;
  stop_deadline_ = Clock::now() + options_.shutdown_timeout;
  uv_timer_start(&stop_timer_, [](uv_timer_t* t) {
    static_cast<ServerImpl*>(t->loop->data)->OnStopPoll();
  }, 0, kStopPollMillis);
}

void ServerImpl::OnStopPoll() {
  if (phase_ != Phase::kStopping) return;
  bool drained = pool_->held() == 0;
  if (drained) {
    FinishStop(false);
  } else if (Clock::now() >= stop_deadline_) {
    Log(LogLevel::kWarn, "shutdown timeout: %zu jobs still running go back to their queues",
        pool_->running());
    FinishStop(true);
  }
}

void ServerImpl::FinishStop(bool hard) {
  if (phase_ == Phase::kFinishing || phase_ == Phase::kStopped) return;
  if (phase_ != Phase::kStopping) EnterQuiet();
  phase_ = Phase::kFinishing;
  hard_stop_ = hard;
  uv_timer_stop(&stop_timer_);
  uv_timer_stop(&janitor_timer_);
  uv_timer_stop(&poll_timer_);
  KillBlocking();
  hard_running_.assign(queues_.size(), {});
  if (hard) {
    // Running jobs are listed before finished ones are taken: a job that
    // finishes in between is then in both lists, and its ack, sent ahead of
    // the requeue on the same connection, removes it first (the requeue
    // ignores listed jobs that are gone). Taken the other way round, it
    // would be in neither and go back to run again.
    for (const RunningJob& job : pool_->Running()) {
      hard_running_[job.queue].push_back(job.payload);
    }
  }
  pool_->TakeFinished(&unsent_);
  if (hard) {
    // The threads still in a handler cannot be stopped; their outcomes no
    // longer matter, because their jobs go back to the queues now.
    pool_->Shutdown(milliseconds(0));
  }
  handback_deadline_ = Clock::now() + kHandBackPatience;
  HandBack();
}

void ServerImpl::HandBack() {
  if (phase_ != Phase::kFinishing || handback_inflight_) return;
  if (Clock::now() >= handback_deadline_) {
    Log(LogLevel::kError,
        "cannot reach Redis to hand jobs back; they stay in this process's working lists and "
        "a janitor returns them once the heartbeat expires");
    RequestClose();
    return;
  }
  if (!command_->ready()) {
    // The reconnect timer brings the connection back; look again shortly.
    uv_timer_start(&stop_timer_, [](uv_timer_t* t) {
      static_cast<ServerImpl*>(t->loop->data)->HandBack();
    }, 50, 0);
    return;
  }
  handback_inflight_ = true;
  ++handback_attempts_;
  for (int64_t id : stale_clients_) {
    command_->Command({"CLIENT", "KILL", "ID", std::to_string(id)},
                      [](const Status&, redisReply*) {});
  }
  stale_clients_.clear();
  SendCompletions();
  // Clean stop: nothing runs, so every job left in a working list (one a
  // BLMOVE moved as its connection closed, say) goes back untouched, except
  // those whose outcome Redis has not confirmed: should their ack be
  // refused, they must not go back and run again (the forget below then
  // fails and the hand-back is tried again). Hard stop: every job goes
  // back, the ones still running with interrupted_count + 1.
  std::vector<std::vector<std::string>> listed(queues_.size());
  if (hard_stop_) {
    listed = hard_running_;
  } else {
    AddUnconfirmed(&listed);
  }
  SendRequeue(hard_stop_ ? "interrupt" : "keep", std::move(listed),
              [this](const Status& s) {
                if (!s.ok()) {
                  handback_inflight_ = false;
                  // Tried again after a pause: Redis refusing the requeue
                  // (a key of the wrong type, say) refuses it every time.
                  Log(LogLevel::kWarn, "hand-back failed: %s", s.ToString().c_str());
                  uv_timer_start(&stop_timer_, [](uv_timer_t* t) {
                    static_cast<ServerImpl*>(t->loop->data)->HandBack();
                  }, kCompletionsRetryMillis, 0);
                  return;
                }
                std::string id = identity_;
                std::vector<std::string> keys = {keys_.Heartbeat(id), keys_.Registry(),
                                                 std::string(Keys::kProcesses), Keys::Process(id),
                                                 Keys::Work(id), Keys::Workers(id)};
                for (const Queue& q : queues_) keys.push_back(q.working_key);
                Status sent = command_->Eval(
                    ScriptId::kForget, std::move(keys), {id, "1"},
                    [this](const Status& s2, redisReply* r) {
                      handback_inflight_ = false;
                      bool forgotten = s2.ok() && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
                      if (forgotten) {
                        Log(LogLevel::kInfo, "stopped %s", identity_.c_str());
                        RequestClose();
                      } else if (handback_attempts_ < 20) {
                        HandBack();  // a job arrived meanwhile: hand it back too
                      } else {
                        Log(LogLevel::kError, "could not empty the working lists; leaving them "
                            "to the janitor");
                        RequestClose();
                      }
                    });
                if (!sent.ok()) {
                  handback_inflight_ = false;
                  HandBack();
                }
              });
}

void ServerImpl::RequestClose() {
  phase_ = Phase::kStopped;
  uv_timer_start(&close_timer_, [](uv_timer_t* t) {
    static_cast<ServerImpl*>(t->loop->data)->CloseAll();
  }, 0, 0);
}

void ServerImpl::CloseAll() {
  phase_ = Phase::kStopped;
  {
    std::lock_guard<std::mutex> lock(control_mu_);
    if (!control_open_ && uv_is_closing(reinterpret_cast<uv_handle_t*>(&control_async_))) return;
    control_open_ = false;
  }
  if (janitor_running_) return;  // JanitorDone calls back here
  pool_->Shutdown(milliseconds(hard_stop_ ? 0 : 1000));
  command_->Close();
  for (Queue& q : queues_) q.blocking->Close();
  auto close = [](auto* handle) {
    uv_handle_t* h = reinterpret_cast<uv_handle_t*>(handle);
    if (!uv_is_closing(h)) uv_close(h, nullptr);
  };
  close(&control_async_);
  close(&finished_async_);
  close(&heartbeat_timer_);
  close(&janitor_timer_);
  close(&reconnect_timer_);
  close(&completions_retry_timer_);
  close(&fetch_retry_timer_);
  close(&stop_timer_);
  close(&poll_timer_);
  close(&close_timer_);
  for (uv_signal_t* s : signals_) close(s);
  // The connections' own handles close when they are destroyed.
  command_.reset();
  for (Queue& q : queues_) q.blocking.reset();
}

Status ServerImpl::Run() {
  if (!loop_initialized_) return Status::Shutdown("server was not opened");
  started_at_ = NowSeconds();
  SetLogThreadName("loop");
  pool_->Start();
  uint64_t interval = static_cast<uint64_t>(options_.heartbeat_interval.count());
  uv_timer_start(&heartbeat_timer_, [](uv_timer_t* t) {
    static_cast<ServerImpl*>(t->loop->data)->Beat();
  }, interval, interval);
  ConnectCommand();
  // Quiet/Stop may have been asked before Run.
  OnControl();
  uv_run(&loop_, UV_RUN_DEFAULT);
  // Every failure while running (Redis down, a script error) is retried and
  // logged; Run ends only by Stop.
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<Server>> Server::Open(const ServerOptions& options,
                                             HandlerRegistry registry) {
  // hiredis writes with write(2): a connection Redis closed must be an error,
  // not SIGPIPE.
  struct sigaction current;
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
  auto server = std::make_unique<ServerImpl>(options, std::move(registry));
  Status s = server->Init();
  if (!s.ok()) return s;
  return std::unique_ptr<Server>(std::move(server));
}

}  // namespace reliableq
