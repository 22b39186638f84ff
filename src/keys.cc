#include "keys.h"

#include <ctime>

namespace reliableq {

std::string_view Keys::QueueName(std::string_view key) {
  constexpr std::string_view kPrefix = "queue:";
  if (key.substr(0, kPrefix.size()) != kPrefix) return {};
  return key.substr(kPrefix.size());
}

std::string Keys::ClientName(std::string_view identity) const {
  std::string name = prefix_ + std::string(identity);
  for (char& c : name) {
    if (c == ' ' || c == '\n' || c == '\r') c = '_';
  }
  return name;
}

std::string UtcDate(double epoch_seconds) {
  time_t t = static_cast<time_t>(epoch_seconds);
  tm parts;
  gmtime_r(&t, &parts);
  char buf[16];
  strftime(buf, sizeof buf, "%Y-%m-%d", &parts);
  return buf;
}

}  // namespace reliableq
