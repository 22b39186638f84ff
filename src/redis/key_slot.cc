#include "redis/key_slot.h"

#include <array>

namespace reliableq::redis {

namespace {

// One entry per byte value: a byte at a time rather than a bit at a time.
constexpr std::array<uint16_t, 256> MakeCrc16Table() {
  std::array<uint16_t, 256> table{};
  for (int byte = 0; byte < 256; ++byte) {
    uint16_t crc = static_cast<uint16_t>(byte << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = static_cast<uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    table[static_cast<size_t>(byte)] = crc;
  }
  return table;
}

constexpr std::array<uint16_t, 256> kCrc16Table = MakeCrc16Table();

}  // namespace

uint16_t Crc16(std::string_view data) {
  uint16_t crc = 0;
  for (char c : data) {
    uint8_t index = static_cast<uint8_t>((crc >> 8) ^ static_cast<uint8_t>(c));
    crc = static_cast<uint16_t>((crc << 8) ^ kCrc16Table[index]);
  }
  return crc;
}

uint16_t KeySlot(std::string_view key) {
  size_t open = key.find('{');
  if (open != std::string_view::npos) {
    size_t close = key.find('}', open + 1);
    // "{}" and an unclosed '{' hash the whole key, as Redis does.
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return static_cast<uint16_t>(Crc16(key) & (kClusterSlots - 1));
}

std::string ClusterRouteKey(const RedisOptions& options) {
  return options.cluster.route_key.empty() ? "{" + options.group + "}" : options.cluster.route_key;
}

int ClusterSlot(const RedisOptions& options) { return KeySlot(ClusterRouteKey(options)); }

}  // namespace reliableq::redis
