// The worker's metrics without Redis: the label bounder, the recorder's
// output through prometheus-cpp's text format, the janitor's pass record,
// the health line and the /proc parser. The endpoint against a real worker
// is in metrics_worker_test.cc.

#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include <cmath>
#include <string>

#include "metrics/label_bounder.h"
#include "metrics/process_collector.h"
#include "metrics/worker_metrics.h"
#include "server/janitor.h"
#include "server/metrics_endpoint.h"

using namespace reliableq;
using namespace reliableq::metrics;
using namespace reliableq::server;

namespace {

// The value of the sample line that starts with `series` followed by a
// space, or NaN when there is none.
double Sample(const std::string& text, const std::string& series) {
  size_t at = 0;
  while ((at = text.find(series + " ", at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') return std::stod(text.substr(at + series.size() + 1));
    at += series.size();
  }
  return std::nan("");
}

}  // namespace

TEST_CASE("LabelBounder maps known names to themselves and anything else to other") {
  LabelBounder bounder({"HardJob", "EasyJob", "HardJob", "other"});
  CHECK(bounder.size() == 3);  // two names and "other"
  CHECK(bounder.Bound("HardJob") == "HardJob");
  CHECK(bounder.Bound("EasyJob") == "EasyJob");
  CHECK(bounder.Bound("Evil\"Job") == "other");
  CHECK(bounder.Bound("") == "other");
  CHECK(bounder.Bound("HardJo") == "other");
  CHECK(bounder.Bound("HardJobs") == "other");
  CHECK(bounder.Index("other") == bounder.other_index());
  CHECK(bounder.Index("EasyJob") != bounder.Index("HardJob"));
  CHECK(bounder.Name(bounder.Index("HardJob")) == "HardJob");
  LabelBounder none({});
  CHECK(none.size() == 1);
  CHECK(none.Bound("Anything") == "other");
}

TEST_CASE("WorkerMetrics text has the decided names, labels and types") {
  WorkerMetrics metrics({"HardJob", "EasyJob"}, {"default", "low"}, 7);
  metrics.JobFinished("HardJob", 0, "default", JobResult::kSucceeded, 0.002, 0.5);
  metrics.JobFinished("HardJob", 0, "default", JobResult::kRetried, 0.004, 1.5);
  metrics.JobFinished("EasyJob", 1, "low", JobResult::kDiscarded, 0.001, -1);
  metrics.JobFinished("EasyJob", 1, "low", JobResult::kDead, 0.001, -1);
  // Attacker-chosen class names: never a series of their own.
  metrics.JobFinished("Evil\"Job{x=\"y\"}", 0, "default", JobResult::kRetried, 0.001, 0.1);
  metrics.JobFinished("Another", 0, "default", JobResult::kSucceeded, 0.001, 0.1);
  metrics.FetchRoundTrip(0.0003);
  metrics.AckRoundTrip(0.0004);
  metrics.AckRoundTrip(0.0005);
  metrics.JanitorPass(5, 2);
  metrics.JanitorPass(0, 0);
  metrics.SetBusy(3);
  metrics.SetOutcomesPending(4);
  metrics.SyncRedisTotals(2, 1);
  metrics.SyncRedisTotals(5, 1);  // counted by what it grew: 3 more errors
  std::string text = metrics.Serialize();
  INFO(text);

  const char* counters[] = {"reliableq_jobs_processed_total", "reliableq_jobs_failed_total",
                            "reliableq_jobs_retried_total", "reliableq_jobs_dead_total",
                            "reliableq_jobs_discarded_total", "reliableq_redis_errors_total",
                            "reliableq_redis_reconnects_total", "reliableq_janitor_passes_total",
                            "reliableq_janitor_jobs_recovered_total",
                            "reliableq_janitor_poison_pills_total", "process_cpu_seconds_total"};
  for (const char* name : counters) {
    CHECK_MESSAGE(text.find(std::string("# TYPE ") + name + " counter\n") != std::string::npos,
                  name);
  }
  const char* histograms[] = {"reliableq_job_duration_seconds",
                              "reliableq_job_pickup_latency_seconds",
                              "reliableq_fetch_round_trip_seconds",
                              "reliableq_ack_round_trip_seconds"};
  for (const char* name : histograms) {
    CHECK_MESSAGE(text.find(std::string("# TYPE ") + name + " histogram\n") != std::string::npos,
                  name);
  }
  const char* gauges[] = {"reliableq_busy_threads", "reliableq_concurrency",
                          "reliableq_outcomes_pending", "process_resident_memory_bytes",
                          "process_start_time_seconds"};
  for (const char* name : gauges) {
    CHECK_MESSAGE(text.find(std::string("# TYPE ") + name + " gauge\n") != std::string::npos,
                  name);
  }

  const std::string hard = "{class=\"HardJob\",queue=\"default\"}";
  CHECK(Sample(text, "reliableq_jobs_processed_total" + hard) == 2);
  CHECK(Sample(text, "reliableq_jobs_failed_total" + hard) == 1);
  CHECK(Sample(text, "reliableq_jobs_retried_total" + hard) == 1);
  CHECK(Sample(text, "reliableq_jobs_dead_total" + hard) == 0);
  const std::string easy = "{class=\"EasyJob\",queue=\"low\"}";
  CHECK(Sample(text, "reliableq_jobs_processed_total" + easy) == 2);
  CHECK(Sample(text, "reliableq_jobs_failed_total" + easy) == 2);
  CHECK(Sample(text, "reliableq_jobs_discarded_total" + easy) == 1);
  CHECK(Sample(text, "reliableq_jobs_dead_total" + easy) == 1);
  const std::string other = "{class=\"other\",queue=\"default\"}";
  CHECK(Sample(text, "reliableq_jobs_processed_total" + other) == 2);
  CHECK(Sample(text, "reliableq_jobs_failed_total" + other) == 1);
  CHECK(Sample(text, "reliableq_jobs_retried_total" + other) == 1);
  CHECK(text.find("Evil") == std::string::npos);
  CHECK(text.find("Another") == std::string::npos);

  CHECK(Sample(text, "reliableq_job_duration_seconds_count{class=\"HardJob\"}") == 2);
  CHECK(Sample(text, "reliableq_job_duration_seconds_count{class=\"other\"}") == 2);
  CHECK(Sample(text, "reliableq_job_duration_seconds_bucket{class=\"HardJob\",le=\"0.0025\"}") ==
        1);
  // Jobs without enqueued_at are not observed.
  CHECK(Sample(text, "reliableq_job_pickup_latency_seconds_count{queue=\"default\"}") == 4);
  CHECK(Sample(text, "reliableq_job_pickup_latency_seconds_count{queue=\"low\"}") == 0);
  CHECK(Sample(text, "reliableq_job_pickup_latency_seconds_sum{queue=\"default\"}") ==
        doctest::Approx(2.2));
  CHECK(Sample(text, "reliableq_fetch_round_trip_seconds_count") == 1);
  CHECK(Sample(text, "reliableq_ack_round_trip_seconds_count") == 2);
  CHECK(Sample(text, "reliableq_busy_threads") == 3);
  CHECK(Sample(text, "reliableq_concurrency") == 7);
  CHECK(Sample(text, "reliableq_outcomes_pending") == 4);
  CHECK(Sample(text, "reliableq_redis_errors_total") == 5);
  CHECK(Sample(text, "reliableq_redis_reconnects_total") == 1);
  CHECK(Sample(text, "reliableq_janitor_passes_total") == 2);
  CHECK(Sample(text, "reliableq_janitor_jobs_recovered_total") == 5);
  CHECK(Sample(text, "reliableq_janitor_poison_pills_total") == 2);
  CHECK(Sample(text, "process_resident_memory_bytes") > 0);
  CHECK(Sample(text, "process_start_time_seconds") > 1.5e9);
}

TEST_CASE("WorkerMetrics counts parked jobs by limit and reason") {
  WorkerMetrics metrics({"Mailer"}, {"default"}, 1);
  metrics.JobParked("mail", "rate");
  metrics.JobParked("mail", "rate");
  metrics.JobParked("mail", "concurrency");
  std::string text = metrics.Serialize();
  CHECK(text.find("# TYPE reliableq_jobs_parked_total counter") != std::string::npos);
  CHECK(Sample(text, "reliableq_jobs_parked_total{limit=\"mail\",reason=\"rate\"}") == 2);
  CHECK(Sample(text, "reliableq_jobs_parked_total{limit=\"mail\",reason=\"concurrency\"}") == 1);
}

TEST_CASE("WorkerMetrics counts a queue index past its slots under other") {
  WorkerMetrics metrics({"HardJob"}, {"default"}, 1);
  metrics.JobFinished("HardJob", WorkerMetrics::kQueueSlots + 5, "q1005", JobResult::kSucceeded,
                      0.001, -1);
  std::string text = metrics.Serialize();
  CHECK(Sample(text, "reliableq_jobs_processed_total{class=\"HardJob\",queue=\"other\"}") == 1);
  CHECK(text.find("q1005") == std::string::npos);
}

TEST_CASE("WorkerMetrics labels a namespace's queues with its spec, whoever names them") {
  WorkerMetrics metrics({"HardJob"}, {"default", "card:*"}, 1);
  // 999 queues a pusher made up in the namespace: one series.
  for (uint32_t queue = 1; queue < WorkerMetrics::kQueueSlots; ++queue) {
    metrics.JobFinished("HardJob", queue, "card:" + std::to_string(queue), JobResult::kSucceeded,
                        0.001, 0.01);
  }
  metrics.JobFinished("HardJob", 0, "default", JobResult::kSucceeded, 0.001, 0.01);
  std::string text = metrics.Serialize();
  CHECK(Sample(text, "reliableq_jobs_processed_total{class=\"HardJob\",queue=\"card:*\"}") == 999);
  CHECK(Sample(text, "reliableq_job_pickup_latency_seconds_count{queue=\"card:*\"}") == 999);
  CHECK(Sample(text, "reliableq_jobs_processed_total{class=\"HardJob\",queue=\"default\"}") == 1);
  CHECK(text.find("card:1") == std::string::npos);
  CHECK(text.size() < 64 * 1024);
  LabelBounder queues = LabelBounder::ForQueues({"mail", "card:*", "card:visa:*"});
  CHECK(queues.Bound("mail") == "mail");
  CHECK(queues.Bound("card:visa:1") == "card:*");  // the first namespace that matches
  CHECK(queues.Bound("card:*") == "card:*");
  CHECK(queues.Bound("mailer") == "other");
}

TEST_CASE("the janitor's pass record") {
  RecoveryReport report;
  IdentityRecovery gone;
  gone.identity = "host-a:1:aaaaaaaaaaaa";
  gone.evidence = DeathEvidence::kConnectionsGone;
  gone.queues = {{"default", 3, 1}, {"low", 2, 0}};
  IdentityRecovery lapsed;
  lapsed.identity = "host-b:2:bbbbbbbbbbbb";
  lapsed.evidence = DeathEvidence::kHeartbeatExpired;
  lapsed.error = "WRONGTYPE somewhere";
  IdentityRecovery alive;
  alive.identity = "host-c:3:cccccccccccc";
  alive.alive = true;
  report.identities = {gone, lapsed, alive};

  std::string json = JanitorPassJson(report, "me:9:999999999999", 1700000000.25);
  rapidjson::Document doc;
  REQUIRE_FALSE(doc.Parse(json.c_str()).HasParseError());
  CHECK(doc["at"].GetDouble() == 1700000000.25);
  CHECK(std::string(doc["by"].GetString()) == "me:9:999999999999");
  CHECK(doc["checked"].GetInt() == 3);
  CHECK_FALSE(doc.HasMember("error"));
  REQUIRE(doc["dead"].Size() == 2);
  const rapidjson::Value& first = doc["dead"][0];
  CHECK(std::string(first["identity"].GetString()) == gone.identity);
  CHECK(std::string(first["evidence"].GetString()) == "connections_gone");
  CHECK(first["requeued"].GetInt() == 5);
  CHECK(first["to_dead"].GetInt() == 1);
  CHECK_FALSE(first.HasMember("error"));
  const rapidjson::Value& second = doc["dead"][1];
  CHECK(std::string(second["evidence"].GetString()) == "heartbeat_expired");
  CHECK(std::string(second["error"].GetString()) == "WRONGTYPE somewhere");
  CHECK(JanitorPassNotable(report));

  RecoveryReport quiet;
  quiet.identities = {alive};
  CHECK_FALSE(JanitorPassNotable(quiet));
  std::string calm = JanitorPassJson(quiet, "me", 5);
  REQUIRE_FALSE(doc.Parse(calm.c_str()).HasParseError());
  CHECK(doc["dead"].Size() == 0);
  CHECK(doc["checked"].GetInt() == 1);

  Result<RecoveryReport> failed = Status::IoError("connection refused");
  CHECK(JanitorPassNotable(failed));
  std::string broken = JanitorPassJson(failed, "me", 5);
  REQUIRE_FALSE(doc.Parse(broken.c_str()).HasParseError());
  CHECK(std::string(doc["error"].GetString()).find("connection refused") != std::string::npos);
  CHECK(doc["dead"].Size() == 0);
}

TEST_CASE("HealthProblem names what is wrong in one line") {
  using std::chrono::duration;
  using std::chrono::milliseconds;
  CHECK(HealthProblem(duration<double>(0.3), duration<double>(4), milliseconds(30000)) == "");
  CHECK(HealthProblem(duration<double>(0.3), duration<double>(31.24), milliseconds(30000)) ==
        "redis: no reply for 31.2 s (heartbeat ttl 30 s)");
  CHECK(HealthProblem(duration<double>(0.3), duration<double>(1.6), milliseconds(1500)) ==
        "redis: no reply for 1.6 s (heartbeat ttl 1.5 s)");
  // A stuck loop is named first: it also keeps replies from being read.
  CHECK(HealthProblem(duration<double>(5.0), duration<double>(40), milliseconds(30000)) ==
        "event loop: no turn for 5.0 s");
}

TEST_CASE("ParseProcStat reads CPU time and start time") {
  // The command name may hold spaces and parentheses.
  std::string stat =
      "1234 (a (weird) name) S 1 1234 1234 0 -1 4194560 300 0 0 0 250 150 0 0 20 0 11 0 5000 "
      "123456789 2000 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n";
  auto parsed = ParseProcStat(stat, 100, 1700000000);
  REQUIRE(parsed.has_value());
  CHECK(parsed->cpu_seconds == doctest::Approx(4.0));
  CHECK(parsed->start_time_seconds == doctest::Approx(1700000050.0));
  CHECK_FALSE(ParseProcStat("garbage", 100, 0).has_value());
  CHECK_FALSE(ParseProcStat("1 (x) S 1 2", 100, 0).has_value());
}

TEST_CASE("a Tally adds its jobs to the shared series in batches") {
  WorkerMetrics metrics({"HardJob", "EasyJob"}, {"default"}, 2);
  const std::string hard = "reliableq_jobs_processed_total{class=\"HardJob\",queue=\"default\"}";
  const std::string easy = "reliableq_jobs_processed_total{class=\"EasyJob\",queue=\"default\"}";
  const std::string hard_failed = "reliableq_jobs_failed_total{class=\"HardJob\",queue=\"default\"}";
  const std::string duration = "reliableq_job_duration_seconds_count{class=\"HardJob\"}";
  const std::string pickup = "reliableq_job_pickup_latency_seconds_count{queue=\"default\"}";
  {
    WorkerMetrics::Tally tally(&metrics);
    tally.Add("HardJob", 0, "default", JobResult::kSucceeded, 0.001, 0.2, 100.0);
    tally.Add("HardJob", 0, "default", JobResult::kRetried, 0.001, -1, 100.01);
    CHECK(tally.pending());
    // Gathered, not yet shared.
    CHECK(std::isnan(Sample(metrics.Serialize(), hard)));
    // Another class: the batch before goes first.
    tally.Add("EasyJob", 0, "default", JobResult::kSucceeded, 0.001, 0.3, 100.02);
    std::string text = metrics.Serialize();
    CHECK(Sample(text, hard) == 2);
    CHECK(Sample(text, hard_failed) == 1);
    CHECK(Sample(text, duration) == 2);
    CHECK(Sample(text, pickup) == 1);
    CHECK(std::isnan(Sample(text, easy)));
    // kLatest after the batch's first job, the batch goes in.
    tally.Add("EasyJob", 0, "default", JobResult::kSucceeded, 0.001, -1,
              100.03 + WorkerMetrics::Tally::kLatest);
    CHECK_FALSE(tally.pending());
    CHECK(Sample(metrics.Serialize(), easy) == 2);
    for (size_t i = 0; i < WorkerMetrics::Tally::kBatch; ++i) {
      tally.Add("HardJob", 0, "default", JobResult::kSucceeded, 0.001, -1, 200.0);
    }
    CHECK_FALSE(tally.pending());
    CHECK(Sample(metrics.Serialize(), hard) == 2 + WorkerMetrics::Tally::kBatch);
    tally.Add("HardJob", 0, "default", JobResult::kSucceeded, 0.001, -1, 200.0);
    CHECK(tally.pending());
  }
  // Destroyed: flushed.
  CHECK(Sample(metrics.Serialize(), hard) == 3 + WorkerMetrics::Tally::kBatch);
  WorkerMetrics::Tally off(nullptr);
  off.Add("HardJob", 0, "default", JobResult::kSucceeded, 0.001, -1, 1);
  CHECK_FALSE(off.pending());
}
