#include "migrate/key_map.h"

namespace reliableq::migrate {

namespace {

constexpr size_t kMaxGroupLength = 64;

bool GroupChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

}  // namespace

std::string GroupKey(std::string_view prefix, std::string_view group, std::string_view name) {
  std::string key;
  key.reserve(prefix.size() + group.size() + name.size() + 3);
  key.append(prefix).append("{").append(group).append("}:").append(name);
  return key;
}

std::string Layout2Key(std::string_view prefix, std::string_view group, std::string_view key) {
  if (key.starts_with(prefix)) key.remove_prefix(prefix.size());
  return GroupKey(prefix, group, key);
}

std::string GroupsKey(std::string_view prefix) { return std::string(prefix) + "groups"; }

Status CheckGroupName(std::string_view group) {
  if (group.empty()) return Status::InvalidArgument("the group name is empty");
  if (group.size() > kMaxGroupLength) {
    return Status::InvalidArgument("the group name is longer than 64 characters");
  }
  for (char c : group) {
    if (!GroupChar(c)) {
      return Status::InvalidArgument("the group name '" + std::string(group) +
                                     "' may only hold letters, digits, '_', '-' and '.'");
    }
  }
  return Status::OK();
}

std::string GlobEscaped(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace reliableq::migrate
