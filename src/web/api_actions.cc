// The POST side of the API: retry, delete and kill of set entries, quiet
// and stop of processes, clearing, pausing and resuming a queue, releasing
// a sequence key or skipping its oldest waiting job, recovering dead
// processes. The checks (auth, read-only, origin, CSRF token, JSON
// body) ran before any of these (web_server.cc); each action leaves an
// audit entry, whether it worked or not.

#include "reliableq/job.h"  // CheckQueueName
#include "web/json_out.h"
#include "web/web_context.h"

namespace reliableq::web {

namespace {

// More ids than any page shows at once (per_page is at most 1000).
constexpr size_t kMaxIds = 10000;
// Ids an audit entry names.
constexpr size_t kAuditedIds = 20;

bool WantsAll(const rapidjson::Document& body) {
  auto it = body.FindMember("all");
  return it != body.MemberEnd() && it->value.IsBool() && it->value.GetBool();
}

std::optional<std::string> StringField(const rapidjson::Document& body, const char* name) {
  auto it = body.FindMember(name);
  if (it == body.MemberEnd() || !it->value.IsString()) return std::nullopt;
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

// Records a failed action and answers with its status.
void Failed(Call& call, Admin& admin, std::string_view action, std::string_view target,
            const Status& status) {
  Audit(call, admin, action, target, "error: " + status.ToString());
  SendStatus(call.response, status);
}

std::optional<SetAction> ActionNamed(std::string_view name) {
  if (name == "retry") return SetAction::kRetry;
  if (name == "delete") return SetAction::kDelete;
  if (name == "kill") return SetAction::kKill;
  return std::nullopt;
}

void SetAct(Call& call) {
  std::optional<JobSet> set = JobSetNamed(call.request.matches[1]);
  if (!set) return SendError(call.response, 404, "no such set (retry, scheduled or dead)");
  std::string action_name = call.request.matches[2];
  std::optional<SetAction> action = ActionNamed(action_name);
  if (!action) return SendError(call.response, 404, "no such action (retry, delete or kill)");
  if (*action == SetAction::kKill && *set == JobSet::kDead) {
    return SendError(call.response, 400, "dead entries cannot be killed");
  }
  const bool all = WantsAll(call.body);
  std::vector<EntryRef> refs;
  std::string target = std::string(JobSetName(*set)) + ":";
  if (all) {
    target += "all";
  } else {
    auto ids = call.body.FindMember("ids");
    if (ids == call.body.MemberEnd() || !ids->value.IsArray()) {
      return SendError(call.response, 400, "the body needs \"ids\": [...] or \"all\": true");
    }
    if (ids->value.Size() > kMaxIds) {
      return SendError(call.response, 400, "at most 10000 ids at once");
    }
    for (const rapidjson::Value& id : ids->value.GetArray()) {
      std::optional<EntryRef> ref =
          id.IsString() ? EntryRef::Parse({id.GetString(), id.GetStringLength()}) : std::nullopt;
      if (!ref) return SendError(call.response, 400, "every id must be \"<score>-<jid>\"");
      // The audit names the first ids; a selection of thousands would make
      // one log line of hundreds of kilobytes.
      if (refs.size() < kAuditedIds) target += (refs.empty() ? "" : ",") + ref->ToString();
      refs.push_back(std::move(*ref));
    }
    if (refs.size() > kAuditedIds) {
      target += " and " + std::to_string(refs.size() - kAuditedIds) + " more";
    }
  }
  auto admin = BorrowAdmin(call);
  if (!admin) return;
  Result<ActionResult> result = all ? (*admin)->ActOnAll(*set, *action)
                                    : (*admin)->ActOn(*set, *action, refs);
  if (!result.ok()) return Failed(call, **admin, action_name, target, result.status());
  Audit(call, **admin, action_name, target,
        "done=" + std::to_string(result->done) + " not_found=" +
            std::to_string(result->not_found) + " skipped=" + std::to_string(result->skipped));
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("done");
  w.Int64(result->done);
  w.Key("not_found");
  w.Int64(result->not_found);
  w.Key("skipped");
  w.Int64(result->skipped);
  w.EndObject();
  SendJson(call.response, Done(buffer));
}

void Signal(Call& call) {
  std::string action = call.request.matches[1];
  if (action != "quiet" && action != "stop") return SendError(call.response, 404, "not found");
  ProcessSignal signal = action == "quiet" ? ProcessSignal::kQuiet : ProcessSignal::kStop;
  const bool all = WantsAll(call.body);
  std::optional<std::string> identity = StringField(call.body, "identity");
  if (!all && (!identity || identity->empty())) {
    return SendError(call.response, 400, "the body needs \"identity\": s or \"all\": true");
  }
  auto admin = BorrowAdmin(call);
  if (!admin) return;
  std::string target = all ? "all" : *identity;
  std::vector<std::string> identities;
  if (all) {
    Result<std::vector<ProcessInfo>> processes = (*admin)->ListProcesses();
    if (!processes.ok()) return Failed(call, **admin, action, target, processes.status());
    for (const ProcessInfo& p : *processes) identities.push_back(p.identity);
  } else {
    identities.push_back(*identity);
  }
  int64_t signalled = 0;
  for (const std::string& id : identities) {
    Status s = (*admin)->SignalProcess(id, signal);
    // With "all", a process that left meanwhile is no error.
    if (s.IsNotFound() && all) continue;
    if (!s.ok()) return Failed(call, **admin, action, target, s);
    ++signalled;
  }
  Audit(call, **admin, action, target, "signalled=" + std::to_string(signalled));
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("signalled");
  w.Int64(signalled);
  w.EndObject();
  SendJson(call.response, Done(buffer));
}

void ClearQueue(Call& call) {
  std::optional<std::string> name = StringField(call.body, "name");
  if (!name) return SendError(call.response, 400, "the body needs \"name\": s");
  if (Status s = CheckQueueName(*name); !s.ok()) return SendError(call.response, 400, s.message());
  auto admin = BorrowAdmin(call);
  if (!admin) return;
  Result<int64_t> cleared = (*admin)->ClearQueue(*name);
  if (!cleared.ok()) return Failed(call, **admin, "clear", *name, cleared.status());
  Audit(call, **admin, "clear", *name, "cleared=" + std::to_string(*cleared));
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("cleared");
  w.Int64(*cleared);
  w.EndObject();
  SendJson(call.response, Done(buffer));
}

// Pause or resume a queue: {"name": s} -> {"changed": bool, "workers_told": n}.
// The dashboard offers only the queues it lists, all known: a name that is
// not (cleared since the page was drawn) is refused as the CLI refuses it.
void SetQueuePaused(Call& call, bool pause) {
  const char* action = pause ? "pause" : "resume";
  std::optional<std::string> name = StringField(call.body, "name");
  if (!name) return SendError(call.response, 400, "the body needs \"name\": s");
  if (Status s = CheckQueueName(*name); !s.ok()) return SendError(call.response, 400, s.message());
  auto admin = BorrowAdmin(call);
  if (!admin) return;
  Result<PauseChange> change =
      pause ? (*admin)->PauseQueue(*name, PauseOptions()) : (*admin)->ResumeQueue(*name);
  if (!change.ok()) return Failed(call, **admin, action, *name, change.status());
  Audit(call, **admin, action, *name, change->changed ? "changed" : "unchanged");
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("changed");
  w.Bool(change->changed);
  w.Key("workers_told");
  w.Int64(change->workers_told);
  w.EndObject();
  SendJson(call.response, Done(buffer));
}

// Release a sequence key, {"key": s} -> {"holder": jid, "next": jid or
// ""}; or skip its oldest waiting job, {"key": s} -> {"jid": jid, "next":
// jid or ""}. A key not held, or with no job waiting, is a 404.
void SequenceAct(Call& call, bool release) {
  const char* action = release ? "sequence_release" : "sequence_skip";
  std::optional<std::string> key = StringField(call.body, "key");
  if (!key || key->empty()) return SendError(call.response, 400, "the body needs \"key\": s");
  auto admin = BorrowAdmin(call);
  if (!admin) return;
  std::string first;
  std::string next;
  if (release) {
    Result<SequenceRelease> done = (*admin)->ReleaseSequence(*key);
    if (!done.ok()) return Failed(call, **admin, action, *key, done.status());
    first = std::move(done->holder);
    next = std::move(done->next);
  } else {
    Result<SequenceSkip> done = (*admin)->SkipSequenceHead(*key, DeadSetLimits());
    if (!done.ok()) return Failed(call, **admin, action, *key, done.status());
    first = std::move(done->jid);
    next = std::move(done->next);
  }
  Audit(call, **admin, action, *key,
        (release ? "holder=" : "skipped=") + first + (next.empty() ? "" : " next=" + next));
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key(release ? "holder" : "jid");
  WriteString(w, first);
  w.Key("next");
  WriteString(w, next);
  w.EndObject();
  SendJson(call.response, Done(buffer));
}

void Recover(Call& call) {
  RecoverOptions options;
  if (call.body.HasMember("identity")) {
    std::optional<std::string> identity = StringField(call.body, "identity");
    if (!identity || identity->empty()) {
      return SendError(call.response, 400, "\"identity\" must be a non-empty string");
    }
    options.identity = *identity;
  }
  std::string target = options.identity.empty() ? "all" : options.identity;
  auto admin = BorrowAdmin(call);
  if (!admin) return;
  Result<RecoveryReport> report = (*admin)->Recover(options);
  if (!report.ok()) return Failed(call, **admin, "recover", target, report.status());
  int64_t requeued = 0;
  int64_t dead = 0;
  int64_t processes = 0;
  for (const IdentityRecovery& identity : report->identities) {
    if (identity.alive) continue;
    ++processes;
    for (const QueueRecovery& q : identity.queues) {
      requeued += q.requeued;
      dead += q.dead;
    }
  }
  Audit(call, **admin, "recover", target,
        "processes=" + std::to_string(processes) + " requeued=" + std::to_string(requeued) +
            " dead=" + std::to_string(dead));
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("identities");
  w.StartArray();
  for (const IdentityRecovery& identity : report->identities) {
    WriteIdentityRecovery(w, identity);
  }
  w.EndArray();
  w.EndObject();
  SendJson(call.response, Done(buffer));
}

}  // namespace

void AddActionRoutes(http::HttpRoutes& server, Context& context) {
  Post(server, context, "/api/sets/*/*", SetAct);
  Post(server, context, "/api/processes/*", Signal);
  Post(server, context, "/api/queue/clear", ClearQueue);
  Post(server, context, "/api/queue/pause", [](Call& call) { SetQueuePaused(call, true); });
  Post(server, context, "/api/queue/resume", [](Call& call) { SetQueuePaused(call, false); });
  Post(server, context, "/api/sequences/release", [](Call& call) { SequenceAct(call, true); });
  Post(server, context, "/api/sequences/skip", [](Call& call) { SequenceAct(call, false); });
  Post(server, context, "/api/recovery/recover", Recover);
}

}  // namespace reliableq::web
