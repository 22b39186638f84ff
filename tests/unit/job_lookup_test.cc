// A job found by jid, without Redis: reading a final record and a payload,
// and choosing the state to report from the places the reads found.

#include "admin/job_lookup.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace reliableq;
using namespace reliableq::admin;

namespace {

JobLookup Place(JobState state, std::string payload = R"({"class":"C","args":[],"jid":"j1"})") {
  JobLookup place;
  place.state = state;
  place.payload = std::move(payload);
  return place;
}

JobRecord Record(std::string_view state) {
  return ParseJobRecord(R"({"state":")" + std::string(state) +
                        R"(","at":1700000000.5,"jid":"j1","class":"Capture","queue":"media",)"
                        R"("process":"host:1:ab","attempts":3,"error_class":"IOError",)"
                        R"("error_message":"disk full","result":{"pages":7},)"
                        R"("progress":{"percent":40},"job":{"class":"Capture","args":[1],)"
                        R"("queue":"media","jid":"j1","retry_count":2},"extra":[1,2]})");
}

}  // namespace

TEST_CASE("a final record is read member by member, unknown members ignored") {
  JobRecord record = Record("done");
  CHECK(record.valid);
  CHECK(record.state == "done");
  CHECK(record.at == doctest::Approx(1700000000.5));
  CHECK(record.process == "host:1:ab");
  CHECK(record.job_class == "Capture");
  CHECK(record.queue == "media");
  CHECK(record.attempts == 3);
  CHECK(record.error_class == "IOError");
  CHECK(record.error_message == "disk full");
  CHECK(record.result == R"({"pages":7})");
  CHECK(record.progress == R"({"percent":40})");
  REQUIRE(record.job);
  CHECK(record.job->find(R"("retry_count":2)") != std::string::npos);
  CHECK_FALSE(record.started_at);
  CHECK_FALSE(record.result_bytes);

  // Optional members of another type read as absent; a record that is not
  // an object is kept as text.
  JobRecord odd = ParseJobRecord(R"({"state":"done","attempts":"3","job":"x","job_bytes":90})");
  CHECK(odd.valid);
  CHECK_FALSE(odd.attempts);
  CHECK_FALSE(odd.job);
  CHECK(odd.job_bytes == 90);
  JobRecord broken = ParseJobRecord("not json");
  CHECK_FALSE(broken.valid);
  CHECK(broken.json == "not json");
}

TEST_CASE("a record's state names a finished state; any other text is unknown") {
  CHECK(RecordState("done") == JobState::kDone);
  CHECK(RecordState("dead") == JobState::kDead);
  CHECK(RecordState("discarded") == JobState::kDiscarded);
  CHECK(RecordState("expired") == JobState::kExpired);
  CHECK(RecordState("cancelled") == JobState::kCancelled);
  CHECK(RecordState("running") == JobState::kUnknown);
  CHECK(JobStateName(JobState::kOrphaned) == "orphaned");
  CHECK(JobStateName(JobState::kUnknown) == "unknown");
}

TEST_CASE("a payload's basics") {
  JobBasics basics =
      ParseJobBasics(R"({"class":"C","args":[1,"x"],"queue":"q","retry_count":4,"error_class":"E",)"
                     R"("error_message":"m","enqueued_at":1700000000.25,"jid":"j1"})");
  CHECK(basics.job_class == "C");
  CHECK(basics.args == R"([1,"x"])");
  CHECK(basics.queue == "q");
  CHECK(basics.retry_count == 4);
  CHECK(basics.error_class == "E");
  CHECK(basics.error_message == "m");
  CHECK(basics.enqueued_at == doctest::Approx(1700000000.25));
  CHECK(ParseJobBasics("[1]").job_class.empty());
}

TEST_CASE("a jid is matched by the parsed payload, not by the text") {
  CHECK(JidIn(R"({"jid":"j1","class":"C"})", "j1") == "j1");
  // j1 appears, but as another member's value: the payload's jid is j10.
  CHECK(JidIn(R"({"jid":"j10","args":["j1"]})", "j1") == "j10");
  CHECK(JidIn(R"({"jid":"other"})", "j1") == "");
  CHECK(JidIn("j1 but not json", "j1") == "");
}

TEST_CASE("the live place first in the order wins, whatever order the reads found them in") {
  JobFindings findings;
  findings.jid = "j1";
  findings.places = {Place(JobState::kDead), Place(JobState::kQueued), Place(JobState::kRetry),
                     Place(JobState::kRunning), Place(JobState::kOrphaned)};
  findings.places[3].process = "host:1:ab";
  findings.places[3].since = 1700000000;
  JobLookup lookup = ChooseJobLookup(findings);
  CHECK(lookup.state == JobState::kRunning);
  CHECK(lookup.process == "host:1:ab");
  CHECK(lookup.since == doctest::Approx(1700000000));
  CHECK(lookup.basics.job_class == "C");
  CHECK_FALSE(lookup.ended);

  findings.places.erase(findings.places.begin() + 3);
  CHECK(ChooseJobLookup(findings).state == JobState::kOrphaned);
  findings.places.pop_back();
  CHECK(ChooseJobLookup(findings).state == JobState::kQueued);
  findings.places.erase(findings.places.begin() + 1);
  CHECK(ChooseJobLookup(findings).state == JobState::kRetry);
}

TEST_CASE("a live place with a record: the record is the previous end") {
  JobFindings findings;
  findings.jid = "j1";
  findings.places = {Place(JobState::kQueued, R"({"class":"C","jid":"j1","enqueued_at":5.5})")};
  findings.record = Record("dead");
  JobLookup lookup = ChooseJobLookup(findings);
  CHECK(lookup.state == JobState::kQueued);
  CHECK_FALSE(lookup.ended);
  REQUIRE(lookup.record);
  CHECK(lookup.record->state == "dead");
  // A queued job is there since it was enqueued.
  CHECK(lookup.since == doctest::Approx(5.5));
  // The payload's fields, not the record's.
  CHECK_FALSE(lookup.basics.error_class);
}

TEST_CASE("no live place: the record says how the job ended") {
  for (const char* state : {"done", "discarded", "expired", "cancelled", "dead"}) {
    JobFindings findings;
    findings.jid = "j1";
    findings.record = Record(state);
    JobLookup lookup = ChooseJobLookup(findings);
    CHECK(lookup.state == RecordState(state));
    CHECK(lookup.ended);
    CHECK(lookup.at == doctest::Approx(1700000000.5));
    CHECK(lookup.process == "host:1:ab");
    CHECK(lookup.progress == R"({"percent":40})");
    CHECK(lookup.basics.job_class == "Capture");
    CHECK(lookup.basics.retry_count == 2);
    CHECK(lookup.basics.error_message == "disk full");
  }
  // A record without its payload (over the cap) still names the class.
  JobFindings capped;
  capped.jid = "j1";
  capped.record = ParseJobRecord(R"({"state":"done","at":1,"class":"Big","job_bytes":99999})");
  JobLookup lookup = ChooseJobLookup(capped);
  CHECK(lookup.basics.job_class == "Big");
  CHECK(lookup.payload.empty());
}

TEST_CASE("found nowhere: unknown, with the lists not searched; a record it cannot read stays") {
  JobFindings findings;
  findings.jid = "j1";
  findings.not_searched = {{"queue", "big", 50000, 10000}};
  JobLookup lookup = ChooseJobLookup(findings);
  CHECK(lookup.state == JobState::kUnknown);
  REQUIRE(lookup.not_searched.size() == 1);
  CHECK(lookup.not_searched[0].name == "big");
  CHECK_FALSE(lookup.record);

  findings.record = ParseJobRecord("garbage");
  lookup = ChooseJobLookup(findings);
  CHECK(lookup.state == JobState::kUnknown);
  CHECK(lookup.record);
}
