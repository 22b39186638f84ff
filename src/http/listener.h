// HttpListener: an HTTP server (GNU libmicrohttpd) on threads of its own,
// for the worker's /metrics and /healthz and for `reliableq web`. The socket
// is bound before Start returns, so a taken port or a bad address is an
// error the caller reports at once, and a client may connect as soon as it
// returns.
//
//   auto where = HttpAddress::Parse("127.0.0.1:9100");
//   HttpRoutes routes;
//   routes.Get("/healthz", [](const HttpRequest&, HttpResponse& response) {
//     response.SetContent("ok", "text/plain");
//   });
//   auto listener = HttpListener::Start(*where, 1, std::move(routes));
//
// One thread reads every connection as its bytes come (libmicrohttpd's
// event loop, epoll on Linux); a request is handed to the handler threads
// only once it is whole. So a client that opens connections and sends
// nothing, or a header a byte at a time, holds no handler thread: it holds
// a connection, and those are bounded (kMaxConnections in all,
// kMaxConnectionsPerClient from one address, each closed after
// kIdleTimeout without a byte). libmicrohttpd rather than civetweb, which
// gave each connection a thread from accept to its response: 8 clients
// that sent half a request made the server unavailable for 3 s at a time.
// It is loaded with dlopen (http/mhd_library.h).
//
// Handlers run on the listener's threads, never on a libuv loop: whatever
// they read from a worker must be safe to read from another thread.
//
// Thread safety: Start and the destructor on one thread; port() anywhere.

#ifndef RELIABLEQ_HTTP_LISTENER_H_
#define RELIABLEQ_HTTP_LISTENER_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "reliableq/status.h"

struct MHD_Daemon;

namespace reliableq::http {

// Where to listen: "PORT" (loopback, 127.0.0.1), "HOST:PORT" or
// "[IPV6]:PORT". Port 0 asks the kernel for a free one (tests).
struct HttpAddress {
  std::string host = "127.0.0.1";
  int port = 0;

  // kInvalidArgument naming the text for anything else (no port, a port
  // outside 0..65535, an empty host, a bracket without its pair).
  static Result<HttpAddress> Parse(std::string_view text);
  // "host:port", with brackets around an IPv6 host.
  std::string ToString() const;
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;       // "GET", "POST", ...
  std::string path;         // URL-decoded, without the query
  HttpHeaders params;       // the query's parameters, URL-decoded, in order
  std::string remote_addr;  // the client's address
  std::string body;
  HttpHeaders headers;
  // The route pattern's match: [0] the whole path, then each "*" segment.
  std::vector<std::string> matches;

  // The first header of that name (case-insensitive); "" when absent.
  std::string Header(std::string_view name) const;
  bool HasHeader(std::string_view name) const;
  // The URL-decoded query parameter `name`; nullopt when absent.
  std::optional<std::string> Param(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "text/plain; charset=utf-8";
  HttpHeaders headers;

  void SetContent(std::string content, std::string_view type) {
    body = std::move(content);
    content_type = std::string(type);
  }
  void SetHeader(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
  }
};

using HttpRouteHandler = std::function<void(const HttpRequest&, HttpResponse&)>;

// What a listener answers: routes by method and a path pattern. A pattern
// is literal but for segments "*", each of which matches one non-empty
// segment of the path and is captured ("/api/sets/*" matches
// "/api/sets/dead"). Not std::regex: libstdc++'s matcher recurses once per
// character, and a long path overflowed the stack of the server's threads.
class HttpRoutes {
 public:
  void Get(std::string_view pattern, HttpRouteHandler handler);
  void Post(std::string_view pattern, HttpRouteHandler handler);
  // Headers added to every response.
  void SetDefaultHeaders(HttpHeaders headers) { default_headers_ = std::move(headers); }
  // Called for a response of status 400 or more with an empty body (no
  // route: 404 or 405; a body over the limit: 413) to fill it.
  void SetErrorHandler(HttpRouteHandler handler) { error_handler_ = std::move(handler); }
  // The largest request body taken (default 1 MiB); larger ones get 413.
  void SetMaxBody(size_t bytes) { max_body_ = bytes; }

  size_t max_body() const { return max_body_; }
  const HttpHeaders& default_headers() const { return default_headers_; }
  // Routes `request` (filling its matches) into `response`.
  void Handle(HttpRequest& request, HttpResponse& response) const;
  // Fills the body of an error response that has none.
  void FillError(const HttpRequest& request, HttpResponse& response) const;

 private:
  struct Route {
    std::string method;
    std::string pattern;
    HttpRouteHandler handler;
  };
  std::vector<Route> routes_;
  HttpHeaders default_headers_;
  HttpRouteHandler error_handler_;
  size_t max_body_ = 1 << 20;
};

// Whether `path` matches `pattern` (see HttpRoutes); fills `captures` with
// the path, then each segment a "*" matched.
bool MatchPath(std::string_view pattern, std::string_view path, std::vector<std::string>* captures);

class MhdLibrary;

class HttpListener {
 public:
  // Open connections, in all and from one client address; a connection
  // past either is closed at once. Idle connections cost a socket and a
  // buffer, not a thread.
  static constexpr unsigned kMaxConnections = 256;
  static constexpr unsigned kMaxConnectionsPerClient = 32;
  // A connection that sends nothing for this long is closed, whether in
  // the middle of a request or kept alive between two.
  static constexpr std::chrono::seconds kIdleTimeout{10};

  // Binds `where` and serves `routes` on `threads` handler threads (at
  // least 1) until destroyed: at most that many requests run at once, and
  // the others wait, read, for a thread. Without `keep_alive` every
  // response closes its connection. kIoError naming the address and the
  // reason (a port in use, an address this host does not have);
  // kNotFound when libmicrohttpd cannot be loaded.
  static Result<std::unique_ptr<HttpListener>> Start(const HttpAddress& where, int threads,
                                                     HttpRoutes routes, bool keep_alive = true);

  // Stops accepting, lets running and waiting requests finish, joins the
  // threads.
  ~HttpListener();
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // The port bound (the kernel's choice when asked for 0).
  int port() const { return port_; }
  // Where it listens, as "host:port".
  std::string address() const;

 private:
  struct Exchange;
  // libmicrohttpd's callbacks, on its thread (listener.cc).
  friend struct ListenerCallbacks;

  HttpListener() = default;
  // A handler thread: runs waiting exchanges until the destructor.
  void Work();

  const MhdLibrary* mhd_ = nullptr;
  ::MHD_Daemon* daemon_ = nullptr;
  HttpRoutes routes_;
  bool keep_alive_ = true;
  std::string host_;
  int port_ = 0;

  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::deque<Exchange*> waiting_;  // guarded by mutex_
  bool stopping_ = false;          // guarded by mutex_
  std::vector<std::thread> workers_;
};

}  // namespace reliableq::http

#endif  // RELIABLEQ_HTTP_LISTENER_H_
