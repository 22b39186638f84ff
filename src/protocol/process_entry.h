// The registry entry: how a worker describes itself in the registry hash
// (<prefix>registry, field = identity) so that a janitor can find the
// working lists of a process that died and fence its connections. The one
// place that writes this JSON (the worker's heartbeat) and reads it (the
// janitor pass, Admin). Pure. reliableq-schema(7) documents the fields:
//
//   {"identity":"host:123:abcdef012345","hostname":"host","pid":123,
//    "started_at":1700000000.5,"queues":["critical","default"],
//    "clients":[17,18],"clients_run":"<40 hex digits>","beat_client":17,
//    "ttl_ms":30000,"run_id":"<40 hex digits>"}
//
// run_id is not written here: heartbeat.lua adds it (from INFO server) to an
// entry that names its beat_client, so that it always names the server that
// stored the entry and gave out its client ids.
//
// Thread safety: plain functions over values (ProcessHostname reads the
// environment and the system's host name).

#ifndef RELIABLEQ_PROTOCOL_PROCESS_ENTRY_H_
#define RELIABLEQ_PROTOCOL_PROCESS_ENTRY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace reliableq::protocol {

struct ProcessEntry {
  std::string identity;
  std::string hostname;
  int64_t pid = 0;
  double started_at = 0;            // epoch seconds
  std::vector<std::string> queues;  // the queues it serves: its working lists
  // The CLIENT IDs of its Redis connections as it last published them; a
  // janitor kills these before it recovers the process, and takes it for
  // dead at once when none of them exists any more (recovery.h).
  std::vector<int64_t> clients;
  // The run_id of the server that gave out every id in `clients` (each
  // connection reads it in its handshake); the process leaves out the ids
  // of connections made to another run, so that an entry with this field
  // names no id of a run before a restart. Empty: unknown (not written),
  // as from an older worker: its ids may belong to an earlier run.
  std::string clients_run;
  // The CLIENT ID of the connection the beat was sent on, which the beat
  // also stores as the heartbeat key's value; 0: unknown (not written).
  int64_t beat_client = 0;
  // The heartbeat ttl the process beats with, in ms; 0: unknown (not written).
  int64_t ttl_ms = 0;
  // The run_id of the Redis server that stored the entry (heartbeat.lua
  // writes it); empty: unknown (not written).
  std::string run_id;
};

std::string EncodeProcessEntry(const ProcessEntry& entry);

// The host name in a worker's identity and entry: $DYNO when set and not
// empty (as Sidekiq does on Heroku), else the system's, else "localhost".
std::string ProcessHostname();

// Reads an entry. False when `json` is not an object with an array of
// non-empty strings under "queues": then its working lists cannot be named
// (queues is left empty). Duplicate queue names are kept once, in order; a
// missing or unreadable "clients" reads as none; other fields are read when
// present with the right type (beat_client and ttl_ms only when positive).
bool DecodeProcessEntry(std::string_view json, ProcessEntry* entry);

}  // namespace reliableq::protocol

#endif  // RELIABLEQ_PROTOCOL_PROCESS_ENTRY_H_
