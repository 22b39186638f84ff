#include "redis/reply.h"

#include <charconv>
#include <cstdlib>
#include <utility>

#include "redis/errors.h"

namespace reliableq::redis {

const char* TypeName(ReplyRef ref) {
  const redisReply* reply = ref.raw();
  if (reply == nullptr) return "no reply";
  switch (reply->type) {
    case REDIS_REPLY_STRING: return "string";
    case REDIS_REPLY_ARRAY: return "array";
    case REDIS_REPLY_INTEGER: return "integer";
    case REDIS_REPLY_NIL: return "nil";
    case REDIS_REPLY_STATUS: return "status";
    case REDIS_REPLY_ERROR: return "error";
  }
  return "unknown";
}

Result<int64_t> ToInteger(ReplyRef ref) {
  const redisReply* reply = ref.raw();
  if (reply != nullptr && reply->type == REDIS_REPLY_INTEGER) return int64_t{reply->integer};
  if (reply != nullptr && reply->type == REDIS_REPLY_STRING) {
    std::string_view text = View(reply);
    int64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec == std::errc() && end == text.data() + text.size()) return value;
  }
  return Status::Protocol(std::string("expected an integer reply, got ") + TypeName(reply));
}

Result<std::string> ToString(ReplyRef ref) {
  const redisReply* reply = ref.raw();
  if (reply != nullptr &&
      (reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS)) {
    return std::string(View(reply));
  }
  if (reply != nullptr && reply->type == REDIS_REPLY_NIL) return Status::NotFound("nil reply");
  return Status::Protocol(std::string("expected a string reply, got ") + TypeName(reply));
}

std::string_view InfoField(std::string_view info, std::string_view field) {
  size_t at = 0;
  while (at < info.size()) {
    size_t end = info.find('\n', at);
    if (end == std::string_view::npos) end = info.size();
    std::string_view line = info.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > field.size() && line.substr(0, field.size()) == field &&
        line[field.size()] == ':') {
      return line.substr(field.size() + 1);
    }
    at = end + 1;
  }
  return {};
}

bool IsErrorReply(ReplyRef reply) { return reply && reply.raw()->type == REDIS_REPLY_ERROR; }

bool IsNilReply(ReplyRef reply) { return reply && reply.raw()->type == REDIS_REPLY_NIL; }

std::string_view ErrorText(ReplyRef reply) {
  return IsErrorReply(reply) ? View(reply.raw()) : std::string_view();
}

int64_t CounterValue(ReplyRef reply) {
  Result<int64_t> value = ToInteger(reply);
  return value.ok() ? *value : 0;
}

Result<std::vector<std::string>> ToStrings(ReplyRef ref) {
  const redisReply* reply = ref.raw();
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) {
    return Status::Protocol(std::string("expected an array of strings, got ") + TypeName(ref));
  }
  std::vector<std::string> strings;
  strings.reserve(reply->elements);
  for (size_t i = 0; i < reply->elements; ++i) {
    Result<std::string> text = ToString(reply->element[i]);
    if (!text.ok()) {
      return Status::Protocol(std::string("expected an array of strings, got an array holding ") +
                              TypeName(reply->element[i]));
    }
    strings.push_back(std::move(*text));
  }
  return strings;
}

Result<std::string> ReadConfigValue(ReplyRef reply) {
  Result<std::vector<std::string>> pair = ToStrings(reply);
  if (!pair.ok() || pair->size() != 2) {
    return Status::Protocol(
        "expected CONFIG GET's {name, value}, got " +
        (pair.ok() ? std::to_string(pair->size()) + " strings" : pair.status().message()));
  }
  return std::move((*pair)[1]);
}

Result<std::vector<std::string>> ReadTrackingFlags(ReplyRef ref) {
  const redisReply* reply = ref.raw();
  if (reply != nullptr && reply->type == REDIS_REPLY_ARRAY) {
    for (size_t i = 0; i + 1 < reply->elements; i += 2) {
      Result<std::string> name = ToString(reply->element[i]);
      if (name.ok() && *name == "flags") return ToStrings(reply->element[i + 1]);
    }
  }
  return Status::Protocol(
      std::string("expected CLIENT TRACKINGINFO's fields with \"flags\", got ") + TypeName(ref));
}

std::vector<std::string> StringArray(ReplyRef ref) {
  std::vector<std::string> out;
  const redisReply* reply = ref.raw();
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) return out;
  out.reserve(reply->elements);
  for (size_t i = 0; i < reply->elements; ++i) {
    const redisReply* element = reply->element[i];
    bool text = element->type == REDIS_REPLY_STRING || element->type == REDIS_REPLY_STATUS;
    out.emplace_back(text ? View(element) : std::string_view());
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> FieldValues(ReplyRef reply) {
  std::vector<std::string> flat = StringArray(reply);
  std::vector<std::pair<std::string, std::string>> pairs;
  pairs.reserve(flat.size() / 2);
  for (size_t i = 0; i + 1 < flat.size(); i += 2) {
    pairs.emplace_back(std::move(flat[i]), std::move(flat[i + 1]));
  }
  return pairs;
}

std::vector<ScoredMember> ScoredMembers(ReplyRef ref) {
  std::vector<ScoredMember> members;
  const redisReply* reply = ref.raw();
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) return members;
  members.reserve(reply->elements / 2);
  for (size_t i = 0; i + 1 < reply->elements; i += 2) {
    const redisReply* score = reply->element[i + 1];
    members.push_back({std::string(View(reply->element[i])),
                       score->type == REDIS_REPLY_STRING ? std::strtod(score->str, nullptr) : 0});
  }
  return members;
}

Result<ScanPage> ReadScanPage(ReplyRef ref, std::string_view command) {
  const redisReply* reply = ref.raw();
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
      reply->element[0]->type != REDIS_REPLY_STRING) {
    return Status::Protocol(std::string(command) + " answered an unexpected reply (" +
                            TypeName(ref) + ")");
  }
  return ScanPage{std::string(View(reply->element[0])), reply->element[1]};
}

Result<std::vector<ReplyRef>> ExecReplies(ReplyRef ref) {
  const redisReply* reply = ref.raw();
  if (IsNilReply(ref)) return Status::Refused("EXEC answered nil: a watched key changed, nothing ran");
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) {
    return Status::Protocol(std::string("EXEC answered ") + TypeName(ref));
  }
  return std::vector<ReplyRef>(reply->element, reply->element + reply->elements);
}

Result<int64_t> ReadWaitReply(ReplyRef ref) {
  if (IsErrorReply(ref)) return FromErrorReply(ErrorText(ref));
  const redisReply* reply = ref.raw();
  if (reply == nullptr || reply->type != REDIS_REPLY_INTEGER) {
    return Status::Protocol(std::string("WAIT answered ") + TypeName(ref));
  }
  return int64_t{reply->integer};
}

Result<double> ReadTimeReply(ReplyRef reply) {
  Result<std::vector<std::string>> parts = ToStrings(reply);
  if (!parts.ok() || parts->size() != 2) return Status::Protocol("TIME answered no pair");
  long long seconds = 0, micros = 0;
  for (auto [text, value] : {std::pair{&(*parts)[0], &seconds}, std::pair{&(*parts)[1], &micros}}) {
    const char* end = text->data() + text->size();
    auto [stop, error] = std::from_chars(text->data(), end, *value);
    if (text->empty() || error != std::errc() || stop != end || *value < 0) {
      return Status::Protocol("TIME answered '" + *text + "'");
    }
  }
  return static_cast<double>(seconds) + static_cast<double>(micros) / 1e6;
}

}  // namespace reliableq::redis
