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
// error_class and error_message. A handler may be called again for the same
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

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace reliableq {

// A fetched job as its handler sees it. Valid only for the duration of the
// handler call; copy what must outlive it.
class JobView {
 public:
  // Made by the server from the exact payload it fetched and the queue it
  // fetched it from. `document` is the parsed payload; it must be an object
  // with a string "class" and an array "args".
  JobView(std::string_view raw, std::string_view queue, const rapidjson::Document& document)
      : raw_(raw), queue_(queue), document_(document) {}

  JobView(const JobView&) = delete;
  JobView& operator=(const JobView&) = delete;

  // The job's `jid`, or "" if the payload has none.
  std::string_view jid() const { return StringField("jid"); }
  // The job's `class`.
  std::string_view job_class() const { return StringField("class"); }
  // The queue the job was fetched from.
  std::string_view queue() const { return queue_; }
  // The job's `args`: always a JSON array.
  const rapidjson::Value& args() const { return document_["args"]; }
  // The job's `retry_count`: absent on a first attempt, 0 after the first
  // failure, +1 after each later one (Sidekiq's meaning).
  std::optional<int> retry_count() const {
    auto it = document_.FindMember("retry_count");
    if (it == document_.MemberEnd() || !it->value.IsInt()) return std::nullopt;
    return it->value.GetInt();
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
};

// Runs one job. Throw to fail it.
using Handler = std::function<void(const JobView& job)>;

// Job class name -> handler. Header-only, so that a plugin built against
// these headers needs no symbol of the library to register its classes.
class HandlerRegistry {
 public:
  // Adds or replaces the handler for `job_class`.
  void Register(std::string job_class, Handler handler) {
    handlers_[std::move(job_class)] = std::move(handler);
  }

  // The handler for `job_class`, or nullptr when none is registered.
  const Handler* Find(std::string_view job_class) const {
    auto it = handlers_.find(job_class);
    return it == handlers_.end() ? nullptr : &it->second;
  }

  // The registered class names, sorted.
  std::vector<std::string> Classes() const {
    std::vector<std::string> names;
    for (const auto& [name, handler] : handlers_) names.push_back(name);
    return names;
  }

  bool empty() const { return handlers_.empty(); }

 private:
  std::map<std::string, Handler, std::less<>> handlers_;
};

}  // namespace reliableq

#endif  // RELIABLEQ_HANDLER_H_
