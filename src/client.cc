#include "reliableq/client.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "job_codec.h"
#include "keys.h"
#include "redis/connection.h"
#include "redis/errors.h"
#include "redis/reply.h"
#include "script_calls.h"

namespace reliableq {

const char* PushOutcomeName(PushOutcome outcome) {
  switch (outcome) {
    case PushOutcome::kAccepted: return "accepted";
    case PushOutcome::kReplicated: return "replicated";
    case PushOutcome::kNotConfirmed: return "not confirmed";
    case PushOutcome::kSpooled: return "spooled";
    case PushOutcome::kRefused: return "refused";
  }
  return "unknown";
}

namespace {

// Jobs per push.lua call in PushBulk: big enough to make a round trip carry
// a lot, small enough that Redis never blocks long on one call.
constexpr size_t kBatchSize = 1000;

// A job ready to be stored, after the client middleware.
struct Encoded {
  std::string payload;
  std::string queue;
  std::string jid;
  bool stopped = false;  // a middleware stopped the push
};

// A call to Redis: its Status, and whether a failed call may have run. That
// alone decides between kNotConfirmed (written, no reply) and kRefused (not
// sent, or answered with an error: push.lua and ZADD then wrote nothing).
struct Attempt {
  Status status;
  bool maybe_run = false;
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
// failure's reason gets `context` in front.
PushResult FromAttempt(const Attempt& attempt, const std::string& context, std::string jid) {
  if (attempt.status.ok()) return Accepted(std::move(jid));
  PushOutcome outcome =
      attempt.maybe_run ? PushOutcome::kNotConfirmed : PushOutcome::kRefused;
  return Failed(outcome, std::move(jid), attempt.status.WithContext(context));
}

PushResult Stopped(std::string jid) {
  return Failed(PushOutcome::kRefused, std::move(jid),
                Status::Refused("stopped by client middleware"));
}

class ClientImpl : public Client {
 public:
  ClientImpl(std::unique_ptr<redis::Connection> connection, ClientOptions options)
      : connection_(std::move(connection)),
        options_(std::move(options)),
        clock_(options_.clock ? options_.clock : SystemClock()) {}

  Result<PushResult> Push(const Job& job) override {
    double now = clock_->Now();
    Result<Encoded> encoded = Encode(job, now, now);
    if (!encoded.ok()) return encoded.status();
    if (encoded->stopped) return Stopped(std::move(encoded->jid));
    Attempt attempt = RunPush({{encoded->queue, {encoded->payload}}});
    return FromAttempt(attempt, "push to " + Keys::Queue(encoded->queue), std::move(encoded->jid));
  }

  Result<std::vector<PushResult>> PushBulk(const std::vector<Job>& jobs) override {
    // Everything is encoded before anything is sent, so that one bad job
    // leaves Redis untouched.
    double now = clock_->Now();
    std::vector<Encoded> encoded(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      Result<Encoded> one = Encode(jobs[i], now, now);
      if (!one.ok()) return one.status().WithContext("job " + std::to_string(i));
      encoded[i] = std::move(one.value());
    }

    std::vector<PushResult> results(jobs.size());
    // Set by the first batch that is not accepted: what every later job is
    // refused with.
    std::optional<Status> not_sent;
    for (size_t begin = 0; begin < jobs.size(); begin += kBatchSize) {
      size_t end = std::min(jobs.size(), begin + kBatchSize);
      // Queues in the order they first appear, each with its payloads in
      // input order (the first given is taken first).
      std::vector<QueuePush> pushes;
      std::unordered_map<std::string_view, size_t> index;
      for (size_t i = begin; i < end; ++i) {
        if (encoded[i].stopped) continue;
        auto [it, added] = index.try_emplace(encoded[i].queue, pushes.size());
        if (added) pushes.push_back({encoded[i].queue, {}});
        pushes[it->second].payloads.push_back(encoded[i].payload);
      }
      PushResult batch;
      if (not_sent) {
        batch = Failed(PushOutcome::kRefused, {}, *not_sent);
      } else if (!pushes.empty()) {
        batch = FromAttempt(
            RunPush(pushes),
            "bulk push, jobs " + std::to_string(begin) + " to " + std::to_string(end - 1), {});
        if (batch.outcome != PushOutcome::kAccepted) {
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
    std::string score = FormatEpoch(epoch_seconds);
    Attempt attempt;
    Result<redis::ReplyPtr> reply = [&] {
      std::lock_guard<std::mutex> lock(mu_);
      Result<redis::ReplyPtr> r =
          connection_->Command({"ZADD", Keys::kSchedule, score, encoded->payload});
      attempt = Finished(r.status());
      return r;
    }();
    if (!reply.ok()) return FromAttempt(attempt, "schedule", std::move(encoded->jid));
    if ((*reply)->type != REDIS_REPLY_INTEGER) {
      // Redis ran something and answered oddly: the job may be stored.
      return Failed(
          PushOutcome::kNotConfirmed, std::move(encoded->jid),
          Status::Protocol(std::string("ZADD answered ") + redis::TypeName(reply->get())));
    }
    return Accepted(std::move(encoded->jid));
  }

  Result<PushResult> PushIn(const Job& job, double seconds) override {
    if (!std::isfinite(seconds)) {
      return Status::InvalidArgument("the delay is not a finite number of seconds");
    }
    return PushAt(job, clock_->Now() + seconds);
  }

 private:
  // The job's JSON after the middleware chain, and the queue it names then.
  // A stopped job keeps the jid it had when it was stopped.
  Result<Encoded> Encode(const Job& job, double now, std::optional<double> enqueued_at) {
    Encoded out;
    Result<std::string> json = EncodeJob(job, now, enqueued_at, &out.jid);
    if (!json.ok()) return json.status();
    out.queue = job.queue;
    if (options_.middleware.empty()) {
      out.payload = std::move(json.value());
      return out;
    }
    // The DOM holds integers beyond 64 bits as doubles; they are written
    // back as the literals EncodeJob wrote, unless a middleware changed them.
    WideIntegers wide = WideIntegers::Find(*json);
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
    out.payload = ToJson(doc, wide);
    return out;
  }

  // One push.lua call: all of it, or (an error naming the key) none.
  Attempt RunPush(const std::vector<QueuePush>& pushes) {
    ScriptCall call = PushCall(pushes);
    std::lock_guard<std::mutex> lock(mu_);
    return Finished(connection_->Eval(call).status());
  }

  // The call on connection_ that just returned `status`, and how far it got.
  // Called under mu_, right after the call: the one place that asks how far
  // a call got.
  Attempt Finished(Status status) {
    bool maybe_run =
        !status.ok() && connection_->last_progress() == redis::Connection::Progress::kSent;
    return {std::move(status), maybe_run};
  }

  std::mutex mu_;
  std::unique_ptr<redis::Connection> connection_;  // guarded by mu_
  const ClientOptions options_;
  const std::shared_ptr<const Clock> clock_;
};

}  // namespace

Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::Open(const RedisOptions& options,
                                             ClientOptions client_options) {
  Result<std::unique_ptr<redis::Connection>> connection = redis::Connection::Open(options);
  if (!connection.ok()) return connection.status();
  return std::unique_ptr<Client>(
      new ClientImpl(std::move(connection.value()), std::move(client_options)));
}

}  // namespace reliableq
