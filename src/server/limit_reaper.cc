// For each limiter declared in `limits`, the holders' processes are read
// from its holders hash and limit_reap.lua frees the slots of those without
// a heartbeat key, in one atomic step per limiter.

#include "server/limit_reaper.h"

#include <rapidjson/document.h>

#include <set>
#include <string>
#include <vector>

#include "protocol/script_calls.h"

namespace reliableq::server {

namespace {

// The concurrency of a definition written by LimitDefinitionJson; 0 when
// it has none or cannot be read (then only dead holders are freed).
int ConcurrencyOf(std::string_view definition) {
  rapidjson::Document doc;
  doc.Parse(definition.data(), definition.size());
  if (doc.HasParseError() || !doc.IsObject()) return 0;
  auto it = doc.FindMember("concurrency");
  if (it == doc.MemberEnd() || !it->value.IsInt() || it->value.GetInt() < 0) return 0;
  return it->value.GetInt();
}

}  // namespace

Result<int64_t> ReapLimits(redis::Connection& redis, const protocol::Keys& keys, double now) {
  auto limits = redis.Command({"HGETALL", keys.Limits()});
  if (!limits.ok()) return limits.status();
  // HGETALL: name, definition, ...
  Result<std::vector<std::string>> all = redis::ToStrings(*limits);
  if (!all.ok()) return int64_t{0};  // not a hash: nothing to reap
  int64_t freed = 0;
  for (size_t i = 0; i + 1 < all->size(); i += 2) {
    const std::string& name = (*all)[i];
    int concurrency = ConcurrencyOf((*all)[i + 1]);
    auto fields = redis.Command({"HKEYS", keys.Limit(name)});
    if (!fields.ok()) return fields.status();
    std::set<std::string> identities;
    Result<std::vector<std::string>> holders = redis::ToStrings(*fields);
    if (!holders.ok()) continue;
    for (std::string_view field : *holders) {
      size_t at = field.find('@');
      if (at != std::string_view::npos) identities.emplace(field.substr(at + 1));
    }
    // Nothing held and nothing that may wait: no script.
    if (identities.empty() && concurrency == 0) continue;
    protocol::LimitTerms terms{name, concurrency, 0, 0};
    auto reaped =
        redis.Eval(protocol::LimitReapCall(keys, terms, {identities.begin(), identities.end()}, now));
    if (!reaped.ok()) return reaped.status();
    Result<protocol::LimitReapReply> read = protocol::ReadLimitReapReply(*reaped);
    if (read.ok()) freed += read->removed;
  }
  return freed;
}

}  // namespace reliableq::server
