#include "http/listener.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <exception>

#include "http/mhd_library.h"

namespace reliableq::http {

namespace {

// A bound, listening, non-blocking socket on `where`; kIoError naming it
// and the reason otherwise. Bound here rather than by libmicrohttpd, so that
// the error says why (a port in use, an address this host does not have).
Result<int> Listen(const HttpAddress& where) {
  auto fail = [&where](const char* why) {
    return Status::IoError("cannot listen on " + where.ToString() + ": " + why);
  };
  struct addrinfo hints = {};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  struct addrinfo* found = nullptr;
  std::string service = std::to_string(where.port);
  if (int rc = getaddrinfo(where.host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return fail(gai_strerror(rc));
  }
  int fd = socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(fd, found->ai_addr, found->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
    int error = errno;
    if (fd >= 0) close(fd);
    freeaddrinfo(found);
    return fail(std::strerror(error));
  }
  freeaddrinfo(found);
  return fd;
}

int BoundPort(int fd) {
  struct sockaddr_storage address = {};
  socklen_t size = sizeof address;
  if (getsockname(fd, reinterpret_cast<struct sockaddr*>(&address), &size) != 0) return 0;
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const struct sockaddr_in6*>(&address)->sin6_port);
  }
  return ntohs(reinterpret_cast<const struct sockaddr_in*>(&address)->sin_port);
}

std::string AddressText(const struct sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = "";
  if (address == nullptr) return text;
  if (address->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const struct sockaddr_in6*>(address)->sin6_addr, text,
              sizeof text);
  } else if (address->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const struct sockaddr_in*>(address)->sin_addr, text,
              sizeof text);
  }
  return text;
}

// Whether the request's Content-Length is over `limit`.
bool DeclaresMoreThan(const HttpRequest& request, size_t limit) {
  std::string text = request.Header("Content-Length");
  uint64_t length = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), length);
  return error == std::errc::result_out_of_range ||
         (error == std::errc() && end == text.data() + text.size() && length > limit);
}

enum MHD_Result AddPair(void* list, enum MHD_ValueKind, const char* key, const char* value) {
  static_cast<HttpHeaders*>(list)->emplace_back(key != nullptr ? key : "",
                                                value != nullptr ? value : "");
  return MHD_YES;
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
  for (const auto& [key, value] : params) {
    if (key == name) return value;
  }
  return std::nullopt;
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

// One request on its way through: read on libmicrohttpd's thread, run on a
// handler thread, answered on libmicrohttpd's thread again.
struct HttpListener::Exchange {
  ::MHD_Connection* connection = nullptr;
  HttpRequest request;
  HttpResponse response;
  bool too_large = false;
  // Set by the handler thread before it resumes the connection.
  std::atomic<bool> answered{false};
};

struct ListenerCallbacks {
  using Exchange = HttpListener::Exchange;

  // Called when a request's head has come, for each piece of its body,
  // once it is whole, and again after a handler thread answered it.
  static enum MHD_Result Access(void* data, struct MHD_Connection* connection, const char* url,
                                const char* method, const char*, const char* upload,
                                size_t* upload_size, void** state) {
    HttpListener& self = *static_cast<HttpListener*>(data);
    auto* exchange = static_cast<Exchange*>(*state);
    if (exchange == nullptr) {
      exchange = new Exchange();
      *state = exchange;
      exchange->connection = connection;
      Begin(self, connection, url, method, exchange->request);
      // Refused before its body is read: the connection closes after.
      if (DeclaresMoreThan(exchange->request, self.routes_.max_body())) {
        return TooLarge(self, *exchange);
      }
      return MHD_YES;
    }
    if (*upload_size > 0) {
      std::string& body = exchange->request.body;
      if (!exchange->too_large) body.append(upload, *upload_size);
      exchange->too_large = exchange->too_large || body.size() > self.routes_.max_body();
      *upload_size = 0;
      return MHD_YES;
    }
    if (exchange->answered.load(std::memory_order_acquire)) return Respond(self, *exchange);
    if (exchange->too_large) return TooLarge(self, *exchange);
    {
      std::lock_guard<std::mutex> lock(self.mutex_);
      if (!self.stopping_) {
        // Suspended first: a handler thread may resume it as soon as it is
        // in the queue.
        self.mhd_->suspend_connection(connection);
        self.waiting_.push_back(exchange);
        self.work_ready_.notify_one();
        return MHD_YES;
      }
    }
    exchange->response.status = 503;
    self.routes_.FillError(exchange->request, exchange->response);
    return Respond(self, *exchange);
  }

  static void Completed(void*, struct MHD_Connection*, void** state,
                        enum MHD_RequestTerminationCode) {
    delete static_cast<Exchange*>(*state);
    *state = nullptr;
  }

  static void Begin(const HttpListener& self, struct MHD_Connection* connection, const char* url,
                    const char* method, HttpRequest& request) {
    request.method = method != nullptr ? method : "";
    request.path = url != nullptr && *url != '\0' ? url : "/";
    self.mhd_->get_connection_values(connection, MHD_HEADER_KIND, &AddPair, &request.headers);
    self.mhd_->get_connection_values(connection, MHD_GET_ARGUMENT_KIND, &AddPair,
                                     &request.params);
    const union MHD_ConnectionInfo* info =
        self.mhd_->get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    request.remote_addr = AddressText(info != nullptr ? info->client_addr : nullptr);
  }

  static enum MHD_Result TooLarge(const HttpListener& self, Exchange& exchange) {
    exchange.too_large = true;
    exchange.response.status = 413;
    self.routes_.FillError(exchange.request, exchange.response);
    return Respond(self, exchange);
  }

  static enum MHD_Result Respond(const HttpListener& self, Exchange& exchange) {
    const HttpResponse& response = exchange.response;
    struct MHD_Response* reply = self.mhd_->create_response_from_buffer(
        response.body.size(), const_cast<char*>(response.body.data()), MHD_RESPMEM_MUST_COPY);
    if (reply == nullptr) return MHD_NO;
    self.mhd_->add_response_header(reply, "Content-Type", response.content_type.c_str());
    for (const auto& [name, value] : self.routes_.default_headers()) {
      self.mhd_->add_response_header(reply, name.c_str(), value.c_str());
    }
    for (const auto& [name, value] : response.headers) {
      self.mhd_->add_response_header(reply, name.c_str(), value.c_str());
    }
    // A body left unread would be taken for the next request.
    if (exchange.too_large || !self.keep_alive_) {
      self.mhd_->add_response_header(reply, "Connection", "close");
    }
    enum MHD_Result queued =
        self.mhd_->queue_response(exchange.connection, static_cast<unsigned>(response.status), reply);
    self.mhd_->destroy_response(reply);
    return queued;
  }
};

void HttpListener::Work() {
  for (;;) {
    Exchange* exchange = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [this] { return stopping_ || !waiting_.empty(); });
      if (waiting_.empty()) return;
      exchange = waiting_.front();
      waiting_.pop_front();
    }
    try {
      routes_.Handle(exchange->request, exchange->response);
    } catch (const std::exception&) {
      exchange->response = HttpResponse();
      exchange->response.status = 500;
      routes_.FillError(exchange->request, exchange->response);
    }
    // Nothing here touches the exchange after the resume: libmicrohttpd's
    // thread answers it and then frees it.
    ::MHD_Connection* connection = exchange->connection;
    exchange->answered.store(true, std::memory_order_release);
    mhd_->resume_connection(connection);
  }
}

Result<std::unique_ptr<HttpListener>> HttpListener::Start(const HttpAddress& where, int threads,
                                                          HttpRoutes routes, bool keep_alive) {
  Result<const MhdLibrary*> mhd = MhdLibrary::Load();
  if (!mhd.ok()) return mhd.status();
  Result<int> fd = Listen(where);
  if (!fd.ok()) return fd.status();
  std::unique_ptr<HttpListener> listener(new HttpListener());
  listener->mhd_ = *mhd;
  listener->routes_ = std::move(routes);
  listener->keep_alive_ = keep_alive;
  listener->host_ = where.host;
  listener->port_ = BoundPort(*fd);
  for (int i = 0; i < std::max(threads, 1); ++i) {
    listener->workers_.emplace_back(&HttpListener::Work, listener.get());
  }
  // One thread of libmicrohttpd's reads every connection (epoll), and hands
  // whole requests to the workers above; suspended meanwhile, a connection
  // neither times out nor is read.
  listener->daemon_ = listener->mhd_->start_daemon(
      MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME, 0, nullptr, nullptr,
      &ListenerCallbacks::Access, listener.get(), MHD_OPTION_LISTEN_SOCKET, *fd,
      MHD_OPTION_CONNECTION_LIMIT, kMaxConnections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
      kMaxConnectionsPerClient, MHD_OPTION_CONNECTION_TIMEOUT,
      static_cast<unsigned>(kIdleTimeout.count()), MHD_OPTION_NOTIFY_COMPLETED,
      &ListenerCallbacks::Completed, listener.get(), MHD_OPTION_END);
  if (listener->daemon_ == nullptr) {
    close(*fd);
    return Status::IoError("cannot serve HTTP on " + where.ToString() +
                           ": libmicrohttpd did not start");
  }
  return listener;
}

HttpListener::~HttpListener() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  // The workers answer every waiting request before they end, so that no
  // connection is suspended when the daemon stops (libmicrohttpd's rule).
  for (std::thread& worker : workers_) worker.join();
  if (daemon_ != nullptr) mhd_->stop_daemon(daemon_);
}

std::string HttpListener::address() const { return HttpAddress{host_, port_}.ToString(); }

}  // namespace reliableq::http
