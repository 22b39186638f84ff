// The worker's HTTP endpoint (ServerOptions::http_address, `reliableq worker
// --http`) against a real worker and a real Redis, and the janitor's pass
// record. The recorder alone is in metrics_test.cc.

#include <doctest/doctest.h>
#include <httplib.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "protocol/keys.h"
#include "support/process.h"
#include "reliableq/client.h"
#include "reliableq/server.h"
#include "support/running_server.h"
#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::protocol;
using namespace reliableq::testing;
using namespace std::chrono_literals;

namespace {

ServerOptions Options(const RedisOptions& redis, int port) {
  ServerOptions options;
  options.redis = redis;
  options.concurrency = 3;
  options.heartbeat_ttl = 1000ms;
  options.heartbeat_interval = 200ms;
  options.janitor_interval = 300ms;
  options.shutdown_timeout = 2000ms;
  options.idle_poll_interval = 50ms;
  options.log_level = LogLevel::kError;
  options.http_address = "127.0.0.1:" + std::to_string(port);
  return options;
}

struct Reply {
  int status = 0;
  std::string body;
  std::string content_type;
};

Reply HttpGet(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(5, 0);
  auto result = client.Get(path.c_str());
  if (!result) return {};
  return {result->status, result->body, result->get_header_value("Content-Type")};
}

// The value of the sample line that starts with `series` and a space; NaN
// when there is none.
double Sample(const std::string& text, const std::string& series) {
  size_t at = 0;
  while ((at = text.find(series + " ", at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') return std::stod(text.substr(at + series.size() + 1));
    at += series.size();
  }
  return std::nan("");
}

void Push(Client& client, const std::string& cls, const std::string& queue = "default") {
  Job job;
  job.job_class = cls;
  job.args = "[1]";
  job.queue = queue;
  AcceptedJid(client.Push(job));
}

}  // namespace

TEST_CASE_FIXTURE(RedisFixture, "the worker's /metrics counts what ran, and /healthz says ok") {
  HandlerRegistry registry;
  registry.Register("GoodJob", [](const JobView&) {});
  registry.Register("BadJob", [](const JobView&) { throw std::runtime_error("nope"); });
  int port = FreeLoopbackPort();
  RunningServer worker(Options(options(), port), std::move(registry));
  auto client = Client::Open(options());
  REQUIRE(client.ok());
  for (int i = 0; i < 3; ++i) Push(**client, "GoodJob");
  Push(**client, "BadJob");
  Push(**client, "Nobody::Knows<this>");

  std::string text;
  bool counted = WaitUntil(
      [&] {
        Reply r = HttpGet(port, "/metrics");
        text = r.body;
        double good = Sample(text, R"(reliableq_jobs_processed_total{class="GoodJob",queue="default"})");
        double bad = Sample(text, R"(reliableq_jobs_processed_total{class="BadJob",queue="default"})");
        double other = Sample(text, R"(reliableq_jobs_processed_total{class="other",queue="default"})");
        return good == 3 && bad == 1 && other == 1;
      },
      10s);
  INFO(text);
  REQUIRE(counted);
  Reply metrics = HttpGet(port, "/metrics");
  CHECK(metrics.status == 200);
  CHECK(metrics.content_type == "text/plain; version=0.0.4; charset=utf-8");
  CHECK(Sample(text, R"(reliableq_jobs_failed_total{class="GoodJob",queue="default"})") == 0);
  CHECK(Sample(text, R"(reliableq_jobs_failed_total{class="BadJob",queue="default"})") == 1);
  CHECK(Sample(text, R"(reliableq_jobs_retried_total{class="BadJob",queue="default"})") == 1);
  CHECK(Sample(text, R"(reliableq_jobs_failed_total{class="other",queue="default"})") == 1);
  CHECK(Sample(text, R"(reliableq_jobs_retried_total{class="other",queue="default"})") == 1);
  CHECK(text.find("Nobody") == std::string::npos);
  CHECK(Sample(text, R"(reliableq_job_duration_seconds_count{class="GoodJob"})") == 3);
  CHECK(Sample(text, R"(reliableq_job_duration_seconds_count{class="BadJob"})") == 1);
  CHECK(Sample(text, R"(reliableq_job_pickup_latency_seconds_count{queue="default"})") == 5);
  CHECK(Sample(text, "reliableq_concurrency") == 3);
  CHECK(Sample(text, "reliableq_busy_threads") == 0);
  CHECK(Sample(text, "reliableq_fetch_round_trip_seconds_count") >= 1);
  CHECK(Sample(text, "process_resident_memory_bytes") > 0);
  // The retries are in Redis, as counted.
  CHECK(ZRange("retry").size() == 2);
  // Acks are confirmed within a round trip or two.
  CHECK(WaitUntil([&] {
    return Sample(HttpGet(port, "/metrics").body, "reliableq_ack_round_trip_seconds_count") >= 1;
  }, 5s));

  Reply health = HttpGet(port, "/healthz");
  CHECK(health.status == 200);
  CHECK(health.body == "ok\n");
  CHECK(HttpGet(port, "/nothing").status == 404);
}

TEST_CASE("the worker's /healthz turns 503 when Redis stops answering, and back") {
  RedisServer redis;
  HandlerRegistry registry;
  registry.Register("GoodJob", [](const JobView&) {});
  int port = FreeLoopbackPort();
  ServerOptions options = Options(redis.Options(), port);
  options.redis.command_timeout = 500ms;
  RunningServer worker(options, std::move(registry));
  REQUIRE(WaitUntil([&] { return HttpGet(port, "/healthz").status == 200; }, 5s));
  // Registered and fetching: the connection is up (a stop during its
  // handshake would be a connect timeout, not a lost connection).
  REQUIRE(WaitUntil([&] {
    return Sample(HttpGet(port, "/metrics").body, "reliableq_fetch_round_trip_seconds_count") >= 1;
  }, 5s));

  REQUIRE(kill(redis.pid(), SIGSTOP) == 0);
  Reply health;
  bool unhealthy = WaitUntil(
      [&] {
        health = HttpGet(port, "/healthz");
        return health.status == 503;
      },
      10s);
  kill(redis.pid(), SIGCONT);
  REQUIRE(unhealthy);
  INFO(health.body);
  CHECK(health.body.rfind("redis: no reply for ", 0) == 0);
  CHECK(health.body.find("(heartbeat ttl 1 s)\n") != std::string::npos);
  CHECK(std::count(health.body.begin(), health.body.end(), '\n') == 1);

  CHECK(WaitUntil([&] { return HttpGet(port, "/healthz").status == 200; }, 10s));
  std::string text = HttpGet(port, "/metrics").body;
  INFO(text);
  CHECK(Sample(text, "reliableq_redis_errors_total") >= 1);
  // Healthy again may come a moment before the reconnect is counted (a
  // beat's reply on the old connection, on a loaded machine).
  CHECK(WaitUntil(
      [&] {
        return Sample(HttpGet(port, "/metrics").body, "reliableq_redis_reconnects_total") >= 1;
      },
      5s));
}

TEST_CASE_FIXTURE(RedisFixture, "the janitor records its passes and counts what it recovered") {
  Keys keys;
  const std::string dead = "host-x:77:777777777777";
  // A registered process without a heartbeat, with two jobs in its working
  // list of a queue this worker does not serve: one goes back, one was
  // interrupted too often and goes to the dead set.
  Run({"HSET", keys.Registry(), dead,
       R"({"identity":")" + dead +
           R"(","hostname":"h","pid":77,"started_at":1700000000.5,"queues":["elsewhere"]})"});
  Run({"SADD", "processes", dead});
  Run({"LPUSH", keys.Working(dead, "elsewhere"),
       R"({"class":"GoodJob","args":[1],"queue":"elsewhere","jid":"aaaaaaaaaaaaaaaaaaaaaaaa"})"});
  Run({"LPUSH", keys.Working(dead, "elsewhere"),
       R"({"class":"GoodJob","args":[2],"queue":"elsewhere","jid":"bbbbbbbbbbbbbbbbbbbbbbbb","interrupted_count":3})"});

  HandlerRegistry registry;
  registry.Register("GoodJob", [](const JobView&) {});
  int port = FreeLoopbackPort();
  RunningServer worker(Options(options(), port), std::move(registry));

  REQUIRE(WaitUntil([&] { return Integer({"LLEN", keys.JanitorPasses()}) >= 1; }, 10s));
  std::string notable = LRange(keys.JanitorPasses())[0];
  INFO(notable);
  rapidjson::Document doc;
  REQUIRE_FALSE(doc.Parse(notable.c_str()).HasParseError());
  CHECK(std::string(doc["by"].GetString()) == worker.identity());
  CHECK(std::fabs(doc["at"].GetDouble() - NowSeconds()) < 30);
  CHECK(doc["checked"].GetInt() >= 1);
  REQUIRE(doc["dead"].Size() == 1);
  CHECK(std::string(doc["dead"][0]["identity"].GetString()) == dead);
  CHECK(std::string(doc["dead"][0]["evidence"].GetString()) == "heartbeat_expired");
  CHECK(doc["dead"][0]["requeued"].GetInt() == 1);
  CHECK(doc["dead"][0]["to_dead"].GetInt() == 1);
  CHECK_FALSE(doc.HasMember("error"));
  CHECK(LRange("queue:elsewhere").size() == 1);
  CHECK(ZRange("dead").size() == 1);

  // Later passes find nothing dead: janitor:last moves on (with a day's
  // expiry), janitor:passes keeps only the notable one.
  REQUIRE(WaitUntil([&] {
    std::string last = Get(keys.JanitorLast());
    rapidjson::Document d;
    return !d.Parse(last.c_str()).HasParseError() && d.IsObject() && d["dead"].Size() == 0;
  }, 10s));
  long long ttl = Integer({"TTL", keys.JanitorLast()});
  CHECK(ttl > 86000);
  CHECK(ttl <= 86400);
  CHECK(Integer({"LLEN", keys.JanitorPasses()}) == 1);

  std::string text = HttpGet(port, "/metrics").body;
  INFO(text);
  CHECK(Sample(text, "reliableq_janitor_passes_total") >= 2);
  CHECK(Sample(text, "reliableq_janitor_jobs_recovered_total") == 1);
  CHECK(Sample(text, "reliableq_janitor_poison_pills_total") == 1);
}

TEST_CASE_FIXTURE(RedisFixture, "janitor:passes keeps the newest 100") {
  Keys keys;
  for (int i = 0; i < 120; ++i) Run({"LPUSH", keys.JanitorPasses(), "{\"old\":" + std::to_string(i) + "}"});
  const std::string dead = "host-y:78:787878787878";
  Run({"HSET", keys.Registry(), dead,
       R"({"identity":")" + dead + R"(","hostname":"h","pid":78,"started_at":1700000000.5,"queues":["elsewhere"]})"});
  Run({"SADD", "processes", dead});
  HandlerRegistry registry;
  registry.Register("GoodJob", [](const JobView&) {});
  ServerOptions options = Options(this->options(), 0);
  options.http_address.clear();  // the record does not need the endpoint
  RunningServer worker(options, std::move(registry));
  REQUIRE(WaitUntil([&] { return LRange(keys.JanitorPasses())[0].find(dead) != std::string::npos; }, 10s));
  CHECK(Integer({"LLEN", keys.JanitorPasses()}) == 100);
}

TEST_CASE_FIXTURE(RedisFixture, "reliableq worker --http: a bad address exits 2, a taken port 1") {
  std::vector<std::string> base = {BuildPath("RELIABLEQ_BIN"), "worker", "--redis",
                                   server().Url(), "-r", BuildPath("RELIABLEQ_DEMO_PLUGIN")};
  for (const char* bad : {"127.0.0.1:99999", "127.0.0.1:", "nonsense"}) {
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), {"--http", bad});
    CommandResult result = RunCommand(argv, 10s);
    INFO(bad, ": ", result.err);
    CHECK(result.exit_code == 2);
    CHECK(std::count(result.err.begin(), result.err.end(), '\n') == 1);
    CHECK(result.err.find(bad) != std::string::npos);
  }

  // A port someone else holds.
  int holder = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(holder >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  REQUIRE(bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(listen(holder, 1) == 0);
  socklen_t length = sizeof address;
  REQUIRE(getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  std::string taken = "127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  std::vector<std::string> argv = base;
  argv.insert(argv.end(), {"--http", taken});
  CommandResult result = RunCommand(argv, 10s);
  close(holder);
  INFO(result.err);
  CHECK(result.exit_code == 1);
  // Its last line (Open's warnings about Redis may come first).
  std::string last = result.err.substr(0, result.err.size() - 1);
  last = last.substr(last.rfind('\n') + 1);
  CHECK(last.rfind("reliableq: ", 0) == 0);
  CHECK(last.find(taken) != std::string::npos);
}
