// The members of a JSON object that Admin reads from what workers and
// Sidekiq wrote (jobs, process info, work entries), each with a value for
// a member that is absent or of another type. Pure.
//
// Thread safety: plain functions over values.

#ifndef RELIABLEQ_ADMIN_JSON_MEMBERS_H_
#define RELIABLEQ_ADMIN_JSON_MEMBERS_H_

#include <rapidjson/document.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace reliableq::admin {

// The string member `name` of `object`; "" when absent or not a string.
std::string StringMember(const rapidjson::Value& object, const char* name);
// The same; nullopt when absent or not a string.
std::optional<std::string> OptionalString(const rapidjson::Value& object, const char* name);
// The number member `name`; 0 when absent or not a number.
double NumberMember(const rapidjson::Value& object, const char* name);
// The same; nullopt when absent or not a number.
std::optional<double> OptionalNumber(const rapidjson::Value& object, const char* name);
// The integer member `name` (within int64); nullopt when absent or not one.
std::optional<int64_t> OptionalInteger(const rapidjson::Value& object, const char* name);
// Member `name` as JSON text, whatever its type; nullopt when absent.
std::optional<std::string> OptionalJson(const rapidjson::Value& object, const char* name);
// The strings of the array member `name` (its other elements skipped).
std::vector<std::string> StringsMember(const rapidjson::Value& object, const char* name);

// The text a JSON writer puts between the quotes of the string `text`, as
// Ruby's JSON.generate writes it: how a jid appears inside a payload.
std::string JsonEscaped(std::string_view text);

}  // namespace reliableq::admin

#endif  // RELIABLEQ_ADMIN_JSON_MEMBERS_H_
