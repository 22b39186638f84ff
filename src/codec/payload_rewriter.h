// The payload rewriter: writes a JSON text again without a DOM, optionally
// replacing or adding top-level members on the way. EncodeJob uses it on
// args and extra, RecordFailure on the whole payload.
//
// A DOM holds an integer beyond the int64 and uint64 ranges as a double,
// which Ruby would then read as a Float: another value. Payloads reliableq
// writes again are therefore rewritten from their text, number literals as
// they stand.
//
// An object that gives a member name more than once is written as Ruby's
// JSON.parse and JSON.generate write it (see RubyMembers): the name once,
// where it first stands, with its last value. So the text written is the
// one Sidekiq would write again for the same job.
//
// Thread safety: a Rewriter is used by one thread at a time.

#ifndef RELIABLEQ_CODEC_PAYLOAD_REWRITER_H_
#define RELIABLEQ_CODEC_PAYLOAD_REWRITER_H_

#include <rapidjson/reader.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace reliableq::codec {

// SAX handler that writes the events of a JSON text as the DOM writer
// (ToJson) writes the same value, except integer literals (see
// AppendNumberLiteral). It never stops the parse: what it finds wrong is
// left for the caller to report, in the caller's order. Feed it with
// ParseText<kParseFlags> (codec/ruby_json.h).
class Rewriter : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, Rewriter> {
 public:
  struct Member {
    std::string name;
    bool too_deep = false;  // its value nests deeper than max_depth allows
  };

  // Levels of arrays and objects allowed, the root counting as one.
  explicit Rewriter(int max_depth) : max_depth_(max_depth) {}

  // The first top-level member called `name` gets `json` as its value and
  // later ones of that name are dropped; when there is none, "name":json is
  // appended to the top-level object, after the members set before it.
  void SetMember(std::string name, std::string json) {
    replacements_.push_back({std::move(name), std::move(json), false});
  }

  std::string& json() { return out_; }
  rapidjson::Type root_type() const { return root_type_; }
  bool too_deep() const { return too_deep_; }
  // True when a string or name held a \u escape of a lone UTF-16 low
  // surrogate (see AppendString): no character.
  bool lone_surrogate() const { return lone_surrogate_; }
  // The members of a top-level object, in order, each name as often as the
  // text gives it.
  const std::vector<Member>& members() const { return members_; }

  // The SAX events.
  bool Null();
  bool Bool(bool b);
  bool RawNumber(const char* text, rapidjson::SizeType length, bool copy);
  bool String(const char* text, rapidjson::SizeType length, bool copy);
  bool StartObject();
  bool StartArray();
  bool EndObject(rapidjson::SizeType member_count);
  bool EndArray(rapidjson::SizeType element_count);
  bool Key(const char* text, rapidjson::SizeType length, bool copy);

 private:
  struct Replacement {
    std::string name;
    std::string json;
    bool done;
  };

  // A member written in an object not closed yet: its name, quoted, stands
  // in out_ at [begin, colon), its value at (colon, end).
  struct Span {
    size_t begin;
    size_t colon;
    size_t end;
  };
  // An object not closed yet: where its members start in out_, and its
  // first entry in spans_.
  struct OpenObject {
    size_t members_begin;
    size_t first_span;
  };

  // Writes "name":json after a ',' where one is needed.
  void WriteMember(std::string_view name, std::string_view json);
  // Starts a member's span at the current end of out_, before its name.
  void BeginSpan();
  // Writes the members of the innermost open object again as Ruby keeps
  // them, if it gives a name twice.
  void KeepRubyMembers();
  // True when the value starting now is to be written.
  bool BeginValue(rapidjson::Type type);
  bool EndValue();
  bool Open(rapidjson::Type type, char bracket);
  bool Close(char bracket);

  const int max_depth_;
  std::string out_;
  int depth_ = 0;
  bool comma_ = false;     // a value was written at this level: the next needs a ','
  bool skipping_ = false;  // inside a top-level member being replaced or dropped
  bool too_deep_ = false;
  bool lone_surrogate_ = false;
  rapidjson::Type root_type_ = rapidjson::kNullType;
  std::vector<Member> members_;
  std::vector<Replacement> replacements_;
  std::vector<bool> in_object_;  // per open array or object, innermost last
  std::vector<OpenObject> objects_;
  std::vector<Span> spans_;  // of the open objects, in order
};

}  // namespace reliableq::codec

#endif  // RELIABLEQ_CODEC_PAYLOAD_REWRITER_H_
