// Admin's lookup of a job by jid: the reads, bounded as admin.h says, and
// the pure steps that make a JobLookup of what they found.

#include "admin/job_lookup.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <deque>
#include <utility>

#include "admin/json_members.h"
#include "admin/processes.h"
#include "codec/json_writer.h"
#include "protocol/process_entry.h"

namespace reliableq::admin {

namespace {

// Entries of a list read per LRANGE: a page of every unfinished list goes
// in one pipeline, so a round trip carries a few MB at most.
constexpr int64_t kPage = 1000;

JobBasics BasicsOf(const rapidjson::Value& doc) {
  JobBasics basics;
  if (!doc.IsObject()) return basics;
  basics.job_class = StringMember(doc, "class");
  basics.queue = StringMember(doc, "queue");
  basics.retry_count = OptionalInteger(doc, "retry_count");
  basics.error_class = OptionalString(doc, "error_class");
  basics.error_message = OptionalString(doc, "error_message");
  basics.args = OptionalJson(doc, "args");
  basics.enqueued_at = OptionalNumber(doc, "enqueued_at");
  return basics;
}

// A list that may hold the job, and how far it has been read.
struct ListScan {
  ListScan(JobState state, std::string owner, std::string name, std::string key,
           bool from_tail = false)
      : state(state),
        owner(std::move(owner)),
        name(std::move(name)),
        key(std::move(key)),
        from_tail(from_tail) {}

  JobState state;     // what finding the job in it means
  std::string owner;  // working lists: the process
  std::string name;   // the queue (working lists, queues) or the limit
  std::string key;
  bool from_tail = false;  // position 0 is the last element (queues)
  int64_t size = 0;        // LLEN
  int64_t read = 0;        // entries read so far
  int64_t limit = 0;       // entries to read at most: min(size, scan limit)
};

// The LRANGE of the next page of `list`.
redis::Argv PageRead(const ListScan& list, std::deque<std::string>& texts) {
  int64_t count = std::min(kPage, list.limit - list.read);
  int64_t first = list.read;
  int64_t last = list.read + count - 1;
  if (list.from_tail) {
    // Position p is index -(p + 1).
    std::swap(first, last);
    first = -(first + 1);
    last = -(last + 1);
  }
  return {"LRANGE", list.key, texts.emplace_back(std::to_string(first)),
          texts.emplace_back(std::to_string(last))};
}

}  // namespace

JobState RecordState(std::string_view state) {
  if (state == "done") return JobState::kDone;
  if (state == "dead") return JobState::kDead;
  if (state == "discarded") return JobState::kDiscarded;
  if (state == "expired") return JobState::kExpired;
  if (state == "cancelled") return JobState::kCancelled;
  return JobState::kUnknown;
}

JobRecord ParseJobRecord(std::string json) {
  JobRecord record;
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseFullPrecisionFlag>(json.data(),
                                                                                 json.size());
  record.json = std::move(json);
  if (!doc.IsObject()) return record;
  record.valid = true;
  record.state = StringMember(doc, "state");
  record.at = NumberMember(doc, "at");
  record.process = StringMember(doc, "process");
  record.job_class = StringMember(doc, "class");
  record.queue = StringMember(doc, "queue");
  record.started_at = OptionalNumber(doc, "started_at");
  record.attempts = OptionalInteger(doc, "attempts");
  record.error_class = OptionalString(doc, "error_class");
  record.error_message = OptionalString(doc, "error_message");
  record.result = OptionalJson(doc, "result");
  record.result_bytes = OptionalInteger(doc, "result_bytes");
  auto progress = doc.FindMember("progress");
  if (progress != doc.MemberEnd() && progress->value.IsObject()) {
    record.progress = codec::ToJson(progress->value);
  }
  auto job = doc.FindMember("job");
  if (job != doc.MemberEnd() && job->value.IsObject()) record.job = codec::ToJson(job->value);
  record.job_bytes = OptionalInteger(doc, "job_bytes");
  record.args = OptionalJson(doc, "args");
  record.args_bytes = OptionalInteger(doc, "args_bytes");
  return record;
}

JobBasics ParseJobBasics(std::string_view payload) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseFullPrecisionFlag>(payload.data(),
                                                                                 payload.size());
  return BasicsOf(doc);
}

std::string JidIn(std::string_view payload, std::string_view escaped_jid) {
  if (payload.find(escaped_jid) == std::string_view::npos) return "";
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(payload.data(), payload.size());
  return doc.IsObject() ? StringMember(doc, "jid") : "";
}

JobLookup ChooseJobLookup(JobFindings findings) {
  auto first =
      std::min_element(findings.places.begin(), findings.places.end(),
                       [](const JobLookup& a, const JobLookup& b) { return a.state < b.state; });
  JobLookup lookup;
  if (first != findings.places.end()) {
    lookup = std::move(*first);
    lookup.jid = std::move(findings.jid);
    lookup.basics = ParseJobBasics(lookup.payload);
    if (lookup.state == JobState::kQueued && lookup.basics.enqueued_at) {
      lookup.since = lookup.basics.enqueued_at;
    }
    lookup.record = std::move(findings.record);
    return lookup;
  }
  lookup.jid = std::move(findings.jid);
  if (findings.record) {
    JobRecord& record = *findings.record;
    lookup.state = RecordState(record.state);
    if (record.valid) {
      lookup.at = record.at;
      lookup.process = record.process;
      lookup.queue = record.queue;
      lookup.progress = record.progress;
      if (record.job) {
        lookup.payload = *record.job;
        lookup.basics = ParseJobBasics(lookup.payload);
      } else if (record.args) {
        lookup.basics.args = record.args;
      }
      // The record's own fields stand in for a payload it left out (over
      // the cap) and name the job's last error.
      if (lookup.basics.job_class.empty()) lookup.basics.job_class = record.job_class;
      if (lookup.basics.queue.empty()) lookup.basics.queue = record.queue;
      if (record.error_class) lookup.basics.error_class = record.error_class;
      if (record.error_message) lookup.basics.error_message = record.error_message;
    }
    lookup.record = std::move(findings.record);
    lookup.ended = true;
    return lookup;
  }
  lookup.state = JobState::kUnknown;
  lookup.not_searched = std::move(findings.not_searched);
  return lookup;
}

JobLookups::JobLookups(AdminContext& context, JobSets& job_sets)
    : context_(context), job_sets_(job_sets) {}

Result<JobLookup> JobLookups::Find(std::string_view jid, const JobLookupOptions& options) {
  if (jid.empty()) return Status::InvalidArgument("the jid is empty");
  if (options.scan_limit < 1) return Status::InvalidArgument("the scan limit must be at least 1");
  const protocol::Keys& keys = context_.keys;
  const std::string escaped = JsonEscaped(jid);
  JobFindings findings;
  findings.jid = std::string(jid);

  // 1. The directories, and the record whatever else is found.
  const std::string record_key = keys.JobRecord(jid);
  const std::string first_keys[] = {keys.Processes(), keys.Registry(), keys.Limits(),
                                    keys.Queues()};
  std::vector<redis::Argv> first = {{"SMEMBERS", first_keys[0]}, {"HGETALL", first_keys[1]},
                                    {"HKEYS", first_keys[2]},    {"SMEMBERS", first_keys[3]},
                                    {"GET", record_key},         {"PTTL", record_key}};
  Result<std::vector<redis::ReplyPtr>> r1 = context_.redis->Pipeline(first);
  if (Status s = context_.Failed(r1, first, "looking up job " + findings.jid); !s.ok()) return s;
  std::vector<std::string> processes = redis::StringArray((*r1)[0]);
  std::sort(processes.begin(), processes.end());
  std::vector<std::string> limits = redis::StringArray((*r1)[2]);
  std::sort(limits.begin(), limits.end());
  std::vector<std::string> queues = redis::StringArray((*r1)[3]);
  std::sort(queues.begin(), queues.end());
  if (Result<std::string> json = redis::ToString((*r1)[4]); json.ok()) {
    findings.record = ParseJobRecord(std::move(*json));
    Result<int64_t> ttl = redis::ToInteger((*r1)[5]);
    if (ttl.ok() && *ttl >= 0) findings.record->ttl_ms = *ttl;
  }

  // 2. The work hashes, the heartbeats of the registered processes, and the
  // length of every list.
  std::vector<ListScan> lists;
  std::vector<std::string> registered;
  for (const auto& [identity, json] : redis::FieldValues((*r1)[1])) {
    protocol::ProcessEntry entry;
    if (!protocol::DecodeProcessEntry(json, &entry)) continue;
    registered.push_back(identity);
    for (const std::string& queue : entry.queues) {
      lists.emplace_back(JobState::kFetched, identity, queue, keys.Working(identity, queue));
    }
  }
  for (const std::string& queue : queues) {
    lists.emplace_back(JobState::kQueued, "", queue, keys.Queue(queue), true);
  }
  for (const std::string& limit : limits) {
    lists.emplace_back(JobState::kParked, "", limit, keys.LimitWaiting(limit));
  }
  std::deque<std::string> texts;
  std::vector<redis::Argv> second;
  for (const std::string& identity : processes) {
    second.push_back({"HGETALL", texts.emplace_back(keys.Work(identity))});
  }
  for (const std::string& identity : registered) {
    second.push_back({"EXISTS", texts.emplace_back(keys.Heartbeat(identity))});
  }
  for (const ListScan& list : lists) second.push_back({"LLEN", list.key});
  Result<std::vector<redis::ReplyPtr>> r2 = context_.redis->Pipeline(second);
  if (Status s = context_.Failed(r2, second, "looking up job " + findings.jid); !s.ok()) return s;
  size_t next = 0;
  for (const std::string& identity : processes) {
    for (auto& [thread, value] : redis::FieldValues((*r2)[next++])) {
      RunningJobInfo work = ReadWork(std::move(thread), value);
      if (JidIn(work.payload, escaped) != jid) continue;
      JobLookup& place = findings.places.emplace_back();
      place.state = JobState::kRunning;
      place.process = identity;
      place.thread = std::move(work.thread);
      place.queue = std::move(work.queue);
      place.since = work.run_at;
      place.progress = std::move(work.progress);
      place.payload = std::move(work.payload);
    }
  }
  std::vector<std::string> dead;
  for (const std::string& identity : registered) {
    if (redis::CounterValue((*r2)[next++]) == 0) dead.push_back(identity);
  }
  for (ListScan& list : lists) {
    list.size = redis::CounterValue((*r2)[next++]);
    list.limit = std::min(list.size, options.scan_limit);
    if (list.state == JobState::kFetched &&
        std::find(dead.begin(), dead.end(), list.owner) != dead.end()) {
      list.state = JobState::kOrphaned;
    }
  }

  // 3. The lists, a page of each per round trip, until the job is found or
  // every list is read to its limit.
  while (findings.places.empty()) {
    std::vector<ListScan*> reading;
    std::vector<redis::Argv> pages;
    texts.clear();
    for (ListScan& list : lists) {
      if (list.read >= list.limit) continue;
      reading.push_back(&list);
      pages.push_back(PageRead(list, texts));
    }
    if (pages.empty()) break;
    Result<std::vector<redis::ReplyPtr>> replies = context_.redis->Pipeline(pages);
    if (Status s = context_.Failed(replies, pages, "looking up job " + findings.jid); !s.ok()) {
      return s;
    }
    for (size_t i = 0; i < reading.size(); ++i) {
      ListScan& list = *reading[i];
      std::vector<std::string> page = redis::StringArray((*replies)[i]);
      for (size_t k = 0; k < page.size(); ++k) {
        if (JidIn(page[k], escaped) != jid) continue;
        // LRANGE answers left to right; from the tail, the last is first.
        int64_t offset =
            list.from_tail ? static_cast<int64_t>(page.size() - 1 - k) : static_cast<int64_t>(k);
        JobLookup place;
        place.state = list.state;
        place.payload = std::move(page[k]);
        if (list.state == JobState::kParked) {
          place.limit = list.name;
        } else {
          place.queue = list.name;
        }
        place.process = list.owner;
        if (list.state == JobState::kQueued || list.state == JobState::kParked) {
          place.position = list.read + offset;
          place.list_size = list.size;
        }
        findings.places.push_back(std::move(place));
        break;
      }
      // A page shorter than asked: the list shrank meanwhile.
      list.read = page.size() < static_cast<size_t>(std::min(kPage, list.limit - list.read))
                      ? list.limit
                      : list.read + static_cast<int64_t>(page.size());
    }
  }

  // 4. The sets, in order, by ZSCAN MATCH.
  constexpr std::pair<JobSet, JobState> kSets[] = {{JobSet::kScheduled, JobState::kScheduled},
                                                   {JobSet::kRetry, JobState::kRetry},
                                                   {JobSet::kDead, JobState::kDead}};
  for (const auto& [set, state] : kSets) {
    if (!findings.places.empty()) break;
    Result<SetEntry> entry = job_sets_.Find(set, jid);
    if (!entry.ok()) {
      if (entry.status().IsNotFound()) continue;
      return entry.status();
    }
    JobLookup place;
    place.state = state;
    place.payload = std::move(entry->payload);
    if (state == JobState::kDead) {
      place.since = entry->score;
    } else {
      place.at = entry->score;
    }
    findings.places.push_back(std::move(place));
  }

  if (findings.places.empty()) {
    for (const ListScan& list : lists) {
      if (list.state != JobState::kQueued && list.state != JobState::kParked) continue;
      if (list.limit >= list.size) continue;
      findings.not_searched.push_back(
          {list.state == JobState::kQueued ? "queue" : "parked", list.name, list.size, list.limit});
    }
  }
  return ChooseJobLookup(std::move(findings));
}

}  // namespace reliableq::admin

namespace reliableq {

std::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kRunning:
      return "running";
    case JobState::kFetched:
      return "fetched";
    case JobState::kOrphaned:
      return "orphaned";
    case JobState::kQueued:
      return "queued";
    case JobState::kParked:
      return "parked";
    case JobState::kScheduled:
      return "scheduled";
    case JobState::kRetry:
      return "retry";
    case JobState::kDead:
      return "dead";
    case JobState::kDone:
      return "done";
    case JobState::kDiscarded:
      return "discarded";
    case JobState::kExpired:
      return "expired";
    case JobState::kCancelled:
      return "cancelled";
    case JobState::kUnknown:
      break;
  }
  return "unknown";
}

}  // namespace reliableq
