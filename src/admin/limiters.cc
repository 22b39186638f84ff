// Admin's limits: the limiters of the `limits` hash (reliableq/limits.h;
// the worker's side is LimitGate) with what each holds now.

#include "admin/limiters.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <deque>
#include <utility>

namespace reliableq::admin {

namespace {

int64_t IntMember(const rapidjson::Value& object, const char* name) {
  auto it = object.FindMember(name);
  if (it == object.MemberEnd() || !it->value.IsInt64()) return 0;
  return std::max<int64_t>(0, it->value.GetInt64());
}

// The terms of `info` from the JSON a worker wrote (LimitDefinitionJson);
// a definition it cannot read leaves them empty.
void ReadDefinition(std::string_view json, LimitInfo* info) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) return;
  auto classes = doc.FindMember("classes");
  if (classes != doc.MemberEnd() && classes->value.IsArray()) {
    for (const rapidjson::Value& c : classes->value.GetArray()) {
      if (c.IsString()) info->classes.emplace_back(c.GetString(), c.GetStringLength());
    }
  }
  info->concurrency = IntMember(doc, "concurrency");
  info->rate = IntMember(doc, "rate");
  auto period = doc.FindMember("period");
  if (period != doc.MemberEnd() && period->value.IsNumber() && period->value.GetDouble() > 0) {
    info->period = period->value.GetDouble();
  }
}

}  // namespace

Limiters::Limiters(AdminContext& context) : context_(context) {}

Result<std::vector<LimitInfo>> Limiters::List() {
  Result<redis::ReplyPtr> all = context_.redis->Command({"HGETALL", context_.keys.Limits()});
  if (!all.ok()) return all.status().WithContext("reading limits");
  if (Status s = context_.CheckReply(*all, "HGETALL " + context_.keys.Limits()); !s.ok()) return s;
  std::vector<LimitInfo> limits;
  for (auto& [name, definition] : redis::FieldValues(*all)) {
    LimitInfo info;
    info.name = std::move(name);
    ReadDefinition(definition, &info);
    limits.push_back(std::move(info));
  }
  std::sort(limits.begin(), limits.end(),
            [](const LimitInfo& a, const LimitInfo& b) { return a.name < b.name; });
  if (limits.empty()) return limits;

  const double now = context_.clock->Now();
  std::deque<std::string> texts;  // the pipeline's arguments point into these
  std::vector<redis::Argv> commands;
  for (const LimitInfo& info : limits) {
    commands.push_back({"HLEN", texts.emplace_back(context_.keys.Limit(info.name))});
    commands.push_back({"LLEN", texts.emplace_back(context_.keys.LimitWaiting(info.name))});
    // The window limit_acquire.lua counts: starts after now - period.
    const std::string& starts = texts.emplace_back(context_.keys.LimitStarts(info.name));
    const std::string& after = texts.emplace_back("(" + ScoreText(now - info.period));
    commands.push_back({"ZCOUNT", starts, after, "+inf"});
  }
  Result<std::vector<redis::ReplyPtr>> replies = context_.redis->Pipeline(commands);
  if (Status s = context_.Failed(replies, commands, "reading limits"); !s.ok()) return s;
  for (size_t i = 0; i < limits.size(); ++i) {
    limits[i].running = redis::CounterValue((*replies)[3 * i]);
    limits[i].parked = redis::CounterValue((*replies)[3 * i + 1]);
    limits[i].window_starts = limits[i].period > 0 ? redis::CounterValue((*replies)[3 * i + 2]) : 0;
  }
  return limits;
}

Result<int64_t> Limiters::CountParked() {
  Result<redis::ReplyPtr> names = context_.redis->Command({"HKEYS", context_.keys.Limits()});
  if (!names.ok()) return names.status().WithContext("reading limits");
  if (Status s = context_.CheckReply(*names, "HKEYS " + context_.keys.Limits()); !s.ok()) return s;
  std::deque<std::string> keys;
  std::vector<redis::Argv> commands;
  for (const std::string& name : redis::StringArray(*names)) {
    commands.push_back({"LLEN", keys.emplace_back(context_.keys.LimitWaiting(name))});
  }
  if (commands.empty()) return int64_t{0};
  Result<std::vector<redis::ReplyPtr>> replies = context_.redis->Pipeline(commands);
  if (Status s = context_.Failed(replies, commands, "reading limits"); !s.ok()) return s;
  int64_t parked = 0;
  for (const redis::ReplyPtr& reply : *replies) parked += redis::CounterValue(reply);
  return parked;
}

}  // namespace reliableq::admin
