// HttpCaller: runs a job by POSTing its JSON to a URL (an HTTP handler).
// It reports how the call ended (HttpCallOutcome, described in one line);
// what the answer means for the job is ClassifyStatus's and
// RetryAfterDelay's, pure functions below (reliableq(1), OUTCOMES).
//
//   Result<std::unique_ptr<HttpCaller>> caller = HttpCaller::Open();
//   HttpCallRequest request;
//   request.url = "http://127.0.0.1:8080/jobs";
//   request.body = job_json;
//   request.timeout = std::chrono::seconds(30);
//   HttpCallOutcome outcome = (*caller)->Post(request, stop_source.get_token());
//   if (!outcome.succeeded()) fail_job(outcome.Describe());
//
// libcurl does the HTTP: loaded at run time by Open (see curl_library.h),
// so that a worker without HTTP handlers never maps it. Connections are
// kept alive: each call takes a channel (a libcurl handle with the cache of
// its open connections) from a pool and gives it back, so calls one after
// another to the same server reuse one TCP connection, and N calls at the
// same time use N connections. A connection that failed mid-call is
// closed, never reused.
//
// Redirects are not followed unless asked (then at most 5, like curl -L,
// which resends a 301/302/303 as a GET), and only to http or https. Proxy
// variables (http_proxy, https_proxy, no_proxy) apply as they do to curl.
//
// Credentials: a URL may hold "user:password@", and a token in its query;
// they are sent but never appear in an outcome's error or description, nor
// in CheckUrl's text (RedactUrls, redis_options.h, masks both wherever a
// URL is shown).
//
// Thread safety: Post from any number of threads at once; CheckUrl is pure.

#ifndef RELIABLEQ_EXEC_HTTP_CALLER_H_
#define RELIABLEQ_EXEC_HTTP_CALLER_H_

#include <time.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "reliableq/status.h"

namespace reliableq::exec {

class CurlLibrary;

struct HttpCallRequest {
  std::string url;                       // http:// or https:// only
  std::vector<std::string> headers;      // extra "Name: value" lines (no line breaks)
  std::string_view body;                 // the job JSON; sent as Content-Type: application/json
  std::chrono::milliseconds timeout{0};  // the whole request, connecting included; 0: none
  std::chrono::milliseconds connect_timeout{10000};  // 0: libcurl's (300 s)
  bool follow_redirects = false;                     // when true: at most 5, same rules as curl -L
  size_t response_limit = 4096;  // bytes of the response body kept (the first ones)
};

struct HttpCallOutcome {
  enum class End { kResponse, kTimedOut, kStopped, kTransportError };
  End end = End::kTransportError;
  long status = 0;   // kResponse: the HTTP status
  std::string body;  // kResponse: at most response_limit bytes of the body (the first ones)
  // kTransportError, kTimedOut: libcurl's message (never the URL's credentials).
  std::string error;
  std::chrono::milliseconds elapsed{0};
  // kTransportError: a short name of what failed ("could not connect", "TLS
  // error", ...), the start of Describe().
  std::string error_kind;
  // kResponse: a 3xx answer with a Location that was not followed because
  // the request did not ask to follow redirects.
  bool redirect_not_followed = false;
  // kResponse: the answer's Retry-After header as it came ("" without
  // one), and the delay it asks for (RetryAfterDelay at the answer's
  // arrival; empty without one or when it is neither form).
  std::string retry_after;
  std::optional<std::chrono::milliseconds> retry_after_delay;

  bool succeeded() const { return end == End::kResponse && status >= 200 && status < 300; }
  // One line: "HTTP 503", "HTTP 302 (redirects are not followed)", "timed
  // out after 2 s", "stopped by the worker", "could not connect: <libcurl's
  // message>".
  std::string Describe() const;
};

// What an answer's status says of the job, as HTTP means it.
enum class HttpStatusClass {
  kSuccess,      // 2xx: done
  kTryAgain,     // 408, 425, 429 and 5xx: the same request may succeed later
  kClientError,  // any other 4xx: this request will not succeed
  kOther,        // 1xx and 3xx as final answers, and anything else
};
HttpStatusClass ClassifyStatus(long status);

// The longest delay a Retry-After may ask for; a longer one counts as this.
constexpr std::chrono::seconds kMostRetryAfter{3600};

// The delay a Retry-After header's `value` asks for, counted from `now`:
// delta-seconds ("120") or an HTTP-date ("Wed, 21 Oct 2015 07:28:00 GMT"),
// the date read by `parse_date` (libcurl's curl_getdate: it returns -1 for
// text it cannot read). Bounded to [0, kMostRetryAfter]: a date in the
// past is 0. nullopt for anything else (an empty value, "-5", "1.5",
// "soon").
std::optional<std::chrono::milliseconds> RetryAfterDelay(
    std::string_view value, std::chrono::system_clock::time_point now,
    time_t (*parse_date)(const char* text, const time_t* unused));

class HttpCaller {
 public:
  // Loads libcurl (CurlLibrary::Load: kNotFound when it is missing). Any
  // thread may then call Post.
  static Result<std::unique_ptr<HttpCaller>> Open();

  ~HttpCaller();
  HttpCaller(const HttpCaller&) = delete;
  HttpCaller& operator=(const HttpCaller&) = delete;

  // POSTs request.body to request.url and waits for the whole answer, the
  // timeout or `stop`. When stop is requested (from any thread) the
  // transfer is abandoned at once, its connection closed, and the outcome
  // is kStopped. The body of the answer past response_limit is read and
  // dropped: a server answering 1 GB costs time, not memory. A URL that
  // CheckUrl refuses gives kTransportError.
  HttpCallOutcome Post(const HttpCallRequest& request, std::stop_token stop);

  // For configuration, without libcurl: OK for an http or https URL with a
  // host (and, if any, a port 1..65535); kInvalidArgument with the reason
  // otherwise, naming the URL without its credentials.
  static Status CheckUrl(std::string_view url);

 private:
  struct Channel;

  explicit HttpCaller(const CurlLibrary& curl);
  // An idle channel, or a new one; null when libcurl cannot make one.
  std::unique_ptr<Channel> TakeChannel();
  void ReturnChannel(std::unique_ptr<Channel> channel);

  const CurlLibrary& curl_;
  std::mutex mutex_;
  // Last in, first out: the channel used last is the likeliest to hold a
  // connection the server has not closed yet.
  std::vector<std::unique_ptr<Channel>> idle_;  // guarded by mutex_
};

}  // namespace reliableq::exec

#endif  // RELIABLEQ_EXEC_HTTP_CALLER_H_
