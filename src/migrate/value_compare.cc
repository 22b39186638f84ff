#include "migrate/value_compare.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "migrate/reads.h"

namespace reliableq::migrate {

namespace {

constexpr int64_t kPage = 1000;

using Strings_ = std::vector<std::string>;

// The same reads on both sides; true when their answers are equal.
Result<bool> SameAnswer(redis::Connection& a, const redis::Argv& a_command, redis::Connection& b,
                        const redis::Argv& b_command) {
  Result<Strings_> left = ReadStrings(a, a_command);
  if (!left.ok()) return left.status();
  Result<Strings_> right = ReadStrings(b, b_command);
  if (!right.ok()) return right.status();
  return *left == *right;
}

// Lists and zsets: the same size, then page by page by index or rank.
Result<bool> SamePages(redis::Connection& a, const std::string& a_key, redis::Connection& b,
                       const std::string& b_key, const std::string& type) {
  Result<int64_t> a_size = KeySize(a, a_key, type);
  if (!a_size.ok()) return a_size.status();
  Result<int64_t> b_size = KeySize(b, b_key, type);
  if (!b_size.ok()) return b_size.status();
  if (*a_size != *b_size) return false;
  for (int64_t start = 0; start < *a_size; start += kPage) {
    std::string from = std::to_string(start), to = std::to_string(start + kPage - 1);
    Result<bool> same =
        type == "list" ? SameAnswer(a, {"LRANGE", a_key, from, to}, b, {"LRANGE", b_key, from, to})
                       : SameAnswer(a, {"ZRANGE", a_key, from, to, "WITHSCORES"}, b,
                                    {"ZRANGE", b_key, from, to, "WITHSCORES"});
    if (!same.ok() || !*same) return same;
  }
  return true;
}

// HGETALL's field/value pairs, sorted by field: a hash has no order.
Result<std::vector<std::pair<std::string, std::string>>> SortedPairs(redis::Connection& redis,
                                                                     const std::string& key) {
  Result<Strings_> flat = ReadStrings(redis, {"HGETALL", key});
  if (!flat.ok()) return flat.status();
  std::vector<std::pair<std::string, std::string>> pairs;
  for (size_t i = 0; i + 1 < flat->size(); i += 2) {
    pairs.emplace_back(std::move((*flat)[i]), std::move((*flat)[i + 1]));
  }
  std::sort(pairs.begin(), pairs.end());
  return pairs;
}

}  // namespace

Result<bool> SameValue(redis::Connection& a, const std::string& a_key, redis::Connection& b,
                       const std::string& b_key) {
  Result<std::optional<std::string>> a_dump = Dump(a, a_key);
  if (!a_dump.ok()) return a_dump.status();
  Result<std::optional<std::string>> b_dump = Dump(b, b_key);
  if (!b_dump.ok()) return b_dump.status();
  if (!a_dump->has_value() || !b_dump->has_value()) {
    return !a_dump->has_value() && !b_dump->has_value();
  }
  if (**a_dump == **b_dump) return true;

  Result<std::string> a_type = KeyType(a, a_key);
  if (!a_type.ok()) return a_type.status();
  Result<std::string> b_type = KeyType(b, b_key);
  if (!b_type.ok()) return b_type.status();
  if (*a_type != *b_type) return false;
  const std::string& type = *a_type;
  if (type == "string") return SameAnswer(a, {"MGET", a_key}, b, {"MGET", b_key});
  if (type == "list" || type == "zset") return SamePages(a, a_key, b, b_key, type);
  if (type == "set") {
    Result<Strings_> left = SortedMembers(a, a_key);
    if (!left.ok()) return left.status();
    Result<Strings_> right = SortedMembers(b, b_key);
    if (!right.ok()) return right.status();
    return *left == *right;
  }
  if (type == "hash") {
    auto left = SortedPairs(a, a_key);
    if (!left.ok()) return left.status();
    auto right = SortedPairs(b, b_key);
    if (!right.ok()) return right.status();
    return *left == *right;
  }
  return false;
}

}  // namespace reliableq::migrate
