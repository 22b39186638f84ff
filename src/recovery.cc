#include "recovery.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <chrono>
#include <string_view>
#include <utility>
#include <vector>

#include "layout_version.h"
#include "process_entry.h"
#include "redis/reply.h"
#include "script_calls.h"

namespace reliableq {

namespace {

struct Entry {
  std::string identity;
  bool readable = false;            // the registry JSON parsed
  std::vector<std::string> queues;  // unique, in the entry's order
  std::vector<int64_t> clients;     // its Redis connections, as it last published them
  bool alive = false;
};

// Closes the Redis connections of a process about to be recovered.
//
// A process that is stopped (SIGSTOP, a long GC-like pause, a frozen VM)
// rather than dead still has its BLMOVE blocked in Redis, and Redis serves a
// blocked client whatever the state of its process. Without this, a job
// pushed after the janitor unregistered such a process could land in the
// working list of a process nobody will ever recover. After CLIENT KILL
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
  const std::string expected = "name=" + config.keys.ClientName(entry.identity);
  std::string_view text = redis::View(listed->get());
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    bool named = false;
    std::string_view id;
    size_t start = 0;
    while (start < line.size()) {
      size_t space = line.find(' ', start);
      std::string_view field = line.substr(start, space - start);
      if (field.substr(0, 3) == "id=") id = field.substr(3);
      if (field == expected) named = true;
      if (space == std::string_view::npos) break;
      start = space + 1;
    }
    if (!named || id.empty()) continue;
    Result<redis::ReplyPtr> killed = redis.Command({"CLIENT", "KILL", "ID", id});
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

// Empties one working list in batches. Sets *alive_again when the owner
// turned out to be alive inside the script (it beat after the pipeline
// looked), in which case the list is left to it.
Status RecoverQueue(redis::Connection& redis, const RecoveryConfig& config,
                    const std::string& identity, double now, QueueRecovery* out,
                    bool* alive_again) {
  RecoverBatch batch;
  batch.max_interruptions = config.max_interruptions;
  batch.limit = config.batch;
  batch.force = config.force;
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
    entries.push_back(std::move(entry));
  }
  if (!config.identity.empty() && entries.empty()) {
    return Status::NotFound("no registered process " + config.identity);
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.identity < b.identity; });

  std::vector<std::string> heartbeats;
  heartbeats.reserve(entries.size());
  std::vector<redis::Argv> exists;
  for (const Entry& entry : entries) heartbeats.push_back(config.keys.Heartbeat(entry.identity));
  for (const std::string& key : heartbeats) exists.push_back({"EXISTS", key});
  Result<std::vector<redis::ReplyPtr>> alive = redis.Pipeline(exists);
  if (!alive.ok()) return alive.status().WithContext("reading heartbeats");
  for (size_t i = 0; i < entries.size(); ++i) {
    Result<int64_t> found = redis::ToInteger((*alive)[i].get());
    if (!found.ok()) return found.status().WithContext("EXISTS " + heartbeats[i]);
    entries[i].alive = *found == 1;
  }

  RecoveryReport report;
  for (const Entry& entry : entries) {
    if (entry.alive && !config.force) continue;
    IdentityRecovery recovery;
    recovery.identity = entry.identity;
    recovery.alive = entry.alive;
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
      Status s = RecoverQueue(redis, config, entry.identity, now, &moved, &alive_again);
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
    if (alive_again) recovery.alive = true;
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

}  // namespace reliableq
