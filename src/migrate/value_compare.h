// Whether a key on one Redis holds the same value as a key on another:
// what tells a rerun of `reliableq migrate` that a key it finds on both
// sides was copied whole before the command stopped, so that only the
// source's DEL is left to do.
//
// Thread safety: one thread per connection, as redis::Connection.

#ifndef RELIABLEQ_MIGRATE_VALUE_COMPARE_H_
#define RELIABLEQ_MIGRATE_VALUE_COMPARE_H_

#include <string>

#include "redis/connection.h"
#include "reliableq/status.h"

namespace reliableq::migrate {

// True when `a_key` on `a` and `b_key` on `b` are of the same type and hold
// the same elements (lists in the same order, zsets with the same scores),
// ttls aside. Equal DUMPs answer at once; otherwise the contents are
// compared, since DUMP's bytes also depend on the encoding and the RDB
// version, which differ between Redis releases. Lists and zsets are read
// in pages of 1000; strings, sets and hashes whole. A stream is never
// "the same" (the migration moves none). Redis errors as the connections
// report them.
Result<bool> SameValue(redis::Connection& a, const std::string& a_key, redis::Connection& b,
                       const std::string& b_key);

}  // namespace reliableq::migrate

#endif  // RELIABLEQ_MIGRATE_VALUE_COMPARE_H_
