// Redis Cluster's hash slots: which of the 16384 slots a key lives in, as
// the cluster computes it (the cluster specification, "Key distribution
// model"): CRC16 (XMODEM) of the key, modulo 16384, where a key with a hash
// tag (the text between its first '{' and the first '}' after it, when
// that text is not empty) hashes the tag only. The layout-2 key names put
// "{group}" in every key so that a group's keys share one slot.
//
// Thread safety: pure functions.

#ifndef RELIABLEQ_REDIS_KEY_SLOT_H_
#define RELIABLEQ_REDIS_KEY_SLOT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "reliableq/redis_options.h"

namespace reliableq::redis {

inline constexpr int kClusterSlots = 16384;

// CRC16-XMODEM (polynomial 0x1021, initial value 0) of `data`.
uint16_t Crc16(std::string_view data);

// The slot of `key`, as CLUSTER KEYSLOT answers.
uint16_t KeySlot(std::string_view key);

// The key whose slot a cluster connection serves: cluster.route_key, or
// "{group}" when it is empty.
std::string ClusterRouteKey(const RedisOptions& options);
// KeySlot(ClusterRouteKey(options)).
int ClusterSlot(const RedisOptions& options);

}  // namespace reliableq::redis

#endif  // RELIABLEQ_REDIS_KEY_SLOT_H_
