#include "job_codec.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <rapidjson/encodedstream.h>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <system_error>
#include <utility>

namespace reliableq {

namespace {

// Iterative parsing keeps a hostile, deeply nested payload from overflowing
// the stack before the depth check can refuse it.
constexpr unsigned kParseFlags =
    rapidjson::kParseFullPrecisionFlag | rapidjson::kParseIterativeFlag;

// ---------------------------------------------------------------------------
// Randomness for jids.

// Bumped in every forked child, so that a child never hands out jids from
// random bytes its parent buffered (and may hand out too).
std::atomic<uint64_t> fork_generation{0};
std::once_flag atfork_once;

void OnForkChild() { fork_generation.fetch_add(1, std::memory_order_relaxed); }

bool ReadUrandom(unsigned char* out, size_t size) {
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t got = 0;
  while (got < size) {
    ssize_t n = read(fd, out + got, size - got);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  close(fd);
  return got == size;
}

// Last resort when the kernel gives no randomness at all: splitmix64 over the
// time, the pid and a counter keeps jids distinct, if not unpredictable.
void FallbackRandom(unsigned char* out, size_t size) {
  static std::atomic<uint64_t> counter{0};
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t state = (static_cast<uint64_t>(ts.tv_sec) << 32) ^ static_cast<uint64_t>(ts.tv_nsec) ^
                   (static_cast<uint64_t>(getpid()) << 16) ^
                   counter.fetch_add(0x9e3779b97f4a7c15ULL, std::memory_order_relaxed);
  for (size_t i = 0; i < size; i += 8) {
    state += 0x9e3779b97f4a7c15ULL;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    std::memcpy(out + i, &z, std::min<size_t>(8, size - i));
  }
}

void FillRandom(unsigned char* out, size_t size) {
  size_t got = 0;
  while (got < size) {
    ssize_t n = getrandom(out + got, size - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;  // ENOSYS on kernels before 3.17, or a seccomp filter.
    }
  }
  if (got == size) return;
  if (ReadUrandom(out, size)) return;
  FallbackRandom(out, size);
}

constexpr size_t kJidBytes = 12;

// One getrandom call serves 64 jids: bulk pushes would otherwise spend most
// of their encoding time in the system call.
struct RandomPool {
  unsigned char bytes[kJidBytes * 64];
  size_t used = sizeof(bytes);
  uint64_t generation = 0;
};

// ---------------------------------------------------------------------------
// UTF-8.

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The length of the valid UTF-8 sequence at the start of `in`, or 0 when it
// is invalid; `*bad` is then the length of its maximal invalid subpart (at
// least 1), which is replaced by one U+FFFD, as Unicode recommends.
size_t SequenceLength(std::string_view in, size_t* bad) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(in[i]); };
  unsigned char lead = byte(0);
  *bad = 1;
  if (lead < 0x80) return 1;
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 3;
    if (lead == 0xE0) lo = 0xA0;  // no overlong forms
    if (lead == 0xED) hi = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 4;
    if (lead == 0xF0) lo = 0x90;  // no overlong forms
    if (lead == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  for (size_t i = 1; i < need; ++i) {
    if (i >= in.size()) return 0;
    unsigned char c = byte(i);
    unsigned char min = i == 1 ? lo : 0x80, max = i == 1 ? hi : 0xBF;
    if (c < min || c > max) return 0;
    *bad = i + 1;
  }
  return need;
}

bool IsValidUtf8(std::string_view in) {
  while (!in.empty()) {
    size_t bad;
    size_t n = SequenceLength(in, &bad);
    if (n == 0) return false;
    in.remove_prefix(n);
  }
  return true;
}

// `in` with each invalid sequence replaced by U+FFFD, cut after `max_chars`
// characters (code points), never inside one.
std::string Scrub(std::string_view in, size_t max_chars = SIZE_MAX) {
  std::string out;
  out.reserve(std::min(in.size(), max_chars));
  for (size_t chars = 0; !in.empty() && chars < max_chars; ++chars) {
    size_t bad;
    size_t n = SequenceLength(in, &bad);
    if (n == 0) {
      out += kReplacement;
      n = bad;
    } else {
      out.append(in.data(), n);
    }
    in.remove_prefix(n);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Writing JSON the way Ruby's JSON.generate does.

void AppendString(std::string_view text, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t plain = 0;  // start of the run of bytes copied as they are
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(text.data() + plain, i - plain);
    plain = i + 1;
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default:
        *out += "\\u00";
        out->push_back(kHex[c >> 4]);
        out->push_back(kHex[c & 15]);
    }
  }
  out->append(text.data() + plain, text.size() - plain);
  out->push_back('"');
}

// Ruby's Float#to_s: the shortest digits that read back as the same double,
// in fixed notation when the decimal exponent is in [-4, 16), else as
// d.ddde+XX; there is always a '.'.
void AppendFloat(double value, std::string* out) {
  // Ruby refuses to write NaN and infinities; null keeps the output JSON.
  if (!std::isfinite(value)) {
    *out += "null";
    return;
  }
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string_view text(buf, static_cast<size_t>(result.ptr - buf));
  if (!text.empty() && text.front() == '-') {
    out->push_back('-');
    text.remove_prefix(1);
  }
  size_t e = text.find('e');
  std::string digits;
  for (char c : text.substr(0, e)) {
    if (c != '.') digits.push_back(c);
  }
  std::string_view exponent = text.substr(e + 1);
  bool negative_exponent = exponent.front() == '-';
  int exp = 0;
  std::from_chars(exponent.data() + 1, exponent.data() + exponent.size(), exp);
  if (negative_exponent) exp = -exp;
  // Ruby's decpt: the value is 0.DIGITS times 10^decpt.
  int decpt = exp + 1;
  int ndigits = static_cast<int>(digits.size());
  if (decpt > 0 && decpt <= 16) {
    if (ndigits <= decpt) {
      *out += digits;
      out->append(static_cast<size_t>(decpt - ndigits), '0');
      *out += ".0";
    } else {
      out->append(digits, 0, static_cast<size_t>(decpt));
      out->push_back('.');
      out->append(digits, static_cast<size_t>(decpt));
    }
  } else if (decpt > -4 && decpt <= 0) {
    *out += "0.";
    out->append(static_cast<size_t>(-decpt), '0');
    *out += digits;
  } else {
    out->push_back(digits[0]);
    out->push_back('.');
    if (ndigits > 1) {
      out->append(digits, 1);
    } else {
      out->push_back('0');
    }
    char tail[16];
    std::snprintf(tail, sizeof(tail), "e%+03d", decpt - 1);
    *out += tail;
  }
}

template <typename Int>
void AppendInteger(Int value, std::string* out) {
  char buf[24];
  auto result = std::to_chars(buf, buf + sizeof(buf), value);
  out->append(buf, result.ptr);
}

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

// The double a non-integer JSON number literal stands for, converted as the
// DOM parser converts it (kParseFullPrecisionFlag), so that the text written
// again is the same whichever way it was read.
double NumberValue(std::string_view literal) {
  struct Handler : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, Handler> {
    double value = 0;
    bool Double(double d) {
      value = d;
      return true;
    }
  } handler;
  rapidjson::MemoryStream stream(literal.data(), literal.size());
  rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> input(stream);
  rapidjson::Reader reader;
  reader.Parse<rapidjson::kParseFullPrecisionFlag>(input, handler);
  return handler.value;
}

bool IsIntegerLiteral(std::string_view literal) {
  return literal.find_first_of(".eE") == std::string_view::npos;
}

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

// A JSON number literal as Ruby writes what JSON.parse made of it: an
// integer literal, of any size, is an Integer and keeps its digits (-0 is
// 0); anything else is a Float.
void AppendNumberLiteral(std::string_view literal, std::string* out) {
  if (!IsIntegerLiteral(literal)) {
    AppendFloat(NumberValue(literal), out);
  } else if (literal == "-0") {
    out->push_back('0');
  } else {
    out->append(literal);
  }
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

// True when `value` has at most `levels` levels of arrays and objects.
// Recursion stops at the limit, so this is safe on any input.
bool DepthWithin(const rapidjson::Value& value, int levels) {
  if (value.IsArray()) {
    if (levels <= 0) return false;
    for (const auto& element : value.GetArray()) {
      if (!DepthWithin(element, levels - 1)) return false;
    }
  } else if (value.IsObject()) {
    if (levels <= 0) return false;
    for (const auto& member : value.GetObject()) {
      if (!DepthWithin(member.value, levels - 1)) return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------
// Writing a JSON text again without a DOM.
//
// A DOM holds an integer beyond the int64 and uint64 ranges as a double,
// which Ruby would then read as a Float: another value. Payloads reliableq
// writes again are therefore rewritten from their text, number literals as
// they stand.

// The parse flags for a rewrite: those of the DOM parse it stands in for,
// with numbers handed over as their literals.
constexpr unsigned kRewriteFlags = kParseFlags | rapidjson::kParseNumbersAsStringsFlag;

// SAX handler that writes the events of a JSON text as AppendValue writes
// the same value from a DOM, except integer literals (see
// AppendNumberLiteral). It never stops the parse: what it finds wrong is
// left for the caller to report, in the caller's order.
class Rewriter : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, Rewriter> {
 public:
  struct Member {
    std::string name;
    bool too_deep = false;  // its value nests deeper than max_depth allows
  };

  // Levels of arrays and objects allowed, the root counting as one.
  explicit Rewriter(int max_depth) : max_depth_(max_depth) {}

  // The first top-level member called `name` gets `json` as its value; when
  // there is none, "name":json is appended to the top-level object, after
  // the members set before it.
  void SetMember(std::string name, std::string json) {
    replacements_.push_back({std::move(name), std::move(json), false});
  }

  std::string& json() { return out_; }
  rapidjson::Type root_type() const { return root_type_; }
  bool too_deep() const { return too_deep_; }
  // The members of a top-level object, in order.
  const std::vector<Member>& members() const { return members_; }

  bool Null() {
    if (BeginValue(rapidjson::kNullType)) out_ += "null";
    return EndValue();
  }
  bool Bool(bool b) {
    if (BeginValue(b ? rapidjson::kTrueType : rapidjson::kFalseType)) out_ += b ? "true" : "false";
    return EndValue();
  }
  bool RawNumber(const char* text, rapidjson::SizeType length, bool) {
    if (BeginValue(rapidjson::kNumberType)) AppendNumberLiteral({text, length}, &out_);
    return EndValue();
  }
  bool String(const char* text, rapidjson::SizeType length, bool) {
    if (BeginValue(rapidjson::kStringType)) AppendString({text, length}, &out_);
    return EndValue();
  }
  bool StartObject() { return Open(rapidjson::kObjectType, '{'); }
  bool StartArray() { return Open(rapidjson::kArrayType, '['); }
  bool EndObject(rapidjson::SizeType) {
    if (depth_ == 1) {
      for (const Replacement& r : replacements_) {
        if (!r.done) WriteMember(r.name, r.json);
      }
    }
    return Close('}');
  }
  bool EndArray(rapidjson::SizeType) { return Close(']'); }

  bool Key(const char* text, rapidjson::SizeType length, bool) {
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

 private:
  struct Replacement {
    std::string name;
    std::string json;
    bool done;
  };

  void WriteMember(std::string_view name, const std::string& json) {
    if (comma_) out_.push_back(',');
    AppendString(name, &out_);
    out_.push_back(':');
    out_ += json;
    comma_ = true;
  }

  // True when the value starting now is to be written.
  bool BeginValue(rapidjson::Type type) {
    if (depth_ == 0) root_type_ = type;
    if (skipping_) return false;
    if (comma_) out_.push_back(',');
    return true;
  }

  bool EndValue() {
    if (depth_ == 1) skipping_ = false;
    comma_ = true;
    return true;
  }

  bool Open(rapidjson::Type type, char bracket) {
    if (BeginValue(type)) out_.push_back(bracket);
    ++depth_;
    if (depth_ > max_depth_) {
      too_deep_ = true;
      if (depth_ > 1 && root_type_ == rapidjson::kObjectType) members_.back().too_deep = true;
    }
    comma_ = false;
    return true;
  }

  bool Close(char bracket) {
    --depth_;
    if (!skipping_) out_.push_back(bracket);
    return EndValue();
  }

  const int max_depth_;
  std::string out_;
  int depth_ = 0;
  bool comma_ = false;     // a value was written at this level: the next needs a ','
  bool skipping_ = false;  // inside a top-level member value being replaced
  bool too_deep_ = false;
  rapidjson::Type root_type_ = rapidjson::kNullType;
  std::vector<Member> members_;
  std::vector<Replacement> replacements_;
};

// Parses `text` into `handler`, as Document::Parse<flags> would.
template <unsigned kFlags, typename Handler>
rapidjson::ParseResult ParseText(std::string_view text, Handler* handler) {
  rapidjson::MemoryStream stream(text.data(), text.size());
  rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> input(stream);
  rapidjson::Reader reader;
  return reader.Parse<kFlags>(input, *handler);
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

// ---------------------------------------------------------------------------
// Job fields.

// Timestamps inside payloads: microsecond precision as FormatEpoch, written
// as Ruby writes the float, so that Sidekiq's re-dump gives the same bytes.
double RoundToMicros(double seconds) { return std::strtod(FormatEpoch(seconds).c_str(), nullptr); }

void AppendTimestamp(double seconds, std::string* out) { AppendFloat(RoundToMicros(seconds), out); }

constexpr std::string_view kReservedFields[] = {"class", "args",       "queue",       "retry",
                                                "jid",   "created_at", "enqueued_at", "at"};

// "Invalid value at offset 3": RapidJSON's message without its full stop.
std::string ParseErrorText(rapidjson::ParseErrorCode code, size_t offset) {
  std::string text = rapidjson::GetParseError_En(code);
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text + " at offset " + std::to_string(offset);
}

std::string ParseErrorText(const rapidjson::Document& document) {
  return ParseErrorText(document.GetParseError(), document.GetErrorOffset());
}

const char* TypeWord(rapidjson::Type type) {
  switch (type) {
    case rapidjson::kNullType: return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType: return "a boolean";
    case rapidjson::kObjectType: return "an object";
    case rapidjson::kArrayType: return "an array";
    case rapidjson::kStringType: return "a string";
    case rapidjson::kNumberType: return "a number";
  }
  return "something else";
}

const char* TypeWord(const rapidjson::Value& value) { return TypeWord(value.GetType()); }

// Rewrites one field of a Job given as JSON text (args, extra) into
// `rewriter`. Invalid UTF-8 is refused here: Sidekiq could not read it.
Status RewriteField(std::string_view name, const std::string& text, Rewriter* rewriter) {
  rapidjson::ParseResult parsed =
      ParseText<kRewriteFlags | rapidjson::kParseValidateEncodingFlag>(text, rewriter);
  if (parsed.IsError()) {
    return Status::InvalidArgument(std::string(name) + " is not valid JSON: " +
                                   ParseErrorText(parsed.Code(), parsed.Offset()));
  }
  return Status::OK();
}

bool IsPrintableAscii(std::string_view text) {
  for (char c : text) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

std::string Base64Mime(const unsigned char* data, size_t size) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((size + 2) / 3 * 4 + size / 45 + 2);
  size_t line = 0;
  for (size_t i = 0; i < size; i += 3) {
    uint32_t chunk = static_cast<uint32_t>(data[i]) << 16;
    if (i + 1 < size) chunk |= static_cast<uint32_t>(data[i + 1]) << 8;
    if (i + 2 < size) chunk |= data[i + 2];
    out.push_back(kAlphabet[(chunk >> 18) & 63]);
    out.push_back(kAlphabet[(chunk >> 12) & 63]);
    out.push_back(i + 1 < size ? kAlphabet[(chunk >> 6) & 63] : '=');
    out.push_back(i + 2 < size ? kAlphabet[chunk & 63] : '=');
    line += 4;
    // Ruby's Base64.encode64 ends every line of 60 characters, and the
    // last one, with a newline.
    if (line == 60) {
      out.push_back('\n');
      line = 0;
    }
  }
  if (line != 0) out.push_back('\n');
  return out;
}

// Sidekiq's compress_backtrace: base64(zlib deflate(JSON array of lines)).
Result<std::string> CompressBacktrace(const std::vector<std::string>& lines, size_t count) {
  std::string json = "[";
  for (size_t i = 0; i < count; ++i) {
    if (i != 0) json.push_back(',');
    AppendString(Scrub(lines[i]), &json);
  }
  json.push_back(']');
  uLongf size = compressBound(static_cast<uLong>(json.size()));
  std::string deflated(size, '\0');
  int rc = compress2(reinterpret_cast<Bytef*>(deflated.data()), &size,
                     reinterpret_cast<const Bytef*>(json.data()), static_cast<uLong>(json.size()),
                     Z_DEFAULT_COMPRESSION);
  if (rc != Z_OK)
    return Status::InvalidArgument("cannot deflate the backtrace: zlib error " +
                                   std::to_string(rc));
  return Base64Mime(reinterpret_cast<const unsigned char*>(deflated.data()), size);
}

// How many backtrace lines the job's `backtrace` field asks for: Ruby's
// `true` (all) or `backtrace[0...n]` for a number n, where a negative n
// counts from the end.
std::optional<size_t> BacktraceLines(const rapidjson::Value& field, size_t available) {
  if (field.IsTrue()) return available;
  if (!field.IsNumber()) return std::nullopt;
  double size = static_cast<double>(available);
  double n = field.IsInt64()    ? static_cast<double>(field.GetInt64())
             : field.IsUint64() ? size
                                : std::trunc(field.GetDouble());
  if (n < 0) n = std::max(0.0, size + n);
  return static_cast<size_t>(std::min(n, size));
}

}  // namespace

std::string NewJid() {
  std::call_once(atfork_once, [] { pthread_atfork(nullptr, nullptr, OnForkChild); });
  thread_local RandomPool pool;
  uint64_t generation = fork_generation.load(std::memory_order_relaxed);
  if (pool.used + kJidBytes > sizeof(pool.bytes) || pool.generation != generation) {
    FillRandom(pool.bytes, sizeof(pool.bytes));
    pool.used = 0;
    pool.generation = generation;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string jid(kJidBytes * 2, '0');
  for (size_t i = 0; i < kJidBytes; ++i) {
    unsigned char b = pool.bytes[pool.used + i];
    jid[2 * i] = kHex[b >> 4];
    jid[2 * i + 1] = kHex[b & 15];
  }
  pool.used += kJidBytes;
  return jid;
}

std::string FormatEpoch(double seconds) {
  char buf[64];
  int n = std::snprintf(buf, sizeof(buf), "%.6f", seconds);
  return std::string(buf, n > 0 ? static_cast<size_t>(n) : 0);
}

Result<std::string> EncodeJob(const Job& job, double created_at, std::optional<double> enqueued_at,
                              std::string* jid) {
  if (job.job_class.empty()) return Status::InvalidArgument("the job class is empty");
  if (!IsValidUtf8(job.job_class)) return Status::InvalidArgument("the job class is not UTF-8");
  if (job.queue.empty()) return Status::InvalidArgument("the queue name is empty");
  if (!IsValidUtf8(job.queue)) return Status::InvalidArgument("the queue name is not UTF-8");
  if (!job.jid.empty() && !IsPrintableAscii(job.jid)) {
    return Status::InvalidArgument("the jid must be printable ASCII");
  }
  std::string retry = job.retry.ToJson();
  if (!Retry::Parse(retry).ok()) {
    return Status::InvalidArgument("retry must be true, false or a non-negative count, not " +
                                   retry);
  }
  if (!std::isfinite(created_at) || (enqueued_at && !std::isfinite(*enqueued_at))) {
    return Status::InvalidArgument("the job's timestamps must be finite");
  }

  // The job object is the first level, args the second.
  Rewriter args(kMaxJsonDepth - 1);
  Status s = RewriteField("args", job.args, &args);
  if (!s.ok()) return s;
  if (args.root_type() != rapidjson::kArrayType) {
    return Status::InvalidArgument(std::string("args must be a JSON array, not ") +
                                   TypeWord(args.root_type()));
  }
  if (args.too_deep()) {
    return Status::InvalidArgument("args nest deeper than " + std::to_string(kMaxJsonDepth) +
                                   " levels");
  }
  // Its members become members of the job object: the same depth limit.
  Rewriter extra(kMaxJsonDepth);
  s = RewriteField("extra", job.extra, &extra);
  if (!s.ok()) return s;
  if (extra.root_type() != rapidjson::kObjectType) {
    return Status::InvalidArgument(std::string("extra must be a JSON object, not ") +
                                   TypeWord(extra.root_type()));
  }
  for (const Rewriter::Member& member : extra.members()) {
    for (std::string_view reserved : kReservedFields) {
      if (member.name == reserved) {
        return Status::InvalidArgument("extra may not set \"" + member.name +
                                       "\": the client sets it");
      }
    }
    if (member.too_deep) {
      return Status::InvalidArgument("extra field \"" + member.name + "\" nests deeper than " +
                                     std::to_string(kMaxJsonDepth) + " levels");
    }
  }

  std::string out;
  out.reserve(96 + job.job_class.size() + job.args.size() + job.queue.size() + job.extra.size());
  out += "{\"class\":";
  AppendString(job.job_class, &out);
  out += ",\"args\":";
  out += args.json();
  out += ",\"queue\":";
  AppendString(job.queue, &out);
  out += ",\"retry\":";
  out += retry;
  out += ",\"jid\":";
  std::string new_jid = job.jid.empty() ? NewJid() : job.jid;
  AppendString(new_jid, &out);
  out += ",\"created_at\":";
  AppendTimestamp(created_at, &out);
  if (enqueued_at) {
    out += ",\"enqueued_at\":";
    AppendTimestamp(*enqueued_at, &out);
  }
  // The members of extra, without its braces.
  const std::string& members = extra.json();
  if (members.size() > 2) {
    out.push_back(',');
    out.append(members, 1, members.size() - 2);
  }
  out.push_back('}');
  if (jid != nullptr) *jid = std::move(new_jid);
  return out;
}

Result<DecodedJob> DecodeJob(std::string_view raw) {
  // Room for the DOM of a typical payload in one chunk: a few nodes per
  // value and a copy of every string.
  DecodedJob job(std::max<size_t>(1024, 2 * raw.size()));
  rapidjson::Document& doc = job.document;
  doc.Parse<kParseFlags>(raw.data(), raw.size());
  if (doc.HasParseError()) {
    return Status::Corruption("job JSON does not parse: " + ParseErrorText(doc));
  }
  if (!doc.IsObject()) {
    return Status::Corruption(std::string("job JSON is ") + TypeWord(doc) + ", not an object");
  }
  auto job_class = doc.FindMember("class");
  if (job_class == doc.MemberEnd() || !job_class->value.IsString()) {
    return Status::Corruption("job JSON has no string \"class\"");
  }
  auto args = doc.FindMember("args");
  if (args == doc.MemberEnd() || !args->value.IsArray()) {
    return Status::Corruption("job JSON has no array \"args\"");
  }
  if (!DepthWithin(doc, kMaxJsonDepth)) {
    return Status::Corruption("job JSON nests deeper than " + std::to_string(kMaxJsonDepth) +
                              " levels");
  }
  return job;
}

Result<std::string> RecordFailure(std::string_view raw, const FailureInfo& info) {
  Result<DecodedJob> decoded = DecodeJob(raw);
  if (!decoded.ok()) return decoded.status();
  const rapidjson::Document& doc = decoded->document;

  // Checked first, so that a bad retry_count changes nothing.
  std::optional<int64_t> retry_count;
  auto count = doc.FindMember("retry_count");
  if (count != doc.MemberEnd() && !count->value.IsNull() && !count->value.IsFalse()) {
    const rapidjson::Value& v = count->value;
    if (v.IsInt64()) {
      retry_count = v.GetInt64();
    } else if (v.IsDouble() && std::trunc(v.GetDouble()) == v.GetDouble() &&
               std::fabs(v.GetDouble()) < 9.0e15) {
      retry_count = static_cast<int64_t>(v.GetDouble());
    } else {
      return Status::Corruption(std::string("job's retry_count is ") + TypeWord(v) +
                                ", not an integer");
    }
  }

  // The DOM only answers questions; the payload is written again from its
  // text, so that every value it does not set keeps its literal.
  Rewriter rewriter(kMaxJsonDepth);
  auto set_string = [&rewriter](const char* name, std::string_view text) {
    std::string json;
    AppendString(text, &json);
    rewriter.SetMember(name, std::move(json));
  };
  std::string_view queue = info.fetched_queue;
  auto retry_queue = doc.FindMember("retry_queue");
  if (retry_queue != doc.MemberEnd() && retry_queue->value.IsString() &&
      retry_queue->value.GetStringLength() > 0) {
    queue = {retry_queue->value.GetString(), retry_queue->value.GetStringLength()};
  }
  set_string("queue", queue);
  set_string("error_message", Scrub(info.error_message, kMaxErrorMessageChars));
  set_string("error_class", Scrub(info.error_class));
  std::string now;
  AppendTimestamp(info.now, &now);
  std::string next_count;
  AppendInteger(retry_count ? *retry_count + 1 : int64_t{0}, &next_count);
  rewriter.SetMember(retry_count ? "retried_at" : "failed_at", std::move(now));
  rewriter.SetMember("retry_count", std::move(next_count));

  auto backtrace = doc.FindMember("backtrace");
  if (backtrace != doc.MemberEnd() && !info.backtrace.empty()) {
    std::optional<size_t> lines = BacktraceLines(backtrace->value, info.backtrace.size());
    if (lines) {
      Result<std::string> compressed = CompressBacktrace(info.backtrace, *lines);
      if (!compressed.ok()) return compressed.status();
      set_string("error_backtrace", *compressed);
    }
  }

  rapidjson::ParseResult parsed = ParseText<kRewriteFlags>(raw, &rewriter);
  if (parsed.IsError()) {  // DecodeJob read the same text with the same flags
    return Status::Corruption("job JSON does not parse: " +
                              ParseErrorText(parsed.Code(), parsed.Offset()));
  }
  return std::move(rewriter.json());
}

std::string ToJson(const rapidjson::Value& value) {
  std::string out;
  AppendValue(value, &out);
  return out;
}

WideIntegers WideIntegers::Find(std::string_view json) {
  WideIntegers found;
  WideIntegerFinder finder(&found.literals_);
  if (ParseText<kRewriteFlags>(json, &finder).IsError()) found.literals_.clear();
  return found;
}

std::string ToJson(const rapidjson::Value& value, const WideIntegers& wide) {
  if (wide.literals_.empty()) return ToJson(value);
  std::string out;
  std::string path;
  AppendValue(value, &out, &wide.literals_, &path);
  return out;
}

}  // namespace reliableq
