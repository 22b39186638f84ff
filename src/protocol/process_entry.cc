#include "protocol/process_entry.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "codec/job_codec.h"  // FormatEpoch

namespace reliableq::protocol {

namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void WriteString(JsonWriter& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

}  // namespace

std::string EncodeProcessEntry(const ProcessEntry& entry) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  w.Key("identity");
  WriteString(w, entry.identity);
  w.Key("hostname");
  WriteString(w, entry.hostname);
  w.Key("pid");
  w.Int64(entry.pid);
  w.Key("started_at");
  std::string started = codec::FormatEpoch(entry.started_at);
  w.RawValue(started.c_str(), started.size(), rapidjson::kNumberType);
  w.Key("queues");
  w.StartArray();
  for (const std::string& q : entry.queues) WriteString(w, q);
  w.EndArray();
  w.Key("clients");
  w.StartArray();
  for (int64_t id : entry.clients) w.Int64(id);
  w.EndArray();
  if (!entry.clients_run.empty()) {
    w.Key("clients_run");
    WriteString(w, entry.clients_run);
  }
  if (entry.beat_client > 0) {
    w.Key("beat_client");
    w.Int64(entry.beat_client);
  }
  if (entry.ttl_ms > 0) {
    w.Key("ttl_ms");
    w.Int64(entry.ttl_ms);
  }
  if (!entry.run_id.empty()) {
    w.Key("run_id");
    WriteString(w, entry.run_id);
  }
  w.EndObject();
  return buf.GetString();
}

bool DecodeProcessEntry(std::string_view json, ProcessEntry* entry) {
  entry->queues.clear();
  entry->clients.clear();
  entry->beat_client = 0;
  entry->ttl_ms = 0;
  entry->run_id.clear();
  entry->clients_run.clear();
  rapidjson::Document doc;
  // Iterative: a record nested absurdly deep must not exhaust the stack.
  doc.Parse<rapidjson::kParseIterativeFlag>(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) return false;
  auto text = [&doc](const char* name, std::string* out) {
    auto it = doc.FindMember(name);
    if (it != doc.MemberEnd() && it->value.IsString()) {
      out->assign(it->value.GetString(), it->value.GetStringLength());
    }
  };
  text("identity", &entry->identity);
  text("hostname", &entry->hostname);
  text("run_id", &entry->run_id);
  text("clients_run", &entry->clients_run);
  auto positive = [&doc](const char* name, int64_t* out) {
    auto it = doc.FindMember(name);
    if (it != doc.MemberEnd() && it->value.IsInt64() && it->value.GetInt64() > 0) {
      *out = it->value.GetInt64();
    }
  };
  positive("beat_client", &entry->beat_client);
  positive("ttl_ms", &entry->ttl_ms);
  if (auto it = doc.FindMember("pid"); it != doc.MemberEnd() && it->value.IsInt64()) {
    entry->pid = it->value.GetInt64();
  }
  if (auto it = doc.FindMember("started_at"); it != doc.MemberEnd() && it->value.IsNumber()) {
    entry->started_at = it->value.GetDouble();
  }
  if (auto it = doc.FindMember("clients"); it != doc.MemberEnd() && it->value.IsArray()) {
    for (const auto& id : it->value.GetArray()) {
      if (id.IsInt64() && id.GetInt64() > 0) entry->clients.push_back(id.GetInt64());
    }
  }
  auto it = doc.FindMember("queues");
  if (it == doc.MemberEnd() || !it->value.IsArray()) return false;
  for (const auto& value : it->value.GetArray()) {
    if (!value.IsString() || value.GetStringLength() == 0) {
      entry->queues.clear();
      return false;
    }
    std::string name(value.GetString(), value.GetStringLength());
    if (std::find(entry->queues.begin(), entry->queues.end(), name) == entry->queues.end()) {
      entry->queues.push_back(std::move(name));
    }
  }
  return true;
}

std::string ProcessHostname() {
  if (const char* dyno = std::getenv("DYNO"); dyno != nullptr && *dyno) return dyno;
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

}  // namespace reliableq::protocol
