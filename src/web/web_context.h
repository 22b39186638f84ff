// What the handlers of `reliableq web` share: the options, the pool of
// Admin connections, the CSRF token, the audit trail, and the helpers that
// turn results into JSON responses. Private to src/web/.
//
// Thread safety: a Context is immutable after Start, except the pool, which
// locks; handlers run on many threads at once.

#ifndef RELIABLEQ_WEB_WEB_CONTEXT_H_
#define RELIABLEQ_WEB_WEB_CONTEXT_H_

#include <rapidjson/document.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "http/listener.h"
#include "base/log.h"
#include "reliableq/admin.h"
#include "web/admin_pool.h"
#include "web/web_server.h"

namespace reliableq::web {

struct Context {
  WebOptions options;
  std::shared_ptr<const Clock> clock;
  std::unique_ptr<AdminPool> pool;
  std::string csrf_token;  // 64 hex digits
  base::Logger logger;
};

// One request after the checks: authenticated and, for a POST, allowed
// (not read-only, CSRF token and origin checked) with a JSON object body.
struct Call {
  const http::HttpRequest& request;
  http::HttpResponse& response;
  Context& context;
  // The basic-auth user, "token", or the client address when the server
  // has no authentication.
  std::string who;
  // A POST's body, a JSON object; null for a GET.
  rapidjson::Document body;
};
using Handler = std::function<void(Call&)>;

// Registers a GET or POST route with the checks above.
void Get(http::HttpRoutes& server, Context& context, const std::string& pattern, Handler handler);
void Post(http::HttpRoutes& server, Context& context, const std::string& pattern,
          Handler handler);

// Responses.
void SendJson(http::HttpResponse& response, std::string json, int status = 200);
void SendError(http::HttpResponse& response, int status, std::string_view message);
// The HTTP status for a failed call (404 kNotFound, 400 kInvalidArgument,
// 409 kCorruption, 503 when Redis is unreachable, 500 otherwise) and its
// message as {"error"}.
void SendStatus(http::HttpResponse& response, const Status& status);

// A query parameter as a positive integer: `fallback` when absent, nullopt
// (after a 400 response) when not a number from 1 to `max`.
std::optional<int64_t> IntParam(const http::HttpRequest& request, http::HttpResponse& response,
                                const char* name, int64_t fallback, int64_t max);

// A connection from the pool, or nullopt after a 503 response naming why.
std::optional<AdminPool::Lease> BorrowAdmin(Call& call);

// An audit entry: a log line and <prefix>audit (see audit.cc). A failure to
// write it is logged; the action it records has happened.
void Audit(Call& call, Admin& admin, std::string_view action, std::string_view target,
           std::string_view result);

// The routes of each area.
void AddPageRoutes(http::HttpRoutes& server, Context& context);     // assets
void AddReadRoutes(http::HttpRoutes& server, Context& context);     // GET /api/...
void AddActionRoutes(http::HttpRoutes& server, Context& context);   // POST /api/...
void AddMetricsRoutes(http::HttpRoutes& server, Context& context);  // /metrics, /healthz

}  // namespace reliableq::web

#endif  // RELIABLEQ_WEB_WEB_CONTEXT_H_
