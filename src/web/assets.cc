// The page itself: index.html at "/" and its files under /assets/, embedded
// at build time (tools/embed_assets.py). The page checks with the server on
// every load (no-cache), so an upgrade is seen at once.


#include "web/web_context.h"
#include "web_assets.h"

namespace reliableq::web {

void AddPageRoutes(http::HttpRoutes& server, Context& context) {
  Handler serve = [](Call& call) {
    const WebAsset* asset = FindWebAsset(call.request.path);
    if (asset == nullptr) return SendError(call.response, 404, "not found");
    call.response.SetHeader("Cache-Control", "no-cache");
    call.response.SetContent(std::string(asset->body), std::string(asset->content_type).c_str());
  };
  Get(server, context, "/", serve);
  Get(server, context, "/assets/*", serve);
}

}  // namespace reliableq::web
