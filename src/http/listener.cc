#include "http/listener.h"

#include <civetweb.h>

#include <netdb.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <thread>

namespace reliableq {

namespace {

// What civetweb reports while mg_start runs (why a bind failed), for the
// error Start returns; civetweb calls its log callback on the thread that
// called mg_start.
thread_local std::string* start_errors = nullptr;

int CaptureLog(const struct mg_connection*, const char* message) {
  if (start_errors != nullptr && message != nullptr) {
    if (!start_errors->empty()) start_errors->append("; ");
    start_errors->append(message);
  }
  return 1;  // handled: civetweb writes nothing to stderr
}

// Opens a connection to host:port and closes it at once: it ends the wait
// of civetweb's accepting thread, which looks at its stop flag only between
// waits.
void Poke(const std::string& host, int port) {
  struct addrinfo hints = {};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  struct addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  const char* name = host == "0.0.0.0" ? "127.0.0.1" : host == "::" ? "::1" : host.c_str();
  if (getaddrinfo(name, service.c_str(), &hints, &found) != 0) return;
  int fd = socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    (void)connect(fd, found->ai_addr, found->ai_addrlen);
    close(fd);
  }
  freeaddrinfo(found);
}

}  // namespace

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

std::string HttpRequest::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key.size() == name.size() && strncasecmp(key.data(), name.data(), name.size()) == 0) {
      return value;
    }
  }
  return {};
}

bool HttpRequest::HasHeader(std::string_view name) const {
  for (const auto& header : headers) {
    if (header.first.size() == name.size() &&
        strncasecmp(header.first.data(), name.data(), name.size()) == 0) {
      return true;
    }
  }
  return false;
}

std::optional<std::string> HttpRequest::Param(std::string_view name) const {
  std::string key(name);
  std::string value(query.size() + 1, '\0');
  int length = mg_get_var(query.data(), query.size(), key.c_str(), value.data(), value.size());
  if (length < 0) return std::nullopt;
  value.resize(static_cast<size_t>(length));
  return value;
}

bool MatchPath(std::string_view pattern, std::string_view path, std::vector<std::string>* captures) {
  captures->assign(1, std::string(path));
  while (!pattern.empty() || !path.empty()) {
    size_t p_end = pattern.find('/', 1);
    size_t s_end = path.find('/', 1);
    std::string_view p_segment = pattern.substr(0, p_end);
    std::string_view s_segment = path.substr(0, s_end);
    if (p_segment == "/*") {
      if (s_segment.size() < 2) return false;
      captures->emplace_back(s_segment.substr(1));
    } else if (p_segment != s_segment) {
      return false;
    }
    pattern = p_end == std::string_view::npos ? std::string_view() : pattern.substr(p_end);
    path = s_end == std::string_view::npos ? std::string_view() : path.substr(s_end);
  }
  return true;
}

void HttpRoutes::Get(std::string_view pattern, HttpRouteHandler handler) {
  routes_.push_back({"GET", std::string(pattern), std::move(handler)});
}

void HttpRoutes::Post(std::string_view pattern, HttpRouteHandler handler) {
  routes_.push_back({"POST", std::string(pattern), std::move(handler)});
}

void HttpRoutes::Handle(HttpRequest& request, HttpResponse& response) const {
  bool path_known = false;
  std::vector<std::string> captures;
  for (const Route& route : routes_) {
    if (!MatchPath(route.pattern, request.path, &captures)) continue;
    path_known = true;
    bool head = request.method == "HEAD" && route.method == "GET";
    if (route.method != request.method && !head) continue;
    request.matches = std::move(captures);
    route.handler(request, response);
    FillError(request, response);
    return;
  }
  response.status = path_known ? 405 : 404;
  FillError(request, response);
}

void HttpRoutes::FillError(const HttpRequest& request, HttpResponse& response) const {
  if (response.status >= 400 && response.body.empty() && error_handler_) {
    error_handler_(request, response);
  }
}

int HttpListener::Serve(::mg_connection* connection, void* data) {
  const HttpListener& self = *static_cast<const HttpListener*>(data);
  const struct mg_request_info* info = mg_get_request_info(connection);
  HttpRequest request;
  HttpResponse response;
  request.method = info->request_method != nullptr ? info->request_method : "";
  request.path = info->local_uri != nullptr ? info->local_uri : "/";
  request.query = info->query_string != nullptr ? info->query_string : "";
  request.remote_addr = info->remote_addr;
  for (int i = 0; i < info->num_headers; ++i) {
    request.headers.emplace_back(info->http_headers[i].name, info->http_headers[i].value);
  }
  size_t limit = self.routes_.max_body();
  bool too_large = info->content_length > 0 && static_cast<uint64_t>(info->content_length) > limit;
  char chunk[8192];
  int n;
  while (!too_large && (n = mg_read(connection, chunk, sizeof chunk)) > 0) {
    request.body.append(chunk, static_cast<size_t>(n));
    too_large = request.body.size() > limit;
  }
  if (too_large) {
    response.status = 413;
    self.routes_.FillError(request, response);
  } else {
    self.routes_.Handle(request, response);
  }

  mg_response_header_start(connection, response.status);
  mg_response_header_add(connection, "Content-Type", response.content_type.c_str(), -1);
  std::string length = std::to_string(response.body.size());
  mg_response_header_add(connection, "Content-Length", length.c_str(), -1);
  for (const auto& [name, value] : self.routes_.default_headers()) {
    mg_response_header_add(connection, name.c_str(), value.c_str(), -1);
  }
  for (const auto& [name, value] : response.headers) {
    mg_response_header_add(connection, name.c_str(), value.c_str(), -1);
  }
  // A body left unread would be taken for the next request.
  if (too_large) mg_response_header_add(connection, "Connection", "close", -1);
  mg_response_header_send(connection);
  if (request.method != "HEAD" && !response.body.empty()) {
    mg_write(connection, response.body.data(), response.body.size());
  }
  return response.status;
}

Result<std::unique_ptr<HttpListener>> HttpListener::Start(const HttpAddress& where, int threads,
                                                          HttpRoutes routes, bool keep_alive) {
  std::unique_ptr<HttpListener> listener(new HttpListener());
  listener->routes_ = std::move(routes);
  std::string ports = where.ToString();
  std::string thread_count = std::to_string(threads < 1 ? 1 : threads);
  // A client that stops sending ties up a thread for no longer than this;
  // TCP_NODELAY: a response's head and body go out in separate writes, and
  // the body must not wait for the client's delayed ACK.
  const char* options[] = {"listening_ports", ports.c_str(),
                           "num_threads", thread_count.c_str(),
                           "request_timeout_ms", "3000",
                           "enable_keep_alive", keep_alive ? "yes" : "no",
                           "keep_alive_timeout_ms", "2000",
                           "tcp_nodelay", "1",
                           nullptr};
  struct mg_callbacks callbacks = {};
  callbacks.log_message = CaptureLog;
  std::string errors;
  start_errors = &errors;
  listener->context_ = mg_start(&callbacks, nullptr, options);
  start_errors = nullptr;
  if (listener->context_ == nullptr) {
    return Status::IoError("cannot listen on " + where.ToString() + ": " +
                           (errors.empty() ? "the address cannot be bound" : errors));
  }
  mg_set_request_handler(listener->context_, "/", &HttpListener::Serve, listener.get());
  struct mg_server_port bound[4] = {};
  int count = mg_get_server_ports(listener->context_, 4, bound);
  listener->host_ = where.host;
  listener->port_ = count > 0 ? bound[0].port : where.port;
  return listener;
}

HttpListener::~HttpListener() {
  if (context_ == nullptr) return;
  // mg_stop waits for civetweb's threads, which look at the stop flag
  // between waits of up to 2 s; poking the port ends the accepting
  // thread's wait, so that a stop takes milliseconds, not seconds.
  std::atomic<bool> stopped{false};
  std::thread stopper([this, &stopped] {
    mg_stop(context_);
    stopped = true;
  });
  for (int i = 0; i < 300 && !stopped; ++i) {
    Poke(host_, port_);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stopper.join();
}

std::string HttpListener::address() const { return HttpAddress{host_, port_}.ToString(); }

}  // namespace reliableq
