// HTTP handlers' client: real POSTs to an HTTP server in this process, on a
// loopback port of its own.
//
// The server is cpp-httplib's, not the project's own listener: the
// keep-alive test counts the client ports the server sees, which
// HttpRequest does not carry.

#include "exec/http_caller.h"

#include <doctest/doctest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "exec/curl_library.h"
#include "reliableq/redis_options.h"  // RedactUrls

using namespace reliableq;
using namespace reliableq::exec;
using namespace std::chrono_literals;

namespace {

using End = HttpCallOutcome::End;

// An httplib::Server on 127.0.0.1:<free port>, serving on a thread of its
// own until destroyed.
class TestServer {
 public:
  explicit TestServer(const std::function<void(httplib::Server&)>& routes) {
    routes(server_);
    // httplib closes a kept-alive connection after 5 requests by default.
    server_.set_keep_alive_max_count(1000);
    port_ = server_.bind_to_any_port("127.0.0.1");
    REQUIRE(port_ > 0);
    // Bound and listening already: a client may connect before this runs.
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~TestServer() {
    server_.stop();
    thread_.join();
  }

  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

std::unique_ptr<HttpCaller> OpenCaller() {
  Result<std::unique_ptr<HttpCaller>> caller = HttpCaller::Open();
  REQUIRE_MESSAGE(caller.ok(), caller.status().ToString());
  return std::move(caller).value();
}

HttpCallRequest PostTo(std::string url, std::string_view body = "{\"jid\":\"abc\"}") {
  HttpCallRequest request;
  request.url = std::move(url);
  request.body = body;
  request.timeout = 10s;
  return request;
}

// A port nothing listens on: bound by the kernel's choice, then closed.
int ClosedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  socklen_t length = sizeof address;
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  close(fd);
  return ntohs(address.sin_port);
}

// A handler that answers after `delay`, or as soon as the test lets it go
// (so that the server's destructor does not wait out the delay).
struct SlowRoute {
  std::atomic<bool> release{false};

  void Serve(httplib::Response& response, std::chrono::milliseconds delay) {
    auto until = std::chrono::steady_clock::now() + delay;
    while (!release && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(10ms);
    }
    response.set_content("late", "text/plain");
  }
};

}  // namespace

TEST_CASE("CurlLibrary::Load opens libcurl once and returns the same library") {
  Result<const CurlLibrary*> first = CurlLibrary::Load();
  REQUIRE_MESSAGE(first.ok(), first.status().ToString());
  Result<const CurlLibrary*> second = CurlLibrary::Load();
  REQUIRE(second.ok());
  CHECK(*first == *second);
  CHECK(std::string((*first)->version()).size() > 0);
}

TEST_CASE("HttpCaller posts the exact body as JSON with the extra headers; 2xx succeeds") {
  std::mutex mutex;
  std::string body, content_type, jid_header, user_agent, method;
  TestServer server([&](httplib::Server& s) {
    s.Post("/jobs", [&](const httplib::Request& request, httplib::Response& response) {
      std::lock_guard<std::mutex> lock(mutex);
      body = request.body;
      content_type = request.get_header_value("Content-Type");
      jid_header = request.get_header_value("X-Reliableq-Jid");
      user_agent = request.get_header_value("User-Agent");
      method = request.method;
      response.status = 201;
      response.set_content("created", "text/plain");
    });
  });
  auto caller = OpenCaller();
  // Large enough that libcurl would otherwise send "Expect: 100-continue".
  std::string json = R"({"class":"EmailJob","args":[")" + std::string(5000, 'a') + R"("]})";
  HttpCallRequest request = PostTo(server.Url("/jobs"), json);
  request.headers = {"X-Reliableq-Jid: abc123"};
  HttpCallOutcome outcome = caller->Post(request, {});
  CHECK_MESSAGE(outcome.succeeded(), outcome.Describe());
  CHECK(outcome.end == End::kResponse);
  CHECK(outcome.status == 201);
  CHECK(outcome.body == "created");
  CHECK(outcome.Describe() == "HTTP 201");
  std::lock_guard<std::mutex> lock(mutex);
  CHECK(method == "POST");
  CHECK(body == json);
  CHECK(content_type == "application/json");
  CHECK(jid_header == "abc123");
  CHECK(user_agent.rfind("reliableq/", 0) == 0);
}

TEST_CASE("HttpCaller sends an empty body, and a body with a NUL byte, as they are") {
  std::mutex mutex;
  std::vector<std::string> bodies;
  TestServer server([&](httplib::Server& s) {
    s.Post("/jobs", [&](const httplib::Request& request, httplib::Response& response) {
      std::lock_guard<std::mutex> lock(mutex);
      bodies.push_back(request.body);
      response.set_content("ok", "text/plain");
    });
  });
  auto caller = OpenCaller();
  const std::string with_nul("a\0b", 3);
  for (std::string_view body : {std::string_view(), std::string_view(with_nul)}) {
    HttpCallOutcome outcome = caller->Post(PostTo(server.Url("/jobs"), body), {});
    CHECK_MESSAGE(outcome.succeeded(), outcome.Describe());
  }
  std::lock_guard<std::mutex> lock(mutex);
  CHECK(bodies == std::vector<std::string>{"", with_nul});
}

TEST_CASE("HttpCaller: a 503 fails with its status and the first response_limit bytes") {
  TestServer server([](httplib::Server& s) {
    s.Post("/jobs", [](const httplib::Request&, httplib::Response& response) {
      response.status = 503;
      response.set_content("busy" + std::string(10000, '.'), "text/plain");
    });
  });
  auto caller = OpenCaller();
  HttpCallRequest request = PostTo(server.Url("/jobs"));
  request.response_limit = 100;
  HttpCallOutcome outcome = caller->Post(request, {});
  CHECK_FALSE(outcome.succeeded());
  CHECK(outcome.end == End::kResponse);
  CHECK(outcome.status == 503);
  CHECK(outcome.body == "busy" + std::string(96, '.'));
  CHECK(outcome.Describe() == "HTTP 503");
}

TEST_CASE("HttpCaller keeps the connection alive across calls, and one per concurrent call") {
  std::mutex mutex;
  std::set<int> client_ports;
  int calls = 0;
  TestServer server([&](httplib::Server& s) {
    s.Post("/jobs", [&](const httplib::Request& request, httplib::Response& response) {
      std::lock_guard<std::mutex> lock(mutex);
      client_ports.insert(request.remote_port);
      ++calls;
      response.set_content("ok", "text/plain");
    });
  });
  auto caller = OpenCaller();
  for (int i = 0; i < 20; ++i) {
    HttpCallOutcome outcome = caller->Post(PostTo(server.Url("/jobs")), {});
    REQUIRE_MESSAGE(outcome.succeeded(), outcome.Describe());
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    CHECK(calls == 20);
    CHECK(client_ports.size() == 1);
    client_ports.clear();
  }

  // Four threads at once: each call has a connection of its own, and the
  // connections are reused after (at most one per thread ever opened).
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        if (!caller->Post(PostTo(server.Url("/jobs")), {}).succeeded()) ++failures;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(failures == 0);
  std::lock_guard<std::mutex> lock(mutex);
  CHECK(calls == 60);
  CHECK(client_ports.size() <= 4);
}

TEST_CASE("HttpCaller does not follow a redirect unless asked") {
  std::atomic<int> target_calls{0};
  TestServer server([&](httplib::Server& s) {
    s.Post("/jobs", [](const httplib::Request&, httplib::Response& response) {
      response.set_redirect("/moved", 302);
    });
    // curl -L's rule: a 302 answer to a POST is followed with a GET.
    s.Get("/moved", [&](const httplib::Request&, httplib::Response& response) {
      ++target_calls;
      response.set_content("moved here", "text/plain");
    });
  });
  auto caller = OpenCaller();
  HttpCallRequest request = PostTo(server.Url("/jobs"));
  HttpCallOutcome outcome = caller->Post(request, {});
  CHECK_FALSE(outcome.succeeded());
  CHECK(outcome.status == 302);
  CHECK(outcome.redirect_not_followed);
  CHECK(outcome.Describe() == "HTTP 302 (redirects are not followed)");
  CHECK(target_calls == 0);

  request.follow_redirects = true;
  outcome = caller->Post(request, {});
  CHECK_MESSAGE(outcome.succeeded(), outcome.Describe());
  CHECK(outcome.body == "moved here");
  CHECK(target_calls == 1);
}

TEST_CASE("HttpCaller: a redirect to another scheme is refused even when following") {
  TestServer server([](httplib::Server& s) {
    s.Post("/jobs", [](const httplib::Request&, httplib::Response& response) {
      response.set_redirect("file:///etc/passwd", 302);
    });
  });
  auto caller = OpenCaller();
  HttpCallRequest request = PostTo(server.Url("/jobs"));
  request.follow_redirects = true;
  HttpCallOutcome outcome = caller->Post(request, {});
  CHECK(outcome.end == End::kTransportError);
  CHECK_MESSAGE(outcome.Describe().rfind("protocol not allowed: ", 0) == 0, outcome.Describe());
}

TEST_CASE("HttpCaller: a server slower than the timeout gives kTimedOut at the timeout") {
  SlowRoute slow;
  TestServer server([&](httplib::Server& s) {
    s.Post("/slow",
           [&](const httplib::Request&, httplib::Response& response) { slow.Serve(response, 2s); });
  });
  auto caller = OpenCaller();
  HttpCallRequest request = PostTo(server.Url("/slow"));
  request.timeout = 200ms;
  HttpCallOutcome outcome = caller->Post(request, {});
  slow.release = true;
  CHECK(outcome.end == End::kTimedOut);
  CHECK_FALSE(outcome.succeeded());
  CHECK(outcome.elapsed >= 200ms);
  CHECK(outcome.elapsed < 1s);
  CHECK(outcome.Describe() == "timed out after 0.2 s");
  CHECK_FALSE(outcome.error.empty());
}

TEST_CASE("HttpCaller: a stop requested from another thread ends the call at once") {
  SlowRoute slow;
  TestServer server([&](httplib::Server& s) {
    s.Post("/slow",
           [&](const httplib::Request&, httplib::Response& response) { slow.Serve(response, 5s); });
  });
  auto caller = OpenCaller();
  std::stop_source stop;
  std::atomic<std::chrono::steady_clock::time_point> stopped_at{};
  std::thread stopper([&] {
    std::this_thread::sleep_for(300ms);
    stopped_at = std::chrono::steady_clock::now();
    stop.request_stop();
  });
  HttpCallRequest request = PostTo(server.Url("/slow"));
  request.timeout = 0ms;  // none: only the stop ends it
  HttpCallOutcome outcome = caller->Post(request, stop.get_token());
  auto returned_at = std::chrono::steady_clock::now();
  stopper.join();
  slow.release = true;
  CHECK(outcome.end == End::kStopped);
  CHECK(outcome.Describe() == "stopped by the worker");
  // Well under the 1 s libcurl may wait for the socket when nothing wakes it.
  CHECK(returned_at - stopped_at.load() < 500ms);

  // Already stopped: no request at all.
  outcome = caller->Post(PostTo(server.Url("/slow")), stop.get_token());
  CHECK(outcome.end == End::kStopped);
}

TEST_CASE("HttpCaller: a closed port is a transport error naming it, without credentials") {
  int port = ClosedPort();
  auto caller = OpenCaller();
  HttpCallOutcome outcome =
      caller->Post(PostTo("http://127.0.0.1:" + std::to_string(port) + "/jobs"), {});
  CHECK(outcome.end == End::kTransportError);
  CHECK_FALSE(outcome.succeeded());
  CHECK(outcome.error.find(std::to_string(port)) != std::string::npos);
  CHECK_MESSAGE(outcome.Describe().rfind("could not connect: ", 0) == 0, outcome.Describe());

  outcome =
      caller->Post(PostTo("http://user:secret@127.0.0.1:" + std::to_string(port) + "/jobs"), {});
  CHECK(outcome.end == End::kTransportError);
  CHECK(outcome.error.find("secret") == std::string::npos);
  CHECK(outcome.Describe().find("secret") == std::string::npos);

  // Refused before any connection: the reason, without the password.
  outcome = caller->Post(PostTo("ftp://user:secret@127.0.0.1/jobs"), {});
  CHECK(outcome.end == End::kTransportError);
  CHECK(outcome.Describe().find("secret") == std::string::npos);
  CHECK(outcome.Describe().find("http or https") != std::string::npos);

  HttpCallRequest request = PostTo("http://127.0.0.1:" + std::to_string(port) + "/jobs");
  request.headers = {"X-Evil: a\r\nX-Injected: b"};
  outcome = caller->Post(request, {});
  CHECK(outcome.end == End::kTransportError);
  CHECK(outcome.Describe() == "bad header: a header line holds a line break");
}

TEST_CASE("HttpCaller sends the URL's credentials as basic authentication") {
  std::mutex mutex;
  std::string authorization;
  TestServer server([&](httplib::Server& s) {
    s.Post("/jobs", [&](const httplib::Request& request, httplib::Response& response) {
      std::lock_guard<std::mutex> lock(mutex);
      authorization = request.get_header_value("Authorization");
      response.set_content("ok", "text/plain");
    });
  });
  std::string url = server.Url("/jobs");
  url.insert(url.find("//") + 2, "user:secret@");
  auto caller = OpenCaller();
  HttpCallOutcome outcome = caller->Post(PostTo(url), {});
  CHECK_MESSAGE(outcome.succeeded(), outcome.Describe());
  std::lock_guard<std::mutex> lock(mutex);
  CHECK(authorization == "Basic dXNlcjpzZWNyZXQ=");  // base64("user:secret")
}

TEST_CASE("HttpCaller keeps response_limit bytes of a 50 MB answer") {
  constexpr size_t kSize = 50u << 20;
  TestServer server([](httplib::Server& s) {
    s.Post("/huge", [](const httplib::Request&, httplib::Response& response) {
      response.set_content_provider(kSize, "application/octet-stream",
                                    [](size_t offset, size_t length, httplib::DataSink& sink) {
                                      std::string chunk(std::min<size_t>(length, 64 << 10), 'z');
                                      if (offset == 0) chunk[0] = 'A';
                                      return sink.write(chunk.data(), chunk.size());
                                    });
    });
  });
  auto caller = OpenCaller();
  HttpCallRequest request = PostTo(server.Url("/huge"));
  request.timeout = 60s;
  request.response_limit = 1000;
  HttpCallOutcome outcome = caller->Post(request, {});
  CHECK_MESSAGE(outcome.succeeded(), outcome.Describe());
  CHECK(outcome.body == "A" + std::string(999, 'z'));
}

TEST_CASE("HttpCaller::CheckUrl takes http and https URLs with a host, and only those") {
  for (const char* good : {"http://h:1/x", "https://h/x", "HTTP://h", "http://u:p@h:65535/x?y",
                           "http://[::1]:8080/jobs", "https://h?q"}) {
    CAPTURE(good);
    CHECK(HttpCaller::CheckUrl(good).ok());
  }
  for (const char* bad : {"ftp://h/x", "file:///etc/passwd", "nonsense", "", "http://", "http:///x",
                          "http://h:0/", "http://h:65536/", "http://h:x/", "http://h:/x",
                          "http://[::1/x", "http://h x/", "http://u:p@/x", "://h/x"}) {
    CAPTURE(bad);
    Status status = HttpCaller::CheckUrl(bad);
    CHECK(status.code() == Status::Code::kInvalidArgument);
    CHECK_FALSE(status.message().empty());
  }
  Status status = HttpCaller::CheckUrl("ftp://user:secret@h/x");
  CHECK(status.message().find("secret") == std::string::npos);
  CHECK(status.message().find("ftp://user:***@h/x") != std::string::npos);
}

TEST_CASE("a handler URL is shown with its user info and query values masked") {
  CHECK(reliableq::RedactUrls("http://user:secret@h:1/x") == "http://user:***@h:1/x");
  CHECK(reliableq::RedactUrls("https://token@h/x") == "https://***@h/x");
  CHECK(reliableq::RedactUrls("https://h/x?token=s3cret&v=2#top") == "https://h/x?token=***&v=***#top");
  CHECK(reliableq::RedactUrls("http://h/x") == "http://h/x");
  Status status = HttpCaller::CheckUrl("ftp://h/x?token=s3cret");
  CHECK(status.message().find("s3cret") == std::string::npos);
  CHECK(status.message().find("ftp://h/x?token=***") != std::string::npos);
}
