#include "reliableq/client.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "codec/job_codec.h"
#include "client/job_flow.h"
#include "client/client_call.h"
#include "client/client_options.h"
#include "protocol/keys.h"
#include "redis/connection.h"
#include "redis/errors.h"
#include "redis/reply.h"
#include "protocol/script_calls.h"
#include "spool/client_spool.h"

namespace reliableq::client {

namespace {

// Jobs per push.lua call in PushBulk: big enough to make a round trip carry
// a lot, small enough that Redis never blocks long on one call.
constexpr size_t kBatchSize = 1000;

// Round trips a caller makes for others' calls, after its own, before it
// hands the connection on (ClientImpl::Run).
constexpr int kMaxRounds = 16;

// A job ready to be stored, after the client middleware.
struct Encoded {
  std::string payload;
  std::string queue;
  std::string jid;
  bool stopped = false;  // a middleware stopped the push
  std::string unique_key;  // Job::unique: its Redis key, and the key's ttl (0: none)
  int64_t unique_ttl_millis = 0;
};

PushResult Accepted(std::string jid) {
  PushResult result;
  result.outcome = PushOutcome::kAccepted;
  result.jid = std::move(jid);
  return result;
}

PushResult Failed(PushOutcome outcome, std::string jid, Status reason) {
  PushResult result;
  result.outcome = outcome;
  result.jid = std::move(jid);
  result.reason = std::move(reason);
  return result;
}

// The result of a call to Redis that stored `jid` if it succeeded; a
// failure's reason gets context() in front (built only then).
template <typename Context>
PushResult FromAttempt(const Attempt& attempt, const Context& context, std::string jid) {
  if (attempt.status.ok()) {
    const Confirmation& confirmation = attempt.confirmation;
    if (!confirmation.unconfirmed.ok()) {
      return Failed(PushOutcome::kNotConfirmed, std::move(jid),
                    confirmation.unconfirmed.WithContext(context()));
    }
    PushResult result = Accepted(std::move(jid));
    if (confirmation.replicas > 0) {
      result.outcome = PushOutcome::kReplicated;
      result.replicas = confirmation.replicas;
    }
    return result;
  }
  PushOutcome outcome =
      attempt.maybe_run ? PushOutcome::kNotConfirmed : PushOutcome::kRefused;
  return Failed(outcome, std::move(jid), attempt.status.WithContext(context()));
}

PushResult Stopped(std::string jid) {
  return Failed(PushOutcome::kRefused, std::move(jid),
                Status::Refused("stopped by client middleware"));
}

// `WAIT <wait_replicas> <wait_timeout>` in Redis's protocol, written after
// the calls of every round trip; empty when wait_replicas is 0.
std::string WaitWire(const ClientOptions& options) {
  std::string wire;
  if (options.wait_replicas <= 0) return wire;
  std::string replicas = std::to_string(options.wait_replicas);
  std::string timeout = std::to_string(options.wait_timeout.count());
  std::string_view argv[] = {"WAIT", replicas, timeout};
  redis::AppendCommand(&wire, argv, 3);
  return wire;
}

class ClientImpl : public Client {
 public:
  ClientImpl(std::unique_ptr<redis::Connection> connection, ClientOptions options,
             std::unique_ptr<spool::ClientSpool> spool)
      : connection_(std::move(connection)),
        spool_(std::move(spool)),
        options_(std::move(options)),
        keys_(protocol::Keys::For(options_.prefix, connection_->options())),
        clock_(options_.clock ? options_.clock : SystemClock()),
        wait_wire_(WaitWire(options_)) {}

  Result<PushResult> Push(const Job& job) override {
    double now = clock_->Now();
    Result<Encoded> encoded = Encode(job, now, now);
    if (!encoded.ok()) return encoded.status();
    if (encoded->stopped) return Stopped(std::move(encoded->jid));
    if (!encoded->unique_key.empty()) return PushUnique(&*encoded, std::nullopt);
    // The spool's copy, taken before the payload moves into the call.
    std::optional<spool::SpooledJob> spooled = ForSpool(*encoded, std::nullopt);
    if (spooled && spool_->bypass()) {
      return spool_->Instead(std::move(encoded->jid), std::move(*spooled));
    }
    Pending pending(spool_ ? OnceCall(encoded->jid, encoded->queue, std::nullopt,
                                      std::move(encoded->payload))
                           : protocol::PushCall(keys_, QueuePushes(encoded->queue,
                                                         std::move(encoded->payload))));
    Attempt attempt = Run(&pending);
    return Spooling(
        FromAttempt(
            attempt, [&] { return "push to " + keys_.Queue(encoded->queue); },
            std::move(encoded->jid)),
        std::move(spooled));
  }

  Result<std::vector<PushResult>> PushBulk(const std::vector<Job>& jobs) override {
    // Everything is encoded before anything is sent, so that one bad job
    // leaves Redis untouched.
    double now = clock_->Now();
    std::vector<Encoded> encoded(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      // A batch is one push.lua call; a unique job needs push_unique.lua.
      if (jobs[i].unique) return Status::InvalidArgument("a unique job cannot be pushed in bulk");
      Result<Encoded> one = Encode(jobs[i], now, now);
      if (!one.ok()) return one.status().WithContext("job " + std::to_string(i));
      encoded[i] = std::move(one.value());
    }

    std::vector<PushResult> results(jobs.size());
    // Set by the first batch that is not stored (a replica shortfall
    // included): what every later job is refused with.
    std::optional<Status> not_sent;
    for (size_t begin = 0; begin < jobs.size(); begin += kBatchSize) {
      size_t end = std::min(jobs.size(), begin + kBatchSize);
      // The spool's copies of the batch, taken before the payloads move
      // into the call.
      std::vector<spool::SpooledJob> spooled;
      for (size_t i = begin; spool_ && i < end; ++i) {
        if (!encoded[i].stopped) spooled.push_back(*ForSpool(encoded[i], std::nullopt));
      }
      std::optional<ScriptCall> call = BatchCall(&encoded, begin, end);
      PushResult batch;
      if (not_sent) {
        batch = Failed(PushOutcome::kRefused, {}, *not_sent);
      } else if (call && spool_ && spool_->bypass()) {
        batch = spool_->Instead({}, std::move(spooled));
      } else if (call) {
        Pending pending(*call);
        batch = FromAttempt(
            Run(&pending),
            [&] {
              return "bulk push, jobs " + std::to_string(begin) + " to " +
                     std::to_string(end - 1);
            },
            {});
        batch = Spooling(std::move(batch), std::move(spooled));
        if (!batch.stored()) {
          not_sent = batch.reason.WithContext(std::string("not sent: an earlier batch was ") +
                                              PushOutcomeName(batch.outcome));
        }
      }
      for (size_t i = begin; i < end; ++i) {
        if (encoded[i].stopped) {
          results[i] = Stopped(std::move(encoded[i].jid));
        } else {
          results[i] = batch;
          results[i].jid = std::move(encoded[i].jid);
        }
      }
    }
    return results;
  }

  Result<PushResult> PushAt(const Job& job, double epoch_seconds) override {
    if (!std::isfinite(epoch_seconds)) {
      return Status::InvalidArgument("the time to run the job at is not a finite number");
    }
    double now = clock_->Now();
    if (epoch_seconds <= now) return Push(job);
    // A scheduled job gets enqueued_at when it is moved to its queue.
    Result<Encoded> encoded = Encode(job, now, std::nullopt);
    if (!encoded.ok()) return encoded.status();
    if (encoded->stopped) return Stopped(std::move(encoded->jid));
    if (!encoded->unique_key.empty()) return PushUnique(&*encoded, epoch_seconds);
    std::optional<spool::SpooledJob> spooled = ForSpool(*encoded, epoch_seconds);
    if (spooled && spool_->bypass()) {
      return spool_->Instead(std::move(encoded->jid), std::move(*spooled));
    }
    Pending pending(spool_ ? OnceCall(encoded->jid, encoded->queue, epoch_seconds,
                                      std::move(encoded->payload))
                           : protocol::ScheduleCall(keys_, epoch_seconds, std::move(encoded->payload)));
    Attempt attempt = Run(&pending);
    if (!attempt.status.ok()) {
      return Spooling(
          FromAttempt(attempt, [] { return "schedule"; }, std::move(encoded->jid)),
          std::move(spooled));
    }
    Status answered = spool_ ? protocol::ReadPushOnceReply(attempt.reply).status()
                             : protocol::ReadScheduleReply(attempt.reply).status();
    if (!answered.ok()) {
      // Redis ran something and answered oddly: the job may be stored.
      return Spooling(Failed(PushOutcome::kNotConfirmed, std::move(encoded->jid), answered),
                      std::move(spooled));
    }
    return Spooling(
        FromAttempt(attempt, [] { return "schedule"; }, std::move(encoded->jid)),
        std::move(spooled));
  }

  Result<PushResult> PushIn(const Job& job, double seconds) override {
    if (!std::isfinite(seconds)) {
      return Status::InvalidArgument("the delay is not a finite number of seconds");
    }
    return PushAt(job, clock_->Now() + seconds);
  }

 private:
  // A unique job, to its queue or the schedule. Never spooled: the caller
  // must learn now whether it is a duplicate.
  PushResult PushUnique(Encoded* e, std::optional<double> at) {
    Pending pending(protocol::PushUniqueCall(keys_, e->unique_key, e->jid, e->unique_ttl_millis, e->queue,
                                   at, std::move(e->payload)));
    Attempt attempt = Run(&pending);
    if (attempt.status.ok()) {
      Result<protocol::PushUniqueReply> reply = protocol::ReadPushUniqueReply(attempt.reply);
      if (auto other = UniquePushRefusal(reply, e->jid, e->unique_key)) return *other;
    }
    return FromAttempt(attempt, [&] { return "unique push, key " + e->unique_key; },
                       std::move(e->jid));
  }

  // With a spool a job may be sent again under its jid (the drain pushes
  // what a push that was not confirmed spooled, and that push may still
  // land): push_once.lua stores each jid once within the replay window.
  ScriptCall OnceCall(std::string_view jid, std::string_view queue, std::optional<double> at,
                      std::string payload) const {
    std::vector<protocol::OncePush> jobs;
    jobs.push_back({jid, queue, at, std::move(payload)});
    return protocol::PushOnceCall(keys_, options_.spool_replay_window, std::move(jobs));
  }

  static std::vector<protocol::QueuePush> QueuePushes(std::string_view queue, std::string payload) {
    std::vector<protocol::QueuePush> pushes;
    pushes.push_back({queue, {}});
    pushes.back().payloads.push_back(std::move(payload));
    return pushes;
  }

  // The call that pushes jobs [begin, end) of `encoded` but those a
  // middleware stopped; nullopt when none is left. The payloads move into
  // the call: nothing reads them afterwards.
  std::optional<ScriptCall> BatchCall(std::vector<Encoded>* encoded, size_t begin,
                                      size_t end) const {
    if (spool_) {
      // One record per job, in input order.
      std::vector<protocol::OncePush> jobs;
      for (size_t i = begin; i < end; ++i) {
        Encoded& e = (*encoded)[i];
        if (!e.stopped) jobs.push_back({e.jid, e.queue, std::nullopt, std::move(e.payload)});
      }
      if (jobs.empty()) return std::nullopt;
      return protocol::PushOnceCall(keys_, options_.spool_replay_window, std::move(jobs));
    }
    // Queues in the order they first appear, each with its payloads in
    // input order (the first given is taken first).
    std::vector<protocol::QueuePush> pushes;
    std::unordered_map<std::string_view, size_t> index;
    for (size_t i = begin; i < end; ++i) {
      Encoded& e = (*encoded)[i];
      if (e.stopped) continue;
      auto [it, added] = index.try_emplace(e.queue, pushes.size());
      if (added) {
        pushes.push_back({e.queue, {}});
        pushes.back().payloads.reserve(end - i);
      }
      pushes[it->second].payloads.push_back(std::move(e.payload));
    }
    if (pushes.empty()) return std::nullopt;
    return protocol::PushCall(keys_, std::move(pushes));
  }

  // The spool's copy of a job about to be pushed (`at`: scheduled for
  // then), its payload and queue exactly as the push sends them; nullopt
  // without a spool.
  std::optional<spool::SpooledJob> ForSpool(const Encoded& encoded,
                                            std::optional<double> at) const {
    if (!spool_) return std::nullopt;
    spool::SpooledJob job;
    job.kind = at ? spool::SpooledJob::Kind::kSchedule : spool::SpooledJob::Kind::kPush;
    job.at = at.value_or(0);
    job.queue = encoded.queue;
    job.jid = encoded.jid;
    job.payload = encoded.payload;
    return job;
  }

  // With a spool: `result`, or kSpooled when it says Redis could not be
  // reached and the jobs it was for are on disk (ClientSpool::AfterPush).
  template <typename Jobs>
  PushResult Spooling(PushResult result, Jobs jobs) {
    return spool_ ? spool_->AfterPush(std::move(result), std::move(jobs)) : result;
  }

  // The job's JSON after the middleware chain, and the queue it names then.
  // A stopped job keeps the jid it had when it was stopped.
  Result<Encoded> Encode(const Job& given, double now, std::optional<double> enqueued_at) {
    std::optional<Job> switched = SwitchedSequence(options_, given);
    const Job& job = switched ? *switched : given;
    if (HasFlowFields(job)) {  // expiry or uniqueness: fields in a copy (job_flow.h)
      std::string key;
      Result<Job> copy = JobWithFlowFields(keys_, job, now, &key);
      if (!copy.ok()) return copy.status();
      Result<Encoded> out = EncodeAsIs(*copy, now, enqueued_at);
      if (out.ok() && job.unique) out->unique_key = std::move(key);
      if (out.ok() && job.unique) out->unique_ttl_millis = job.unique->ttl.count();
      return out;
    }
    if (Status s = CheckNoUniqueFields(job.extra); !s.ok()) return s;
    return EncodeAsIs(job, now, enqueued_at);
  }

  Result<Encoded> EncodeAsIs(const Job& job, double now, std::optional<double> enqueued_at) {
    Encoded out;
    Result<std::string> json = codec::EncodeJob(job, now, enqueued_at, &out.jid);
    if (!json.ok()) return json.status();
    out.queue = job.queue;
    if (options_.middleware.empty()) {
      out.payload = std::move(json.value());
      return out;
    }
    // The DOM holds integers beyond 64 bits as doubles; they are written
    // back as the literals EncodeJob wrote, unless a middleware changed them.
    codec::WideIntegers wide = codec::WideIntegers::Find(*json);
    rapidjson::Document doc;
    doc.Parse<rapidjson::kParseFullPrecisionFlag>(json->data(), json->size());
    auto string_field = [&doc](const char* name) -> std::string {
      if (!doc.IsObject()) return {};
      auto it = doc.FindMember(name);
      if (it == doc.MemberEnd() || !it->value.IsString()) return {};
      return {it->value.GetString(), it->value.GetStringLength()};
    };
    for (const ClientMiddleware& middleware : options_.middleware) {
      if (!middleware(doc)) {
        out.stopped = true;
        if (std::string jid = string_field("jid"); !jid.empty()) out.jid = std::move(jid);
        return out;
      }
    }
    out.queue = string_field("queue");
    bool has_args = doc.IsObject() && doc.HasMember("args") && doc["args"].IsArray();
    if (out.queue.empty() || string_field("class").empty() || !has_args) {
      return Status::InvalidArgument(
          "a client middleware left the job without a class, an args array or a queue");
    }
    out.jid = string_field("jid");
    out.payload = codec::ToJson(doc, wide);
    return out;
  }

  // Runs `pending` and returns how it went. Calls from many threads share
  // round trips (automatic pipelining, as group commit): a caller that
  // finds the connection free takes it and writes, in one write, its own
  // call and every call queued meanwhile, reads their replies in order and
  // hands each to its caller. While calls queued up during a round trip,
  // it writes them in the next one at once: waking another thread to do it
  // would leave Redis idle for a scheduler's delay. After kMaxRounds it
  // hands the connection to the caller of the first queued call instead,
  // so that no caller serves others for long. Each call stays its own
  // script call, all or nothing, whatever else shares its round trip.
  Attempt Run(Pending* pending) {
    std::unique_lock<std::mutex> lock(mu_);
    queue_.push_back(pending);
    if (writing_) {
      lock.unlock();
      if (pending->Wait() == Pending::State::kDone) return std::move(pending->attempt);
      // Handed the connection: `pending` is still queued.
      lock.lock();
    }
    writing_ = true;
    Attempt own;
    for (int round = 1;; ++round) {
      batch_.swap(queue_);
      lock.unlock();
      // The callers of the previous round are woken while Redis runs this
      // one: their wake-ups cost this thread system calls.
      RoundTrip([this] { FinishAll(&answered_); });
      FinishAll(&answered_);
      for (Pending* p : batch_) {
        if (p == pending) {
          own = std::move(p->attempt);
        } else {
          answered_.push_back(p);
        }
      }
      batch_.clear();
      lock.lock();
      if (queue_.empty() || round == kMaxRounds) break;
    }
    Pending* next = queue_.empty() ? nullptr : queue_.front();
    if (next == nullptr) writing_ = false;
    // answered_ is this caller's until it lets the connection go.
    std::vector<Pending*> answered;
    answered.swap(answered_);
    lock.unlock();
    FinishAll(&answered);
    if (next != nullptr) next->Lead();
    return own;
  }

  static void FinishAll(std::vector<Pending*>* calls) {
    for (Pending* p : *calls) p->Finish();
    calls->clear();
  }

  // Writes every call of batch_ in one write, reads the replies, and sets
  // each call's attempt (not yet published to its caller). A call whose
  // script Redis no longer holds (NOSCRIPT: a restart or SCRIPT FLUSH)
  // did not run: the script is loaded and the call written again, once.
  // Runs with the connection held (writing_), without mu_.
  void RoundTrip(const std::function<void()>& while_redis_works) {
    std::vector<Pending*> again = Send(batch_, {}, while_redis_works);
    if (again.empty()) return;
    std::vector<ScriptId> scripts;
    for (Pending* p : again) {
      if (std::find(scripts.begin(), scripts.end(), p->script) == scripts.end()) {
        scripts.push_back(p->script);
      }
    }
    std::vector<Pending*> still = Send(again, scripts, nullptr);
    for (Pending* p : still) {
      p->attempt.status = Status::Script("NOSCRIPT twice: Redis lost the script again");
    }
  }

  // One round trip: SCRIPT LOAD of each of `load`, then the calls of
  // `calls`. Sets each call's attempt; returns the calls Redis answered
  // with NOSCRIPT (they did not run).
  std::vector<Pending*> Send(const std::vector<Pending*>& calls,
                             const std::vector<ScriptId>& load,
                             const std::function<void()>& while_redis_works) {
    wire_.clear();
    ends_.clear();
    replies_.clear();
    for (ScriptId id : load) {
      std::string_view argv[] = {"SCRIPT", "LOAD", GetScript(id).source};
      redis::AppendCommand(&wire_, argv, 3);
      ends_.push_back(wire_.size());
    }
    std::string_view wire;
    const bool wait = !wait_wire_.empty();
    if (load.empty() && calls.size() == 1 && !wait) {
      wire = calls[0]->wire;  // a bulk batch: no copy
      ends_.push_back(wire.size());
    } else {
      // With WAIT a bulk batch is copied too: a memcpy is small beside the
      // wait for a replica.
      for (const Pending* p : calls) {
        wire_ += p->wire;
        ends_.push_back(wire_.size());
      }
      if (wait) {
        // One WAIT after every call of the round trip: it counts the
        // replicas that have every write this connection made before it.
        wire_ += wait_wire_;
        ends_.push_back(wire_.size());
      }
      wire = wire_;
    }
    size_t written = 0;
    Status sent = connection_->Send(wire, ends_, &replies_, &written, while_redis_works);
    Confirmation confirmation;
    if (wait) confirmation = Confirm(load.size() + calls.size(), sent);
    std::vector<Pending*> noscript;
    for (size_t i = 0; i < calls.size(); ++i) {
      Pending* p = calls[i];
      size_t at = load.size() + i;
      Attempt& attempt = p->attempt;
      if (at < replies_.size()) {
        redis::ReplyPtr& reply = replies_[at];
        if (!redis::IsErrorReply(reply)) {
          attempt = {Status::OK(), false, std::move(reply), confirmation};
          continue;
        }
        std::string_view text = redis::ErrorText(reply);
        if (redis::ParseRedirect(text) || redis::IsTryAgainReply(text)) {
          attempt = Resend(wire, at, std::move(reply), wait);  // NOSCRIPT: a new node
        } else {
          attempt = {redis::FromErrorReply(text), false, nullptr};
        }
        if (redis::IsNoScript(attempt.status)) noscript.push_back(p);
      } else {
        // Written whole and unanswered: it may have run. Not written
        // whole: Redis never ran it.
        attempt = {sent, at < written, nullptr};
      }
    }
    return noscript;
  }

  // Call `at` of `wire`, redirected by a cluster (MOVED, ASK, TRYAGAIN: it
  // did not run), goes again where its slot is now. The round trip's WAIT
  // came before it, so a WAIT of its own follows it, on the connection that
  // ran it (an ASK's target is another connection, and WAIT counts the
  // writes of the connection it is sent on).
  Attempt Resend(std::string_view wire, size_t at, redis::ReplyPtr reply, bool wait) {
    size_t begin = at == 0 ? 0 : ends_[at - 1];
    auto followed = connection_->Resend(wire.substr(begin, ends_[at] - begin), std::move(reply));
    if (!followed.ok()) {
      using Progress = redis::Connection::Progress;
      return {followed.status(), connection_->last_progress() == Progress::kSent, nullptr};
    }
    Confirmation confirmation;
    if (wait) {
      std::string replicas = std::to_string(options_.wait_replicas);
      std::string timeout = std::to_string(options_.wait_timeout.count());
      Result<redis::ReplyPtr> waited =
          connection_->LastWriter().Command({"WAIT", replicas, timeout});
      if (waited.ok()) {
        confirmation = Confirm(waited->get(), Status::OK());
      } else {
        confirmation.unconfirmed =
            waited.status().WithContext("stored on the master, but WAIT failed");
      }
    }
    return {Status::OK(), false, std::move(*followed), confirmation};
  }

  // What the round trip's WAIT, reply `at` of replies_, says about the
  // writes before it; `sent` is how the round trip ended.
  Confirmation Confirm(size_t at, const Status& sent) const {
    return Confirm(at < replies_.size() ? redis::ReplyRef(replies_[at]) : redis::ReplyRef(), sent);
  }

  // What the reply of a WAIT says about the writes before it on its
  // connection; null when it was lost (`sent`: how).
  Confirmation Confirm(redis::ReplyRef reply, const Status& sent) const {
    Confirmation out;
    if (!reply) {
      // The calls' replies came and WAIT's did not: what they stored is on
      // the master, and whether a replica has it is unknown.
      Status why = sent.ok() ? Status::Protocol("no reply to WAIT") : sent;
      out.unconfirmed = why.WithContext("stored on the master, but WAIT's reply was lost");
      return out;
    }
    Result<int64_t> acknowledged = redis::ReadWaitReply(reply);
    if (!acknowledged.ok()) {
      // An error reply: for example a managed Redis that refuses WAIT, or a
      // replica (writable, or just demoted) that cannot run it.
      out.unconfirmed =
          redis::IsErrorReply(reply)
              ? acknowledged.status().WithContext("stored on the master, but WAIT failed")
              : Status::Protocol("stored on the master, but " + acknowledged.status().message());
      return out;
    }
    if (*acknowledged >= options_.wait_replicas) {
      out.replicas = static_cast<int>(std::min<int64_t>(*acknowledged, INT_MAX));
      return out;
    }
    out.unconfirmed = Status::Timeout(
        "stored on the master, but only " + std::to_string(*acknowledged) + " of " +
        std::to_string(options_.wait_replicas) + " replicas confirmed it within " +
        std::to_string(options_.wait_timeout.count()) + " ms");
    return out;
  }

  std::unique_ptr<redis::Connection> connection_;  // used only while writing_
  std::unique_ptr<spool::ClientSpool> spool_;  // null without spool_dir
  const ClientOptions options_;
  const protocol::Keys keys_;
  const std::shared_ptr<const Clock> clock_;
  const std::string wait_wire_;  // WaitWire(options_)

  std::mutex mu_;
  std::vector<Pending*> queue_;  // guarded by mu_: calls waiting to be written
  bool writing_ = false;         // guarded by mu_: a caller holds the connection
  // Used only by the caller that holds the connection.
  std::vector<Pending*> batch_;
  std::vector<Pending*> answered_;  // answered, their callers not woken yet
  std::string wire_;
  std::vector<size_t> ends_;
  std::vector<redis::ReplyPtr> replies_;
};

}  // namespace
}  // namespace reliableq::client

// The public Client: opened here, its implementation in reliableq::client.
namespace reliableq {

Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::Open(const RedisOptions& options,
                                             ClientOptions client_options) {
  Result<RedisOptions> connection_options =
      client::ClientConnectionOptions(options, client_options);
  if (!connection_options.ok()) return connection_options.status();
  std::unique_ptr<spool::ClientSpool> spool;
  if (!client_options.spool_dir.empty()) {
    Result<std::unique_ptr<spool::ClientSpool>> opened =
        spool::ClientSpool::Open(*connection_options, spool::SpoolOptionsOf(client_options));
    if (!opened.ok()) return opened.status();
    spool = std::move(opened.value());
  }
  // With a spool the Client must start while Redis is down: its first push
  // connects, and one that cannot is spooled.
  Result<std::unique_ptr<redis::Connection>> connection =
      spool ? redis::Connection::Create(*connection_options)
            : redis::Connection::Open(*connection_options);
  if (!connection.ok()) return connection.status();
  return std::unique_ptr<Client>(new client::ClientImpl(std::move(connection.value()),
                                                std::move(client_options), std::move(spool)));
}

}  // namespace reliableq
