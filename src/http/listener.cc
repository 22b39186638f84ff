#include "http/listener.h"

#include <httplib.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace reliableq {

Result<HttpAddress> HttpAddress::Parse(std::string_view text) {
  auto bad = [&](const char* why) {
    return Status::InvalidArgument("bad HTTP address \"" + std::string(text) + "\": " + why +
                                   " (expected PORT, HOST:PORT or [IPV6]:PORT)");
  };
  HttpAddress address;
  std::string_view port_text = text;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return bad("no closing bracket");
    if (close + 1 >= text.size() || text[close + 1] != ':') return bad("no port after the bracket");
    address.host = std::string(text.substr(1, close - 1));
    port_text = text.substr(close + 2);
  } else if (size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    if (text.find(':') != colon) return bad("an IPv6 host needs brackets");
    address.host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
  }
  if (address.host.empty()) return bad("empty host");
  int port = -1;
  auto [end, error] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || error != std::errc() || end != port_text.data() + port_text.size() ||
      port < 0 || port > 65535) {
    return bad("the port is not a number from 0 to 65535");
  }
  address.port = port;
  return address;
}

std::string HttpAddress::ToString() const {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<std::unique_ptr<HttpListener>> HttpListener::Start(
    const HttpAddress& where, int threads, const std::function<void(httplib::Server&)>& routes) {
  std::unique_ptr<HttpListener> listener(new HttpListener());
  listener->server_ = std::make_unique<httplib::Server>();
  httplib::Server& server = *listener->server_;
  int pool_size = threads < 1 ? 1 : threads;
  server.new_task_queue = [pool_size] { return new httplib::ThreadPool(pool_size); };
  // A client that stops sending ties up a thread for no longer than this.
  server.set_read_timeout(5, 0);
  server.set_write_timeout(5, 0);
  server.set_keep_alive_timeout(5);
  // httplib writes a response's head and body apart; without TCP_NODELAY
  // the body waits for the client's delayed ACK, about 40 ms per response.
  server.set_tcp_nodelay(true);
  routes(server);

  errno = 0;
  int port = where.port;
  bool bound = where.port == 0 ? (port = server.bind_to_any_port(where.host)) > 0
                               : server.bind_to_port(where.host, where.port);
  if (!bound) {
    int saved = errno;
    return Status::IoError("cannot listen on " + where.ToString() + ": " +
                           (saved != 0 ? std::strerror(saved) : "the address cannot be bound"));
  }
  listener->host_ = where.host;
  listener->port_ = port;
  listener->thread_ = std::thread([&server] { server.listen_after_bind(); });
  return listener;
}

HttpListener::~HttpListener() {
  if (server_) {
    // stop() before the loop started is lost; wait until it runs or has
    // returned (listen_after_bind returns at once on a closed socket).
    for (int i = 0; i < 1000 && !server_->is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    server_->stop();
  }
  if (thread_.joinable()) thread_.join();
}

std::string HttpListener::address() const { return HttpAddress{host_, port_}.ToString(); }

}  // namespace reliableq
