#include "protocol/keys.h"

#include <ctime>

namespace reliableq::protocol {

namespace {

constexpr size_t kMaxGroupBytes = 64;

bool GroupChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

}  // namespace

Keys::Keys(std::string prefix, std::string_view group)
    : root_(std::move(prefix)),
      group_(group),
      prefix_(group_.empty() ? root_ : root_ + "{" + group_ + "}:"),
      sidekiq_(group_.empty() ? "" : prefix_) {}

std::string_view Keys::QueueName(std::string_view key) const {
  if (!key.starts_with(sidekiq_)) return {};
  key.remove_prefix(sidekiq_.size());
  constexpr std::string_view kQueue = "queue:";
  if (!key.starts_with(kQueue)) return {};
  return key.substr(kQueue.size());
}

std::string Keys::Stat(std::string_view name, std::string_view date) const {
  std::string key = sidekiq_ + "stat:" + std::string(name);
  if (!date.empty()) key += ":" + std::string(date);
  return key;
}

std::string Keys::ClientName(std::string_view identity) const {
  std::string name = prefix_ + std::string(identity);
  for (char& c : name) {
    if (c == ' ' || c == '\n' || c == '\r') c = '_';
  }
  return name;
}

Status CheckGroup(std::string_view group) {
  if (group.empty() || group.size() > kMaxGroupBytes) {
    return Status::InvalidArgument("the queue group must be 1 to " +
                                   std::to_string(kMaxGroupBytes) + " characters long");
  }
  for (char c : group) {
    if (!GroupChar(c)) {
      return Status::InvalidArgument(
          "the queue group may hold only letters, digits, '_', '-' and '.'");
    }
  }
  return Status::OK();
}

Status CheckKeyLayout(std::string_view prefix, std::string_view group) {
  if (group.empty()) return Status::OK();
  if (Status s = CheckGroup(group); !s.ok()) return s;
  if (prefix.find_first_of("{}") != std::string_view::npos) {
    return Status::InvalidArgument(
        "with a queue group the key prefix must not contain '{' or '}': the hash tag of every "
        "key is the group's");
  }
  return Status::OK();
}

std::string UtcDate(double epoch_seconds) {
  time_t t = static_cast<time_t>(epoch_seconds);
  tm parts;
  gmtime_r(&t, &parts);
  char buf[16];
  strftime(buf, sizeof buf, "%Y-%m-%d", &parts);
  return buf;
}

}  // namespace reliableq::protocol
