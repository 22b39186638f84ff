#include "protocol/recovery.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/layout_version.h"
#include "protocol/process_entry.h"
#include "redis/reply.h"
#include "protocol/script_calls.h"

namespace reliableq::protocol {

namespace {

struct Entry {
  std::string identity;
  bool readable = false;            // the registry JSON parsed
  std::vector<std::string> queues;  // unique, in the entry's order
  std::vector<int64_t> clients;     // its Redis connections, as it last published them
  int64_t beat_client = 0;          // the connection its last beat came on
  int64_t ttl_ms = 0;               // its heartbeat ttl
  std::string run_id;               // the server that stored the entry
  std::string clients_run;          // the run that gave out every id of `clients`
  std::string json;                 // the entry as read, byte for byte
  bool alive = false;
  DeathEvidence evidence = DeathEvidence::kNone;

  // Whether its connections can tell that it is dead: it says which
  // connection its heartbeat key names, its ttl, and on which server run its
  // client ids were given out.
  bool Judgeable() const {
    return readable && beat_client > 0 && ttl_ms > 0 && !run_id.empty();
  }
  // Every connection id it published.
  std::vector<int64_t> AllClients() const {
    std::vector<int64_t> ids = clients;
    if (std::find(ids.begin(), ids.end(), beat_client) == ids.end()) ids.push_back(beat_client);
    return ids;
  }
};

// One line of CLIENT LIST: the connection's id and name.
struct ListedClient {
  std::string_view id;
  std::string_view name;
};

std::vector<ListedClient> ParseClientList(std::string_view text) {
  std::vector<ListedClient> out;
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ListedClient client;
    size_t start = 0;
    while (start < line.size()) {
      size_t space = line.find(' ', start);
      std::string_view field = line.substr(start, space - start);
      if (field.substr(0, 3) == "id=") client.id = field.substr(3);
      if (field.substr(0, 5) == "name=") client.name = field.substr(5);
      if (space == std::string_view::npos) break;
      start = space + 1;
    }
    if (!client.id.empty()) out.push_back(client);
  }
  return out;
}

// What the server says about itself and about the connections the
// registry entries name, read once per pass.
struct ServerView {
  bool usable = false;  // INFO and CLIENT LIST both answered
  std::string run_id;
  int64_t uptime_ms = 0;
  std::set<int64_t> connected;  // the published ids CLIENT LIST listed

  // Whether `entry` can be taken for dead because none of its connections
  // exists any more. Client ids are counted per server run: only ids the
  // process got from this very run say anything (a restart or a failover
  // gives a new run_id, and the entries it loads name ids of another run).
  // An entry that says which run gave out all its ids (clients_run, this
  // one) is judged at once: a live process that reconnected after a restart
  // publishes no id of the run before it. One that does not say (an older
  // worker) may still list ids of the run before, which name nobody now or
  // another client: it is judged only once this server has been up longer
  // than its ttl, by when a live process has beaten from new connections.
  bool ConnectionsGone(const Entry& entry) const {
    if (!usable || !entry.Judgeable() || entry.run_id != run_id) return false;
    if (entry.clients_run != run_id && uptime_ms <= entry.ttl_ms) return false;
    for (int64_t id : entry.AllClients()) {
      if (connected.count(id) > 0) return false;
    }
    return true;
  }
};

// Reads a ServerView from the replies to INFO server and CLIENT LIST ID.
// Either may be an error (an ACL without them, a renamed command): then
// connections tell nothing this pass, and only heartbeats count.
ServerView ReadServerView(const redisReply* info, const redisReply* list) {
  ServerView view;
  if (info == nullptr || list == nullptr || info->type == REDIS_REPLY_ERROR ||
      list->type == REDIS_REPLY_ERROR) {
    return view;
  }
  std::string_view text = redis::View(info);
  view.run_id = std::string(redis::InfoField(text, "run_id"));
  std::string uptime(redis::InfoField(text, "uptime_in_seconds"));
  char* end = nullptr;
  long long seconds = std::strtoll(uptime.c_str(), &end, 10);
  if (view.run_id.empty() || uptime.empty() || *end != '\0' || seconds < 0) return view;
  view.uptime_ms = static_cast<int64_t>(seconds) * 1000;
  for (const ListedClient& client : ParseClientList(redis::View(list))) {
    std::string id(client.id);
    view.connected.insert(std::strtoll(id.c_str(), nullptr, 10));
  }
  view.usable = true;
  return view;
}

// Closes the Redis connections of a process about to be recovered.
//
// A process that is stopped (SIGSTOP, a long GC-like pause, a frozen VM)
// rather than dead may still have commands in its sockets that Redis runs
// whatever the state of its process (a fetch it sent just before it
// stopped). Without this, such a fetch could move a job after the janitor
// unregistered the process, into a working list nobody will ever recover. After CLIENT KILL
// returns, none of its commands can run any more; if it wakes up, it
// reconnects and registers again before it fetches.
//
// Only connections whose name is the one the process gave them are killed:
// ids start again from 1 when Redis restarts, so an old id may now belong to
// somebody else.
Status FenceConnections(redis::Connection& redis, const RecoveryConfig& config,
                        const Entry& entry) {
  if (entry.clients.empty()) return Status::OK();
  std::vector<std::string> ids;
  for (int64_t id : entry.clients) ids.push_back(std::to_string(id));
  redis::Argv list = {"CLIENT", "LIST", "ID"};
  for (const std::string& id : ids) list.push_back(id);
  Result<redis::ReplyPtr> listed = redis.Command(list);
  if (!listed.ok()) return listed.status().WithContext("CLIENT LIST of " + entry.identity);
  const std::string expected = config.keys.ClientName(entry.identity);
  for (const ListedClient& client : ParseClientList(redis::View(listed->get()))) {
    if (client.name != expected) continue;
    Result<redis::ReplyPtr> killed = redis.Command({"CLIENT", "KILL", "ID", client.id});
    // "No such client": it went away by itself meanwhile, which is as good.
    if (!killed.ok() && !killed.status().IsScript()) {
      return killed.status().WithContext("CLIENT KILL of " + entry.identity);
    }
  }
  return Status::OK();
}

// One recover.lua reply: {"alive"|"ok", requeued, dead, remaining}.
struct RecoverReply {
  bool alive = false;
  int64_t requeued = 0;
  int64_t dead = 0;
  int64_t remaining = 0;
};

Result<RecoverReply> ParseRecoverReply(const redisReply* reply) {
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 4) {
    return Status::Protocol(std::string("recover.lua returned ") + redis::TypeName(reply));
  }
  Result<std::string> state = redis::ToString(reply->element[0]);
  Result<int64_t> requeued = redis::ToInteger(reply->element[1]);
  Result<int64_t> dead = redis::ToInteger(reply->element[2]);
  Result<int64_t> remaining = redis::ToInteger(reply->element[3]);
  if (!state.ok() || !requeued.ok() || !dead.ok() || !remaining.ok() ||
      (*state != "alive" && *state != "ok")) {
    return Status::Protocol("recover.lua returned an unexpected array");
  }
  RecoverReply out;
  out.alive = *state == "alive";
  out.requeued = *requeued;
  out.dead = *dead;
  out.remaining = *remaining;
  return out;
}

// Empties one working list in batches (`force`: although the heartbeat key
// exists). Sets *alive_again when the owner turned out to be alive inside
// the script (it beat after the pipeline looked), in which case the list is
// left to it.
Status RecoverQueue(redis::Connection& redis, const RecoveryConfig& config,
                    const std::string& identity, bool force, double now, QueueRecovery* out,
                    bool* alive_again) {
  RecoverBatch batch;
  batch.max_interruptions = config.max_interruptions;
  batch.limit = config.batch;
  batch.force = force;
  batch.dry_run = config.dry_run;
  const DeadSetLimits limits{config.dead_max_jobs, std::chrono::seconds(config.dead_timeout_seconds)};

  // The first reply tells how many jobs are left; the calls after it are
  // bounded by what that count needs plus one, so a list that some other
  // writer keeps filling cannot hold the pass forever (the next pass goes on).
  int64_t calls_left = 1;
  int64_t offset = 0;
  bool first = true;
  while (calls_left-- > 0) {
    batch.offset = offset;
    Result<redis::ReplyPtr> reply =
        redis.Eval(RecoverCall(config.keys, identity, out->queue, batch, now, limits));
    if (!reply.ok()) {
      return reply.status().WithContext("recovering " + config.keys.Working(identity, out->queue));
    }
    Result<RecoverReply> parsed = ParseRecoverReply(reply->get());
    if (!parsed.ok()) return parsed.status();
    if (parsed->alive) {
      *alive_again = true;
      return Status::OK();
    }
    out->requeued += parsed->requeued;
    out->dead += parsed->dead;
    if (parsed->remaining == 0) break;
    // A real pass that moved nothing while jobs remain would only spin.
    if (!config.dry_run && parsed->requeued + parsed->dead == 0) break;
    if (config.dry_run) offset += config.batch;
    if (first) {
      calls_left = (parsed->remaining + config.batch - 1) / config.batch + 1;
      first = false;
    }
  }
  return Status::OK();
}

Status Forget(redis::Connection& redis, const RecoveryConfig& config, const Entry& entry) {
  Result<redis::ReplyPtr> reply =
      redis.Eval(ForgetCall(config.keys, entry.identity, entry.queues, config.force));
  if (!reply.ok()) return reply.status().WithContext("forgetting " + entry.identity);
  return Status::OK();
}

}  // namespace

Result<RecoveryReport> RunRecoveryPass(redis::Connection& redis, const RecoveryConfig& config,
                                       double now) {
  if (config.force && config.identity.empty()) {
    return Status::InvalidArgument("force needs an identity");
  }
  if (config.batch <= 0) return Status::InvalidArgument("the recovery batch must be positive");
  // Never move jobs between keys laid out for another release.
  if (Status layout = VerifyLayout(redis, config.keys, /*record=*/false); !layout.ok()) {
    return layout;
  }

  const std::string registry = config.keys.Registry();
  Result<redis::ReplyPtr> all = redis.Command({"HGETALL", registry});
  if (!all.ok()) return all.status().WithContext("reading " + registry);
  const redisReply* flat = all->get();
  if (flat->type != REDIS_REPLY_ARRAY || flat->elements % 2 != 0) {
    return Status::Protocol("HGETALL " + registry + " returned " + redis::TypeName(flat));
  }
  std::vector<Entry> entries;
  for (size_t i = 0; i + 1 < flat->elements; i += 2) {
    Entry entry;
    entry.identity = std::string(redis::View(flat->element[i]));
    if (!config.identity.empty() && entry.identity != config.identity) continue;
    if (entry.identity == config.skip_identity) continue;
    ProcessEntry published;
    entry.readable = DecodeProcessEntry(redis::View(flat->element[i + 1]), &published);
    entry.queues = std::move(published.queues);
    entry.clients = std::move(published.clients);
    entry.beat_client = published.beat_client;
    entry.ttl_ms = published.ttl_ms;
    entry.run_id = std::move(published.run_id);
    entry.clients_run = std::move(published.clients_run);
    entry.json = std::string(redis::View(flat->element[i + 1]));
    entries.push_back(std::move(entry));
  }
  if (!config.identity.empty() && entries.empty()) {
    return Status::NotFound("no registered process " + config.identity);
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.identity < b.identity; });

  // One round trip: every heartbeat, and, when some entry can be judged by
  // its connections, what the server is and which of those connections it
  // still has. CLIENT LIST comes after HGETALL: a connection an entry names
  // and the server no longer lists is gone for good (ids are never reused
  // within a server run).
  std::vector<std::string> heartbeats;
  heartbeats.reserve(entries.size());
  std::vector<redis::Argv> reads;
  for (const Entry& entry : entries) heartbeats.push_back(config.keys.Heartbeat(entry.identity));
  for (const std::string& key : heartbeats) reads.push_back({"EXISTS", key});
  std::vector<std::string> ids;
  for (const Entry& entry : entries) {
    if (!entry.Judgeable()) continue;
    for (int64_t id : entry.AllClients()) ids.push_back(std::to_string(id));
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (!ids.empty()) {
    reads.push_back({"INFO", "server"});
    redis::Argv list = {"CLIENT", "LIST", "ID"};
    for (const std::string& id : ids) list.push_back(id);
    reads.push_back(std::move(list));
  }
  Result<std::vector<redis::ReplyPtr>> replies = redis.Pipeline(reads);
  if (!replies.ok()) return replies.status().WithContext("reading heartbeats");
  for (size_t i = 0; i < entries.size(); ++i) {
    Result<int64_t> found = redis::ToInteger((*replies)[i].get());
    if (!found.ok()) return found.status().WithContext("EXISTS " + heartbeats[i]);
    entries[i].alive = *found == 1;
    if (!entries[i].alive) entries[i].evidence = DeathEvidence::kHeartbeatExpired;
  }
  ServerView server;
  if (!ids.empty()) {
    server = ReadServerView((*replies)[entries.size()].get(), (*replies)[entries.size() + 1].get());
  }

  // A process whose connections are all gone died (a crash, a kill, the
  // OOM killer): it is taken for dead now rather than when its ttl runs
  // out. drop_heartbeat.lua deletes its heartbeat key only while the key
  // still names the connection of the beat this pass read, so a process
  // that reconnected and beat meanwhile stays alive; after the delete, the
  // pass goes on exactly as for an expired heartbeat. A dry run deletes
  // nothing and counts what would move as if it had.
  for (Entry& entry : entries) {
    if (!entry.alive || config.force || !server.ConnectionsGone(entry)) continue;
    if (!config.dry_run) {
      Result<redis::ReplyPtr> dropped =
          redis.Eval(DropHeartbeatCall(config.keys, entry.identity, entry.beat_client, entry.json,
                                       server.run_id));
      if (!dropped.ok() && dropped.status().IsRetryable()) return dropped.status();
      Result<int64_t> done =
          dropped.ok() ? redis::ToInteger(dropped->get()) : Result<int64_t>(dropped.status());
      if (!done.ok() || *done != 1) continue;
    }
    entry.alive = false;
    entry.evidence = DeathEvidence::kConnectionsGone;
  }

  RecoveryReport report;
  for (const Entry& entry : entries) {
    if (entry.alive && !config.force) continue;
    IdentityRecovery recovery;
    recovery.identity = entry.identity;
    recovery.alive = entry.alive;
    recovery.evidence = entry.evidence;
    // A dry run left the heartbeat of a process without connections in
    // place: its count must look past it. A real run deleted it, and every
    // move checks again that no beat has brought it back.
    const bool force =
        config.force || (config.dry_run && entry.evidence == DeathEvidence::kConnectionsGone);
    bool alive_again = false;
    if (!config.dry_run) {
      // Where the server refuses CLIENT (an ACL without it, a renamed
      // command), recovery goes on unfenced: jobs stuck behind a dead
      // process would be worse than the window the fence closes.
      Status fenced = FenceConnections(redis, config, entry);
      if (!fenced.ok() && fenced.IsRetryable()) return fenced;
    }
    for (const std::string& queue : entry.queues) {
      QueueRecovery moved;
      moved.queue = queue;
      Status s = RecoverQueue(redis, config, entry.identity, force, now, &moved, &alive_again);
      if (!s.ok() && s.IsRetryable()) return s;
      if (!s.ok()) {
        // Refused with nothing written (a key of the wrong type): every
        // later pass would be refused the same, so the other processes
        // must not wait behind this one.
        recovery.error = s.ToString();
        break;
      }
      recovery.queues.push_back(std::move(moved));
      if (alive_again) break;
    }
    // A process that beat during the pass keeps its remaining lists and its
    // registration; it stays in this group, marked alive, with what had
    // already moved before it came back.
    if (alive_again) {
      recovery.alive = true;
      recovery.evidence = DeathEvidence::kNone;
    }
    if (entry.readable && !alive_again && recovery.error.empty() && !config.dry_run) {
      Status s = Forget(redis, config, entry);
      if (!s.ok()) return s;
    }
    report.identities.push_back(std::move(recovery));
  }
  for (const Entry& entry : entries) {
    if (!entry.alive || config.force) continue;
    IdentityRecovery recovery;
    recovery.identity = entry.identity;
    recovery.alive = true;
    report.identities.push_back(std::move(recovery));
  }
  return report;
}

}  // namespace reliableq::protocol
