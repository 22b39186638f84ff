#include "server/redis_time.h"

#include <charconv>
#include <string>
#include <vector>

namespace reliableq::server {

std::optional<double> ReadTimeReply(redis::ReplyRef reply) {
  Result<std::vector<std::string>> parts = redis::ToStrings(reply);
  if (!parts.ok() || parts->size() != 2) return std::nullopt;
  long long seconds = 0, micros = 0;
  for (auto [text, value] : {std::pair{&(*parts)[0], &seconds}, std::pair{&(*parts)[1], &micros}}) {
    const char* end = text->data() + text->size();
    auto [stop, error] = std::from_chars(text->data(), end, *value);
    if (text->empty() || error != std::errc() || stop != end || *value < 0) return std::nullopt;
  }
  return static_cast<double>(seconds) + static_cast<double>(micros) / 1e6;
}

}  // namespace reliableq::server
