// `reliableq web`: start-up, authentication, the checks every POST passes
// (read-only, origin, CSRF token, JSON body) and the security headers. The routes live in api_*.cc, assets.cc and
// cluster_metrics.cc.

#include "web/web_server.h"

#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <strings.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <utility>

#include "base/text_escape.h"
#include "web/web_context.h"

namespace reliableq::web {

namespace {

std::string Hex(const unsigned char* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < size; ++i) {
    out.push_back(kDigits[data[i] >> 4]);
    out.push_back(kDigits[data[i] & 15]);
  }
  return out;
}

// Compares two secrets in a time that depends on neither: their SHA-256
// digests are compared with CRYPTO_memcmp, so not even the length leaks.
bool SameSecret(std::string_view given, std::string_view expected) {
  unsigned char a[SHA256_DIGEST_LENGTH];
  unsigned char b[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(given.data()), given.size(), a);
  SHA256(reinterpret_cast<const unsigned char*>(expected.data()), expected.size(), b);
  return CRYPTO_memcmp(a, b, sizeof a) == 0;
}

std::optional<std::string> Base64Decode(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0 || text.size() > 4096) return std::nullopt;
  std::string out(text.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  size_t padding = text.ends_with("==") ? 2 : text.ends_with("=") ? 1 : 0;
  out.resize(static_cast<size_t>(n) - padding);
  return out;
}

// The credentials of an Authorization header of `scheme` (compared without
// regard to case, RFC 7235) after the spaces that follow it; nullopt for
// another scheme.
std::optional<std::string_view> Credentials(std::string_view header, std::string_view scheme) {
  if (header.size() <= scheme.size() || header[scheme.size()] != ' ' ||
      strncasecmp(header.data(), scheme.data(), scheme.size()) != 0) {
    return std::nullopt;
  }
  header.remove_prefix(scheme.size());
  header.remove_prefix(std::min(header.find_first_not_of(' '), header.size()));
  return header;
}

// Who sent `request`, or nullopt when the server has authentication and the
// request does not carry valid credentials.
std::optional<std::string> Authenticate(const Context& context, const http::HttpRequest& request) {
  const WebOptions& options = context.options;
  if (options.users.empty() && options.token.empty()) return request.remote_addr;
  std::string header = request.Header("Authorization");
  if (std::optional<std::string_view> token = Credentials(header, "Bearer");
      token && !options.token.empty()) {
    if (SameSecret(*token, options.token)) return "token";
    return std::nullopt;
  }
  if (std::optional<std::string_view> basic = Credentials(header, "Basic");
      basic && !options.users.empty()) {
    std::optional<std::string> decoded = Base64Decode(*basic);
    if (!decoded) return std::nullopt;
    size_t colon = decoded->find(':');
    if (colon == std::string::npos) return std::nullopt;
    std::string user = decoded->substr(0, colon);
    auto it = options.users.find(user);
    // An unknown user costs the same comparison as a wrong password.
    bool ok = SameSecret(std::string_view(*decoded).substr(colon + 1),
                         it == options.users.end() ? std::string_view() : it->second);
    if (it == options.users.end() || !ok) return std::nullopt;
    return user;
  }
  return std::nullopt;
}

// Browsers send Origin with every cross-site POST; one that is present must
// name this server as the browser reached it: its scheme (http, the only one
// it speaks) and its Host header. An https:// page of the same host and
// port is another origin.
bool SameOrigin(const http::HttpRequest& request) {
  if (!request.HasHeader("Origin")) return true;
  std::string host = request.Header("Host");
  return !host.empty() && request.Header("Origin") == "http://" + host;
}

// The host part of a Host header ("[::1]:7480" -> "::1").
std::string HostName(std::string_view host) {
  if (host.starts_with('[')) {
    size_t close = host.find(']');
    return std::string(host.substr(1, close == std::string_view::npos ? 0 : close - 1));
  }
  return std::string(host.substr(0, host.rfind(':')));
}

// Without authentication a page anywhere on the web could still reach a
// loopback server through DNS rebinding (its name made to point at
// 127.0.0.1): the browser then sends that name as Host, and Origin to
// match. So a server without authentication on loopback answers only
// requests addressed to a loopback name.
bool HostAllowed(const Context& context, const http::HttpRequest& request) {
  const WebOptions& options = context.options;
  if (!options.users.empty() || !options.token.empty()) return true;
  if (!IsLoopback(options.address.host)) return true;  // --insecure-no-auth: the operator's call
  return IsLoopback(HostName(request.Header("Host")));
}

bool IsJson(const http::HttpRequest& request) {
  std::string type = request.Header("Content-Type");
  return type == "application/json" || type.starts_with("application/json;");
}

// Runs the checks, then `handler`; `post` adds the POST checks.
void Dispatch(Context& context, const Handler& handler, bool post, const http::HttpRequest& request,
              http::HttpResponse& response) {
  if (!HostAllowed(context, request)) {
    return SendError(response, 403, "this server answers only to a loopback host name");
  }
  std::optional<std::string> who = Authenticate(context, request);
  if (!who) {
    response.SetHeader("WWW-Authenticate", "Basic realm=\"reliableq\"");
    SendError(response, 401, "authentication required");
    return;
  }
  Call call{request, response, context, std::move(*who), rapidjson::Document()};
  if (post) {
    if (context.options.read_only) return SendError(response, 403, "read-only");
    if (!SameOrigin(request)) return SendError(response, 403, "cross-origin request refused");
    if (!SameSecret(request.Header("X-CSRF-Token"), context.csrf_token)) {
      return SendError(response, 403, "missing or wrong X-CSRF-Token (see GET /api/session)");
    }
    if (!IsJson(request)) return SendError(response, 415, "the body must be application/json");
    call.body.Parse<rapidjson::kParseIterativeFlag>(request.body.data(), request.body.size());
    if (call.body.HasParseError() || !call.body.IsObject()) {
      return SendError(response, 400, "the body must be a JSON object");
    }
  }
  handler(call);
}

std::string NewCsrfToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return {};
  return Hex(bytes, sizeof bytes);
}

}  // namespace

bool IsLoopback(const std::string& host) {
  if (host == "localhost") return true;
  unsigned char addr[16];
  if (inet_pton(AF_INET, host.c_str(), addr) == 1) return addr[0] == 127;
  if (inet_pton(AF_INET6, host.c_str(), addr) == 1) {
    static const unsigned char kLoopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    return std::memcmp(addr, kLoopback, 16) == 0;
  }
  return false;
}

void SendJson(http::HttpResponse& response, std::string json, int status) {
  response.status = status;
  // Payloads are stored bytes: whatever they hold, the response is UTF-8
  // JSON without control characters a terminal would act on.
  response.SetContent(base::TerminalSafeJson(json), "application/json");
}

void SendError(http::HttpResponse& response, int status, std::string_view message) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.StartObject();
  writer.Key("error");
  writer.String(message.data(), static_cast<rapidjson::SizeType>(message.size()));
  writer.EndObject();
  SendJson(response, buffer.GetString(), status);
}

void SendStatus(http::HttpResponse& response, const Status& status) {
  int code = 500;
  if (status.IsNotFound()) code = 404;
  if (status.IsInvalidArgument()) code = 400;
  if (status.IsCorruption()) code = 409;
  if (status.IsRetryable()) code = 503;
  SendError(response, code, RedactUrls(status.ToString()));
}

std::optional<int64_t> IntParam(const http::HttpRequest& request, http::HttpResponse& response,
                                const char* name, int64_t fallback, int64_t max) {
  if (!request.Param(name).has_value()) return fallback;
  std::string text = request.Param(name).value_or("");
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 1 || value > max) {
    SendError(response, 400,
              std::string(name) + " must be a number from 1 to " + std::to_string(max));
    return std::nullopt;
  }
  return value;
}

void Get(http::HttpRoutes& server, Context& context, const std::string& pattern, Handler handler) {
  server.Get(pattern, [&context, handler = std::move(handler)](const http::HttpRequest& request,
                                                               http::HttpResponse& response) {
    Dispatch(context, handler, false, request, response);
  });
}

void Post(http::HttpRoutes& server, Context& context, const std::string& pattern,
          Handler handler) {
  server.Post(pattern, [&context, handler = std::move(handler)](const http::HttpRequest& request,
                                                                http::HttpResponse& response) {
    Dispatch(context, handler, true, request, response);
  });
}

struct WebServer::State {
  Context context;
};

Result<std::unique_ptr<WebServer>> WebServer::Start(WebOptions options) {
  const bool auth = !options.users.empty() || !options.token.empty();
  if (!auth && !options.insecure_no_auth && !IsLoopback(options.address.host)) {
    return Status::InvalidArgument(
        "refusing to serve " + options.address.ToString() +
        " without authentication: use --basic-auth-file or --token-file, a loopback "
        "address, or --insecure-no-auth");
  }
  std::unique_ptr<WebServer> server(new WebServer());
  server->state_ = std::make_shared<State>();
  Context& context = server->state_->context;
  context.clock = options.clock ? options.clock : SystemClock();
  context.logger = base::Logger(LogLevel::kInfo, options.log, options.log_format);
  context.csrf_token = NewCsrfToken();
  if (context.csrf_token.empty()) return Status::IoError("no random bytes for the CSRF token");
  AdminOptions admin_options;
  admin_options.prefix = options.prefix;
  admin_options.clock = context.clock;
  context.pool = std::make_unique<AdminPool>(options.redis, admin_options);
  context.options = std::move(options);
  {
    // Redis must answer before the address is taken: a mistyped URL fails
    // at once, naming where it tried (never with the password).
    Result<AdminPool::Lease> first = context.pool->Acquire();
    if (!first.ok()) {
      return first.status().WithContext("cannot reach Redis at " +
                                        context.options.redis.Describe());
    }
  }
  http::HttpRoutes http;
  // The largest body an action needs (10,000 ids) is under 1 MiB.
  http.SetMaxBody(4 << 20);
  http.SetDefaultHeaders({
      {"Content-Security-Policy", "default-src 'self'"},
      {"X-Content-Type-Options", "nosniff"},
      {"X-Frame-Options", "DENY"},
      {"Referrer-Policy", "no-referrer"},
  });
  http.SetErrorHandler([](const http::HttpRequest&, http::HttpResponse& response) {
    SendError(response, response.status,
              response.status == 404   ? "not found"
              : response.status == 405 ? "method not allowed"
              : response.status == 413 ? "request body too large"
                                       : "request refused");
  });
  AddPageRoutes(http, context);
  AddReadRoutes(http, context);
  AddActionRoutes(http, context);
  AddMetricsRoutes(http, context);
  Result<std::unique_ptr<http::HttpListener>> listener =
      http::HttpListener::Start(context.options.address, context.options.threads, std::move(http));
  if (!listener.ok()) return listener.status();
  server->listener_ = std::move(listener.value());
  const WebOptions& o = context.options;
  std::string auth_text = !auth ? "none" : !o.users.empty() && !o.token.empty() ? "basic, token"
                                       : !o.users.empty()                   ? "basic"
                                                                            : "token";
  context.logger.Log(LogLevel::kInfo, "web_started",
                     "reliableq web: serving http://%s (Redis %s, auth: %s%s)",
                     server->listener_->address().c_str(), o.redis.Describe().c_str(),
                     auth_text.c_str(), o.read_only ? ", read-only" : "");
  return server;
}

WebServer::~WebServer() {
  // The listener joins its threads first: no handler runs on the context
  // after this line.
  listener_.reset();
}

int WebServer::port() const { return listener_->port(); }

std::string WebServer::address() const { return listener_->address(); }

}  // namespace reliableq::web
