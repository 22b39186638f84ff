// WebServer: `reliableq web`, the dashboard and its JSON API over HTTP
// (reliableq(1), "web"). It serves the embedded page (src/web/assets/), the
// API under /api/, the cluster's gauges on /metrics and /healthz, on the
// threads of an HttpListener; each request thread borrows a blocking Admin
// from a small pool, so no Redis connection is ever shared between threads.
//
// Safe by default: loopback unless told otherwise, optional basic and
// bearer-token authentication, a CSRF token on every POST, --read-only,
// and an audit entry (log line and <prefix>audit) for every action.
//
// Thread safety: Start and the destructor on one thread; the handlers run
// on the listener's threads.

#ifndef RELIABLEQ_WEB_WEB_SERVER_H_
#define RELIABLEQ_WEB_WEB_SERVER_H_

#include <map>
#include <memory>
#include <string>

#include "http/listener.h"
#include "reliableq/clock.h"
#include "reliableq/logging.h"
#include "reliableq/redis_options.h"
#include "reliableq/status.h"

namespace reliableq::web {

struct WebOptions {
  RedisOptions redis;
  std::string prefix = "reliableq:";
  http::HttpAddress address{"127.0.0.1", 7480};
  // Every POST is refused (403 {"error":"read-only"}).
  bool read_only = false;
  // Basic authentication: user name -> password. Empty: none.
  std::map<std::string, std::string> users;
  // Bearer token ("Authorization: Bearer T"). Empty: none.
  std::string token;
  // With neither users nor token, the API is open to whoever reaches the
  // address: refused for a non-loopback address unless this is set.
  bool insecure_no_auth = false;
  // Threads serving requests (and at most this many Redis connections).
  int threads = 8;
  // How often the page refreshes itself, in ms (GET /api/session).
  int refresh_ms = 5000;
  // Where "now" comes from; empty: SystemClock().
  std::shared_ptr<const Clock> clock;
  // Where the log lines (startup, audit) go; empty: stderr.
  LogSink log;
  // Text or one JSON object a line (reliableq(1), LOGS).
  LogFormat log_format = LogFormat::kText;
};

// True when `host` is a loopback address or "localhost".
bool IsLoopback(const std::string& host);

class WebServer {
 public:
  // Checks the options (kInvalidArgument: a non-loopback address without
  // authentication and without insecure_no_auth), connects to Redis once
  // (kUnavailable/kIoError naming where it tried, without secrets), then
  // binds and serves.
  static Result<std::unique_ptr<WebServer>> Start(WebOptions options);
  ~WebServer();
  WebServer(const WebServer&) = delete;
  WebServer& operator=(const WebServer&) = delete;

  int port() const;
  std::string address() const;

 private:
  struct State;
  WebServer() = default;
  std::shared_ptr<State> state_;
  std::unique_ptr<http::HttpListener> listener_;
};

}  // namespace reliableq::web

#endif  // RELIABLEQ_WEB_WEB_SERVER_H_
