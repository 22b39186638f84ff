// The names `reliableq migrate` moves keys between: a layout-1 key (one
// Redis, Sidekiq's names and reliableq's prefixed ones) and its layout-2
// name in a queue group (reliableq-schema(7), "Key layout for Redis
// Cluster"). Pure; kept apart from keys.h so that the migration states its
// own mapping, which the tests check against the layout's names.
//
// Thread safety: pure functions.

#ifndef RELIABLEQ_MIGRATE_KEY_MAP_H_
#define RELIABLEQ_MIGRATE_KEY_MAP_H_

#include <string>
#include <string_view>

#include "reliableq/status.h"

namespace reliableq::migrate {

// "<prefix>{<group>}:<name>": the layout-2 key of group `group` whose
// layout-1 name, less the prefix, is `name` ("queue:default", "schedule",
// "limit:api:waiting").
std::string GroupKey(std::string_view prefix, std::string_view group, std::string_view name);

// The layout-2 name in group `group` of layout-1 key `key`: GroupKey of
// `key` less `prefix` when `key` starts with `prefix` (reliableq's own
// keys), else of `key` as it is (Sidekiq's).
std::string Layout2Key(std::string_view prefix, std::string_view group, std::string_view key);

// "<prefix>groups": the cluster-wide SET of group names.
std::string GroupsKey(std::string_view prefix);

// OK for a group name layout 2 accepts: 1 to 64 of letters, digits, '_',
// '-' and '.'; otherwise kInvalidArgument with the reason.
Status CheckGroupName(std::string_view group);

// `text` with the glob characters of SCAN MATCH (* ? [ ] \) escaped, so
// that a prefix matches itself only.
std::string GlobEscaped(std::string_view text);

}  // namespace reliableq::migrate

#endif  // RELIABLEQ_MIGRATE_KEY_MAP_H_
