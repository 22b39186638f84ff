// The GET side of the API: session, overview, busy, queues, sets, a job,
// a job found by jid, the held sequence keys, recovery and the audit trail (reliableq(1), "web").
// Every call reads a bounded page: never a whole set or list.

#include <algorithm>

#include "reliableq/job.h"  // CheckQueueName
#include "version.h"
#include "web/json_out.h"
#include "web/web_context.h"

namespace reliableq::web {

namespace {

constexpr int64_t kMaxPerPage = 1000;
constexpr int64_t kDefaultPerPage = 25;
// The most entries of each list a job search reads (scan_limit).
constexpr int64_t kMaxScanLimit = 1'000'000;
// Jobs listed per orphaned process on the recovery page.
constexpr int64_t kOrphanJobs = 100;

std::optional<AdminPool::Lease> Borrow(Call& call) {
  Result<AdminPool::Lease> lease = call.context.pool->Acquire();
  if (!lease.ok()) {
    SendStatus(call.response, lease.status());
    return std::nullopt;
  }
  return std::move(lease.value());
}

void WriteQueue(JsonWriter& w, const QueueStats& q) {
  w.StartObject();
  w.Key("name");
  WriteString(w, q.name);
  w.Key("size");
  w.Int64(q.size);
  w.Key("latency");
  WriteNumber(w, q.latency);
  w.Key("paused");
  w.Bool(q.paused);
  w.EndObject();
}

// Jobs in working lists of processes a recovery would take for dead.
int64_t OrphanCount(const RecoveryReport& report) {
  int64_t total = 0;
  for (const IdentityRecovery& identity : report.identities) {
    if (identity.alive) continue;
    for (const QueueRecovery& q : identity.queues) total += q.requeued + q.dead;
  }
  return total;
}

void Session(Call& call) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("csrf_token");
  WriteString(w, call.context.csrf_token);
  w.Key("read_only");
  w.Bool(call.context.options.read_only);
  w.Key("user");
  WriteString(w, call.who);
  w.Key("version");
  WriteString(w, RELIABLEQ_VERSION);
  w.Key("refresh_ms");
  w.Int(call.context.options.refresh_ms);
  w.Key("prefix");
  WriteString(w, call.context.options.prefix);
  // The queue group (layout 2), "" in layout 1: every key read is the group's.
  w.Key("group");
  WriteString(w, call.context.options.redis.group);
  w.EndObject();
  SendJson(call.response, Done(buffer));
}

void Overview(Call& call) {
  auto admin = Borrow(call);
  if (!admin) return;
  Result<Stats> stats = (*admin)->GetStats();
  if (!stats.ok()) return SendStatus(call.response, stats.status());
  RecoverOptions dry;
  dry.dry_run = true;
  Result<RecoveryReport> report = (*admin)->Recover(dry);
  if (!report.ok()) return SendStatus(call.response, report.status());
  Result<RedisServerInfo> info = (*admin)->ServerInfo();
  if (!info.ok()) return SendStatus(call.response, info.status());
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("now");
  w.Double(call.context.clock->Now());
  w.Key("processed");
  w.Int64(stats->processed);
  w.Key("failed");
  w.Int64(stats->failed);
  w.Key("enqueued");
  w.Int64(stats->enqueued);
  w.Key("scheduled");
  w.Int64(stats->scheduled);
  w.Key("retries");
  w.Int64(stats->retries);
  w.Key("dead");
  w.Int64(stats->dead);
  w.Key("processes");
  w.Int64(stats->processes);
  w.Key("busy");
  w.Int64(stats->busy);
  w.Key("in_progress");
  w.Int64(stats->in_progress);
  w.Key("orphaned");
  w.Int64(OrphanCount(*report));
  w.Key("queues");
  w.StartArray();
  for (const QueueStats& q : stats->queues) WriteQueue(w, q);
  w.EndArray();
  w.Key("redis");
  w.StartObject();
  w.Key("address");
  WriteString(w, call.context.options.redis.Describe());
  w.Key("version");
  WriteString(w, info->version);
  w.Key("uptime_seconds");
  w.Int64(info->uptime_seconds);
  w.Key("used_memory_human");
  WriteString(w, info->used_memory_human);
  w.Key("connected_clients");
  w.Int64(info->connected_clients);
  w.EndObject();
  w.EndObject();
  SendJson(call.response, Done(buffer));
}

void Busy(Call& call) {
  auto admin = Borrow(call);
  if (!admin) return;
  Result<std::vector<ProcessInfo>> processes = (*admin)->ListProcesses();
  if (!processes.ok()) return SendStatus(call.response, processes.status());
  const double now = call.context.clock->Now();
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("processes");
  w.StartArray();
  for (const ProcessInfo& p : *processes) {
    w.StartObject();
    w.Key("identity");
    WriteString(w, p.identity);
    w.Key("hostname");
    WriteString(w, p.hostname);
    w.Key("pid");
    w.Int64(p.pid);
    w.Key("tag");
    WriteString(w, p.tag);
    w.Key("labels");
    w.StartArray();
    for (const std::string& label : p.labels) WriteString(w, label);
    w.EndArray();
    w.Key("queues");
    w.StartArray();
    for (const std::string& queue : p.queues) WriteString(w, queue);
    w.EndArray();
    w.Key("concurrency");
    w.Int64(p.concurrency);
    w.Key("busy");
    w.Int64(p.busy);
    w.Key("rss_kb");
    w.Int64(p.rss_kb);
    w.Key("started_at");
    WriteNumber(w, p.started_at);
    w.Key("beat");
    if (p.beat > 0) {
      WriteNumber(w, p.beat);
    } else {
      w.Null();
    }
    w.Key("heartbeat_age");
    if (p.beat > 0) {
      w.Double(std::max(0.0, now - p.beat));
    } else {
      w.Null();
    }
    w.Key("heartbeat_ttl_left");
    if (p.heartbeat_ttl_ms) {
      w.Double(static_cast<double>(*p.heartbeat_ttl_ms) / 1000);
    } else {
      w.Null();
    }
    w.Key("quiet");
    w.Bool(p.quiet);
    w.Key("version");
    WriteString(w, p.version);
    w.Key("jobs");
    w.StartArray();
    for (const RunningJobInfo& job : p.jobs) {
      ParsedPayload parsed(job.payload);
      w.StartObject();
      w.Key("thread");
      WriteString(w, job.thread);
      w.Key("queue");
      WriteString(w, job.queue);
      w.Key("run_at");
      WriteNumber(w, job.run_at);
      WriteJobBasics(w, parsed);
      w.Key("payload");
      WriteString(w, job.payload);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  SendJson(call.response, Done(buffer));
}

void Queues(Call& call) {
  auto admin = Borrow(call);
  if (!admin) return;
  Result<std::vector<QueueStats>> queues = (*admin)->ListQueues();
  if (!queues.ok()) return SendStatus(call.response, queues.status());
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("queues");
  w.StartArray();
  for (const QueueStats& q : *queues) WriteQueue(w, q);
  w.EndArray();
  w.EndObject();
  SendJson(call.response, Done(buffer));
}

void Queue(Call& call) {
  std::optional<std::string> name = call.request.Param("name");
  if (!name) return SendError(call.response, 400, "name is missing");
  if (Status s = CheckQueueName(*name); !s.ok()) return SendError(call.response, 400, s.message());
  std::optional<int64_t> page = IntParam(call.request, call.response, "page", 1, 1'000'000'000);
  if (!page) return;
  std::optional<int64_t> per_page =
      IntParam(call.request, call.response, "per_page", kDefaultPerPage, kMaxPerPage);
  if (!per_page) return;
  auto admin = Borrow(call);
  if (!admin) return;
  Result<QueuePage> listing = (*admin)->ListQueue(*name, (*page - 1) * *per_page, *per_page);
  if (!listing.ok()) return SendStatus(call.response, listing.status());
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("name");
  WriteString(w, *name);
  w.Key("size");
  w.Int64(listing->stats.size);
  w.Key("latency");
  WriteNumber(w, listing->stats.latency);
  w.Key("paused");
  w.Bool(listing->stats.paused);
  w.Key("page");
  w.Int64(*page);
  w.Key("per_page");
  w.Int64(*per_page);
  w.Key("jobs");
  w.StartArray();
  for (const QueuedJob& job : listing->jobs) {
    ParsedPayload parsed(job.payload);
    w.StartObject();
    w.Key("position");
    w.Int64(job.position);
    WriteJobBasics(w, parsed);
    w.Key("enqueued_at");
    WriteMember(w, parsed, "enqueued_at");
    w.Key("payload");
    WriteString(w, job.payload);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  SendJson(call.response, Done(buffer));
}

void SetPage(Call& call) {
  std::optional<JobSet> set = JobSetNamed(call.request.matches[1]);
  if (!set) return SendError(call.response, 404, "no such set (retry, scheduled or dead)");
  std::optional<int64_t> page = IntParam(call.request, call.response, "page", 1, 1'000'000'000);
  if (!page) return;
  std::optional<int64_t> per_page =
      IntParam(call.request, call.response, "per_page", kDefaultPerPage, kMaxPerPage);
  if (!per_page) return;
  auto admin = Borrow(call);
  if (!admin) return;
  Result<SetListing> listing = (*admin)->ListPage(*set, (*page - 1) * *per_page, *per_page);
  if (!listing.ok()) return SendStatus(call.response, listing.status());
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("set");
  WriteString(w, JobSetName(*set));
  w.Key("size");
  w.Int64(listing->size);
  w.Key("page");
  w.Int64(*page);
  w.Key("per_page");
  w.Int64(*per_page);
  w.Key("entries");
  w.StartArray();
  for (const SetEntry& entry : listing->entries) WriteSetEntry(w, entry);
  w.EndArray();
  w.EndObject();
  SendJson(call.response, Done(buffer));
}

void Job(Call& call) {
  std::optional<JobSet> set = JobSetNamed(call.request.Param("set").value_or(""));
  if (!set) return SendError(call.response, 400, "set must be retry, scheduled or dead");
  std::string id = call.request.Param("id").value_or("");
  std::optional<EntryRef> ref = EntryRef::Parse(id);
  if (!ref) return SendError(call.response, 400, "id must be <score>-<jid>");
  auto admin = Borrow(call);
  if (!admin) return;
  Result<SetEntry> entry = (*admin)->FindAt(*set, *ref);
  if (!entry.ok()) return SendStatus(call.response, entry.status());
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("set");
  WriteString(w, JobSetName(*set));
  w.Key("id");
  WriteString(w, EntryIdOf(*entry));
  w.Key("score");
  WriteNumber(w, entry->score);
  w.Key("entry");
  WriteSetEntry(w, *entry);
  w.EndObject();
  SendJson(call.response, Done(buffer));
}

// Where a job is, by jid (Admin::FindJob): the JSON of `reliableq job --json`.
// Found or not, 200: "unknown" is an answer.
void FindJob(Call& call) {
  std::string jid = call.request.Param("jid").value_or("");
  if (jid.empty()) return SendError(call.response, 400, "jid is missing");
  std::optional<int64_t> scan_limit = IntParam(call.request, call.response, "scan_limit",
                                               JobLookupOptions().scan_limit, kMaxScanLimit);
  if (!scan_limit) return;
  auto admin = Borrow(call);
  if (!admin) return;
  Result<JobLookup> job = (*admin)->FindJob(jid, {.scan_limit = *scan_limit});
  if (!job.ok()) return SendStatus(call.response, job.status());
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  WriteJobLookup(w, *job);
  SendJson(call.response, Done(buffer));
}

void Recovery(Call& call) {
  auto admin = Borrow(call);
  if (!admin) return;
  Result<std::vector<Orphan>> orphans = (*admin)->ListOrphans(kOrphanJobs);
  if (!orphans.ok()) return SendStatus(call.response, orphans.status());
  Result<JanitorRecord> janitor = (*admin)->ReadJanitorRecord();
  if (!janitor.ok()) return SendStatus(call.response, janitor.status());
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("orphans");
  w.StartArray();
  int64_t total = 0;
  for (const Orphan& orphan : *orphans) {
    total += orphan.total;
    w.StartObject();
    WriteIdentityRecoveryFields(w, orphan.recovery);
    w.Key("total");
    w.Int64(orphan.total);
    w.Key("jobs");
    w.StartArray();
    for (const OrphanJob& job : orphan.jobs) {
      ParsedPayload parsed(job.payload);
      w.StartObject();
      w.Key("queue");
      WriteString(w, job.queue);
      WriteJobBasics(w, parsed);
      w.Key("interrupted_count");
      const rapidjson::Value* count = parsed.Get("interrupted_count");
      w.Int64(count != nullptr && count->IsInt64() ? count->GetInt64() : 0);
      w.Key("payload");
      WriteString(w, job.payload);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.Key("total");
  w.Int64(total);
  w.Key("janitor");
  w.StartObject();
  w.Key("last");
  if (janitor->last) {
    WriteStoredJson(w, *janitor->last);
  } else {
    w.Null();
  }
  w.Key("passes");
  w.StartArray();
  for (const std::string& pass : janitor->passes) WriteStoredJson(w, pass);
  w.EndArray();
  w.EndObject();
  w.EndObject();
  SendJson(call.response, Done(buffer));
}

// The held sequence keys, oldest hold first: ?limit (default 100).
void Sequences(Call& call) {
  std::optional<int64_t> limit = IntParam(call.request, call.response, "limit", 100, kMaxPerPage);
  if (!limit) return;
  auto admin = Borrow(call);
  if (!admin) return;
  Result<SequenceListing> listing = (*admin)->ListSequences(*limit);
  if (!listing.ok()) return SendStatus(call.response, listing.status());
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("held");
  w.Int64(listing->held);
  w.Key("sequences");
  w.StartArray();
  for (const SequenceInfo& s : listing->sequences) {
    w.StartObject();
    w.Key("key");
    WriteString(w, s.key);
    w.Key("holder");
    WriteString(w, s.holder);
    w.Key("held_since");
    WriteNumber(w, s.held_since);
    w.Key("waiting");
    w.Int64(s.waiting);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  SendJson(call.response, Done(buffer));
}

void AuditTrail(Call& call) {
  std::optional<int64_t> limit = IntParam(call.request, call.response, "limit", 1000, 1000);
  if (!limit) return;
  auto admin = Borrow(call);
  if (!admin) return;
  Result<std::vector<std::string>> entries = (*admin)->ReadAudit(*limit);
  if (!entries.ok()) return SendStatus(call.response, entries.status());
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("entries");
  w.StartArray();
  for (const std::string& entry : *entries) WriteStoredJson(w, entry);
  w.EndArray();
  w.EndObject();
  SendJson(call.response, Done(buffer));
}

}  // namespace

std::optional<AdminPool::Lease> BorrowAdmin(Call& call) { return Borrow(call); }

void AddReadRoutes(http::HttpRoutes& server, Context& context) {
  Get(server, context, "/api/session", Session);
  Get(server, context, "/api/overview", Overview);
  Get(server, context, "/api/busy", Busy);
  Get(server, context, "/api/queues", Queues);
  Get(server, context, "/api/queue", Queue);
  Get(server, context, "/api/sets/*", SetPage);
  Get(server, context, "/api/job", Job);
  Get(server, context, "/api/find", FindJob);
  Get(server, context, "/api/sequences", Sequences);
  Get(server, context, "/api/recovery", Recovery);
  Get(server, context, "/api/audit", AuditTrail);
}

}  // namespace reliableq::web
