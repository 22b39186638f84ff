#include "codec/payload_rewriter.h"

#include "codec/ruby_json.h"

namespace reliableq::codec {

bool Rewriter::Null() {
  if (BeginValue(rapidjson::kNullType)) out_ += "null";
  return EndValue();
}

bool Rewriter::Bool(bool b) {
  if (BeginValue(b ? rapidjson::kTrueType : rapidjson::kFalseType)) out_ += b ? "true" : "false";
  return EndValue();
}

bool Rewriter::RawNumber(const char* text, rapidjson::SizeType length, bool) {
  if (BeginValue(rapidjson::kNumberType)) AppendNumberLiteral({text, length}, &out_);
  return EndValue();
}

bool Rewriter::String(const char* text, rapidjson::SizeType length, bool) {
  if (BeginValue(rapidjson::kStringType)) AppendString({text, length}, &out_);
  return EndValue();
}

bool Rewriter::StartObject() { return Open(rapidjson::kObjectType, '{'); }

bool Rewriter::StartArray() { return Open(rapidjson::kArrayType, '['); }

bool Rewriter::EndObject(rapidjson::SizeType) {
  if (depth_ == 1) {
    for (const Replacement& r : replacements_) {
      if (!r.done) WriteMember(r.name, r.json);
    }
  }
  return Close('}');
}

bool Rewriter::EndArray(rapidjson::SizeType) { return Close(']'); }

bool Rewriter::Key(const char* text, rapidjson::SizeType length, bool) {
  std::string_view name(text, length);
  if (depth_ == 1) {
    members_.push_back({std::string(name), false});
    for (Replacement& r : replacements_) {
      if (!r.done && r.name == name) {
        r.done = true;
        WriteMember(name, r.json);
        skipping_ = true;  // the member's own value
        return true;
      }
    }
  }
  if (!skipping_) {
    if (comma_) out_.push_back(',');
    AppendString(name, &out_);
    out_.push_back(':');
    comma_ = false;
  }
  return true;
}

void Rewriter::WriteMember(std::string_view name, const std::string& json) {
  if (comma_) out_.push_back(',');
  AppendString(name, &out_);
  out_.push_back(':');
  out_ += json;
  comma_ = true;
}

bool Rewriter::BeginValue(rapidjson::Type type) {
  if (depth_ == 0) root_type_ = type;
  if (skipping_) return false;
  if (comma_) out_.push_back(',');
  return true;
}

bool Rewriter::EndValue() {
  if (depth_ == 1) skipping_ = false;
  comma_ = true;
  return true;
}

bool Rewriter::Open(rapidjson::Type type, char bracket) {
  if (BeginValue(type)) out_.push_back(bracket);
  ++depth_;
  if (depth_ > max_depth_) {
    too_deep_ = true;
    if (depth_ > 1 && root_type_ == rapidjson::kObjectType) members_.back().too_deep = true;
  }
  comma_ = false;
  return true;
}

bool Rewriter::Close(char bracket) {
  --depth_;
  if (!skipping_) out_.push_back(bracket);
  return EndValue();
}

}  // namespace reliableq::codec
