// The HTTP layer: addresses and route patterns, and a listener that stays
// answerable while clients hold connections open without a whole request.

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "http/listener.h"

using namespace reliableq;
using namespace reliableq::http;

namespace {

// A connection from `source` (a loopback address) to 127.0.0.1:`port` that
// has sent `text` and then nothing; closed when destroyed.
class IdleConnection {
 public:
  IdleConnection(const char* source, int port, const std::string& text) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in from = {};
    from.sin_family = AF_INET;
    inet_pton(AF_INET, source, &from.sin_addr);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0);
    sockaddr_in to = {};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    REQUIRE(connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0);
    REQUIRE(send(fd_, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size()));
  }
  ~IdleConnection() { close(fd_); }
  IdleConnection(const IdleConnection&) = delete;
  IdleConnection& operator=(const IdleConnection&) = delete;

  // Whether the server closed it within `wait`.
  bool ClosedWithin(std::chrono::milliseconds wait) {
    timeval timeout = {0, static_cast<suseconds_t>(wait.count() * 1000)};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    char byte;
    // Closed with the request unread, the socket may be reset, not ended.
    ssize_t n = recv(fd_, &byte, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }

 private:
  int fd_ = -1;
};

}  // namespace

TEST_CASE("HttpAddress::Parse takes PORT, HOST:PORT and [IPV6]:PORT, loopback by default") {
  CHECK(HttpAddress::Parse("9100")->ToString() == "127.0.0.1:9100");
  CHECK(HttpAddress::Parse("0.0.0.0:80")->ToString() == "0.0.0.0:80");
  CHECK(HttpAddress::Parse("[::1]:7480")->ToString() == "[::1]:7480");
  for (const char* bad : {"", ":80", "host:", "host:65536", "::1:80", "[::1]80", "[::1", "x:-1"}) {
    CAPTURE(bad);
    CHECK(HttpAddress::Parse(bad).status().code() == Status::Code::kInvalidArgument);
  }
}

TEST_CASE("MatchPath matches literal segments and captures each *") {
  std::vector<std::string> captures;
  CHECK(MatchPath("/", "/", &captures));
  CHECK(MatchPath("/api/busy", "/api/busy", &captures));
  CHECK_FALSE(MatchPath("/api/busy", "/api/busy/", &captures));
  CHECK_FALSE(MatchPath("/api/busy", "/api/bus", &captures));
  CHECK_FALSE(MatchPath("/", "/api", &captures));
  REQUIRE(MatchPath("/api/sets/*/*", "/api/sets/dead/retry", &captures));
  CHECK(captures == std::vector<std::string>{"/api/sets/dead/retry", "dead", "retry"});
  CHECK_FALSE(MatchPath("/api/sets/*", "/api/sets/", &captures));  // an empty segment
  CHECK_FALSE(MatchPath("/api/sets/*", "/api/sets/dead/retry", &captures));
  CHECK_FALSE(MatchPath("/api/sets/*/*", "/api/sets/dead", &captures));
  // No recursion per character: a path far longer than any route is fine.
  std::string long_path = "/assets/" + std::string(1 << 20, 'A');
  REQUIRE(MatchPath("/assets/*", long_path, &captures));
  CHECK(captures[1].size() == size_t{1} << 20);
}

TEST_CASE("idle half-sent requests hold no handler thread: /healthz answers under them") {
  // What took `reliableq web` (8 threads) and the worker's endpoint down: 16
  // clients that send a request line and wait held a thread each for 3 s.
  for (bool keep_alive : {true, false}) {
    CAPTURE(keep_alive);
    HttpRoutes routes;
    routes.Get("/healthz", [](const HttpRequest&, HttpResponse& response) {
      response.SetContent("ok", "text/plain");
    });
    auto listener = HttpListener::Start(HttpAddress{"127.0.0.1", 0}, 2, std::move(routes),
                                        keep_alive);
    REQUIRE_MESSAGE(listener.ok(), listener.status().ToString());
    const int port = (*listener)->port();
    std::vector<std::unique_ptr<IdleConnection>> idle;
    // From the probe's own address, below the per-client bound...
    for (int i = 0; i < 24; ++i) {
      idle.push_back(std::make_unique<IdleConnection>("127.0.0.1", port, "GET / HTTP/1.1\r\n"));
    }
    // ...and from another client, past it: those over the bound are closed.
    std::vector<std::unique_ptr<IdleConnection>> greedy;
    for (unsigned i = 0; i < HttpListener::kMaxConnectionsPerClient + 8; ++i) {
      greedy.push_back(std::make_unique<IdleConnection>("127.0.0.2", port, "GET"));
    }
    httplib::Client probe("127.0.0.1", port);
    probe.set_connection_timeout(1, 0);
    probe.set_read_timeout(1, 0);
    for (int i = 0; i < 5; ++i) {
      auto started = std::chrono::steady_clock::now();
      httplib::Result health = probe.Get("/healthz");
      REQUIRE_MESSAGE(health, "probe " << i << " got no answer");
      CHECK(health->status == 200);
      CHECK(health->body == "ok");
      CHECK(std::chrono::steady_clock::now() - started < std::chrono::milliseconds(500));
    }
    int closed = 0;
    for (auto& connection : greedy) closed += connection->ClosedWithin(std::chrono::milliseconds(20));
    CHECK(closed == 8);
  }
}
