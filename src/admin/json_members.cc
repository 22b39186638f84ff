#include "admin/json_members.h"

#include "codec/json_writer.h"

namespace reliableq::admin {

std::string StringMember(const rapidjson::Value& object, const char* name) {
  auto it = object.FindMember(name);
  if (it == object.MemberEnd() || !it->value.IsString()) return {};
  return {it->value.GetString(), it->value.GetStringLength()};
}

std::optional<std::string> OptionalString(const rapidjson::Value& object, const char* name) {
  auto it = object.FindMember(name);
  if (it == object.MemberEnd() || !it->value.IsString()) return std::nullopt;
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

double NumberMember(const rapidjson::Value& object, const char* name) {
  auto it = object.FindMember(name);
  if (it == object.MemberEnd() || !it->value.IsNumber()) return 0;
  return it->value.GetDouble();
}

std::optional<double> OptionalNumber(const rapidjson::Value& object, const char* name) {
  auto it = object.FindMember(name);
  if (it == object.MemberEnd() || !it->value.IsNumber()) return std::nullopt;
  return it->value.GetDouble();
}

std::optional<int64_t> OptionalInteger(const rapidjson::Value& object, const char* name) {
  auto it = object.FindMember(name);
  if (it == object.MemberEnd() || !it->value.IsInt64()) return std::nullopt;
  return it->value.GetInt64();
}

std::optional<std::string> OptionalJson(const rapidjson::Value& object, const char* name) {
  auto it = object.FindMember(name);
  if (it == object.MemberEnd()) return std::nullopt;
  return codec::ToJson(it->value);
}

std::vector<std::string> StringsMember(const rapidjson::Value& object, const char* name) {
  std::vector<std::string> out;
  auto it = object.FindMember(name);
  if (it == object.MemberEnd() || !it->value.IsArray()) return out;
  for (const rapidjson::Value& v : it->value.GetArray()) {
    if (v.IsString()) out.emplace_back(v.GetString(), v.GetStringLength());
  }
  return out;
}

std::string JsonEscaped(std::string_view text) {
  rapidjson::Value value(rapidjson::StringRef(text.data(), text.size()));
  std::string quoted = codec::ToJson(value);
  return quoted.substr(1, quoted.size() - 2);
}

}  // namespace reliableq::admin
