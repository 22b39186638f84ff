// ToJson and WideIntegers (json_writer.h): a whole JSON value written as
// Ruby's JSON.generate writes it, on the pieces of ruby_json.h.

#include "codec/json_writer.h"

#include <rapidjson/document.h>

#include <charconv>
#include <cstdint>
#include <map>
#include <string>
#include <system_error>
#include <vector>

#include "codec/ruby_json.h"

namespace reliableq::codec {

namespace {

// Where a value stands inside a JSON text: the member names and array
// indices leading to it, each with its length, so that no two places share
// a path.
void PushMemberStep(std::string_view name, std::string* path) {
  *path += 'o';
  *path += std::to_string(name.size());
  path->push_back(':');
  path->append(name);
}

void PushIndexStep(size_t index, std::string* path) {
  *path += 'a';
  *path += std::to_string(index);
  path->push_back(';');
}

// The literals of wide integers by path (see WideIntegers).
using WideLiterals = std::map<std::string, std::string, std::less<>>;

// True for an integer literal that fits neither int64 nor uint64: the DOM
// holds it as the nearest double.
bool IsWideInteger(std::string_view literal) {
  if (!IsIntegerLiteral(literal)) return false;
  const char* end = literal.data() + literal.size();
  if (literal.front() == '-') {
    int64_t value;
    return std::from_chars(literal.data(), end, value).ec != std::errc();
  }
  uint64_t value;
  return std::from_chars(literal.data(), end, value).ec != std::errc();
}

// `wide` and `path` are null, or the wide integers of the text `value` was
// parsed from and the path of `value` in it.
void AppendValue(const rapidjson::Value& value, std::string* out,
                 const WideLiterals* wide = nullptr, std::string* path = nullptr) {
  switch (value.GetType()) {
    case rapidjson::kNullType: *out += "null"; break;
    case rapidjson::kFalseType: *out += "false"; break;
    case rapidjson::kTrueType: *out += "true"; break;
    case rapidjson::kStringType:
      AppendString({value.GetString(), value.GetStringLength()}, out);
      break;
    case rapidjson::kNumberType:
      if (value.IsDouble()) {
        if (wide != nullptr) {
          // Only while the double there is still the one the literal reads
          // as: a value put in its place is written as it is.
          auto it = wide->find(*path);
          if (it != wide->end() && NumberValue(it->second) == value.GetDouble()) {
            *out += it->second;
            break;
          }
        }
        AppendFloat(value.GetDouble(), out);
      } else if (value.IsInt64()) {
        AppendInteger(value.GetInt64(), out);
      } else {
        AppendInteger(value.GetUint64(), out);
      }
      break;
    case rapidjson::kArrayType: {
      out->push_back('[');
      size_t index = 0;
      for (const auto& element : value.GetArray()) {
        if (index != 0) out->push_back(',');
        if (wide != nullptr) {
          size_t mark = path->size();
          PushIndexStep(index, path);
          AppendValue(element, out, wide, path);
          path->resize(mark);
        } else {
          AppendValue(element, out);
        }
        ++index;
      }
      out->push_back(']');
      break;
    }
    case rapidjson::kObjectType: {
      out->push_back('{');
      bool first = true;
      for (const auto& member : value.GetObject()) {
        if (!first) out->push_back(',');
        first = false;
        AppendValue(member.name, out);
        out->push_back(':');
        if (wide != nullptr) {
          size_t mark = path->size();
          PushMemberStep({member.name.GetString(), member.name.GetStringLength()}, path);
          AppendValue(member.value, out, wide, path);
          path->resize(mark);
        } else {
          AppendValue(member.value, out);
        }
      }
      out->push_back('}');
      break;
    }
  }
}

// SAX handler that collects the wide integers of a text by path.
class WideIntegerFinder
    : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, WideIntegerFinder> {
 public:
  explicit WideIntegerFinder(WideLiterals* literals) : literals_(literals) {}

  bool RawNumber(const char* text, rapidjson::SizeType length, bool) {
    std::string_view literal(text, length);
    if (IsWideInteger(literal)) {
      size_t mark = path_.size();
      PushStep();
      literals_->emplace(path_, literal);
      path_.resize(mark);
    }
    return Default();
  }
  bool StartObject() { return Open(false); }
  bool StartArray() { return Open(true); }
  bool EndObject(rapidjson::SizeType) { return Close(); }
  bool EndArray(rapidjson::SizeType) { return Close(); }
  bool Key(const char* text, rapidjson::SizeType length, bool) {
    levels_.back().key.assign(text, length);
    // A name given again in this object: Ruby keeps its last value only,
    // so the literals found under an earlier one are gone.
    if (!literals_->empty()) {
      size_t mark = path_.size();
      PushStep();
      auto first = literals_->lower_bound(path_);
      auto last = first;
      while (last != literals_->end() && last->first.starts_with(path_)) ++last;
      literals_->erase(first, last);
      path_.resize(mark);
    }
    return true;
  }
  // Every other value.
  bool Default() {
    if (!levels_.empty()) ++levels_.back().index;
    return true;
  }

 private:
  struct Level {
    bool array;
    size_t index = 0;
    std::string key;
  };

  // Appends the step to the value starting now to path_.
  void PushStep() {
    if (levels_.empty()) return;
    if (levels_.back().array) {
      PushIndexStep(levels_.back().index, &path_);
    } else {
      PushMemberStep(levels_.back().key, &path_);
    }
  }

  bool Open(bool array) {
    marks_.push_back(path_.size());
    PushStep();
    levels_.push_back({array, 0, {}});
    return true;
  }

  bool Close() {
    levels_.pop_back();
    path_.resize(marks_.back());
    marks_.pop_back();
    return Default();
  }

  WideLiterals* literals_;
  std::string path_;
  std::vector<size_t> marks_;
  std::vector<Level> levels_;
};

}  // namespace

}  // namespace reliableq::codec

namespace reliableq::codec {

std::string ToJson(const rapidjson::Value& value) {
  std::string out;
  codec::AppendValue(value, &out);
  return out;
}

WideIntegers WideIntegers::Find(std::string_view json) {
  WideIntegers found;
  codec::WideIntegerFinder finder(&found.literals_);
  if (codec::ParseText<codec::kParseFlags>(json, &finder).IsError()) found.literals_.clear();
  return found;
}

std::string ToJson(const rapidjson::Value& value, const WideIntegers& wide) {
  if (wide.literals_.empty()) return ToJson(value);
  std::string out;
  std::string path;
  codec::AppendValue(value, &out, &wide.literals_, &path);
  return out;
}

}  // namespace reliableq::codec
