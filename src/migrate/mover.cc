#include "migrate/mover.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "migrate/reads.h"
#include "migrate/value_compare.h"

namespace reliableq::migrate {

namespace {

// Sends `commands` in MULTI ... EXEC in one round trip. OK when EXEC ran
// them all without an error; kRefused when EXEC found a WATCHed key
// changed (nothing ran); the first error reply otherwise.
Status Transaction(redis::Connection& redis, const std::vector<redis::Argv>& commands) {
  std::vector<redis::Argv> all;
  all.reserve(commands.size() + 2);
  all.push_back({"MULTI"});
  all.insert(all.end(), commands.begin(), commands.end());
  all.push_back({"EXEC"});
  Result<std::vector<redis::ReplyPtr>> replies = redis.Pipeline(all);
  if (!replies.ok()) return replies.status();
  for (const redis::ReplyPtr& reply : *replies) {
    if (redis::IsErrorReply(reply)) return Status::Script(std::string(redis::ErrorText(reply)));
  }
  Result<std::vector<redis::ReplyRef>> ran = redis::ExecReplies(replies->back());
  if (!ran.ok()) {
    return ran.status().IsRefused() ? Status::Refused("changed while it moved") : ran.status();
  }
  for (redis::ReplyRef reply : *ran) {
    if (redis::IsErrorReply(reply)) return Status::Script(std::string(redis::ErrorText(reply)));
  }
  return Status::OK();
}

// PTTL as RESTORE and PEXPIRE take it: 0 for no ttl; nullopt when the key
// is gone.
Result<std::optional<int64_t>> TtlMillis(redis::Connection& redis, const std::string& key) {
  Result<redis::ReplyPtr> reply = redis.Command({"PTTL", key});
  if (!reply.ok()) return reply.status();
  Result<int64_t> ttl = redis::ToInteger(*reply);
  if (!ttl.ok()) return ttl.status();
  if (*ttl == -2) return std::optional<int64_t>();
  return std::optional<int64_t>(std::max<int64_t>(*ttl, 0));
}

Result<int64_t> MarkerValue(redis::Connection& redis, const std::string& key,
                            const std::string& field) {
  Result<std::optional<std::string>> value = GetField(redis, key, field);
  if (!value.ok()) return value.status();
  if (!value->has_value()) return int64_t{0};
  int64_t n = 0;
  auto [end, ec] = std::from_chars((*value)->data(), (*value)->data() + (*value)->size(), n);
  if (ec != std::errc() || end != (*value)->data() + (*value)->size() || n < 0) {
    return Status::Corruption("the migration marker " + key + " holds '" + **value + "' for " +
                              field);
  }
  return n;
}

void Unwatch(redis::Connection& redis) { (void)redis.Command({"UNWATCH"}); }

// The replicas connected to the primary `redis` reaches (INFO replication's
// connected_slaves); 0 when it says none.
Result<int64_t> ConnectedReplicas(redis::Connection& redis) {
  Result<redis::ReplyPtr> info = redis.Command({"INFO", "replication"});
  if (!info.ok()) return info.status();
  Result<std::string> text = redis::ToString(*info);
  if (!text.ok()) return text.status();
  std::string_view field = redis::InfoField(*text, "connected_slaves");
  int64_t n = 0;
  std::from_chars(field.data(), field.data() + field.size(), n);
  return n;
}

// WAIT's own bound: below the connection's command timeout, so that a slow
// replica is a refusal rather than a broken connection.
constexpr std::chrono::milliseconds kLongestReplicaWait{2000};

// A field of the target's marker hash that is never a source key's name
// (those are the prefix's or Sidekiq's keys): written and removed at once.
constexpr const char* kSyncField = "{sync}";

}  // namespace

Status Mover::TargetReplicated() {
  // The node that ran the last write: the target's owner, or the target of
  // the ASK the write followed while its slot migrates (WAIT counts the
  // writes of the connection it is sent on).
  redis::Connection& writer = target_.LastWriter();
  Result<int64_t> replicas = ConnectedReplicas(writer);
  if (!replicas.ok()) return replicas.status().WithContext("INFO replication on the target");
  if (*replicas <= 0) return Status::OK();
  std::chrono::milliseconds wait =
      std::min(kLongestReplicaWait,
               std::max(target_.options().command_timeout / 2, std::chrono::milliseconds(1)));
  const std::string wanted = std::to_string(*replicas);
  Result<redis::ReplyPtr> reply = writer.Command({"WAIT", wanted, std::to_string(wait.count())});
  if (!reply.ok()) return reply.status().WithContext("WAIT on the target");
  Result<int64_t> confirmed = redis::ToInteger(*reply);
  if (!confirmed.ok()) return confirmed.status().WithContext("WAIT on the target");
  if (*confirmed >= *replicas) return Status::OK();
  return Status::Timeout("only " + std::to_string(*confirmed) + " of the target's " + wanted +
                         " replicas confirmed the copy within " + std::to_string(wait.count()) +
                         " ms; the source keeps it (run migrate again once they catch up)");
}

Status Mover::EarlierCopyReplicated() {
  // WAIT counts the replicas that have this connection's last write: an
  // earlier run's copy came on another connection, so a write of this one
  // (a field set and removed, on the group's marker hash) comes first.
  const std::string marker = TargetMarkerKey(settings_.prefix, settings_.group);
  Result<std::vector<redis::ReplyPtr>> written =
      target_.Pipeline({{"HSET", marker, kSyncField, "1"}, {"HDEL", marker, kSyncField}});
  if (!written.ok()) return written.status();
  for (const redis::ReplyPtr& reply : *written) {
    if (redis::IsErrorReply(reply)) return target_.ErrorOf(reply);
  }
  return TargetReplicated();
}

Result<int64_t> Mover::Move(const PlannedKey& key) {
  Result<int64_t> moved = 0;
  switch (key.action) {
    case Action::kRestore:
      moved = Restore(key);
      break;
    case Action::kDeleteOnly:
      moved = DeleteOnly(key);
      break;
    case Action::kBatches:
      moved = key.type == "list" ? ListBatches(key) : ZsetBatches(key);
      break;
  }
  if (!moved.ok()) return moved.status().WithContext(key.source);
  return moved;
}

Status Mover::DeleteWatched(const PlannedKey& key) {
  Status deleted = Transaction(source_, {{"DEL", key.source}});
  if (deleted.IsRefused()) {
    return Status::Refused(
        "changed on the source while it moved (a client still writes to it): the target's " +
        key.target + " holds its value from before, the source the newer one");
  }
  return deleted;
}

Result<int64_t> Mover::Restore(const PlannedKey& key) {
  // WATCH first: the DEL below must not remove what a client added after
  // the DUMP.
  Result<redis::ReplyPtr> watched = source_.Command({"WATCH", key.source});
  if (!watched.ok()) return watched.status();
  Result<int64_t> size = KeySize(source_, key.source, key.type);
  if (!size.ok()) return size.status();
  Result<std::optional<std::string>> dump = Dump(source_, key.source);
  if (!dump.ok()) return dump.status();
  Result<std::optional<int64_t>> ttl = TtlMillis(source_, key.source);
  if (!ttl.ok()) return ttl.status();
  if (!dump->has_value() || !ttl->has_value()) {
    Unwatch(source_);
    return int64_t{0};
  }
  std::string ttl_text = std::to_string(**ttl);
  // No REPLACE: a key that appeared on the target since the plan is not
  // overwritten (BUSYKEY).
  Result<redis::ReplyPtr> restored = target_.Command({"RESTORE", key.target, ttl_text, **dump});
  if (!restored.ok()) {
    Unwatch(source_);
    return restored.status().WithContext("RESTORE " + key.target);
  }
  AfterTargetWrite();
  if (Status copied = TargetReplicated(); !copied.ok()) {
    Unwatch(source_);
    return copied;
  }
  Status deleted = DeleteWatched(key);
  if (!deleted.ok()) return deleted;
  return *size;
}

Result<int64_t> Mover::DeleteOnly(const PlannedKey& key) {
  Result<redis::ReplyPtr> watched = source_.Command({"WATCH", key.source});
  if (!watched.ok()) return watched.status();
  Result<bool> same = SameValue(source_, key.source, target_, key.target);
  if (!same.ok() || !*same) {
    Unwatch(source_);
    if (!same.ok()) return same.status();
    return Status::Refused("no longer equals " + key.target + " on the target");
  }
  Result<int64_t> size = KeySize(source_, key.source, key.type);
  if (!size.ok()) return size.status();
  if (Status copied = EarlierCopyReplicated(); !copied.ok()) {
    Unwatch(source_);
    return copied;
  }
  Status deleted = DeleteWatched(key);
  if (!deleted.ok()) return deleted;
  return *size;
}

// A list moves from its right end, where the oldest job waits. Each batch
// goes to the left of the target's list (so the order is kept) together
// with the target's marker; then it leaves the source together with the
// source's marker. Equal markers: every batch copied was removed. A target
// marker ahead by k: the last k copied (the k leftmost on the target) are
// still on the source (the run stopped in between) and are removed first,
// not copied again.
Result<int64_t> Mover::ListBatches(const PlannedKey& key) {
  const std::string source_marker = SourceMarkerKey(settings_.prefix);
  const std::string target_marker = TargetMarkerKey(settings_.prefix, settings_.group);
  Result<int64_t> copied = MarkerValue(target_, target_marker, key.source);
  if (!copied.ok()) return copied.status();
  Result<int64_t> removed = MarkerValue(source_, source_marker, key.source);
  if (!removed.ok()) return removed.status();
  if (*copied == 0 && *removed > 0) {
    // Left by a run that finished this key and stopped before deleting
    // its source marker: this is a new move.
    Result<redis::ReplyPtr> reset = source_.Command({"HDEL", source_marker, key.source});
    if (!reset.ok()) return reset.status();
    *removed = 0;
  }
  if (*copied < *removed) {
    return Status::Corruption("the migration markers disagree (" + std::to_string(*copied) +
                              " copied, " + std::to_string(*removed) + " removed)");
  }
  int64_t moved = 0;
  if (*copied > *removed) {
    int64_t pending = *copied - *removed;
    Result<redis::ReplyPtr> page =
        target_.Command({"LRANGE", key.target, "0", std::to_string(pending - 1)});
    if (!page.ok()) return page.status();
    if (Status kept = EarlierCopyReplicated(); !kept.ok()) return kept;
    Status removed_copies = RemoveCopied(key, redis::StringArray(*page), std::to_string(*copied));
    if (!removed_copies.ok()) return removed_copies;
    moved += pending;
  }
  int64_t total = *copied;
  const std::string batch_text = std::to_string(settings_.batch);
  for (;;) {
    Result<redis::ReplyPtr> page = source_.Command({"LRANGE", key.source, "-" + batch_text, "-1"});
    if (!page.ok()) return page.status();
    std::vector<std::string> jobs = redis::StringArray(*page);
    if (jobs.empty()) break;
    Result<std::optional<int64_t>> ttl = TtlMillis(source_, key.source);
    if (!ttl.ok()) return ttl.status();
    int64_t n = static_cast<int64_t>(jobs.size());
    total += n;
    std::string total_text = std::to_string(total);
    redis::Argv push = {"LPUSH", key.target};
    // Oldest first, so that the newest of the batch ends up leftmost.
    for (auto it = jobs.rbegin(); it != jobs.rend(); ++it) push.push_back(*it);
    std::vector<redis::Argv> copy = {push, {"HSET", target_marker, key.source, total_text}};
    std::string ttl_text = ttl->has_value() ? std::to_string(**ttl) : "0";
    if (ttl->has_value() && **ttl > 0) copy.push_back({"PEXPIRE", key.target, ttl_text});
    Status written = Transaction(target_, copy);
    if (!written.ok()) return written;
    AfterTargetWrite();
    if (Status copied = TargetReplicated(); !copied.ok()) return copied;
    Status removed_batch = RemoveCopied(key, jobs, total_text);
    if (!removed_batch.ok()) return removed_batch;
    moved += n;
  }
  // The target's marker first: a source marker left alone is recognised as
  // stale above.
  Result<redis::ReplyPtr> done = target_.Command({"HDEL", target_marker, key.source});
  if (!done.ok()) return done.status();
  done = source_.Command({"HDEL", source_marker, key.source});
  if (!done.ok()) return done.status();
  return moved;
}

Status Mover::RemoveCopied(const PlannedKey& key, const std::vector<std::string>& batch,
                           const std::string& total_text) {
  // By value, not by place: an LTRIM of the batch's length would remove
  // whatever is at the right end by then, and something that still takes
  // jobs from the source (a worker started after the checks) or gives them
  // back would make it remove jobs never copied. Each LREM takes the
  // rightmost copy of its job, the oldest first, so each finds it at the
  // right end; a job no longer on the source (taken meanwhile) removes
  // nothing, and its copy on the target stays: at least once, never lost.
  std::vector<redis::Argv> remove;
  remove.reserve(batch.size() + 1);
  for (auto it = batch.rbegin(); it != batch.rend(); ++it) {
    remove.push_back({"LREM", key.source, "-1", *it});
  }
  // Argv holds views: the marker's name must outlive the transaction.
  const std::string source_marker = SourceMarkerKey(settings_.prefix);
  remove.push_back({"HSET", source_marker, key.source, total_text});
  return Transaction(source_, remove);
}

// A zset moves by its lowest scores first; ZADD and ZREM of the same
// members are idempotent, so a rerun after a stop between the two copies
// the same members again (no change on the target) and removes them. The
// target's marker only tells the plan that this key is part-way.
Result<int64_t> Mover::ZsetBatches(const PlannedKey& key) {
  const std::string target_marker = TargetMarkerKey(settings_.prefix, settings_.group);
  Result<int64_t> copied = MarkerValue(target_, target_marker, key.source);
  if (!copied.ok()) return copied.status();
  int64_t total = *copied, moved = 0;
  const std::string last = std::to_string(settings_.batch - 1);
  for (;;) {
    Result<redis::ReplyPtr> page = source_.Command({"ZRANGE", key.source, "0", last, "WITHSCORES"});
    if (!page.ok()) return page.status();
    std::vector<std::string> flat = redis::StringArray(*page);
    if (flat.empty()) break;
    Result<std::optional<int64_t>> ttl = TtlMillis(source_, key.source);
    if (!ttl.ok()) return ttl.status();
    int64_t n = static_cast<int64_t>(flat.size() / 2);
    total += n;
    std::string total_text = std::to_string(total);
    redis::Argv add = {"ZADD", key.target};
    redis::Argv remove = {"ZREM", key.source};
    for (size_t i = 0; i + 1 < flat.size(); i += 2) {
      add.push_back(flat[i + 1]);
      add.push_back(flat[i]);
      remove.push_back(flat[i]);
    }
    std::vector<redis::Argv> copy = {add, {"HSET", target_marker, key.source, total_text}};
    std::string ttl_text = ttl->has_value() ? std::to_string(**ttl) : "0";
    if (ttl->has_value() && **ttl > 0) copy.push_back({"PEXPIRE", key.target, ttl_text});
    Status written = Transaction(target_, copy);
    if (!written.ok()) return written;
    AfterTargetWrite();
    if (Status copied = TargetReplicated(); !copied.ok()) return copied;
    Result<redis::ReplyPtr> removed = source_.Command(remove);
    if (!removed.ok()) return removed.status();
    moved += n;
  }
  Result<redis::ReplyPtr> done = target_.Command({"HDEL", target_marker, key.source});
  if (!done.ok()) return done.status();
  return moved;
}

}  // namespace reliableq::migrate
