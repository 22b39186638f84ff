// The registry entry: how a worker describes itself in the registry hash
// (<prefix>registry, field = identity) so that a janitor can find the
// working lists of a process that died and fence its connections. The one
// place that writes this JSON (the worker's heartbeat) and reads it (the
// janitor pass, Admin). Pure. reliableq-schema(7) documents the fields:
//
//   {"identity":"host:123:abcdef012345","hostname":"host","pid":123,
//    "started_at":1700000000.5,"queues":["critical","default"],
//    "clients":[17,18]}
//
// Thread safety: plain functions over values.

#ifndef RELIABLEQ_PROCESS_ENTRY_H_
#define RELIABLEQ_PROCESS_ENTRY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace reliableq {

struct ProcessEntry {
  std::string identity;
  std::string hostname;
  int64_t pid = 0;
  double started_at = 0;            // epoch seconds
  std::vector<std::string> queues;  // the queues it serves: its working lists
  // The CLIENT IDs of its Redis connections as it last published them; a
  // janitor kills these before it recovers the process.
  std::vector<int64_t> clients;
};

std::string EncodeProcessEntry(const ProcessEntry& entry);

// Reads an entry. False when `json` is not an object with an array of
// non-empty strings under "queues": then its working lists cannot be named
// (queues is left empty). Duplicate queue names are kept once, in order; a
// missing or unreadable "clients" reads as none; other fields are read when
// present with the right type.
bool DecodeProcessEntry(std::string_view json, ProcessEntry* entry);

}  // namespace reliableq

#endif  // RELIABLEQ_PROCESS_ENTRY_H_
