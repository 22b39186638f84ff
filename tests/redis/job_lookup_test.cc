// Admin::FindJob against the private redis-server: a job put by hand in each
// place a job can be, found there, in the order of the places; the record
// as the end or the previous end; the scan bound; and not one write.

#include <doctest/doctest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "protocol/keys.h"
#include "protocol/process_entry.h"
#include "redis/reply.h"
#include "reliableq/admin.h"
#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::testing;

namespace {

const protocol::Keys kKeys;
constexpr const char* kJid = "0123456789abcdef01234567";
constexpr const char* kIdentity = "host:42:abcdef012345";

std::string Payload(const std::string& jid, const std::string& extra = "") {
  return R"({"class":"CaptureJob","args":[7,"caf\u00e9"],"queue":"media","jid":")" + jid +
         R"(","retry":true,"created_at":1700000000.5,"enqueued_at":1700000001.25)" + extra + "}";
}

class LookupFixture : public RedisFixture {
 public:
  LookupFixture() {
    auto admin = Admin::Open(options());
    REQUIRE_MESSAGE(admin.ok(), admin.status().ToString());
    admin_ = std::move(admin.value());
  }

  JobLookup Find(const std::string& jid, JobLookupOptions options = {}) {
    Result<JobLookup> found = admin_->FindJob(jid, options);
    REQUIRE_MESSAGE(found.ok(), found.status().ToString());
    return std::move(found.value());
  }

  // A registered reliableq process serving `queue`, alive (a heartbeat
  // key) or dead, in `processes` with a work hash.
  void Register(const std::string& identity, const std::string& queue, bool alive) {
    protocol::ProcessEntry entry;
    entry.identity = identity;
    entry.hostname = "host";
    entry.pid = 42;
    entry.queues = {queue};
    Run({"HSET", kKeys.Registry(), identity, protocol::EncodeProcessEntry(entry)});
    Run({"SADD", kKeys.Processes(), identity});
    Run({"HSET", kKeys.Process(identity), "info", "{}", "busy", "0"});
    if (alive) Run({"SET", kKeys.Heartbeat(identity), "1", "PX", "60000"});
  }

  // Queue `name` with `count` other jobs, the job `jid` at position
  // `position` from the tail (or none when position < 0).
  void FillQueue(const std::string& name, int count, int position, const std::string& jid) {
    Run({"SADD", kKeys.Queues(), name});
    // LPUSH puts each at the head: the i-th pushed is at position i from
    // the tail.
    for (int i = 0; i < count; ++i) {
      std::string payload = i == position ? Payload(jid) : Payload("other" + std::to_string(i));
      Run({"LPUSH", kKeys.Queue(name), payload});
    }
  }

  Admin& admin() { return *admin_; }

 private:
  std::unique_ptr<Admin> admin_;
};

}  // namespace

TEST_CASE_FIXTURE(LookupFixture, "a job found in each place, and where in it") {
  SUBCASE("running, with its progress") {
    Register(kIdentity, "media", true);
    Run({"HSET", kKeys.Work(kIdentity), "p0",
         R"({"queue":"media","payload":"{\"class\":\"CaptureJob\",\"jid\":\")" + std::string(kJid) +
             R"(\"}","run_at":1700000100,"progress":{"percent":40,"message":"page 3"}})"});
    JobLookup job = Find(kJid);
    CHECK(job.state == JobState::kRunning);
    CHECK(job.process == kIdentity);
    CHECK(job.thread == "p0");
    CHECK(job.queue == "media");
    CHECK(job.since == doctest::Approx(1700000100));
    CHECK(job.progress == R"({"percent":40,"message":"page 3"})");
    CHECK(job.basics.job_class == "CaptureJob");
    CHECK_FALSE(job.ended);
  }
  SUBCASE("fetched by a live process, orphaned in a dead one's working list") {
    Register(kIdentity, "media", true);
    Run({"LPUSH", kKeys.Working(kIdentity, "media"), Payload(kJid)});
    JobLookup job = Find(kJid);
    CHECK(job.state == JobState::kFetched);
    CHECK(job.process == kIdentity);
    CHECK(job.queue == "media");
    CHECK(job.payload == Payload(kJid));
    Run({"DEL", kKeys.Heartbeat(kIdentity)});
    CHECK(Find(kJid).state == JobState::kOrphaned);
  }
  SUBCASE("queued: position 0 is the tail, taken next") {
    FillQueue("media", 5, 0, kJid);
    JobLookup job = Find(kJid);
    CHECK(job.state == JobState::kQueued);
    CHECK(job.queue == "media");
    CHECK(job.position == 0);
    CHECK(job.list_size == 5);
    CHECK(job.since == doctest::Approx(1700000001.25));
    CHECK(job.payload == Payload(kJid));
    CHECK(job.basics.args == R"([7,"café"])");
    Run({"DEL", kKeys.Queue("media")});
    // Across pages of 1000: the 1500th from the tail.
    FillQueue("media", 2000, 1499, kJid);
    job = Find(kJid);
    CHECK(job.position == 1499);
    CHECK(job.list_size == 2000);
  }
  SUBCASE("parked on a limit: position 0 is the head, released first") {
    Run({"HSET", kKeys.Limits(), "scanner", R"({"concurrency":1})"});
    Run({"RPUSH", kKeys.LimitWaiting("scanner"), Payload("first"), Payload(kJid)});
    JobLookup job = Find(kJid);
    CHECK(job.state == JobState::kParked);
    CHECK(job.limit == "scanner");
    CHECK(job.position == 1);
    CHECK(job.list_size == 2);
  }
  SUBCASE("scheduled, retry and dead, with their times") {
    Run({"ZADD", kKeys.Dead(), "1700000300", Payload(kJid, R"(,"error_class":"E")")});
    JobLookup job = Find(kJid);
    CHECK(job.state == JobState::kDead);
    CHECK(job.since == doctest::Approx(1700000300));
    CHECK(job.basics.error_class == "E");
    Run({"ZADD", kKeys.Retry(), "1700000200", Payload(kJid, R"(,"retry_count":3)")});
    job = Find(kJid);
    CHECK(job.state == JobState::kRetry);
    CHECK(job.at == doctest::Approx(1700000200));
    CHECK(job.basics.retry_count == 3);
    Run({"ZADD", kKeys.Schedule(), "1700000100", Payload(kJid)});
    job = Find(kJid);
    CHECK(job.state == JobState::kScheduled);
    CHECK(job.at == doctest::Approx(1700000100));
  }
}

TEST_CASE_FIXTURE(LookupFixture, "live places come first: a running job also queued is running") {
  Register(kIdentity, "media", true);
  FillQueue("media", 1, 0, kJid);
  Run({"ZADD", kKeys.Retry(), "1700000200", Payload(kJid)});
  CHECK(Find(kJid).state == JobState::kQueued);
  Run({"LPUSH", kKeys.Working(kIdentity, "media"), Payload(kJid)});
  CHECK(Find(kJid).state == JobState::kFetched);
  Run({"HSET", kKeys.Work(kIdentity), "p1",
       R"({"queue":"media","payload":"{\"jid\":\")" + std::string(kJid) + R"(\"}","run_at":1})"});
  CHECK(Find(kJid).state == JobState::kRunning);
}

TEST_CASE_FIXTURE(LookupFixture, "the record: the end, or the previous end of a live job") {
  const std::string record =
      R"({"state":"done","at":1700000400.5,"jid":")" + std::string(kJid) +
      R"(","class":"CaptureJob","queue":"media","process":"host:42:abcdef012345",)"
      R"("attempts":2,"result":{"pages":7},"job":)" +
      Payload(kJid) + "}";
  Run({"SET", kKeys.JobRecord(kJid), record, "EX", "3600"});
  JobLookup job = Find(kJid);
  CHECK(job.state == JobState::kDone);
  CHECK(job.ended);
  CHECK(job.at == doctest::Approx(1700000400.5));
  CHECK(job.process == kIdentity);
  REQUIRE(job.record);
  CHECK(job.record->json == record);
  CHECK(job.record->attempts == 2);
  CHECK(job.record->result == R"({"pages":7})");
  REQUIRE(job.record->ttl_ms);
  CHECK(*job.record->ttl_ms > 3500 * 1000);
  CHECK(*job.record->ttl_ms <= 3600 * 1000);
  CHECK(job.basics.job_class == "CaptureJob");

  // Given back to its queue (a janitor, a retry from dead): queued, with the
  // record as its previous end.
  FillQueue("media", 1, 0, kJid);
  job = Find(kJid);
  CHECK(job.state == JobState::kQueued);
  CHECK_FALSE(job.ended);
  REQUIRE(job.record);
  CHECK(job.record->state == "done");

  // A dead record whose dead-set member was trimmed: dead, from the record.
  Run({"DEL", kKeys.Queue("media")});
  Run({"SET", kKeys.JobRecord(kJid), R"({"state":"dead","at":1700000500})"});
  job = Find(kJid);
  CHECK(job.state == JobState::kDead);
  CHECK(job.ended);
  CHECK(job.at == doctest::Approx(1700000500));
  REQUIRE(job.record);
  CHECK_FALSE(job.record->ttl_ms);
}

TEST_CASE_FIXTURE(LookupFixture, "unknown, and the lists longer than the scan limit") {
  JobLookup job = Find(kJid);
  CHECK(job.state == JobState::kUnknown);
  CHECK_FALSE(job.record);
  CHECK(job.not_searched.empty());

  FillQueue("big", 30, -1, kJid);
  FillQueue("small", 3, -1, kJid);
  job = Find(kJid, {.scan_limit = 20});
  CHECK(job.state == JobState::kUnknown);
  REQUIRE(job.not_searched.size() == 1);
  CHECK(job.not_searched[0].kind == "queue");
  CHECK(job.not_searched[0].name == "big");
  CHECK(job.not_searched[0].size == 30);
  CHECK(job.not_searched[0].searched == 20);

  // Beyond the bound it is not seen; within it, it is.
  Run({"RPUSH", kKeys.Queue("big"), Payload(kJid)});  // the tail: position 0
  CHECK(Find(kJid, {.scan_limit = 20}).state == JobState::kQueued);
  Run({"RPOP", kKeys.Queue("big")});
  Run({"LPUSH", kKeys.Queue("big"), Payload(kJid)});  // the head: position 30
  CHECK(Find(kJid, {.scan_limit = 20}).state == JobState::kUnknown);
  CHECK(Find(kJid, {.scan_limit = 31}).position == 30);

  CHECK(admin().FindJob("", {}).status().IsInvalidArgument());
  CHECK(admin().FindJob(kJid, {.scan_limit = 0}).status().IsInvalidArgument());
}

TEST_CASE_FIXTURE(LookupFixture, "a lookup writes nothing") {
  Register(kIdentity, "media", false);
  Run({"LPUSH", kKeys.Working(kIdentity, "media"), Payload("w")});
  FillQueue("media", 50, -1, kJid);
  Run({"HSET", kKeys.Limits(), "scanner", "{}"});
  Run({"RPUSH", kKeys.LimitWaiting("scanner"), Payload("p")});
  Run({"ZADD", kKeys.Dead(), "1", Payload("d")});
  Run({"SET", kKeys.JobRecord("r"), R"({"state":"done"})", "EX", "100"});
  auto before = Snapshot();
  Run({"CONFIG", "RESETSTAT"});
  CHECK(Find(kJid).state == JobState::kUnknown);
  CHECK(Find("r").state == JobState::kDone);
  CHECK(Find("w").state == JobState::kOrphaned);
  Result<redis::ReplyPtr> info = redis().Command({"INFO", "commandstats"});
  REQUIRE(info.ok());
  Result<std::string> text = redis::ToString(*info);
  REQUIRE(text.ok());
  // Every command since the reset is a read (or the INFO itself).
  const std::set<std::string> reads = {"smembers",        "hgetall", "hkeys",  "get",   "pttl",
                                       "exists",          "llen",    "lrange", "zscan", "info",
                                       "config|resetstat"};
  std::istringstream lines(*text);
  std::string line;
  int commands = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("cmdstat_", 0) != 0) continue;
    std::string name = line.substr(8, line.find(':') - 8);
    CHECK_MESSAGE(reads.count(name) == 1, name);
    ++commands;
  }
  CHECK(commands > 5);
  CHECK(Snapshot() == before);
}
