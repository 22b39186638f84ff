// Handlers: the C++ code that runs a job class, and the registry that maps
// the job's `class` field to it.
//
//   reliableq::HandlerRegistry registry;
//   registry.Register("PaymentJob", [](const reliableq::JobView& job) {
//     const auto& args = job.args();            // a RapidJSON array
//     capture(args[0].GetString(), args[1].GetInt64());
//   });
//
// A handler that returns has succeeded and its job is acknowledged. A handler
// that throws has failed; the exception's type and what() become the job's
// error_class and error_message, and the job is retried with its class's
// backoff, then goes to the dead set. To say more, a handler throws one of
// the outcomes below (JobSnooze, JobRetry, JobDiscard, JobDead); command and
// HTTP handlers say the same through their outcome channel and their HTTP
// status (reliableq(1), OUTCOMES). A handler may be called again for the same
// job: delivery is at least once (see reliableq-schema(7)), so make handlers
// idempotent where running twice would hurt.
//
// Thread safety: handlers run on the server's processor threads, up to
// `concurrency` at once, so a handler must be safe to call concurrently.
// Register all classes before the server starts; the registry is read-only
// from then on.

#ifndef RELIABLEQ_HANDLER_H_
#define RELIABLEQ_HANDLER_H_

#include <rapidjson/document.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace reliableq {

// Where a running job's result and progress go (JobView::SetResult,
// ReportProgress): the server's, one per processor. Its calls may come from
// any thread and never block for long.
class JobReporter {
 public:
  virtual void Result(std::string_view json) = 0;
  virtual void Progress(double percent, std::string_view message) = 0;

 protected:
  ~JobReporter() = default;
};

// A fetched job as its handler sees it. Valid only for the duration of the
// handler call; copy what must outlive it.
class JobView {
 public:
  // Made by the server from the exact payload it fetched and the queue it
  // fetched it from. `document` is the parsed payload; it must be an object
  // with a string "class" and an array "args".
  JobView(std::string_view raw, std::string_view queue, const rapidjson::Document& document)
      : raw_(raw), queue_(queue), document_(document) {}
  // As above, for a job whose stop is requested through `stop` (which
  // outlives the view) and, when it has a timeout, with a deadline (on the
  // server's clock's Monotonic()); its result and progress go to `reporter`
  // (which outlives the view; null: nowhere).
  JobView(std::string_view raw, std::string_view queue, const rapidjson::Document& document,
          const std::stop_source* stop,
          std::optional<std::chrono::steady_clock::time_point> deadline,
          JobReporter* reporter = nullptr)
      : raw_(raw),
        queue_(queue),
        document_(document),
        stop_(stop),
        deadline_(deadline),
        reporter_(reporter) {}

  JobView(const JobView&) = delete;
  JobView& operator=(const JobView&) = delete;

  // The job's `jid`, or "" if the payload has none.
  std::string_view jid() const { return StringField("jid"); }
  // The job's `class`.
  std::string_view job_class() const { return StringField("class"); }
  // The queue the job was fetched from.
  std::string_view queue() const { return queue_; }
  // The job's `args`: always a JSON array. Numbers are RapidJSON's: an
  // integer within int64 or uint64 is exact, one beyond both (which Ruby
  // writes as a plain Integer) is the nearest double. raw() keeps its exact
  // digits, and so do the payloads reliableq writes back (retry, dead).
  const rapidjson::Value& args() const { return document_["args"]; }
  // The job's `retry_count`: absent on a first attempt, 0 after the first
  // failure, +1 after each later one (Sidekiq's meaning).
  std::optional<int> retry_count() const {
    auto it = document_.FindMember("retry_count");
    if (it == document_.MemberEnd() || !it->value.IsInt()) return std::nullopt;
    return it->value.GetInt();
  }
  // How many times a process died while running this job and the janitor
  // gave it back to its queue (the payload's `interrupted_count`; 0 when
  // absent).
  int interrupted_count() const {
    auto it = document_.FindMember("interrupted_count");
    if (it == document_.MemberEnd() || !it->value.IsInt()) return 0;
    return it->value.GetInt();
  }
  // Whether this job may have run before, in whole or in part: it failed
  // before (retry_count) or its process died while running it
  // (interrupted_count). An idempotent handler checks its own records of
  // the jid when this is true (docs/handlers.md, "Idempotent handlers").
  bool may_have_run_before() const { return retry_count().has_value() || interrupted_count() > 0; }

  // Cancellation. A C++ thread cannot be stopped from outside, so a handler
  // that may run long polls this token (or registers a std::stop_callback)
  // and returns or throws when stop is requested, which happens when the
  // job's timeout passes (reliableq(1), TIMEOUTS) and when the server stops
  // hard (the shutdown timeout, or a second stop) and hands the job back;
  // after a hard stop, what the handler returns or throws is dropped. A
  // stop_callback runs on the server's event loop thread, under its
  // processors' lock: keep it short (set a flag, close a socket).
  std::stop_token stop_token() const {
    return stop_ != nullptr ? stop_->get_token() : std::stop_token();
  }
  bool stop_requested() const { return stop_ != nullptr && stop_->stop_requested(); }
  // Throws JobTimeout when stop was requested; a handler's way to give up.
  void ThrowIfStopRequested() const;
  // When the job's timeout ends, on the server clock's Monotonic(); empty
  // when the job has no timeout.
  std::optional<std::chrono::steady_clock::time_point> deadline() const { return deadline_; }

  // The job's result: one JSON value (text that is not JSON is kept as a
  // JSON string), such as a payment provider's charge id. Kept in the job's
  // final record when its class keeps records (reliableq(1), JOB RECORDS),
  // at most the record's size cap; the last call wins. A job that fails
  // keeps no result.
  void SetResult(std::string_view json) const {
    if (reporter_ != nullptr) reporter_->Result(json);
  }
  // How far the job is: `percent` from 0 to 100 (clamped), and a short
  // message. Shown by `reliableq job JID` and the dashboard while the job
  // runs: the server writes the latest one into Sidekiq's work hash at most
  // once a second, however often it is called.
  void ReportProgress(double percent, std::string_view message = {}) const {
    if (reporter_ != nullptr) reporter_->Progress(percent, message);
  }

  // The whole parsed payload, for any other field.
  const rapidjson::Value& payload() const { return document_; }
  // The payload exactly as it is stored in Redis.
  std::string_view raw() const { return raw_; }

 private:
  std::string_view StringField(const char* name) const {
    auto it = document_.FindMember(name);
    if (it == document_.MemberEnd() || !it->value.IsString()) return {};
    return {it->value.GetString(), it->value.GetStringLength()};
  }

  std::string_view raw_;
  std::string_view queue_;
  const rapidjson::Document& document_;
  // The server's, not a token: a handler that never asks costs no
  // reference count.
  const std::stop_source* stop_ = nullptr;
  std::optional<std::chrono::steady_clock::time_point> deadline_;
  JobReporter* reporter_ = nullptr;
};

// Runs one job. Throw to fail it.
using Handler = std::function<void(const JobView& job)>;

// A job class's answer to "when should this failed job run again?"
// (Sidekiq's sidekiq_retry_in), and a failure's own (JobFailure::then).
class RetryIn {
 public:
  // Sidekiq's schedule: count^4 + 15 seconds, plus jitter.
  static RetryIn Default() { return RetryIn(Kind::kDefault, 0); }
  // After `seconds` (> 0), plus the same jitter as the default.
  static RetryIn After(double seconds) { return RetryIn(Kind::kAfter, seconds); }
  // Drop the job: no retry, no dead set. As Sidekiq 8 does, the payload
  // gets `discarded_at` (the time, float seconds) and the death handlers
  // run with it; the retries-exhausted hook does not.
  static RetryIn Discard() { return RetryIn(Kind::kDiscard, 0); }
  // As if its retries were used up now (Sidekiq 7's :kill): the
  // retries-exhausted hook and the death handlers run, and the job goes to
  // the dead set unless its `dead` field is false.
  static RetryIn Kill() { return RetryIn(Kind::kKill, 0); }

  enum class Kind { kDefault, kAfter, kDiscard, kKill };
  Kind kind() const { return kind_; }
  double seconds() const { return seconds_; }

 private:
  RetryIn(Kind kind, double seconds) : kind_(kind), seconds_(seconds) {}
  Kind kind_;
  double seconds_;
};

// An error a handler may throw to give its failure a backtrace. C++
// exceptions carry none, so a job whose `backtrace` option asks for one
// (Sidekiq's error_backtrace) gets these lines, innermost first, when the
// handler throws a JobFailure; any other exception stores no backtrace.
//
// A JobFailure may also name its error_class (shown in the Web UI and
// matched by retry rules); otherwise it is the exception's type. And it may
// say what becomes of the job (then()): JobRetry, JobDiscard and JobDead
// below do; any other failure follows its class's retry_in.
class JobFailure : public std::runtime_error {
 public:
  JobFailure(const std::string& message, std::vector<std::string> backtrace)
      : std::runtime_error(message), backtrace_(std::move(backtrace)) {}
  // A failure whose error_class is `error_class`.
  static JobFailure Named(std::string error_class, const std::string& message,
                          std::vector<std::string> backtrace = {}) {
    JobFailure failure(message, std::move(backtrace));
    failure.error_class_ = std::move(error_class);
    return failure;
  }
  const std::vector<std::string>& backtrace() const { return backtrace_; }
  // Empty: the exception's type names the error.
  const std::string& error_class() const { return error_class_; }
  // What becomes of the job instead of its class's retry_in; empty: that.
  const std::optional<RetryIn>& then() const { return then_; }

 protected:
  std::vector<std::string> backtrace_;
  std::string error_class_;
  std::optional<RetryIn> then_;
};

// The failure of a job stopped at its timeout (error_class
// "Reliableq::JobTimeout"). Command and HTTP handlers fail with it when
// their timeout passes; a C++ handler may throw it itself, most simply
// with JobView::ThrowIfStopRequested().
class JobTimeout : public JobFailure {
 public:
  explicit JobTimeout(const std::string& message) : JobFailure(message, {}) {
    error_class_ = "Reliableq::JobTimeout";
  }
};

inline void JobView::ThrowIfStopRequested() const {
  if (stop_requested()) throw JobTimeout("stopped: its timeout passed or the worker stopped");
}

// The outcomes a handler throws to say more than "failed". Each ends the
// run as one atomic move of the job (reliableq-schema(7), "The end of a
// job's life"). The failures take an error_class as JobFailure::Named
// does (empty: the exception's type):
//
//   throw reliableq::JobSnooze(std::chrono::seconds(30));  // not yet
//   throw reliableq::JobRetry(300, "the gateway is busy");  // a failure
//   throw reliableq::JobDiscard("the order was deleted");   // never again
//   throw reliableq::JobDead("the card was refused");       // dead now

// A failure retried after `seconds` (> 0, plus Sidekiq's jitter) rather
// than its class's backoff; its retries and retry_for still bound it.
class JobRetry : public JobFailure {
 public:
  JobRetry(double seconds, const std::string& message, std::string error_class = "")
      : JobFailure(message, {}) {
    then_ = RetryIn::After(seconds);
    error_class_ = std::move(error_class);
  }
};

// A failure that will never succeed (a 4xx of a webhook, a record that is
// gone): counted as failed, dropped, not in the dead set; `discarded_at`
// and the death handlers as RetryIn::Discard.
class JobDiscard : public JobFailure {
 public:
  explicit JobDiscard(const std::string& message, std::string error_class = "")
      : JobFailure(message, {}) {
    then_ = RetryIn::Discard();
    error_class_ = std::move(error_class);
  }
};

// A failure sent to the dead set now, whatever retries are left
// (RetryIn::Kill).
class JobDead : public JobFailure {
 public:
  explicit JobDead(const std::string& message, std::string error_class = "")
      : JobFailure(message, {}) {
    then_ = RetryIn::Kill();
    error_class_ = std::move(error_class);
  }
};

// Not a failure: "try again in `delay`" (a rate limit, a resource not ready
// yet). The job goes to the scheduled set for that long, its
// `snooze_count` one higher, no retry spent and nothing recorded as an
// error; it counts as processed. A job snoozed more than its class's
// max_snoozes (ServerOptions::max_snoozes unless the class sets one) fails
// instead, with error_class "Reliableq::SnoozedTooOften". A delay below 0
// counts as 0; one above a year, as a year.
class JobSnooze : public std::exception {
 public:
  explicit JobSnooze(std::chrono::milliseconds delay) : delay_(delay) {}
  std::chrono::milliseconds delay() const { return delay_; }
  const char* what() const noexcept override { return "snoozed"; }

 private:
  std::chrono::milliseconds delay_;
};

// What a failed execution threw, as hooks see it.
struct JobError {
  std::string error_class;  // the exception's type, e.g. "std::runtime_error"
  std::string message;      // what()
};

// Options of one job class, like Sidekiq's sidekiq_options and blocks.
struct JobClassOptions {
  // Called after a failure that may be retried, with the retry count (0 on
  // the first failure) and the error. Empty: RetryIn::Default().
  std::function<RetryIn(int count, const JobError& error)> retry_in;
  // Called once when the job will not be retried any more (its retries are
  // used up, or its `retry` is 0), before it goes to the dead set
  // (Sidekiq's sidekiq_retries_exhausted).
  std::function<void(const JobView& job, const JobError& error)> on_retries_exhausted;
  // How long a job of this class may run (0: the server's default, see
  // ServerOptions::job_timeouts). A job's own `timeout` field wins.
  std::chrono::milliseconds timeout{0};
  // The most times a job of this class may snooze (JobSnooze) before a
  // snooze fails it; empty: ServerOptions::max_snoozes.
  std::optional<int> max_snoozes;
};

// Job class name -> handler. Header-only, so that a plugin built against
// these headers needs no symbol of the library to register its classes.
class HandlerRegistry {
 public:
  // Adds or replaces the handler (and options) for `job_class`.
  void Register(std::string job_class, Handler handler, JobClassOptions options = {}) {
    handlers_[std::move(job_class)] = Entry{std::move(handler), std::move(options)};
  }

  // The handler for `job_class`, or nullptr when none is registered.
  const Handler* Find(std::string_view job_class) const {
    auto it = handlers_.find(job_class);
    return it == handlers_.end() ? nullptr : &it->second.handler;
  }

  // The options of `job_class`, or nullptr when it is not registered.
  const JobClassOptions* Options(std::string_view job_class) const {
    auto it = handlers_.find(job_class);
    return it == handlers_.end() ? nullptr : &it->second.options;
  }

  // The registered class names, sorted.
  std::vector<std::string> Classes() const {
    std::vector<std::string> names;
    for (const auto& [name, handler] : handlers_) names.push_back(name);
    return names;
  }

  bool empty() const { return handlers_.empty(); }

 private:
  struct Entry {
    Handler handler;
    JobClassOptions options;
  };
  std::map<std::string, Entry, std::less<>> handlers_;
};

}  // namespace reliableq

#endif  // RELIABLEQ_HANDLER_H_
