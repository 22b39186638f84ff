#include "spool/record.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

namespace reliableq::spool {

namespace {

void PutU32(std::string* out, uint32_t v) {
  char bytes[4];
  for (int i = 0; i < 4; ++i) bytes[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out->append(bytes, 4);
}

void PutU64(std::string* out, uint64_t v) {
  char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out->append(bytes, 8);
}

void PutDouble(std::string* out, double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  PutU64(out, bits);
}

void PutString(std::string* out, std::string_view s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

uint32_t Crc(std::string_view length_bytes, std::string_view body) {
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(length_bytes.data()),
              static_cast<uInt>(length_bytes.size()));
  // zlib's crc32 takes a uInt length; a body may be larger than that on
  // platforms with a 16-bit uInt only in theory, but stay exact anyway.
  const char* p = body.data();
  size_t left = body.size();
  while (left > 0) {
    uInt n = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(p), n);
    p += n;
    left -= n;
  }
  return static_cast<uint32_t>(crc);
}

// A frame is built in place: StartFrame reserves its header, the body is
// appended, FinishFrame fills the header in (no copy of the body).
size_t StartFrame(std::string* out) {
  size_t at = out->size();
  out->append(kFrameHeader, '\0');
  return at;
}

void FinishFrame(std::string* out, size_t at) {
  std::string_view body(out->data() + at + kFrameHeader, out->size() - at - kFrameHeader);
  std::string header;
  PutU32(&header, static_cast<uint32_t>(body.size()));
  PutU32(&header, Crc(header, body));
  out->replace(at, kFrameHeader, header);
}

// Reads the fields of a body in order; any read past its end sets failed.
class BodyReader {
 public:
  explicit BodyReader(std::string_view body) : rest_(body) {}
  bool failed() const { return failed_; }
  uint8_t U8() {
    if (!Need(1)) return 0;
    uint8_t v = static_cast<uint8_t>(rest_[0]);
    rest_.remove_prefix(1);
    return v;
  }
  uint64_t U64() {
    if (!Need(8)) return 0;
    uint64_t v = GetU64(rest_.data());
    rest_.remove_prefix(8);
    return v;
  }
  double Double() {
    uint64_t bits = U64();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
  }
  std::string String() {
    if (!Need(4)) return {};
    uint32_t n = GetU32(rest_.data());
    rest_.remove_prefix(4);
    if (!Need(n)) return {};
    std::string s(rest_.substr(0, n));
    rest_.remove_prefix(n);
    return s;
  }
  std::string Rest() {
    std::string s(rest_);
    rest_ = {};
    return s;
  }

 private:
  bool Need(size_t n) {
    if (rest_.size() < n) failed_ = true;
    return !failed_;
  }
  std::string_view rest_;
  bool failed_ = false;
};

}  // namespace

void AppendJobRecord(std::string* out, const SpooledJob& job) {
  size_t at = StartFrame(out);
  out->push_back(static_cast<char>(RecordType::kJob));
  out->push_back(static_cast<char>(job.kind));
  PutDouble(out, job.at);
  PutDouble(out, job.spooled_at);
  PutString(out, job.queue);
  PutString(out, job.jid);
  out->append(job.payload);
  FinishFrame(out, at);
}

void AppendProgressRecord(std::string* out, uint64_t upto) {
  size_t at = StartFrame(out);
  out->push_back(static_cast<char>(RecordType::kProgress));
  PutU64(out, upto);
  FinishFrame(out, at);
}

void AppendResolvedRecord(std::string* out, uint64_t job_offset, Resolution how) {
  size_t at = StartFrame(out);
  out->push_back(static_cast<char>(RecordType::kResolved));
  PutU64(out, job_offset);
  out->push_back(static_cast<char>(how));
  FinishFrame(out, at);
}

void AppendHeldRecord(std::string* out, uint64_t job_offset, std::string_view reason) {
  size_t at = StartFrame(out);
  out->push_back(static_cast<char>(RecordType::kHeld));
  PutU64(out, job_offset);
  out->append(reason);
  FinishFrame(out, at);
}

void AppendKeyspaceRecord(std::string* out, const Keyspace& keyspace) {
  size_t at = StartFrame(out);
  out->push_back(static_cast<char>(RecordType::kKeyspace));
  PutString(out, keyspace.prefix);
  out->append(keyspace.group);
  FinishFrame(out, at);
}

std::string JournalHeader(const Keyspace& keyspace) {
  std::string header(kMagic);
  AppendKeyspaceRecord(&header, keyspace);
  return header;
}

bool Drains(const std::optional<Keyspace>& recorded, const Keyspace& drainer) {
  return recorded ? *recorded == drainer : drainer.group.empty();
}

std::string KeyspaceText(const std::optional<Keyspace>& keyspace) {
  if (!keyspace) return "no group (format 1: any prefix)";
  std::string prefix = "(prefix '" + keyspace->prefix + "')";
  if (keyspace->group.empty()) return "no group " + prefix;
  return "group '" + keyspace->group + "' " + prefix;
}

Frame ParseFrame(std::string_view data) {
  Frame frame;
  if (data.size() < kFrameHeader) {
    frame.check = Frame::Check::kIncomplete;
    frame.size = kFrameHeader;
    return frame;
  }
  uint32_t length = GetU32(data.data());
  if (length == 0 || length > kMaxBody) {
    frame.check = Frame::Check::kBad;
    return frame;
  }
  frame.size = kFrameHeader + static_cast<uint64_t>(length);
  if (data.size() < frame.size) {
    frame.check = Frame::Check::kIncomplete;
    return frame;
  }
  std::string_view body = data.substr(kFrameHeader, length);
  if (Crc(data.substr(0, 4), body) != GetU32(data.data() + 4)) {
    frame.check = Frame::Check::kBad;
    return frame;
  }
  frame.check = Frame::Check::kOk;
  frame.body = body;
  return frame;
}

Result<Record> DecodeRecord(std::string_view body) {
  BodyReader in(body);
  Record record;
  uint8_t type = in.U8();
  switch (type) {
    case static_cast<uint8_t>(RecordType::kJob): {
      record.type = RecordType::kJob;
      uint8_t kind = in.U8();
      if (kind > 1)
        return Status::Corruption("a spooled job of unknown kind " + std::to_string(kind));
      record.job.kind = static_cast<SpooledJob::Kind>(kind);
      record.job.at = in.Double();
      record.job.spooled_at = in.Double();
      record.job.queue = in.String();
      record.job.jid = in.String();
      record.job.payload = in.Rest();
      break;
    }
    case static_cast<uint8_t>(RecordType::kProgress):
      record.type = RecordType::kProgress;
      record.offset = in.U64();
      break;
    case static_cast<uint8_t>(RecordType::kResolved): {
      record.type = RecordType::kResolved;
      record.offset = in.U64();
      uint8_t how = in.U8();
      if (how > 1) return Status::Corruption("a spool resolution of unknown kind");
      record.resolution = static_cast<Resolution>(how);
      break;
    }
    case static_cast<uint8_t>(RecordType::kHeld):
      record.type = RecordType::kHeld;
      record.offset = in.U64();
      record.reason = in.Rest();
      break;
    case static_cast<uint8_t>(RecordType::kKeyspace):
      record.type = RecordType::kKeyspace;
      record.keyspace.prefix = in.String();
      record.keyspace.group = in.Rest();
      break;
    default:
      return Status::Corruption("a spool record of unknown type " + std::to_string(type));
  }
  if (in.failed()) return Status::Corruption("a spool record shorter than its type needs");
  return record;
}

}  // namespace reliableq::spool
