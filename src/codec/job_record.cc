#include "codec/job_record.h"

#include <rapidjson/encodedstream.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdint>

#include "base/utf8.h"
#include "codec/job_codec.h"
#include "codec/json_writer.h"

namespace reliableq::codec {

namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void WriteText(JsonWriter& w, std::string_view text) {
  w.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
}

// Epoch seconds as FormatEpoch writes them (microseconds), as a number.
void WriteEpoch(JsonWriter& w, double seconds) {
  std::string text = FormatEpoch(seconds);
  w.RawValue(text.data(), text.size(), rapidjson::kNumberType);
}

// Counts how deep a value nests, and stops the parse past the bound.
struct DepthBound : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, DepthBound> {
  int depth = 0;
  bool Open() { return ++depth <= kMaxJsonDepth; }
  bool Close() {
    --depth;
    return true;
  }
  bool StartObject() { return Open(); }
  bool EndObject(rapidjson::SizeType) { return Close(); }
  bool StartArray() { return Open(); }
  bool EndArray(rapidjson::SizeType) { return Close(); }
};

// One JSON value, valid UTF-8, nesting at most kMaxJsonDepth deep (readers
// of a record walk it recursively), and nothing after it but white space.
bool IsJson(std::string_view text) {
  rapidjson::MemoryStream memory(text.data(), text.size());
  rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> stream(memory);
  DepthBound bound;
  rapidjson::Reader reader;
  return !reader
              .Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseIterativeFlag>(stream,
                                                                                             bound)
              .IsError();
}

}  // namespace

std::string ProgressJson(const JobProgress& progress) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  w.Key("percent");
  w.Double(progress.percent);
  if (!progress.message.empty()) {
    w.Key("message");
    WriteText(w, progress.message);
  }
  w.Key("at");
  WriteEpoch(w, progress.at);
  w.EndObject();
  return buf.GetString();
}

std::string JsonValueOf(std::string_view text) {
  size_t first = text.find_first_not_of(" \t\r\n");
  size_t last = text.find_last_not_of(" \t\r\n");
  if (first != std::string_view::npos) {
    std::string_view trimmed = text.substr(first, last - first + 1);
    if (IsJson(trimmed)) return std::string(trimmed);
  }
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  WriteText(w, base::Scrub(text));
  return buf.GetString();
}

std::string JobRecordJson(const JobRecordFields& fields, size_t max_bytes) {
  // One allocation for the common record.
  rapidjson::StringBuffer buf(
      nullptr, 256 + fields.result.size() + fields.payload.size() + fields.args.size());
  JsonWriter w(buf);
  w.StartObject();
  w.Key("state");
  WriteText(w, fields.state);
  w.Key("at");
  WriteEpoch(w, fields.at);
  w.Key("jid");
  WriteText(w, fields.jid);
  w.Key("class");
  WriteText(w, fields.job_class);
  w.Key("queue");
  WriteText(w, fields.queue);
  w.Key("process");
  WriteText(w, fields.process);
  if (fields.started_at) {
    w.Key("started_at");
    WriteEpoch(w, *fields.started_at);
  }
  w.Key("attempts");
  w.Int64(fields.attempts);
  if (!fields.error_class.empty()) {
    w.Key("error_class");
    WriteText(w, fields.error_class);
    w.Key("error_message");
    WriteText(w, fields.error_message);
  }
  if (fields.progress != nullptr) {
    std::string progress = ProgressJson(*fields.progress);
    w.Key("progress");
    w.RawValue(progress.data(), progress.size(), rapidjson::kObjectType);
  }
  // What is left for the two parts that may be large, each with its key and
  // the closing brace.
  auto fits = [&](std::string_view key, size_t size) {
    return buf.GetSize() + key.size() + size + 5 <= max_bytes;
  };
  if (!fields.result.empty()) {
    if (fits("result", fields.result.size())) {
      w.Key("result");
      w.RawValue(fields.result.data(), fields.result.size(), rapidjson::kObjectType);
    } else {
      w.Key("result_bytes");
      w.Uint64(fields.result.size());
    }
  }
  const bool whole = !fields.payload.empty();
  std::string_view job = whole ? fields.payload : fields.args;
  if (fits(whole ? "job" : "args", job.size())) {
    w.Key(whole ? "job" : "args");
    w.RawValue(job.data(), job.size(), whole ? rapidjson::kObjectType : rapidjson::kArrayType);
  } else {
    w.Key(whole ? "job_bytes" : "args_bytes");
    w.Uint64(job.size());
  }
  w.EndObject();
  return buf.GetString();
}

}  // namespace reliableq::codec
