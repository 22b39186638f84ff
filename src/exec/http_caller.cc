#include "exec/http_caller.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <utility>

#include "exec/curl_library.h"
#include "reliableq/redis_options.h"  // RedactUrls
#include "version.h"

namespace reliableq::exec {

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kUserAgent = "reliableq/" RELIABLEQ_VERSION;
constexpr long kMostRedirects = 5;  // curl -L's would be 50: a handler URL is not a web page
// How long one wait for the connection may last when libcurl has no timer
// of its own sooner; a stop does not wait for it (curl_multi_wakeup).
constexpr int kPollMs = 1000;

// Where the "user:password" of `url` is: [begin, end) before its '@', or
// begin == end when it has none.
struct Userinfo {
  size_t begin = 0;
  size_t end = 0;
};

Userinfo FindUserinfo(std::string_view url) {
  size_t start = url.find("://");
  start = start == std::string_view::npos ? 0 : start + 3;
  size_t authority_end = url.find_first_of("/?#", start);
  if (authority_end == std::string_view::npos) authority_end = url.size();
  size_t at = url.substr(0, authority_end).rfind('@');
  if (at == std::string_view::npos || at < start) return {};
  return {start, at};
}

std::string PercentDecoded(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned value = 0;
    if (text[i] == '%' && i + 2 < text.size() &&
        std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16).ptr ==
            text.data() + i + 3) {
      out += static_cast<char>(value);
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

void ReplaceAll(std::string& text, std::string_view secret) {
  if (secret.empty()) return;
  for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at + 3)) {
    text.replace(at, secret.size(), "***");
  }
}

// `text` without the credentials `url` holds, raw or decoded: the password,
// or the user name when there is no password (a token in its place).
std::string WithoutCredentials(std::string text, std::string_view url) {
  Userinfo userinfo = FindUserinfo(url);
  std::string_view secret = url.substr(userinfo.begin, userinfo.end - userinfo.begin);
  if (secret.empty()) return text;
  ReplaceAll(text, secret);
  size_t colon = secret.find(':');
  if (colon != std::string_view::npos) secret.remove_prefix(colon + 1);
  ReplaceAll(text, secret);
  ReplaceAll(text, PercentDecoded(secret));
  return text;
}

// What failed, in a few words, for the start of Describe().
const char* KindOf(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return "host not found";
    case CURLE_COULDNT_CONNECT:
      return "could not connect";
    case CURLE_OPERATION_TIMEDOUT:
      return "connection timed out";
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
      return "TLS error";
    case CURLE_TOO_MANY_REDIRECTS:
      return "too many redirects";
    case CURLE_UNSUPPORTED_PROTOCOL:
      return "protocol not allowed";
    case CURLE_URL_MALFORMAT:
      return "bad URL";
    case CURLE_WEIRD_SERVER_REPLY:
      return "bad response";
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return "connection failed";
    default:
      return "transport error";
  }
}

// "2 s", "0.2 s": tenths of a second, the precision a timeout is set with.
std::string Seconds(std::chrono::milliseconds duration) {
  long long tenths = (duration.count() + 50) / 100;
  std::string text = std::to_string(tenths / 10);
  if (tenths % 10 != 0) text += "." + std::to_string(tenths % 10);
  return text + " s";
}

// Keeps the first `limit` bytes of the response body and reads past the
// rest, so that the connection stays usable and memory stays bounded.
struct BodySink {
  std::string* body;
  size_t limit;

  static size_t Write(char* data, size_t size, size_t count, void* sink_pointer) {
    auto* sink = static_cast<BodySink*>(sink_pointer);
    size_t bytes = size * count;
    size_t room = sink->limit - std::min(sink->limit, sink->body->size());
    sink->body->append(data, std::min(room, bytes));
    return bytes;
  }
};

bool HasLineBreak(std::string_view line) {
  return line.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos;
}

// `text` without the spaces and tabs around it.
std::string_view Trimmed(std::string_view text) {
  size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return {};
  size_t end = text.find_last_not_of(" \t");
  return text.substr(begin, end - begin + 1);
}

}  // namespace

HttpStatusClass ClassifyStatus(long status) {
  if (status >= 200 && status < 300) return HttpStatusClass::kSuccess;
  if (status == 408 || status == 425 || status == 429 || (status >= 500 && status < 600)) {
    return HttpStatusClass::kTryAgain;
  }
  if (status >= 400 && status < 500) return HttpStatusClass::kClientError;
  return HttpStatusClass::kOther;
}

std::optional<std::chrono::milliseconds> RetryAfterDelay(
    std::string_view value, std::chrono::system_clock::time_point now,
    time_t (*parse_date)(const char* text, const time_t* unused)) {
  using std::chrono::milliseconds;
  const milliseconds most = kMostRetryAfter;
  value = Trimmed(value);
  if (value.empty()) return std::nullopt;
  if (value.find_first_not_of("0123456789") == std::string_view::npos) {
    // delta-seconds. More digits than any bound needs are that bound (and
    // cannot overflow).
    if (value.size() > 9) return most;
    unsigned long seconds = 0;
    std::from_chars(value.data(), value.data() + value.size(), seconds);
    return std::min(milliseconds(std::chrono::seconds(seconds)), most);
  }
  // An HTTP-date begins with a letter (the day's name, or the month's in
  // asctime's form); this also keeps "-5" and "1.5" from curl_getdate,
  // which reads more forms than HTTP has.
  if (!std::isalpha(static_cast<unsigned char>(value.front()))) return std::nullopt;
  std::string text(value);
  time_t at = parse_date(text.c_str(), nullptr);
  if (at == -1) return std::nullopt;
  auto left = std::chrono::system_clock::from_time_t(at) - now;
  return std::clamp(std::chrono::ceil<milliseconds>(left), milliseconds(0), most);
}

// One transfer at a time: an easy handle, in the multi handle that owns
// the cache of its connections (kept between calls: keep-alive) and that a
// stop wakes (curl_multi_wakeup) from another thread.
struct HttpCaller::Channel {
  CurlMulti multi;  // declared first, so destroyed after the easy handle
  CurlEasy easy;
};

std::string HttpCallOutcome::Describe() const {
  switch (end) {
    case End::kResponse:
      return "HTTP " + std::to_string(status) +
             (redirect_not_followed ? " (redirects are not followed)" : "");
    case End::kTimedOut:
      return "timed out after " + Seconds(elapsed);
    case End::kStopped:
      return "stopped by the worker";
    case End::kTransportError:
      break;
  }
  std::string line = error_kind.empty() ? "transport error" : error_kind;
  if (!error.empty()) line += ": " + error;
  return line;
}

Result<std::unique_ptr<HttpCaller>> HttpCaller::Open() {
  Result<const CurlLibrary*> curl = CurlLibrary::Load();
  if (!curl.ok()) return curl.status();
  return std::unique_ptr<HttpCaller>(new HttpCaller(**curl));
}

HttpCaller::HttpCaller(const CurlLibrary& curl) : curl_(curl) {}

HttpCaller::~HttpCaller() = default;

std::unique_ptr<HttpCaller::Channel> HttpCaller::TakeChannel() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_.empty()) {
      std::unique_ptr<Channel> channel = std::move(idle_.back());
      idle_.pop_back();
      return channel;
    }
  }
  auto channel = std::make_unique<Channel>();
  channel->multi = CurlMulti(curl_);
  channel->easy = CurlEasy(curl_);
  if (!channel->multi || !channel->easy) return nullptr;
  return channel;
}

void HttpCaller::ReturnChannel(std::unique_ptr<Channel> channel) {
  std::lock_guard<std::mutex> lock(mutex_);
  idle_.push_back(std::move(channel));
}

HttpCallOutcome HttpCaller::Post(const HttpCallRequest& request, std::stop_token stop) {
  const Clock::time_point start = Clock::now();
  HttpCallOutcome outcome;
  auto finish = [&](HttpCallOutcome::End end) {
    outcome.end = end;
    if (end != HttpCallOutcome::End::kResponse) {
      outcome.body.clear();
      outcome.retry_after.clear();
      outcome.retry_after_delay.reset();
    }
    outcome.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    return std::move(outcome);
  };
  auto refuse = [&](std::string kind, std::string error) {
    outcome.error_kind = std::move(kind);
    outcome.error = std::move(error);
    return finish(HttpCallOutcome::End::kTransportError);
  };

  if (Status valid = CheckUrl(request.url); !valid.ok()) return refuse("bad URL", valid.message());
  if (std::any_of(request.headers.begin(), request.headers.end(), HasLineBreak)) {
    return refuse("bad header", "a header line holds a line break");
  }
  if (stop.stop_requested()) return finish(HttpCallOutcome::End::kStopped);

  std::unique_ptr<Channel> channel = TakeChannel();
  if (channel == nullptr) return refuse("transport error", "libcurl could not make a handle");
  CURL* easy = channel->easy.get();
  CURLM* multi = channel->multi.get();

  CurlList headers(curl_);
  // "Expect:" drops the "Expect: 100-continue" libcurl would send with a
  // large body, which costs a round trip, or a second's wait on a server
  // that does not answer it.
  bool listed = headers.Append("Content-Type: application/json") && headers.Append("Expect:");
  for (const std::string& line : request.headers) listed = listed && headers.Append(line.c_str());
  if (!listed) {
    ReturnChannel(std::move(channel));
    return refuse("transport error", "out of memory for the header lines");
  }

  char error_buffer[CURL_ERROR_SIZE] = "";
  BodySink sink{&outcome.body, request.response_limit};
  CURLcode set = CURLE_OK;
  auto option = [&](CURLoption name, auto value) {
    if (set == CURLE_OK) set = curl_.easy_setopt(easy, name, value);
  };
  option(CURLOPT_URL, request.url.c_str());
  option(CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for DNS timeouts: other threads run
  option(CURLOPT_PROTOCOLS_STR, "http,https");
  option(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  option(CURLOPT_FOLLOWLOCATION, request.follow_redirects ? 1L : 0L);
  option(CURLOPT_MAXREDIRS, kMostRedirects);
  option(CURLOPT_POST, 1L);
  // The size first, as libcurl asks; the body is not copied: it outlives
  // the transfer.
  option(CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  // Never null: a null body would make libcurl read one from stdin.
  option(CURLOPT_POSTFIELDS, request.body.empty() ? "" : request.body.data());
  option(CURLOPT_HTTPHEADER, headers.get());
  option(CURLOPT_USERAGENT, kUserAgent);
  option(CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
  option(CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(request.connect_timeout.count()));
  option(CURLOPT_WRITEFUNCTION, &BodySink::Write);
  option(CURLOPT_WRITEDATA, static_cast<void*>(&sink));
  option(CURLOPT_ERRORBUFFER, error_buffer);
  if (set != CURLE_OK) {
    std::string why = curl_.easy_strerror(set);
    curl_.easy_reset(easy);
    ReturnChannel(std::move(channel));
    return refuse("transport error", "libcurl refused an option: " + why);
  }

  bool stopped = false;
  CURLMcode driven = curl_.multi_add_handle(multi, easy);
  if (driven == CURLM_OK) {
    // Wakes the wait below at once from the thread that requests the stop.
    std::stop_callback wake(stop, [this, multi] { curl_.multi_wakeup(multi); });
    for (int running = 1;;) {
      driven = curl_.multi_perform(multi, &running);
      if (driven != CURLM_OK || running == 0) break;
      if (stop.stop_requested()) {
        stopped = true;
        break;
      }
      driven = curl_.multi_poll(multi, nullptr, 0, kPollMs, nullptr);
      if (driven != CURLM_OK) break;
    }
  }
  CURLcode result = CURLE_OK;
  bool done = false;
  int queued = 0;
  while (CURLMsg* message = curl_.multi_info_read(multi, &queued)) {
    if (message->msg == CURLMSG_DONE && message->easy_handle == easy) {
      result = message->data.result;
      done = true;
    }
  }
  long status = 0;
  char* location = nullptr;
  if (done && result == CURLE_OK) {
    curl_.easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    curl_.easy_getinfo(easy, CURLINFO_REDIRECT_URL, &location);
    // The last answer's (request -1), not a redirect's on the way; read
    // before the reset below frees the headers.
    curl_header* retry_after = nullptr;
    if (curl_.easy_header(easy, "Retry-After", 0, CURLH_HEADER, -1, &retry_after) == CURLHE_OK &&
        retry_after != nullptr && retry_after->value != nullptr) {
      outcome.retry_after = retry_after->value;
      outcome.retry_after_delay =
          RetryAfterDelay(outcome.retry_after, std::chrono::system_clock::now(), curl_.getdate);
    }
  }
  bool not_followed = location != nullptr && !request.follow_redirects;
  // Mid-transfer (stopped, failed), this closes the connection: what is
  // left of the answer must not be read as the next call's.
  curl_.multi_remove_handle(multi, easy);
  // No option may point into this call's stack (the error buffer, the sink)
  // while the handle waits in the pool.
  curl_.easy_reset(easy);
  ReturnChannel(std::move(channel));

  if (stopped && !done) return finish(HttpCallOutcome::End::kStopped);
  if (driven != CURLM_OK) {
    return refuse("transport error", std::string("libcurl: ") + curl_.multi_strerror(driven));
  }
  if (!done) return refuse("transport error", "libcurl ended the transfer without a result");
  if (result == CURLE_OK) {
    outcome.status = status;
    outcome.redirect_not_followed = not_followed && status >= 300 && status < 400;
    return finish(HttpCallOutcome::End::kResponse);
  }
  outcome.error = RedactUrls(WithoutCredentials(
      error_buffer[0] != '\0' ? error_buffer : curl_.easy_strerror(result), request.url));
  // The request's own timeout, rather than the connect timeout alone: it
  // had run out (libcurl's clock started after this one).
  if (result == CURLE_OPERATION_TIMEDOUT && request.timeout.count() > 0 &&
      Clock::now() - start >= request.timeout) {
    return finish(HttpCallOutcome::End::kTimedOut);
  }
  outcome.error_kind = KindOf(result);
  return finish(HttpCallOutcome::End::kTransportError);
}

Status HttpCaller::CheckUrl(std::string_view url) {
  if (url.empty()) return Status::InvalidArgument("handler URL is empty");
  const std::string named = "handler URL " + RedactUrls(url);
  if (std::any_of(url.begin(), url.end(),
                  [](char c) { return static_cast<unsigned char>(c) <= ' ' || c == 0x7f; })) {
    return Status::InvalidArgument(named + ": holds a space or a control character");
  }
  size_t separator = url.find("://");
  if (separator == std::string_view::npos) {
    return Status::InvalidArgument(named + ": not an http:// or https:// URL");
  }
  std::string scheme(url.substr(0, separator));
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme != "http" && scheme != "https") {
    return Status::InvalidArgument(named + ": the scheme must be http or https, not " +
                                   (scheme.empty() ? "none" : scheme));
  }
  Userinfo userinfo = FindUserinfo(url);
  size_t host_begin = userinfo.begin == userinfo.end ? separator + 3 : userinfo.end + 1;
  size_t authority_end = url.find_first_of("/?#", host_begin);
  std::string_view authority = url.substr(
      host_begin,
      (authority_end == std::string_view::npos ? url.size() : authority_end) - host_begin);
  std::string_view host = authority;
  std::string_view port;
  bool has_port = false;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return Status::InvalidArgument(named + ": an IPv6 address without its ']'");
    }
    host = authority.substr(0, close + 1);
    std::string_view rest = authority.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') {
      return Status::InvalidArgument(named + ": text after the IPv6 address");
    }
    has_port = !rest.empty();
    if (has_port) port = rest.substr(1);
  } else if (size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    has_port = true;
  }
  if (host.empty() || host == "[]") return Status::InvalidArgument(named + ": no host");
  if (has_port) {
    unsigned number = 0;
    auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), number);
    if (port.empty() || error != std::errc() || end != port.data() + port.size() || number == 0 ||
        number > 65535) {
      return Status::InvalidArgument(named + ": the port must be a number from 1 to 65535");
    }
  }
  return Status::OK();
}

}  // namespace reliableq::exec
