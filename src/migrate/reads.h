// Small blocking reads the migration makes on either Redis, each returning
// a value or the connection's Status. Not a general client: only the
// shapes `reliableq migrate` needs.
//
// Thread safety: one thread per connection, as redis::Connection.

#ifndef RELIABLEQ_MIGRATE_READS_H_
#define RELIABLEQ_MIGRATE_READS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "redis/connection.h"
#include "reliableq/status.h"

namespace reliableq::migrate {

// GET or HGET: the value, or nullopt when the key (field) is absent.
Result<std::optional<std::string>> GetString(redis::Connection& redis, const std::string& key);
Result<std::optional<std::string>> GetField(redis::Connection& redis, const std::string& key,
                                            const std::string& field);

// Every key SCAN MATCH `pattern` names, in the order SCAN returns them (a
// key may come twice: SCAN's contract).
Status ScanKeys(redis::Connection& redis, const std::string& pattern,
                std::vector<std::string>* keys);

// The members of a SET (SMEMBERS), sorted.
Result<std::vector<std::string>> SortedMembers(redis::Connection& redis, const std::string& key);

// TYPE: "none", "string", "list", "set", "zset", "hash", "stream".
Result<std::string> KeyType(redis::Connection& redis, const std::string& key);

// The number of elements of a key of type `type` (1 for a string, 0 for
// "none").
Result<int64_t> KeySize(redis::Connection& redis, const std::string& key, const std::string& type);

// DUMP: the key's value serialized as RESTORE takes it, or nullopt when the
// key is absent.
Result<std::optional<std::string>> Dump(redis::Connection& redis, const std::string& key);

// The strings `command` answers with (an array: LRANGE, ZRANGE, HGETALL,
// SMEMBERS ...; nil elements as "").
Result<std::vector<std::string>> ReadStrings(redis::Connection& redis, const redis::Argv& command);

}  // namespace reliableq::migrate

#endif  // RELIABLEQ_MIGRATE_READS_H_
