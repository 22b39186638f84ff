#include "web/json_out.h"

#include <cmath>

namespace reliableq::web {

std::string Done(const rapidjson::StringBuffer& buffer) {
  return std::string(buffer.GetString(), buffer.GetSize());
}

void WriteString(JsonWriter& w, std::string_view text) {
  w.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
}

void WriteOptionalString(JsonWriter& w, const std::optional<std::string>& text) {
  if (text) {
    WriteString(w, *text);
  } else {
    w.Null();
  }
}

void WriteNumber(JsonWriter& w, double value) {
  if (std::isfinite(value)) {
    w.Double(value);
  } else {
    w.Null();
  }
}

ParsedPayload::ParsedPayload(std::string_view payload) {
  // Iterative: a payload nested absurdly deep must not exhaust the stack.
  doc.Parse<rapidjson::kParseIterativeFlag>(payload.data(), payload.size());
  if (doc.HasParseError()) doc.SetNull();
}

const rapidjson::Value* ParsedPayload::Get(const char* name) const {
  if (!doc.IsObject()) return nullptr;
  auto it = doc.FindMember(name);
  return it == doc.MemberEnd() ? nullptr : &it->value;
}

void WriteMember(JsonWriter& w, const ParsedPayload& payload, const char* name) {
  const rapidjson::Value* value = payload.Get(name);
  if (value == nullptr) {
    w.Null();
  } else {
    value->Accept(w);
  }
}

void WriteJobBasics(JsonWriter& w, const ParsedPayload& payload) {
  w.Key("jid");
  const rapidjson::Value* jid = payload.Get("jid");
  if (jid != nullptr && jid->IsString()) {
    jid->Accept(w);
  } else {
    w.Null();
  }
  w.Key("class");
  const rapidjson::Value* job_class = payload.Get("class");
  if (job_class != nullptr && job_class->IsString()) {
    job_class->Accept(w);
  } else {
    w.Null();
  }
  w.Key("args");
  const rapidjson::Value* args = payload.Get("args");
  if (args != nullptr && args->IsArray()) {
    args->Accept(w);
  } else {
    w.Null();
  }
}

void WriteStoredJson(JsonWriter& w, std::string_view text) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseFullPrecisionFlag>(text.data(),
                                                                                 text.size());
  if (doc.HasParseError()) {
    WriteString(w, text);
  } else {
    doc.Accept(w);
  }
}

namespace {

void WriteOptionalNumber(JsonWriter& w, const std::optional<double>& value) {
  if (value) {
    WriteNumber(w, *value);
  } else {
    w.Null();
  }
}

void WriteOptionalInteger(JsonWriter& w, const std::optional<int64_t>& value) {
  if (value) {
    w.Int64(*value);
  } else {
    w.Null();
  }
}

// A string member, null when empty.
void WriteNonEmpty(JsonWriter& w, const std::string& text) {
  if (text.empty()) {
    w.Null();
  } else {
    WriteString(w, text);
  }
}

void WriteOptionalJson(JsonWriter& w, const std::optional<std::string>& json) {
  if (json) {
    WriteStoredJson(w, *json);
  } else {
    w.Null();
  }
}

}  // namespace

void WriteJobLookup(JsonWriter& w, const JobLookup& lookup) {
  const JobBasics& basics = lookup.basics;
  w.StartObject();
  w.Key("jid");
  WriteString(w, lookup.jid);
  w.Key("state");
  WriteString(w, JobStateName(lookup.state));
  w.Key("process");
  WriteNonEmpty(w, lookup.process);
  w.Key("thread");
  WriteNonEmpty(w, lookup.thread);
  w.Key("queue");
  WriteNonEmpty(w, lookup.queue);
  w.Key("limit");
  WriteNonEmpty(w, lookup.limit);
  w.Key("position");
  WriteOptionalInteger(w, lookup.position);
  w.Key("list_size");
  WriteOptionalInteger(w, lookup.list_size);
  w.Key("since");
  WriteOptionalNumber(w, lookup.since);
  w.Key("at");
  WriteOptionalNumber(w, lookup.at);
  w.Key("progress");
  WriteOptionalJson(w, lookup.progress);
  w.Key("class");
  WriteNonEmpty(w, basics.job_class);
  w.Key("retry_count");
  WriteOptionalInteger(w, basics.retry_count);
  w.Key("error_class");
  WriteOptionalString(w, basics.error_class);
  w.Key("error_message");
  WriteOptionalString(w, basics.error_message);
  w.Key("args");
  WriteOptionalJson(w, basics.args);
  w.Key("job");
  if (lookup.payload.empty()) {
    w.Null();
  } else {
    WriteStoredJson(w, lookup.payload);
  }
  w.Key("payload");
  WriteNonEmpty(w, lookup.payload);
  // "record": the end the state comes from; "last_end": a previous one.
  for (bool ended : {true, false}) {
    w.Key(ended ? "record" : "last_end");
    if (lookup.record && lookup.ended == ended) {
      WriteStoredJson(w, lookup.record->json);
    } else {
      w.Null();
    }
  }
  w.Key("record_ttl_ms");
  WriteOptionalInteger(w, lookup.record ? lookup.record->ttl_ms : std::nullopt);
  w.Key("not_searched");
  w.StartArray();
  for (const NotSearched& list : lookup.not_searched) {
    w.StartObject();
    w.Key("kind");
    WriteString(w, list.kind);
    w.Key("name");
    WriteString(w, list.name);
    w.Key("size");
    w.Int64(list.size);
    w.Key("searched");
    w.Int64(list.searched);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

void WriteSetEntry(JsonWriter& w, const SetEntry& entry) {
  ParsedPayload parsed(entry.payload);
  w.StartObject();
  w.Key("id");
  WriteString(w, EntryIdOf(entry));
  w.Key("score");
  WriteNumber(w, entry.score);
  w.Key("jid");
  WriteString(w, entry.jid);
  w.Key("class");
  WriteString(w, entry.job_class);
  w.Key("queue");
  WriteString(w, entry.queue.empty() ? "default" : entry.queue);
  w.Key("args");
  const rapidjson::Value* args = parsed.Get("args");
  if (args != nullptr && args->IsArray()) {
    args->Accept(w);
  } else {
    w.Null();
  }
  w.Key("retry_count");
  WriteOptionalInteger(w, entry.retry_count);
  w.Key("error_class");
  WriteOptionalString(w, entry.error_class);
  w.Key("error_message");
  WriteOptionalString(w, entry.error_message);
  for (const char* name : {"enqueued_at", "failed_at", "retried_at", "created_at"}) {
    w.Key(name);
    const rapidjson::Value* value = parsed.Get(name);
    if (value != nullptr && value->IsNumber()) {
      value->Accept(w);
    } else {
      w.Null();
    }
  }
  w.Key("valid");
  w.Bool(entry.valid);
  w.Key("payload");
  WriteString(w, entry.payload);
  w.EndObject();
}

std::optional<JobSet> JobSetNamed(std::string_view name) {
  if (name == "retry") return JobSet::kRetry;
  if (name == "scheduled") return JobSet::kScheduled;
  if (name == "dead") return JobSet::kDead;
  return std::nullopt;
}

std::string_view JobSetName(JobSet set) {
  switch (set) {
    case JobSet::kRetry:
      return "retry";
    case JobSet::kScheduled:
      return "scheduled";
    case JobSet::kDead:
      return "dead";
  }
  return "retry";
}

std::string_view EvidenceName(DeathEvidence evidence) {
  switch (evidence) {
    case DeathEvidence::kHeartbeatExpired:
      return "heartbeat_expired";
    case DeathEvidence::kConnectionsGone:
      return "connections_gone";
    case DeathEvidence::kNone:
      break;
  }
  return {};
}

void WriteIdentityRecovery(JsonWriter& w, const IdentityRecovery& recovery) {
  w.StartObject();
  WriteIdentityRecoveryFields(w, recovery);
  w.EndObject();
}

void WriteIdentityRecoveryFields(JsonWriter& w, const IdentityRecovery& recovery) {
  w.Key("identity");
  WriteString(w, recovery.identity);
  w.Key("alive");
  w.Bool(recovery.alive);
  w.Key("evidence");
  if (recovery.alive) {
    w.Null();
  } else {
    WriteString(w, EvidenceName(recovery.evidence));
  }
  w.Key("queues");
  w.StartArray();
  for (const QueueRecovery& q : recovery.queues) {
    w.StartObject();
    w.Key("queue");
    WriteString(w, q.queue);
    w.Key("requeued");
    w.Int64(q.requeued);
    w.Key("dead");
    w.Int64(q.dead);
    w.EndObject();
  }
  w.EndArray();
  w.Key("error");
  if (recovery.error.empty()) {
    w.Null();
  } else {
    WriteString(w, recovery.error);
  }
}

}  // namespace reliableq::web
