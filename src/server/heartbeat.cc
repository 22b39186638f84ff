#include "server/heartbeat.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <unistd.h>

#include <cstdio>

#include "codec/job_codec.h"
#include "protocol/process_entry.h"
#include "redis/reply.h"
#include "protocol/script_calls.h"
#include "version.h"

namespace reliableq::server {

namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void WriteString(JsonWriter& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

int64_t RssKilobytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long pages_total = 0, pages_resident = 0;
  int n = std::fscanf(f, "%ld %ld", &pages_total, &pages_resident);
  std::fclose(f);
  if (n != 2) return 0;
  return static_cast<int64_t>(pages_resident) * (sysconf(_SC_PAGESIZE) / 1024);
}

// Sidekiq's work entry for a running job: {"queue","payload","run_at"},
// and reliableq's "progress" when its handler reported some.
std::string WorkJson(const std::string& queue, const RunningJob& job) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  w.Key("queue");
  WriteString(w, queue);
  w.Key("payload");
  WriteString(w, job.payload);
  w.Key("run_at");
  w.Int64(static_cast<int64_t>(job.started_at));
  if (job.progress) {
    std::string progress = codec::ProgressJson(*job.progress);
    w.Key("progress");
    w.RawValue(progress.data(), progress.size(), rapidjson::kObjectType);
  }
  w.EndObject();
  return buf.GetString();
}

}  // namespace

Heartbeat::Heartbeat(uv::EventLoop& loop, redis::AsyncConnection& command, const protocol::Keys& keys,
                     ProcessDescription self, std::chrono::milliseconds ttl,
                     std::chrono::milliseconds interval, const Clock& clock, const base::Logger& log,
                     Events events)
    : command_(command),
      keys_(keys),
      self_(std::move(self)),
      ttl_(ttl),
      interval_(interval),
      clock_(clock),
      log_(log),
      events_(std::move(events)),
      timer_(loop, [this] { Beat(); }) {}

void Heartbeat::Start() {
  started_at_ = clock_.Now();
  timer_.Start(interval_, interval_);
}

void Heartbeat::Stop() {
  stopped_ = true;
  timer_.Stop();
}

std::string Heartbeat::InfoJson(const std::vector<std::string>& queues) const {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  w.Key("hostname");
  WriteString(w, self_.hostname);
  w.Key("started_at");
  std::string started = codec::FormatEpoch(started_at_);
  w.RawValue(started.c_str(), started.size(), rapidjson::kNumberType);
  w.Key("pid");
  w.Int64(self_.pid);
  w.Key("tag");
  WriteString(w, self_.tag);
  w.Key("concurrency");
  w.Int(self_.concurrency);
  w.Key("queues");
  w.StartArray();
  for (const std::string& q : queues) WriteString(w, q);
  w.EndArray();
  w.Key("labels");
  w.StartArray();
  for (const std::string& label : self_.labels) WriteString(w, label);
  w.EndArray();
  w.Key("identity");
  WriteString(w, self_.identity);
  w.Key("version");
  WriteString(w, "reliableq " RELIABLEQ_VERSION);
  w.EndObject();
  return buf.GetString();
}

void Heartbeat::Beat() {
  if (stopped_ || !command_.ready()) return;
  if (in_flight_) {
    again_ = true;
    return;
  }
  in_flight_ = true;
  again_ = false;

  auto ping_sent = clock_.Monotonic();
  command_.Command({"PING"}, [this, ping_sent](const Status& s, redis::ReplyRef) {
    if (s.ok()) {
      rtt_us_ = std::chrono::duration_cast<std::chrono::microseconds>(clock_.Monotonic() -
                                                                      ping_sent)
                    .count();
    }
  });

  BeatSnapshot snapshot = events_.snapshot();
  const std::vector<std::string>& queues =
      snapshot.queues.empty() ? self_.queues : snapshot.queues;
  protocol::ProcessEntry entry;
  entry.identity = self_.identity;
  entry.hostname = self_.hostname;
  entry.pid = self_.pid;
  entry.started_at = started_at_;
  entry.queues = queues;
  // The janitor kills these connections before it recovers this process, so
  // that a stopped-but-alive process cannot move a job into a working list
  // after its registration is gone.
  entry.clients = snapshot.clients;
  entry.clients_run = snapshot.clients_run;
  // The connection this beat goes out on: heartbeat.lua stores its id as the
  // heartbeat key's value, and a janitor that sees all our connections gone
  // deletes the key only while it still holds this id (drop_heartbeat.lua),
  // so a beat from a new connection keeps us alive.
  entry.beat_client = command_.client_id();
  entry.ttl_ms = ttl_.count();
  std::set<int64_t> published(snapshot.clients.begin(), snapshot.clients.end());

  protocol::BeatFields fields;
  fields.ttl_millis = ttl_.count();
  fields.registry_entry = protocol::EncodeProcessEntry(entry);
  fields.info = InfoJson(queues);
  fields.busy = snapshot.running.size();
  fields.now = clock_.Now();
  fields.quiet = snapshot.quiet;
  fields.rss_kb = RssKilobytes();
  fields.rtt_us = rtt_us_;
  for (const RunningJob& job : snapshot.running) {
    fields.work.emplace_back("p" + std::to_string(job.slot), WorkJson(queues[job.queue], job));
  }
  ScriptCall call = protocol::HeartbeatCall(keys_, self_.identity, std::move(fields));
  auto sent_at = clock_.Monotonic();
  Status sent = command_.Eval(
      std::move(call), [this, published = std::move(published), queue_count = queues.size(),
                        sent_at](const Status& s, redis::ReplyRef r) mutable {
        OnReply(s, r, std::move(published), queue_count, sent_at);
      });
  if (!sent.ok()) in_flight_ = false;
}

void Heartbeat::OnReply(const Status& status, redis::ReplyRef reply, std::set<int64_t> published,
                        size_t queue_count,
                        std::chrono::steady_clock::time_point sent_at) {
  in_flight_ = false;
  if (stopped_) return;
  if (!status.ok()) {
    std::string error = status.ToString();
    log_.Log(LogLevel::kWarn, base::LogEvent("heartbeat_failed").WithError(error), "heartbeat failed: %s",
             error.c_str());
    return;  // the connection's own recovery will beat again
  }
  // A reply of another shape (a broken script) reads as a key that was
  // not there, and no signal.
  Result<protocol::HeartbeatReply> read = protocol::ReadHeartbeatReply(reply);
  bool existed = read.ok() && read->existed;
  std::string signal = read.ok() ? std::move(read->signal) : std::string();
  published_ = std::move(published);
  published_queues_ = queue_count;
  Found found = !registered_ ? Found::kFirst : existed ? Found::kAlive : Found::kDeclaredDead;
  registered_ = true;
  // The key lives until at least sent_at + ttl, so no janitor can take our
  // jobs before then (a tenth is kept back for clock drift) while one of
  // the connections this beat published stays open; a janitor may take
  // them sooner once all of them are gone (recovery.h).
  events_.on_beat(found, signal, sent_at + ttl_ * 9 / 10);
  if (again_) Beat();
}

}  // namespace reliableq::server
