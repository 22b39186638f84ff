// The final record's JSON and its size cap (codec/job_record.h).

#include "codec/job_record.h"

#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include <string>

using namespace reliableq::codec;

namespace {

rapidjson::Document Parsed(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  REQUIRE_FALSE(doc.HasParseError());
  return doc;
}

JobRecordFields Fields(std::string_view payload, std::string_view result) {
  JobRecordFields fields;
  fields.state = "done";
  fields.at = 1700000001.5;
  fields.jid = "j1";
  fields.job_class = "PaymentJob";
  fields.queue = "default";
  fields.process = "host:1:abc";
  fields.started_at = 1700000000.25;
  fields.attempts = 2;
  fields.result = result;
  fields.payload = payload;
  return fields;
}

}  // namespace

TEST_CASE("JsonValueOf keeps one JSON value, and makes any other text a JSON string") {
  CHECK(JsonValueOf(R"( {"charge": "ch_1"} )") == R"({"charge": "ch_1"})");
  CHECK(JsonValueOf("42") == "42");
  CHECK(JsonValueOf("status 200") == R"("status 200")");
  CHECK(JsonValueOf("{} {}") == R"("{} {}")");
  CHECK(JsonValueOf("") == R"("")");
  // Invalid UTF-8 never reaches a record.
  CHECK(JsonValueOf("\xff\"") == "\"\xEF\xBF\xBD\\\"\"");
  // Deep nesting is parsed without recursion, and kept as text: readers of
  // a record walk it recursively.
  std::string deep(100000, '[');
  CHECK(JsonValueOf(deep).front() == '"');
  std::string nested = std::string(100, '[') + std::string(100, ']');
  CHECK(JsonValueOf(nested) == nested);
  std::string deeper = "[" + nested + "]";
  CHECK(JsonValueOf(deeper).front() == '"');
}

TEST_CASE("a record holds its fields, its result and its job while they fit the cap") {
  std::string payload = R"({"class":"PaymentJob","args":[1],"jid":"j1"})";
  rapidjson::Document record = Parsed(JobRecordJson(Fields(payload, R"({"id":7})"), 8192));
  CHECK(std::string(record["state"].GetString()) == "done");
  CHECK(record["at"].GetDouble() == 1700000001.5);
  CHECK(record["started_at"].GetDouble() == 1700000000.25);
  CHECK(record["attempts"].GetInt() == 2);
  CHECK(std::string(record["process"].GetString()) == "host:1:abc");
  CHECK(record["result"]["id"].GetInt() == 7);
  CHECK(record["job"]["args"][0].GetInt() == 1);
  CHECK_FALSE(record.HasMember("error_class"));
  CHECK_FALSE(record.HasMember("progress"));

  JobProgress progress{55, "half", 1700000001.0};
  JobRecordFields with = Fields(payload, "");
  with.progress = &progress;
  with.error_class = "RuntimeError";
  with.error_message = "no";
  with.started_at.reset();
  rapidjson::Document failed = Parsed(JobRecordJson(with, 8192));
  CHECK(failed["progress"]["percent"].GetDouble() == 55);
  CHECK(std::string(failed["progress"]["message"].GetString()) == "half");
  CHECK(std::string(failed["error_message"].GetString()) == "no");
  CHECK_FALSE(failed.HasMember("result"));
  CHECK_FALSE(failed.HasMember("started_at"));
}

TEST_CASE("a record over the cap leaves out its result first, then its job") {
  std::string payload = R"({"class":"PaymentJob","args":[")" + std::string(300, 'a') + R"("]})";
  std::string result = "\"" + std::string(600, 'r') + "\"";
  std::string both = JobRecordJson(Fields(payload, result), 8192);
  rapidjson::Document all = Parsed(both);
  CHECK(all.HasMember("result"));
  CHECK(all.HasMember("job"));

  std::string no_result = JobRecordJson(Fields(payload, result), 700);
  CHECK(no_result.size() <= 700);
  rapidjson::Document cut = Parsed(no_result);
  CHECK(cut["result_bytes"].GetUint64() == result.size());
  CHECK(cut.HasMember("job"));

  std::string bare = JobRecordJson(Fields(payload, result), 256);
  CHECK(bare.size() <= 256);
  rapidjson::Document none = Parsed(bare);
  CHECK(none["job_bytes"].GetUint64() == payload.size());
  CHECK_FALSE(none.HasMember("job"));
  CHECK_FALSE(none.HasMember("result"));
}

TEST_CASE("a done job's record keeps its arguments alone") {
  JobRecordFields fields = Fields("", "");
  fields.args = R"(["order-1",1250])";
  rapidjson::Document record = Parsed(JobRecordJson(fields, 8192));
  CHECK(record["args"][1].GetInt() == 1250);
  CHECK_FALSE(record.HasMember("job"));
  std::string big = "[\"" + std::string(500, 'a') + "\"]";
  fields.args = big;
  rapidjson::Document cut = Parsed(JobRecordJson(fields, 256));
  CHECK(cut["args_bytes"].GetUint64() == big.size());
  CHECK_FALSE(cut.HasMember("args"));
}
