#include "migrate/migration.h"

#include <cstdlib>
#include <memory>
#include <string>

#include "migrate/key_map.h"
#include "migrate/mover.h"
#include "migrate/plan.h"

namespace reliableq::migrate {

namespace {

int64_t* JobCount(JobCounts* jobs, KeyKind kind) {
  switch (kind) {
    case KeyKind::kQueue:
      return &jobs->queued;
    case KeyKind::kSchedule:
      return &jobs->scheduled;
    case KeyKind::kRetry:
      return &jobs->retries;
    case KeyKind::kDead:
      return &jobs->dead;
    case KeyKind::kParked:
      return &jobs->parked;
    case KeyKind::kDirectory:
    case KeyKind::kOther:
      break;
  }
  return nullptr;
}

Status CheckOptions(const RedisOptions& source, const RedisOptions& target,
                    const MigrationSettings& settings) {
  Status group = CheckGroupName(settings.group);
  if (!group.ok()) return group;
  if (settings.batch < 1) return Status::InvalidArgument("the batch size must be at least 1");
  if (!source.cluster.seeds.empty() || !source.group.empty()) {
    return Status::InvalidArgument(
        "the source must be the single Redis of a layout-1 deployment, not a cluster or a group");
  }
  if (!target.group.empty() && target.group != settings.group) {
    return Status::InvalidArgument("the target URL names group '" + target.group +
                                   "', not the --group '" + settings.group + "'");
  }
  return Status::OK();
}

Result<std::unique_ptr<redis::Connection>> OpenNamed(const RedisOptions& options,
                                                     const char* side) {
  Result<std::unique_ptr<redis::Connection>> connection = redis::Connection::Open(options);
  if (!connection.ok()) {
    // The connection's message already names the address.
    return connection.status().WithContext(side);
  }
  return connection;
}

}  // namespace

Result<MigrationReport> Migrate(const RedisOptions& source_options,
                                const RedisOptions& target_options, const MigrateOptions& options) {
  const MigrationSettings& settings = options.settings;
  Status usable = CheckOptions(source_options, target_options, settings);
  if (!usable.ok()) return usable;
  RedisOptions group_options = target_options;
  group_options.group = settings.group;

  auto source = OpenNamed(source_options, "source");
  if (!source.ok()) return source.status();
  auto target = OpenNamed(group_options, "target");
  if (!target.ok()) return target.status();

  Status checked = CheckSource(**source, settings);
  if (!checked.ok()) return checked;
  checked = CheckTarget(**target, settings);
  if (!checked.ok()) return checked;
  Result<std::vector<PlannedKey>> plan = PlanKeys(**source, **target, settings);
  if (!plan.ok()) return plan.status();

  MigrationReport report;
  report.dry_run = options.dry_run;
  int64_t writes = 0;
  auto stop = [&writes, limit = options.TEST_stop_after_writes] {
    if (limit >= 0 && ++writes >= limit) std::_Exit(kTestStopExitCode);
  };
  Mover mover(**source, **target, settings, stop);
  size_t done = 0;
  for (PlannedKey& key : *plan) {
    int64_t moved = key.size;
    if (!options.dry_run) {
      Result<int64_t> result = mover.Move(key);
      if (!result.ok()) {
        return result.status().WithContext(std::to_string(done) + " of " +
                                           std::to_string(plan->size()) +
                                           " keys moved, then stopped (run again to go on)");
      }
      moved = *result;
    }
    ++done;
    if (int64_t* count = JobCount(&report.jobs, key.kind)) *count += moved;
    report.keys.push_back({std::move(key), moved});
  }
  if (options.dry_run) return report;

  const std::string schema = GroupKey(settings.prefix, settings.group, "schema");
  Result<redis::ReplyPtr> recorded = (*target)->Command({"SET", schema, "2", "NX"});
  if (!recorded.ok()) return recorded.status().WithContext("SET " + schema);
  report.schema_written = !redis::IsNilReply(*recorded);

  // The directory of groups has a slot of its own: on a cluster it needs a
  // connection routed there.
  std::unique_ptr<redis::Connection> directory;
  redis::Connection* groups = target->get();
  if (!target_options.cluster.seeds.empty()) {
    RedisOptions routed = group_options;
    routed.cluster.route_key = GroupsKey(settings.prefix);
    auto opened = OpenNamed(routed, "target");
    if (!opened.ok()) return opened.status();
    directory = std::move(*opened);
    groups = directory.get();
  }
  Result<redis::ReplyPtr> added =
      groups->Command({"SADD", GroupsKey(settings.prefix), settings.group});
  if (!added.ok()) return added.status().WithContext("SADD " + GroupsKey(settings.prefix));
  report.group_added = redis::CounterValue(*added) > 0;
  return report;
}

}  // namespace reliableq::migrate
