#include "codec/payload_rewriter.h"

#include <span>

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
  if (HasEncodedLowSurrogate({text, length})) lone_surrogate_ = true;
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
  if (HasEncodedLowSurrogate(name)) lone_surrogate_ = true;
  if (depth_ == 1) {
    members_.push_back({std::string(name), false});
    for (Replacement& r : replacements_) {
      if (r.name != name) continue;
      // One member of a name, where it first stands, as Ruby's Hash keeps it.
      if (!r.done) {
        r.done = true;
        WriteMember(name, r.json);
      }
      skipping_ = true;  // the member's own value
      return true;
    }
  }
  if (!skipping_) {
    BeginSpan();
    AppendString(name, &out_);
    spans_.back().colon = out_.size();
    out_.push_back(':');
    comma_ = false;
  }
  return true;
}

void Rewriter::WriteMember(std::string_view name, std::string_view json) {
  BeginSpan();
  AppendString(name, &out_);
  spans_.back().colon = out_.size();
  out_.push_back(':');
  out_ += json;
  spans_.back().end = out_.size();
  comma_ = true;
}

void Rewriter::BeginSpan() {
  if (comma_) out_.push_back(',');
  spans_.push_back({out_.size(), 0, 0});
}

void Rewriter::KeepRubyMembers() {
  const OpenObject& object = objects_.back();
  std::span<const Span> spans(spans_.data() + object.first_span,
                              spans_.size() - object.first_span);
  if (spans.size() < 2) return;
  // A name's text as written is the same exactly when the names are.
  std::vector<std::string_view> names;
  names.reserve(spans.size());
  for (const Span& span : spans) {
    names.emplace_back(out_.data() + span.begin, span.colon - span.begin);
  }
  std::vector<KeptMember> kept;
  if (!RubyMembers(names, &kept)) return;
  std::string members;
  for (const KeptMember& k : kept) {
    if (!members.empty()) members.push_back(',');
    const Span& name = spans[k.first];
    const Span& value = spans[k.last];
    members.append(out_, name.begin, name.colon + 1 - name.begin);
    members.append(out_, value.colon + 1, value.end - value.colon - 1);
  }
  out_.resize(object.members_begin);
  out_ += members;
}

bool Rewriter::BeginValue(rapidjson::Type type) {
  if (depth_ == 0) root_type_ = type;
  if (skipping_) return false;
  if (comma_) out_.push_back(',');
  return true;
}

bool Rewriter::EndValue() {
  if (skipping_) {
    if (depth_ == 1) skipping_ = false;  // the replaced or dropped member ends
  } else if (!in_object_.empty() && in_object_.back()) {
    spans_.back().end = out_.size();
  }
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
  bool object = type == rapidjson::kObjectType;
  in_object_.push_back(object);
  if (object) objects_.push_back({out_.size(), spans_.size()});
  comma_ = false;
  return true;
}

bool Rewriter::Close(char bracket) {
  --depth_;
  if (in_object_.back()) {
    if (!skipping_) KeepRubyMembers();
    spans_.resize(objects_.back().first_span);
    objects_.pop_back();
  }
  in_object_.pop_back();
  if (!skipping_) out_.push_back(bracket);
  return EndValue();
}

}  // namespace reliableq::codec
