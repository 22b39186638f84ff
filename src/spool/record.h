// The records of a spool journal and their framing. Pure: bytes in, bytes
// out, no I/O; journal.h does the files.
//
// A journal file is 8 bytes of magic, then frames, back to back. Format 2
// (kMagic) starts with one kKeyspace record, the keyspace its jobs were
// spooled for; format 1 (kMagicV1, written before keyspaces were recorded)
// has none, and is read as written for layout 1 (no group) by a client of
// any prefix (reliableq-schema(7), "Client spool"). Both are read; only
// format 2 is written.
//
//   frame  := length:u32 crc:u32 body
//   length := the size of body in bytes, 1..kMaxBody
//   crc    := zlib crc32 of the 4 length bytes followed by body
//   body   := type:u8 fields (by type, below)
//
// Integers are little-endian; a double is its IEEE 754 bits as a u64; a
// string is its length as a u32, then its bytes, except a body's last
// field, which runs to the end of the body.
//
//   kJob       kind:u8 (0 push, 1 schedule) at:double spooled_at:double
//              queue:string jid:string payload:rest
//   kProgress  upto:u64    every job record that starts before `upto` is
//                          done, except those a kHeld names and no
//                          kResolved resolves
//   kResolved  offset:u64 how:u8 (0 pushed, 1 dropped)
//                          the job record at `offset` is done
//   kHeld      offset:u64 reason:rest
//                          Redis refused the job at `offset` with an error
//                          reply; it stays in the spool until resolved
//   kKeyspace  prefix:string group:rest
//                          the prefix of reliableq's keys and the queue group
//                          ("": none, layout 1) of the client that wrote the
//                          file; format 2's first record, and only there
//
// The length and the CRC let a reader tell a frame a crash cut short (a
// torn tail) from a complete one; reliableq-schema(7), "Client spool".
//
// Thread safety: plain functions over values.

#ifndef RELIABLEQ_SPOOL_RECORD_H_
#define RELIABLEQ_SPOOL_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "reliableq/status.h"

namespace reliableq::spool {

// The first bytes of every journal file: the format's name and version.
// Format 2 is written; format 1 is still read (and drained).
inline constexpr std::string_view kMagic = "RQSPOOL2";
inline constexpr std::string_view kMagicV1 = "RQSPOOL1";
static_assert(kMagic.size() == kMagicV1.size());
// length and crc.
inline constexpr size_t kFrameHeader = 8;
// Larger than any job Redis takes (a bulk string is at most 512 MiB), so
// that a length beyond it is known to be garbage.
inline constexpr uint32_t kMaxBody = (512u << 20) + 4096u;

enum class RecordType : uint8_t {
  kJob = 1,
  kProgress = 2,
  kResolved = 3,
  kHeld = 4,
  kKeyspace = 5,
};

// The keys a journal's jobs go to: the prefix of reliableq's keys
// (ClientOptions::prefix) and the queue group (RedisOptions::group; empty
// for layout 1). Not the Redis address: a spool outlives a failover or a
// new address for the same data, and a directory serves one deployment.
struct Keyspace {
  std::string prefix;
  std::string group;
  bool operator==(const Keyspace&) const = default;
};

// True when a client or drain of keyspace `drainer` may push the jobs of a
// journal that records `recorded`: the same prefix and group; for a journal
// of format 1 (nothing recorded), any drainer without a group, since format
// 1 was written for layout 1, where the prefix names only the wake-up
// channels a push publishes on, never where its job goes.
bool Drains(const std::optional<Keyspace>& recorded, const Keyspace& drainer);

// For messages: "group 'G' (prefix 'P')", "no group (prefix 'P')", or for
// format 1 "no group (format 1: any prefix)". Not escaped.
std::string KeyspaceText(const std::optional<Keyspace>& keyspace);

// One job as it would have been pushed: the script that would have stored
// it and its payload, byte for byte (after the client middleware).
struct SpooledJob {
  enum class Kind : uint8_t { kPush = 0, kSchedule = 1 };
  Kind kind = Kind::kPush;
  // kSchedule: when it is due, epoch seconds (schedule.lua's score).
  double at = 0;
  // When it was spooled, epoch seconds (for `spool status`).
  double spooled_at = 0;
  // The queue it goes to (kSchedule: when it is due).
  std::string queue;
  std::string jid;
  std::string payload;
};

enum class Resolution : uint8_t { kPushed = 0, kDropped = 1 };

// A decoded body; only the fields of its type are set.
struct Record {
  RecordType type = RecordType::kJob;
  SpooledJob job;                               // kJob
  uint64_t offset = 0;                          // kProgress: upto; kResolved, kHeld: the job's
  Resolution resolution = Resolution::kPushed;  // kResolved
  std::string reason;                           // kHeld
  Keyspace keyspace;                            // kKeyspace
};

// Each appends one whole frame to *out.
void AppendJobRecord(std::string* out, const SpooledJob& job);
void AppendProgressRecord(std::string* out, uint64_t upto);
void AppendResolvedRecord(std::string* out, uint64_t job_offset, Resolution how);
void AppendHeldRecord(std::string* out, uint64_t job_offset, std::string_view reason);
void AppendKeyspaceRecord(std::string* out, const Keyspace& keyspace);

// What a new journal of format 2 starts with: kMagic, then the kKeyspace
// record of `keyspace`.
std::string JournalHeader(const Keyspace& keyspace);

// The frame at the start of `data` (the bytes from a frame's start to at
// most the end of the file).
struct Frame {
  enum class Check {
    kOk,          // whole, and its CRC matches
    kIncomplete,  // `data` ends inside it
    kBad,         // a length out of range, or a CRC that does not match
  };
  Check check = Check::kBad;
  std::string_view body;  // kOk only
  // kOk: the whole frame's size. kIncomplete: the size it claims (at least
  // kFrameHeader), so a reader knows how much more to read.
  uint64_t size = 0;
};
Frame ParseFrame(std::string_view data);

// The record of a frame's body; kCorruption when the body does not follow
// its type's layout (or the type is unknown).
Result<Record> DecodeRecord(std::string_view body);

// The type of a body without decoding it (0 for an empty body).
inline uint8_t BodyType(std::string_view body) {
  return body.empty() ? 0 : static_cast<uint8_t>(body[0]);
}

}  // namespace reliableq::spool

#endif  // RELIABLEQ_SPOOL_RECORD_H_
