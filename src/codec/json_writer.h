// A whole JSON value written as Ruby's JSON.generate writes it (the rules
// are at the top of job_codec.h), keeping the integer literals a DOM cannot
// hold.
//
// Thread safety: pure functions; any thread.

#ifndef RELIABLEQ_CODEC_JSON_WRITER_H_
#define RELIABLEQ_CODEC_JSON_WRITER_H_

#include <rapidjson/document.h>

#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace reliableq::codec {

// Deeper nesting (the job object counts as level 1) is refused, as Ruby's
// JSON parser refuses it by default: Sidekiq could not read such a job.
inline constexpr int kMaxJsonDepth = 100;

// `value` as Ruby's JSON.generate writes it (see the top of job_codec.h).
// Precondition: `value` nests at most kMaxJsonDepth deep.
std::string ToJson(const rapidjson::Value& value);

class WideIntegers;

// As ToJson(value), for a `value` parsed from the text `wide` was found in
// and possibly changed since: a double that stands where that text has a
// wide integer, and still equals the double that integer reads as, is
// written as the integer's literal. Integers code left where they were
// (client middleware adding fields, say) thus stay exact; one moved
// elsewhere is written as a float.
std::string ToJson(const rapidjson::Value& value, const WideIntegers& wide);

// The integer literals of a JSON text beyond the int64 and uint64 ranges,
// which a rapidjson DOM can hold only as the nearest double (Ruby reads them
// as Integers), each with where it stands. EncodeJob and RecordFailure keep
// such literals by themselves; this is for payloads that pass through a DOM.
class WideIntegers {
 public:
  // Those of `json` (under a name an object gives twice, those of its last
  // value, which Ruby and DecodeJob keep); none when it is not valid JSON.
  static WideIntegers Find(std::string_view json);

  bool empty() const { return literals_.empty(); }

 private:
  friend std::string ToJson(const rapidjson::Value& value, const WideIntegers& wide);

  // Literal by path of member names and array indices.
  std::map<std::string, std::string, std::less<>> literals_;
};

}  // namespace reliableq::codec

#endif  // RELIABLEQ_CODEC_JSON_WRITER_H_
