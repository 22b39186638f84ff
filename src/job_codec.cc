#include "job_codec.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <rapidjson/error/en.h>

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

void AppendValue(const rapidjson::Value& value, std::string* out) {
  switch (value.GetType()) {
    case rapidjson::kNullType: *out += "null"; break;
    case rapidjson::kFalseType: *out += "false"; break;
    case rapidjson::kTrueType: *out += "true"; break;
    case rapidjson::kStringType:
      AppendString({value.GetString(), value.GetStringLength()}, out);
      break;
    case rapidjson::kNumberType:
      if (value.IsDouble()) {
        AppendFloat(value.GetDouble(), out);
      } else if (value.IsInt64()) {
        AppendInteger(value.GetInt64(), out);
      } else {
        AppendInteger(value.GetUint64(), out);
      }
      break;
    case rapidjson::kArrayType: {
      out->push_back('[');
      bool first = true;
      for (const auto& element : value.GetArray()) {
        if (!first) out->push_back(',');
        first = false;
        AppendValue(element, out);
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
        AppendValue(member.value, out);
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
// Job fields.

// Timestamps inside payloads: microsecond precision as FormatEpoch, written
// as Ruby writes the float, so that Sidekiq's re-dump gives the same bytes.
double RoundToMicros(double seconds) { return std::strtod(FormatEpoch(seconds).c_str(), nullptr); }

void AppendTimestamp(double seconds, std::string* out) { AppendFloat(RoundToMicros(seconds), out); }

constexpr std::string_view kReservedFields[] = {"class", "args",       "queue",       "retry",
                                                "jid",   "created_at", "enqueued_at", "at"};

// "Invalid value at offset 3": RapidJSON's message without its full stop.
std::string ParseErrorText(const rapidjson::Document& document) {
  std::string text = rapidjson::GetParseError_En(document.GetParseError());
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text + " at offset " + std::to_string(document.GetErrorOffset());
}

const char* TypeWord(const rapidjson::Value& value) {
  switch (value.GetType()) {
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

// Parses one field of a Job given as JSON text (args, extra).
Status ParseField(std::string_view name, const std::string& text, rapidjson::Document* document) {
  document->Parse<kParseFlags | rapidjson::kParseValidateEncodingFlag>(text.data(), text.size());
  if (document->HasParseError()) {
    return Status::InvalidArgument(std::string(name) +
                                   " is not valid JSON: " + ParseErrorText(*document));
  }
  return Status::OK();
}

bool IsPrintableAscii(std::string_view text) {
  for (char c : text) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

// Sets field `name` of `object`: in place when present, appended when not.
void SetField(rapidjson::Document* object, const char* name, rapidjson::Value value) {
  auto it = object->FindMember(name);
  if (it != object->MemberEnd()) {
    it->value = value;  // a move: RapidJSON assignment transfers ownership
  } else {
    object->AddMember(rapidjson::StringRef(name), value, object->GetAllocator());
  }
}

rapidjson::Value StringValue(std::string_view text, rapidjson::Document::AllocatorType& allocator) {
  return rapidjson::Value(text.data(), static_cast<rapidjson::SizeType>(text.size()), allocator);
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

  rapidjson::Document args;
  Status s = ParseField("args", job.args, &args);
  if (!s.ok()) return s;
  if (!args.IsArray()) {
    return Status::InvalidArgument(std::string("args must be a JSON array, not ") + TypeWord(args));
  }
  // The job object is the first level, args the second.
  if (!DepthWithin(args, kMaxJsonDepth - 1)) {
    return Status::InvalidArgument("args nest deeper than " + std::to_string(kMaxJsonDepth) +
                                   " levels");
  }
  rapidjson::Document extra;
  s = ParseField("extra", job.extra, &extra);
  if (!s.ok()) return s;
  if (!extra.IsObject()) {
    return Status::InvalidArgument(std::string("extra must be a JSON object, not ") +
                                   TypeWord(extra));
  }
  for (const auto& member : extra.GetObject()) {
    std::string_view name(member.name.GetString(), member.name.GetStringLength());
    for (std::string_view reserved : kReservedFields) {
      if (name == reserved) {
        return Status::InvalidArgument("extra may not set \"" + std::string(name) +
                                       "\": the client sets it");
      }
    }
    if (!DepthWithin(member.value, kMaxJsonDepth - 1)) {
      return Status::InvalidArgument("extra field \"" + std::string(name) +
                                     "\" nests deeper than " + std::to_string(kMaxJsonDepth) +
                                     " levels");
    }
  }

  std::string out;
  out.reserve(96 + job.job_class.size() + job.args.size() + job.queue.size() + job.extra.size());
  out += "{\"class\":";
  AppendString(job.job_class, &out);
  out += ",\"args\":";
  AppendValue(args, &out);
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
  for (const auto& member : extra.GetObject()) {
    out.push_back(',');
    AppendValue(member.name, &out);
    out.push_back(':');
    AppendValue(member.value, &out);
  }
  out.push_back('}');
  if (jid != nullptr) *jid = std::move(new_jid);
  return out;
}

Result<DecodedJob> DecodeJob(std::string_view raw) {
  DecodedJob job;
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
  rapidjson::Document& doc = decoded->document;
  auto& allocator = doc.GetAllocator();

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

  std::string_view queue = info.fetched_queue;
  auto retry_queue = doc.FindMember("retry_queue");
  if (retry_queue != doc.MemberEnd() && retry_queue->value.IsString() &&
      retry_queue->value.GetStringLength() > 0) {
    queue = {retry_queue->value.GetString(), retry_queue->value.GetStringLength()};
  }
  rapidjson::Value queue_value = StringValue(queue, allocator);  // copied before SetField
  SetField(&doc, "queue", std::move(queue_value));
  SetField(&doc, "error_message",
           StringValue(Scrub(info.error_message, kMaxErrorMessageChars), allocator));
  SetField(&doc, "error_class", StringValue(Scrub(info.error_class), allocator));
  double now = RoundToMicros(info.now);
  if (retry_count) {
    SetField(&doc, "retried_at", rapidjson::Value(now));
    SetField(&doc, "retry_count", rapidjson::Value(*retry_count + 1));
  } else {
    SetField(&doc, "failed_at", rapidjson::Value(now));
    SetField(&doc, "retry_count", rapidjson::Value(0));
  }

  auto backtrace = doc.FindMember("backtrace");
  if (backtrace != doc.MemberEnd() && !info.backtrace.empty()) {
    std::optional<size_t> lines = BacktraceLines(backtrace->value, info.backtrace.size());
    if (lines) {
      Result<std::string> compressed = CompressBacktrace(info.backtrace, *lines);
      if (!compressed.ok()) return compressed.status();
      SetField(&doc, "error_backtrace", StringValue(*compressed, allocator));
    }
  }
  return ToJson(doc);
}

std::string ToJson(const rapidjson::Value& value) {
  std::string out;
  AppendValue(value, &out);
  return out;
}

}  // namespace reliableq
