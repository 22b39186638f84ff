// HttpListener: an HTTP server (cpp-httplib) on threads of its own, for the
// worker's /metrics and /healthz and for `reliableq web`. The socket is bound
// before Start returns, so a taken port or a bad address is an error the
// caller reports at once, and a client may connect as soon as it returns.
//
//   auto where = HttpAddress::Parse("127.0.0.1:9100");
//   auto listener = HttpListener::Start(*where, 2, [&](httplib::Server& s) {
//     s.Get("/healthz", ...);
//   });
//
// Handlers run on the listener's threads, never on a libuv loop: whatever
// they read from a worker must be safe to read from another thread.
//
// Thread safety: Start and the destructor on one thread; port() anywhere.

#ifndef RELIABLEQ_HTTP_LISTENER_H_
#define RELIABLEQ_HTTP_LISTENER_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "reliableq/status.h"

namespace httplib {
class Server;
}

namespace reliableq {

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

class HttpListener {
 public:
  // Binds `where`, lets `routes` add its handlers, and serves on `threads`
  // threads (at least 1) until destroyed. kIoError naming the address and
  // the reason (a port in use, an address this host does not have).
  static Result<std::unique_ptr<HttpListener>> Start(
      const HttpAddress& where, int threads, const std::function<void(httplib::Server&)>& routes);

  // Stops accepting, lets running requests finish, joins the threads.
  ~HttpListener();
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // The port bound (the kernel's choice when asked for 0).
  int port() const { return port_; }
  // Where it listens, as "host:port".
  std::string address() const;

 private:
  HttpListener() = default;

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string host_;
  int port_ = 0;
};

}  // namespace reliableq

#endif  // RELIABLEQ_HTTP_LISTENER_H_
