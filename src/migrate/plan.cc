#include "migrate/plan.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <utility>

#include "migrate/key_map.h"
#include "migrate/reads.h"
#include "migrate/value_compare.h"

namespace reliableq::migrate {

namespace {

// A key the plan considers: its layout-1 name, its name less the prefix
// (what follows "<prefix>{<group>}:" in layout 2) and its kind.
struct Candidate {
  std::string source;
  std::string name;
  KeyKind kind;
};

// Sidekiq's dated counters: the date pattern keeps the match to their
// names alone.
constexpr std::string_view kDatePattern = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]";

class CandidateList {
 public:
  explicit CandidateList(std::string prefix) : prefix_(std::move(prefix)) {}
  // One of Sidekiq's keys, which carry no prefix.
  void Sidekiq(std::string name, KeyKind kind) { Add(name, name, kind); }
  // One of reliableq's, by its name less the prefix.
  void Own(const std::string& name, KeyKind kind) { Add(prefix_ + name, name, kind); }
  // A key SCAN found under the prefix.
  void OwnKey(const std::string& key, KeyKind kind) { Add(key, key.substr(prefix_.size()), kind); }
  std::vector<Candidate> Take() { return std::move(list_); }

 private:
  void Add(std::string source, std::string name, KeyKind kind) {
    if (!seen_.insert(source).second) return;
    list_.push_back({std::move(source), std::move(name), kind});
  }
  std::string prefix_;
  std::set<std::string> seen_;
  std::vector<Candidate> list_;
};

Status ScanSorted(redis::Connection& redis, const std::string& pattern,
                  std::vector<std::string>* keys) {
  Status scanned = ScanKeys(redis, pattern, keys);
  std::sort(keys->begin(), keys->end());
  return scanned;
}

Result<std::vector<Candidate>> Candidates(redis::Connection& source, redis::Connection& target,
                                          const MigrationSettings& settings) {
  const std::string& prefix = settings.prefix;
  CandidateList list(prefix);
  // Directories first: on the target a name is never missing from its
  // directory while its data is there.
  list.Sidekiq("queues", KeyKind::kDirectory);
  list.Own("periodic", KeyKind::kDirectory);
  list.Own("limits", KeyKind::kDirectory);
  list.Own("paused", KeyKind::kDirectory);

  Result<std::vector<std::string>> queues = SortedMembers(source, "queues");
  if (!queues.ok()) return queues.status();
  Result<std::vector<std::string>> moved_queues =
      SortedMembers(target, GroupKey(prefix, settings.group, "queues"));
  if (!moved_queues.ok()) return moved_queues.status();
  std::set<std::string> names(queues->begin(), queues->end());
  names.insert(moved_queues->begin(), moved_queues->end());
  for (const std::string& queue : names) list.Sidekiq("queue:" + queue, KeyKind::kQueue);

  list.Sidekiq("schedule", KeyKind::kSchedule);
  list.Sidekiq("retry", KeyKind::kRetry);
  list.Sidekiq("dead", KeyKind::kDead);
  for (std::string counter : {"stat:processed", "stat:failed"}) {
    list.Sidekiq(counter, KeyKind::kOther);
    std::vector<std::string> dated;
    Status scanned = ScanSorted(source, counter + ":" + std::string(kDatePattern), &dated);
    if (!scanned.ok()) return scanned;
    for (std::string& key : dated) list.Sidekiq(std::move(key), KeyKind::kOther);
  }

  for (const char* name : {"stat:expired", "audit", "janitor:last", "janitor:passes"}) {
    list.Own(name, KeyKind::kOther);
  }
  // Not unique:*: a job's payload names its lock by its layout-1 name,
  // which a worker of the group does not release (the name is outside the
  // group), so a moved lock would be held for good; the locks stay behind
  // and uniqueness ends with the move (reliableq(1), migrate).
  for (const char* family : {"limit:", "periodic:"}) {
    std::vector<std::string> keys;
    Status scanned = ScanSorted(source, GlobEscaped(prefix) + family + "*", &keys);
    if (!scanned.ok()) return scanned;
    for (const std::string& key : keys) {
      bool parked = std::string_view(family) == "limit:" && key.ends_with(":waiting");
      list.OwnKey(key, parked ? KeyKind::kParked : KeyKind::kOther);
    }
  }
  return list.Take();
}

std::optional<double> ParseBeat(const std::string& text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::string SourceMarkerKey(std::string_view prefix) { return std::string(prefix) + "migrate"; }

std::string TargetMarkerKey(std::string_view prefix, std::string_view group) {
  return GroupKey(prefix, group, "migrate");
}

Status CheckSource(redis::Connection& source, const MigrationSettings& settings) {
  const std::string& prefix = settings.prefix;
  Result<std::optional<std::string>> layout = GetString(source, prefix + "schema");
  if (!layout.ok()) return layout.status();
  if (layout->has_value() && **layout != "1") {
    return Status::Refused("the source records layout '" + **layout + "' at " + prefix +
                           "schema: migrate moves the data of layout 1 only");
  }

  std::vector<std::string> beats;
  Status scanned = ScanSorted(source, GlobEscaped(prefix) + "heartbeat:*", &beats);
  if (!scanned.ok()) return scanned;
  if (!beats.empty()) {
    return Status::Refused("a worker is alive on the source (its heartbeat key " + beats[0] +
                           " exists): stop every worker first");
  }
  // Sidekiq's own processes have no heartbeat key; their process record
  // tells, and so does a reliableq worker's.
  Result<std::vector<std::string>> processes = SortedMembers(source, "processes");
  if (!processes.ok()) return processes.status();
  for (const std::string& identity : *processes) {
    Result<std::optional<std::string>> beat = GetField(source, identity, "beat");
    if (!beat.ok()) return beat.status();
    if (!beat->has_value()) continue;
    std::optional<double> at = ParseBeat(**beat);
    if (at && settings.now - *at < kSidekiqBeatWindow) {
      return Status::Refused("process " + identity + " beat " +
                             std::to_string(static_cast<int64_t>(settings.now - *at)) +
                             " s ago on the source: stop every worker first");
    }
  }

  std::vector<std::string> working;
  scanned = ScanSorted(source, GlobEscaped(prefix) + "working:*", &working);
  if (!scanned.ok()) return scanned;
  if (!working.empty()) {
    Result<int64_t> jobs = KeySize(source, working[0], "list");
    if (!jobs.ok()) return jobs.status();
    return Status::Refused(
        "working list " + working[0] + " holds " + std::to_string(*jobs) +
        (*jobs == 1 ? " job" : " jobs") +
        " of a stopped worker: run `reliableq recover` first (or wait for a janitor)" +
        (working.size() > 1 ? " (" + std::to_string(working.size() - 1) + " more lists)"
                            : std::string()));
  }
  return Status::OK();
}

Status CheckTarget(redis::Connection& target, const MigrationSettings& settings) {
  std::string key = GroupKey(settings.prefix, settings.group, "schema");
  Result<std::optional<std::string>> layout = GetString(target, key);
  if (!layout.ok()) return layout.status();
  if (layout->has_value() && **layout != "2") {
    return Status::Refused("the target records layout '" + **layout + "' at " + key +
                           ": migrate writes layout 2");
  }
  return Status::OK();
}

Result<std::vector<PlannedKey>> PlanKeys(redis::Connection& source, redis::Connection& target,
                                         const MigrationSettings& settings) {
  Result<std::vector<Candidate>> candidates = Candidates(source, target, settings);
  if (!candidates.ok()) return candidates.status();
  const std::string marker = TargetMarkerKey(settings.prefix, settings.group);
  std::vector<PlannedKey> plan;
  std::vector<std::string> conflicts;
  for (Candidate& candidate : *candidates) {
    PlannedKey key;
    key.source = std::move(candidate.source);
    key.target = GroupKey(settings.prefix, settings.group, candidate.name);
    key.kind = candidate.kind;
    Result<std::string> type = KeyType(source, key.source);
    if (!type.ok()) return type.status();
    if (*type == "none") continue;
    key.type = *type;
    Result<int64_t> size = KeySize(source, key.source, key.type);
    if (!size.ok()) return size.status();
    key.size = *size;
    Result<std::optional<std::string>> begun = GetField(target, marker, key.source);
    if (!begun.ok()) return begun.status();
    // A key part-way through its batches goes on from its markers; any
    // other key already on the target is either a whole copy whose DEL was
    // left to do, or a conflict, whatever its size.
    bool batchable = key.type == "list" || key.type == "zset";
    if (batchable && begun->has_value()) {
      key.action = Action::kBatches;
      plan.push_back(std::move(key));
      continue;
    }
    Result<redis::ReplyPtr> exists = target.Command({"EXISTS", key.target});
    if (!exists.ok()) return exists.status();
    if (redis::CounterValue(*exists) > 0) {
      Result<bool> same = SameValue(source, key.source, target, key.target);
      if (!same.ok()) return same.status();
      if (!*same) {
        conflicts.push_back(key.target);
        continue;
      }
      key.action = Action::kDeleteOnly;
    } else if (batchable && key.size > settings.batch) {
      key.action = Action::kBatches;
    }
    plan.push_back(std::move(key));
  }
  if (!conflicts.empty()) {
    std::string more = conflicts.size() > 1
                           ? " (and " + std::to_string(conflicts.size() - 1) + " more keys)"
                           : std::string();
    return Status::Refused(
        "the target already holds " + conflicts[0] + more +
        " with another value than the source's: a worker or client of the group wrote it, "
        "or the source changed after a stopped run copied it; keep one of the two (their jobs "
        "may exist in both) and run again; nothing was moved");
  }
  return plan;
}

}  // namespace reliableq::migrate
