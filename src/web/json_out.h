// JSON writing for the API: RapidJSON's Writer and the shapes several
// endpoints share (a set entry, a job's fields read from its payload).
// Private to src/web/.
//
// Thread safety: plain functions over values.

#ifndef RELIABLEQ_WEB_JSON_OUT_H_
#define RELIABLEQ_WEB_JSON_OUT_H_

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <optional>
#include <string>
#include <string_view>

#include "reliableq/admin.h"

namespace reliableq::web {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

// What a JsonWriter wrote into `buffer`, as a response body.
std::string Done(const rapidjson::StringBuffer& buffer);

void WriteString(JsonWriter& w, std::string_view text);
void WriteOptionalString(JsonWriter& w, const std::optional<std::string>& text);
// A number, or null when it is not finite.
void WriteNumber(JsonWriter& w, double value);

// A payload parsed once for the fields the API shows; `doc` is null when
// the payload is not JSON.
struct ParsedPayload {
  explicit ParsedPayload(std::string_view payload);
  rapidjson::Document doc;
  // The member `name` of an object payload, or nullptr.
  const rapidjson::Value* Get(const char* name) const;
};

// "jid", "class" and "args" (the parsed array, or null) of a payload.
void WriteJobBasics(JsonWriter& w, const ParsedPayload& payload);
// A member of the payload as it is (any JSON value), or null.
void WriteMember(JsonWriter& w, const ParsedPayload& payload, const char* name);

// A set entry: {"id","score","jid","class","queue","args","retry_count",
// "error_class","error_message","valid","payload", ...}.
void WriteSetEntry(JsonWriter& w, const SetEntry& entry);

// A JSON text stored by someone else (the janitor, the audit trail, a
// worker's job record) as the JSON value it holds, or as a string when it
// is not JSON.
void WriteStoredJson(JsonWriter& w, std::string_view text);

// Where a job is (Admin::FindJob), as `GET /api/find` and `reliableq job
// --json` print it: {"jid","state","process","thread","queue","limit",
// "position","list_size","since","at","progress","class","retry_count",
// "error_class","error_message","args","job","payload","record",
// "last_end","record_ttl_ms","not_searched"}; reliableq(1) lists them.
void WriteJobLookup(JsonWriter& w, const JobLookup& lookup);

// The key of a job set in URLs and JSON ("retry", "scheduled", "dead").
std::optional<JobSet> JobSetNamed(std::string_view name);
std::string_view JobSetName(JobSet set);

// How the API names a DeathEvidence ("" for kNone).
std::string_view EvidenceName(DeathEvidence evidence);
// The recovery report of one identity: {"identity","alive","evidence",
// "queues":[{"queue","requeued","dead"}],"error"}.
void WriteIdentityRecovery(JsonWriter& w, const IdentityRecovery& recovery);
// Its members alone, for an object that adds more (an orphan's jobs).
void WriteIdentityRecoveryFields(JsonWriter& w, const IdentityRecovery& recovery);

}  // namespace reliableq::web

#endif  // RELIABLEQ_WEB_JSON_OUT_H_
