// `reliableq web`: its JSON API, authentication, CSRF, read-only mode and
// audit trail, in-process against the private redis-server, over real HTTP
// (httplib::Client); and the program's refusals (a public address without
// authentication, an unreachable Redis) as a real process.

#include <doctest/doctest.h>
#include <httplib.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "protocol/keys.h"
#include "support/process.h"
#include "support/testutil.h"
#include "web/web_server.h"

using namespace reliableq;
using namespace reliableq::protocol;
using namespace reliableq::http;
using namespace reliableq::testing;

namespace {

constexpr const char* kLive = "host:1:aaaaaaaaaaaa";
constexpr const char* kDeadProcess = "gone:2:bbbbbbbbbbbb";

std::string Job(const std::string& jid, const std::string& queue = "default",
                const std::string& extra = "") {
  return R"({"class":"HardJob","args":[1,"two"],"queue":")" + queue + R"(","jid":")" + jid +
         R"(","retry":true,"created_at":1700000000.5,"enqueued_at":1700000000.5)" + extra + "}";
}

std::string Failed(const std::string& jid) {
  return Job(jid, "default",
             R"(,"retry_count":2,"error_class":"RuntimeError","error_message":"boom",)"
             R"("failed_at":1700000001.5)");
}

rapidjson::Document Parse(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  REQUIRE_MESSAGE(!doc.HasParseError(), json);
  return doc;
}

class WebFixture : public RedisFixture {
 public:
  // Starts a server on a free loopback port with `options` (redis filled in).
  void Start(web::WebOptions options = {}) {
    options.redis = this->options();
    options.address = HttpAddress{"127.0.0.1", 0};
    options.threads = 2;
    options.log = [this](LogLevel, std::string_view line) {
      std::lock_guard<std::mutex> lock(log_mutex_);
      log_.emplace_back(line);
    };
    Result<std::unique_ptr<web::WebServer>> server = web::WebServer::Start(std::move(options));
    REQUIRE_MESSAGE(server.ok(), server.status().ToString());
    server_ = std::move(server.value());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(10, 0);
  }

  httplib::Client& client() { return *client_; }
  int port() const { return server_->port(); }

  rapidjson::Document GetJson(const std::string& path, int status = 200) {
    httplib::Result result = client_->Get(path.c_str());
    REQUIRE_MESSAGE(result, path);
    CHECK_MESSAGE(result->status == status, path << ": " << result->body);
    CHECK(result->get_header_value("Content-Type") == "application/json");
    return Parse(result->body);
  }

  std::string Csrf() {
    rapidjson::Document session = GetJson("/api/session");
    return session["csrf_token"].GetString();
  }

  httplib::Result PostJson(const std::string& path, const std::string& body,
                           httplib::Headers headers) {
    return client_->Post(path.c_str(), headers, body, "application/json");
  }

  // A POST with the session's CSRF token, expecting `status`.
  rapidjson::Document Act(const std::string& path, const std::string& body, int status = 200) {
    httplib::Result result = PostJson(path, body, {{"X-CSRF-Token", Csrf()}});
    REQUIRE_MESSAGE(result, path);
    CHECK_MESSAGE(result->status == status, path << ": " << result->body);
    return Parse(result->body);
  }

  // The ids the API gives the entries of `set`, in its order.
  std::vector<std::string> Ids(const std::string& set) {
    rapidjson::Document page = GetJson("/api/sets/" + set + "?per_page=1000");
    std::vector<std::string> ids;
    for (const auto& entry : page["entries"].GetArray()) ids.push_back(entry["id"].GetString());
    return ids;
  }

  std::vector<std::string> Log() {
    std::lock_guard<std::mutex> lock(log_mutex_);
    return log_;
  }

  // Jobs in queues, retry, schedule and dead; a live process with a running
  // job; a dead process (no heartbeat) with two jobs in its working list.
  void Seed() {
    Run({"LPUSH", "queue:default", Job("q1"), Job("q2")});
    Run({"LPUSH", "queue:critical", Job("c1", "critical")});
    Run({"SADD", "queues", "default", "critical"});
    Run({"ZADD", "retry", "1700000100.5", Failed("r1"), "1700000200.25", Failed("r2")});
    Run({"ZADD", "schedule", "1900000000", Job("s1")});
    Run({"ZADD", "dead", "1700000001.5", Failed("d1"), "1700000002.5", Failed("d2"),
         "1700000003.5", Failed("d3")});
    std::string info = R"({"hostname":"host","pid":1,"tag":"app","concurrency":5,)"
                       R"("queues":["default","critical"],"labels":["blue"],)"
                       R"("started_at":1700000000.5,"identity":")" +
                       std::string(kLive) + R"(","version":"0.1.0"})";
    Run({"SADD", "processes", kLive});
    Run({"HSET", kLive, "info", info, "busy", "1", "beat", std::to_string(NowSeconds()),
         "quiet", "false", "rss", "2048"});
    rapidjson::StringBuffer work;
    rapidjson::Writer<rapidjson::StringBuffer> w(work);
    w.StartObject();
    w.Key("queue");
    w.String("default");
    w.Key("payload");
    std::string running = Job("run1");
    w.String(running.c_str());
    w.Key("run_at");
    w.Int64(1700000050);
    w.EndObject();
    Run({"HSET", Keys().Work(kLive), "p0", work.GetString()});
    Keys keys;
    Run({"SET", keys.Heartbeat(kLive), "1", "PX", "30000"});
    Run({"HSET", keys.Registry(), kLive,
         R"({"identity":")" + std::string(kLive) + R"(","queues":["default"]})"});
    Run({"HSET", keys.Registry(), kDeadProcess,
         R"({"identity":")" + std::string(kDeadProcess) +
             R"(","hostname":"gone","pid":2,"queues":["default"]})"});
    Run({"RPUSH", keys.Working(kDeadProcess, "default"), Job("o1"), Job("o2")});
  }

 private:
  std::unique_ptr<web::WebServer> server_;
  std::unique_ptr<httplib::Client> client_;
  std::mutex log_mutex_;
  std::vector<std::string> log_;
};

bool Contains(const std::vector<std::string>& list, const std::string& text) {
  for (const std::string& item : list) {
    if (item.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE_FIXTURE(WebFixture, "every GET endpoint returns the documented fields") {
  Seed();
  Start();

  rapidjson::Document session = GetJson("/api/session");
  CHECK(std::string(session["csrf_token"].GetString()).size() == 64);
  CHECK(session["read_only"].GetBool() == false);
  CHECK(session["user"].IsString());
  CHECK(session["version"].IsString());
  CHECK(session["refresh_ms"].GetInt() > 0);

  rapidjson::Document overview = GetJson("/api/overview");
  for (const char* field : {"now", "processed", "failed", "enqueued", "scheduled", "retries",
                            "dead", "processes", "busy", "in_progress", "orphaned"}) {
    CHECK_MESSAGE(overview.HasMember(field), field);
  }
  CHECK(overview["enqueued"].GetInt64() == 3);
  CHECK(overview["retries"].GetInt64() == 2);
  CHECK(overview["scheduled"].GetInt64() == 1);
  CHECK(overview["dead"].GetInt64() == 3);
  CHECK(overview["processes"].GetInt64() == 1);
  CHECK(overview["busy"].GetInt64() == 1);
  CHECK(overview["orphaned"].GetInt64() == 2);
  REQUIRE(overview["queues"].Size() == 2);
  CHECK(std::string(overview["queues"][0]["name"].GetString()) == "critical");
  CHECK(overview["queues"][1]["size"].GetInt64() == 2);
  CHECK(overview["queues"][1]["latency"].GetDouble() > 0);
  for (const char* field :
       {"address", "version", "uptime_seconds", "used_memory_human", "connected_clients"}) {
    CHECK_MESSAGE(overview["redis"].HasMember(field), field);
  }

  rapidjson::Document busy = GetJson("/api/busy");
  REQUIRE(busy["processes"].Size() == 1);
  const auto& p = busy["processes"][0];
  CHECK(std::string(p["identity"].GetString()) == kLive);
  CHECK(std::string(p["hostname"].GetString()) == "host");
  CHECK(p["pid"].GetInt64() == 1);
  CHECK(std::string(p["tag"].GetString()) == "app");
  CHECK(std::string(p["labels"][0].GetString()) == "blue");
  CHECK(p["queues"].Size() == 2);
  CHECK(p["concurrency"].GetInt64() == 5);
  CHECK(p["busy"].GetInt64() == 1);
  CHECK(p["rss_kb"].GetInt64() == 2048);
  CHECK(p["started_at"].GetDouble() == doctest::Approx(1700000000.5));
  CHECK(p["beat"].IsNumber());
  CHECK(p["heartbeat_age"].GetDouble() < 60);
  CHECK(p["heartbeat_ttl_left"].GetDouble() > 0);
  CHECK(p["heartbeat_ttl_left"].GetDouble() <= 30);
  CHECK(p["quiet"].GetBool() == false);
  CHECK(std::string(p["version"].GetString()) == "0.1.0");
  REQUIRE(p["jobs"].Size() == 1);
  const auto& job = p["jobs"][0];
  CHECK(std::string(job["thread"].GetString()) == "p0");
  CHECK(std::string(job["queue"].GetString()) == "default");
  CHECK(job["run_at"].GetDouble() == 1700000050);
  CHECK(std::string(job["jid"].GetString()) == "run1");
  CHECK(std::string(job["class"].GetString()) == "HardJob");
  CHECK(job["args"].IsArray());
  CHECK(std::string(job["payload"].GetString()) == Job("run1"));

  rapidjson::Document queues = GetJson("/api/queues");
  CHECK(queues["queues"].Size() == 2);

  rapidjson::Document queue = GetJson("/api/queue?name=default&page=1&per_page=1");
  CHECK(std::string(queue["name"].GetString()) == "default");
  CHECK(queue["size"].GetInt64() == 2);
  CHECK(queue["latency"].IsNumber());
  CHECK(queue["page"].GetInt64() == 1);
  CHECK(queue["per_page"].GetInt64() == 1);
  REQUIRE(queue["jobs"].Size() == 1);
  CHECK(queue["jobs"][0]["position"].GetInt64() == 0);
  CHECK(std::string(queue["jobs"][0]["jid"].GetString()) == "q2");
  CHECK(std::string(queue["jobs"][0]["class"].GetString()) == "HardJob");
  CHECK(std::string(queue["jobs"][0]["args"][1].GetString()) == "two");
  CHECK(queue["jobs"][0]["enqueued_at"].GetDouble() == doctest::Approx(1700000000.5));
  CHECK(std::string(queue["jobs"][0]["payload"].GetString()) == Job("q2"));
  CHECK(GetJson("/api/queue?name=default&page=2&per_page=1")["jobs"][0]["position"].GetInt64() ==
        1);

  rapidjson::Document retry = GetJson("/api/sets/retry?page=1&per_page=25");
  CHECK(std::string(retry["set"].GetString()) == "retry");
  CHECK(retry["size"].GetInt64() == 2);
  CHECK(retry["page"].GetInt64() == 1);
  CHECK(retry["per_page"].GetInt64() == 25);
  REQUIRE(retry["entries"].Size() == 2);
  const auto& r = retry["entries"][0];  // soonest first
  CHECK(std::string(r["id"].GetString()) == "1700000100.5-r1");
  CHECK(r["score"].GetDouble() == 1700000100.5);
  CHECK(std::string(r["jid"].GetString()) == "r1");
  CHECK(std::string(r["class"].GetString()) == "HardJob");
  CHECK(std::string(r["queue"].GetString()) == "default");
  CHECK(r["args"].IsArray());
  CHECK(r["retry_count"].GetInt64() == 2);
  CHECK(std::string(r["error_class"].GetString()) == "RuntimeError");
  CHECK(std::string(r["error_message"].GetString()) == "boom");
  CHECK(r["valid"].GetBool());
  CHECK(std::string(r["payload"].GetString()) == Failed("r1"));

  // dead: newest first; paged.
  rapidjson::Document dead = GetJson("/api/sets/dead?page=2&per_page=2");
  CHECK(dead["size"].GetInt64() == 3);
  REQUIRE(dead["entries"].Size() == 1);
  CHECK(std::string(dead["entries"][0]["jid"].GetString()) == "d1");
  CHECK(std::string(GetJson("/api/sets/dead")["entries"][0]["jid"].GetString()) == "d3");
  CHECK(GetJson("/api/sets/scheduled")["entries"].Size() == 1);
  GetJson("/api/sets/nope", 404);
  GetJson("/api/sets/dead?per_page=1001", 400);
  GetJson("/api/sets/dead?page=0", 400);

  rapidjson::Document found = GetJson("/api/job?set=retry&id=1700000200.25-r2");
  CHECK(std::string(found["set"].GetString()) == "retry");
  CHECK(std::string(found["id"].GetString()) == "1700000200.25-r2");
  CHECK(found["score"].GetDouble() == 1700000200.25);
  CHECK(std::string(found["entry"]["jid"].GetString()) == "r2");
  GetJson("/api/job?set=retry&id=1700000200.25-nope", 404);
  GetJson("/api/job?set=retry&id=garbage", 400);

  // A job by jid: the JSON of `reliableq job --json`; unknown is an answer.
  rapidjson::Document where = GetJson("/api/find?jid=r2");
  for (const char* field :
       {"jid",         "state",       "process",       "thread",      "queue",    "limit",
        "position",    "list_size",   "since",         "at",          "progress", "class",
        "retry_count", "error_class", "error_message", "args",        "job",      "payload",
        "record",      "last_end",    "record_ttl_ms", "not_searched"}) {
    CHECK_MESSAGE(where.HasMember(field), field);
  }
  CHECK(std::string(where["state"].GetString()) == "retry");
  CHECK(where["at"].GetDouble() == 1700000200.25);
  rapidjson::Document orphaned = GetJson("/api/find?jid=o1");
  CHECK(std::string(orphaned["state"].GetString()) == "orphaned");
  CHECK(std::string(orphaned["process"].GetString()) == kDeadProcess);
  CHECK(std::string(orphaned["queue"].GetString()) == "default");
  CHECK(std::string(GetJson("/api/find?jid=nope")["state"].GetString()) == "unknown");
  GetJson("/api/find", 400);
  GetJson("/api/find?jid=r2&scan_limit=0", 400);

  rapidjson::Document recovery = GetJson("/api/recovery");
  REQUIRE(recovery["orphans"].Size() == 1);
  const auto& orphan = recovery["orphans"][0];
  CHECK(std::string(orphan["identity"].GetString()) == kDeadProcess);
  CHECK(std::string(orphan["evidence"].GetString()) == "heartbeat_expired");
  REQUIRE(orphan["queues"].Size() == 1);
  CHECK(std::string(orphan["queues"][0]["queue"].GetString()) == "default");
  CHECK(orphan["queues"][0]["requeued"].GetInt64() == 2);
  CHECK(orphan["queues"][0]["dead"].GetInt64() == 0);
  REQUIRE(orphan["jobs"].Size() == 2);
  CHECK(std::string(orphan["jobs"][0]["jid"].GetString()) == "o1");
  CHECK(std::string(orphan["jobs"][0]["queue"].GetString()) == "default");
  CHECK(orphan["jobs"][0]["interrupted_count"].GetInt64() == 0);
  CHECK(orphan["jobs"][0]["args"].IsArray());
  CHECK(std::string(orphan["jobs"][0]["payload"].GetString()) == Job("o1"));
  CHECK(recovery["total"].GetInt64() == 2);
  CHECK(recovery["janitor"]["last"].IsNull());
  CHECK(recovery["janitor"]["passes"].Size() == 0);

  CHECK(GetJson("/api/audit")["entries"].Size() == 0);
}

TEST_CASE_FIXTURE(WebFixture, "the janitor's record is shown as JSON") {
  Keys keys;
  Run({"SET", keys.JanitorLast(), R"({"at":1700000000.5,"by":"w1","checked":3,"dead":[]})"});
  Run({"LPUSH", keys.JanitorPasses(),
       R"({"at":1700000000.5,"by":"w1","checked":3,"dead":[{"identity":"x","evidence":)"
       R"("heartbeat_expired","requeued":4,"to_dead":0}]})"});
  Start();
  rapidjson::Document recovery = GetJson("/api/recovery");
  CHECK(std::string(recovery["janitor"]["last"]["by"].GetString()) == "w1");
  REQUIRE(recovery["janitor"]["passes"].Size() == 1);
  CHECK(recovery["janitor"]["passes"][0]["dead"][0]["requeued"].GetInt() == 4);
}

TEST_CASE_FIXTURE(WebFixture, "retry, delete and kill by id, by selection and all") {
  Seed();
  Start();
  SUBCASE("retry of one dead entry moves it to its queue") {
    rapidjson::Document result =
        Act("/api/sets/dead/retry", R"({"ids":["1700000002.5-d2"]})");
    CHECK(result["done"].GetInt64() == 1);
    CHECK(result["not_found"].GetInt64() == 0);
    CHECK(result["skipped"].GetInt64() == 0);
    CHECK(ZRange("dead").size() == 2);
    CHECK(Contains(LRange("queue:default"), R"("jid":"d2")"));
    // Gone now: counted as not found.
    result = Act("/api/sets/dead/retry", R"({"ids":["1700000002.5-d2","1700000001.5-d1"]})");
    CHECK(result["done"].GetInt64() == 1);
    CHECK(result["not_found"].GetInt64() == 1);
  }
  SUBCASE("delete of a selection") {
    rapidjson::Document result =
        Act("/api/sets/dead/delete", R"({"ids":["1700000001.5-d1","1700000003.5-d3"]})");
    CHECK(result["done"].GetInt64() == 2);
    CHECK(ZRange("dead") == std::vector<std::string>{Failed("d2")});
    CHECK(LRange("queue:default").size() == 2);
  }
  SUBCASE("kill of a retry entry and of a scheduled one") {
    rapidjson::Document result = Act("/api/sets/retry/kill", R"({"ids":["1700000100.5-r1"]})");
    CHECK(result["done"].GetInt64() == 1);
    CHECK(ZRange("retry") == std::vector<std::string>{Failed("r2")});
    CHECK(Contains(ZRange("dead"), R"("jid":"r1")"));
    result = Act("/api/sets/scheduled/kill", R"({"ids":["1900000000-s1"]})");
    CHECK(result["done"].GetInt64() == 1);
    CHECK(ZRange("schedule").empty());
    Act("/api/sets/dead/kill", R"({"ids":["1700000001.5-d1"]})", 400);
  }
  SUBCASE("all") {
    CHECK(Act("/api/sets/retry/retry", R"({"all":true})")["done"].GetInt64() == 2);
    CHECK(ZRange("retry").empty());
    CHECK(LRange("queue:default").size() == 4);
    CHECK(Act("/api/sets/dead/delete", R"({"all":true})")["done"].GetInt64() == 3);
    CHECK(ZRange("dead").empty());
    CHECK(Act("/api/sets/scheduled/kill", R"({"all":true})")["done"].GetInt64() == 1);
    CHECK(ZRange("dead").size() == 1);
  }
  SUBCASE("a malformed id is refused and nothing moves") {
    auto before = Snapshot();
    Act("/api/sets/dead/retry", R"({"ids":["nonsense"]})", 400);
    Act("/api/sets/dead/retry", R"({"ids":"1700000002.5-d2"})", 400);
    CHECK(Snapshot() == before);
  }
}

TEST_CASE_FIXTURE(WebFixture, "quiet, stop, clear and recover now") {
  Seed();
  Start();
  CHECK(Act("/api/processes/quiet", std::string(R"({"identity":")") + kLive + "\"}")["signalled"]
            .GetInt64() == 1);
  CHECK(LRange(Keys().Signals(kLive)) == std::vector<std::string>{"TSTP"});
  CHECK(Integer({"TTL", Keys().Signals(kLive)}) > 0);
  CHECK(Act("/api/processes/stop", R"({"all":true})")["signalled"].GetInt64() == 1);
  CHECK(LRange(Keys().Signals(kLive)) == std::vector<std::string>{"TERM", "TSTP"});
  Act("/api/processes/stop", R"({"identity":"nobody"})", 404);

  CHECK(Act("/api/queue/clear", R"({"name":"critical"})")["cleared"].GetInt64() == 1);
  CHECK(!Exists("queue:critical"));

  rapidjson::Document paused = Act("/api/queue/pause", R"({"name":"default"})");
  CHECK(paused["changed"].IsTrue());
  CHECK(paused["workers_told"].GetInt64() == 0);  // no worker runs here
  CHECK(Act("/api/queue/pause", R"({"name":"default"})")["changed"].IsFalse());
  // A queue that is not known is refused, as by the CLI without --force.
  Act("/api/queue/pause", R"({"name":"defualt"})", 404);
  CHECK(SMembers(Keys().Paused()) == std::vector<std::string>{"default"});
  rapidjson::Document listed = GetJson("/api/queues");
  bool marked = false;
  for (const rapidjson::Value& q : listed["queues"].GetArray()) {
    if (std::string(q["name"].GetString()) == "default") marked = q["paused"].IsTrue();
  }
  CHECK(marked);
  CHECK(GetJson("/api/queue?name=default&page=1&per_page=5")["paused"].IsTrue());
  CHECK(Act("/api/queue/resume", R"({"name":"default"})")["changed"].IsTrue());
  CHECK_FALSE(Exists(Keys().Paused()));
  Act("/api/queue/pause", R"({"name":""})", 400);

  Keys keys;
  rapidjson::Document report = Act("/api/recovery/recover", "{}");
  REQUIRE(report["identities"].Size() >= 1);
  CHECK(std::string(report["identities"][0]["identity"].GetString()) == kDeadProcess);
  CHECK(report["identities"][0]["queues"][0]["requeued"].GetInt64() == 2);
  CHECK(!Exists(keys.Working(kDeadProcess, "default")));
  CHECK(LRange("queue:default").size() == 4);
  CHECK(GetJson("/api/recovery")["orphans"].Size() == 0);

  // Every action left an audit entry, newest first, with who (the client
  // address, as there is no authentication) and a log line.
  rapidjson::Document audit = GetJson("/api/audit");
  REQUIRE(audit["entries"].Size() == 9);
  std::vector<std::string> actions;
  for (const auto& entry : audit["entries"].GetArray()) {
    actions.push_back(entry["action"].GetString());
    CHECK(std::string(entry["who"].GetString()) == "127.0.0.1");
    CHECK(entry["at"].GetDouble() > 1.7e9);
    CHECK(entry["target"].IsString());
    CHECK(entry["result"].IsString());
  }
  CHECK(actions == std::vector<std::string>{"recover", "resume", "pause", "pause", "pause", "clear",
                                            "stop", "stop", "quiet"});
  CHECK(Contains(Log(), R"("action":"clear","target":"critical")"));
}

TEST_CASE_FIXTURE(WebFixture, "POSTs without the CSRF token, from another origin or read-only") {
  Seed();
  SUBCASE("csrf and origin") {
    Start();
    auto before = Snapshot();
    std::string body = R"({"ids":["1700000002.5-d2"]})";
    httplib::Result none = PostJson("/api/sets/dead/retry", body, {});
    REQUIRE(none);
    CHECK(none->status == 403);
    httplib::Result wrong =
        PostJson("/api/sets/dead/retry", body, {{"X-CSRF-Token", std::string(64, '0')}});
    REQUIRE(wrong);
    CHECK(wrong->status == 403);
    httplib::Result cross = PostJson("/api/sets/dead/retry", body,
                                     {{"X-CSRF-Token", Csrf()}, {"Origin", "http://evil.test"}});
    REQUIRE(cross);
    CHECK(cross->status == 403);
    // The same host and port under another scheme is another origin: this
    // server speaks http only.
    httplib::Result other_scheme = PostJson(
        "/api/sets/dead/retry", body,
        {{"X-CSRF-Token", Csrf()}, {"Origin", "https://127.0.0.1:" + std::to_string(port())}});
    REQUIRE(other_scheme);
    CHECK(other_scheme->status == 403);
    httplib::Result form =
        client().Post("/api/sets/dead/retry", {{"X-CSRF-Token", Csrf()}}, body, "text/plain");
    REQUIRE(form);
    CHECK(form->status == 415);
    httplib::Result not_object = PostJson("/api/sets/dead/retry", "[1]", {{"X-CSRF-Token", Csrf()}});
    REQUIRE(not_object);
    CHECK(not_object->status == 400);
    CHECK(Snapshot() == before);
    // The same origin is fine.
    std::string origin = "http://127.0.0.1:" + std::to_string(port());
    httplib::Result same = PostJson("/api/sets/dead/retry", body,
                                    {{"X-CSRF-Token", Csrf()}, {"Origin", origin}});
    REQUIRE(same);
    CHECK(same->status == 200);
  }
  SUBCASE("read-only") {
    web::WebOptions options;
    options.read_only = true;
    Start(options);
    auto before = Snapshot();
    CHECK(GetJson("/api/session")["read_only"].GetBool());
    rapidjson::Document refused =
        Act("/api/sets/dead/retry", R"({"ids":["1700000002.5-d2"]})", 403);
    CHECK(std::string(refused["error"].GetString()) == "read-only");
    Act("/api/processes/stop", R"({"all":true})", 403);
    CHECK(Snapshot() == before);
    GetJson("/api/sets/dead");
  }
}

TEST_CASE_FIXTURE(WebFixture, "basic and token authentication") {
  web::WebOptions options;
  options.users = {{"alice", "s3cret:with colon"}};
  options.token = "tok-123";
  Start(options);
  httplib::Result anonymous = client().Get("/api/session");
  REQUIRE(anonymous);
  CHECK(anonymous->status == 401);
  CHECK(anonymous->get_header_value("WWW-Authenticate") == "Basic realm=\"reliableq\"");
  CHECK(client().Get("/metrics")->status == 401);
  CHECK(client().Get("/")->status == 401);
  // Health needs no credentials.
  CHECK(client().Get("/healthz")->status == 200);

  httplib::Result wrong = client().Get("/api/session", {{"Authorization", "Bearer nope"}});
  CHECK(wrong->status == 401);
  client().set_basic_auth("alice", "wrong");
  CHECK(client().Get("/api/session")->status == 401);

  client().set_basic_auth("alice", "s3cret:with colon");
  rapidjson::Document session = GetJson("/api/session");
  CHECK(std::string(session["user"].GetString()) == "alice");
  Run({"ZADD", "dead", "5", Failed("d5")});
  Act("/api/sets/dead/delete", R"({"ids":["5-d5"]})");

  client().set_basic_auth("", "");
  httplib::Client token_client("127.0.0.1", port());
  token_client.set_bearer_token_auth("tok-123");
  httplib::Result with_token = token_client.Get("/api/session");
  REQUIRE(with_token);
  CHECK(with_token->status == 200);
  CHECK(std::string(Parse(with_token->body)["user"].GetString()) == "token");
  httplib::Result metrics = token_client.Get("/metrics");
  CHECK(metrics->status == 200);

  token_client.set_bearer_token_auth("tok-123");
  httplib::Result audit = token_client.Get("/api/audit");
  rapidjson::Document entries = Parse(audit->body);
  REQUIRE(entries["entries"].Size() == 1);
  CHECK(std::string(entries["entries"][0]["who"].GetString()) == "alice");
  CHECK(std::string(entries["entries"][0]["action"].GetString()) == "delete");
  // No secret in the log.
  for (const std::string& line : Log()) {
    CHECK(line.find("s3cret") == std::string::npos);
    CHECK(line.find("tok-123") == std::string::npos);
  }
}

TEST_CASE_FIXTURE(WebFixture, "the authentication scheme is case-insensitive (RFC 7235)") {
  web::WebOptions options;
  options.users = {{"alice", "pw"}};
  options.token = "tok-123";
  Start(options);
  for (const char* header : {"bearer tok-123", "BEARER tok-123", "Bearer  tok-123",
                             "basic YWxpY2U6cHc=", "BASIC YWxpY2U6cHc="}) {
    httplib::Result result = client().Get("/api/session", {{"Authorization", header}});
    REQUIRE(result);
    CHECK_MESSAGE(result->status == 200, header);
  }
  for (const char* header : {"bearer nope", "bearertok-123", "basic YWxpY2U6bm8=", "tok-123"}) {
    httplib::Result result = client().Get("/api/session", {{"Authorization", header}});
    REQUIRE(result);
    CHECK_MESSAGE(result->status == 401, header);
  }
}

TEST_CASE_FIXTURE(WebFixture, "hostile payloads come back as JSON strings") {
  std::string hostile = R"({"class":"<script>alert(1)</script>","args":["\u0007\u001b[31m"],)"
                        R"("queue":"default","jid":"x</script>"})";
  Run({"ZADD", "dead", "10", hostile, "11", "not json at all \x01\x7f\xff", "12",
       R"({"jid":"nojob"})"});
  Start();
  httplib::Result result = client().Get("/api/sets/dead");
  REQUIRE(result);
  CHECK(result->status == 200);
  rapidjson::Document dead = Parse(result->body);
  REQUIRE(dead["entries"].Size() == 3);
  CHECK(std::string(dead["entries"][0]["jid"].GetString()) == "nojob");
  CHECK(dead["entries"][0]["valid"].GetBool() == false);
  CHECK(dead["entries"][1]["valid"].GetBool() == false);
  CHECK(dead["entries"][1]["args"].IsNull());
  CHECK(std::string(dead["entries"][1]["payload"].GetString()).starts_with("not json"));
  CHECK(dead["entries"][2]["valid"].GetBool() == true);
  CHECK(std::string(dead["entries"][2]["class"].GetString()) == "<script>alert(1)</script>");
  CHECK(std::string(dead["entries"][2]["payload"].GetString()) == hostile);
  // A malformed member can still be found and deleted by its id.
  rapidjson::Document gone = Act("/api/sets/dead/delete", R"({"ids":["11-"]})");
  CHECK(gone["done"].GetInt64() == 1);
  // Retrying what is not a job skips it.
  rapidjson::Document skipped = Act("/api/sets/dead/retry", R"({"ids":["12-nojob"]})");
  CHECK(skipped["skipped"].GetInt64() == 1);
  CHECK(ZRange("dead").size() == 2);
}

TEST_CASE_FIXTURE(WebFixture, "requests it must refuse without harm") {
  Start();
  Seed();
  // Paths far longer than any route: a 404, and the server still answers.
  std::string long_segment(5000, 'a');
  // (The last one is a POST route's path: 405.)
  for (const auto& [path, status] : std::vector<std::pair<std::string, int>>{
           {"/api/sets/" + long_segment, 404},
           {"/assets/" + long_segment, 404},
           {"/api/sets/dead/" + long_segment, 405}}) {
    httplib::Result result = client().Get(path.c_str());
    REQUIRE(result);
    CHECK(result->status == status);
  }
  GetJson("/api/session");
  // Without authentication on loopback only a loopback Host is answered (a
  // page whose name was rebound to 127.0.0.1 sends its own name).
  std::string port_text = std::to_string(port());
  httplib::Result rebound = client().Get("/api/overview", {{"Host", "evil.example:" + port_text}});
  REQUIRE(rebound);
  CHECK(rebound->status == 403);
  httplib::Result named = client().Get("/api/overview", {{"Host", "localhost:" + port_text}});
  REQUIRE(named);
  CHECK(named->status == 200);
  // Unknown actions and an empty identity change nothing.
  Act("/api/processes/bogus", R"({"all":true})", 404);
  CHECK(!Exists(Keys().Signals(kLive)));
  Act("/api/recovery/recover", R"({"identity":""})", 400);
  CHECK(Integer({"LLEN", Keys().Working(kDeadProcess, "default")}) == 2);
  // A process record with a beat that is not a finite number.
  Run({"HSET", kLive, "beat", "inf"});
  rapidjson::Document busy = GetJson("/api/busy");
  CHECK(busy["processes"].Size() >= 1);
}

TEST_CASE_FIXTURE(WebFixture, "metrics, health, assets and security headers") {
  Seed();
  Start();
  httplib::Result metrics = client().Get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->status == 200);
  for (const char* line :
       {"reliableq_queue_size{queue=\"default\"} 2", "reliableq_queue_latency_seconds{",
        "reliableq_retry_set_size 2", "reliableq_scheduled_set_size 1",
        "reliableq_dead_set_size 3", "reliableq_processes 1", "reliableq_busy_jobs 1",
        "reliableq_in_progress_jobs ", "reliableq_orphaned_jobs 2",
        "reliableq_stat_processed_total 0", "reliableq_stat_failed_total 0",
        "# TYPE reliableq_stat_processed_total counter"}) {
    CHECK_MESSAGE(metrics->body.find(line) != std::string::npos, line);
  }
  httplib::Result health = client().Get("/healthz");
  CHECK(health->status == 200);
  CHECK(health->body == "ok");

  httplib::Result index = client().Get("/");
  REQUIRE(index);
  CHECK(index->status == 200);
  CHECK(index->get_header_value("Content-Type").starts_with("text/html"));
  CHECK(index->get_header_value("Cache-Control") == "no-cache");
  CHECK(index->get_header_value("Content-Security-Policy") == "default-src 'self'");
  CHECK(index->get_header_value("X-Content-Type-Options") == "nosniff");
  CHECK(index->get_header_value("X-Frame-Options") == "DENY");
  CHECK(index->get_header_value("Referrer-Policy") == "no-referrer");
  CHECK(client().Get("/assets/app.js")->get_header_value("Content-Type").starts_with(
      "text/javascript"));
  CHECK(client().Get("/assets/app.css")->get_header_value("Content-Type").starts_with("text/css"));
  CHECK(client().Get("/assets/nothing.js")->status == 404);
  CHECK(client().Get("/api/nothing")->status == 404);
  CHECK(client().Get("/api/session")->get_header_value("X-Frame-Options") == "DENY");
}

TEST_CASE("reliableq web refuses a public address without auth, and an unreachable Redis") {
  std::string bin = BuildPath("RELIABLEQ_BIN");
  CommandResult open = RunCommand({bin, "web", "--redis", RedisServer::Shared().Url(), "--http",
                                   "0.0.0.0:0"});
  CHECK(open.exit_code == 2);
  CHECK(open.err.find("without authentication") != std::string::npos);

  int port = FreeLoopbackPort();
  auto started = std::chrono::steady_clock::now();
  CommandResult down = RunCommand({bin, "web", "--redis",
                                   "redis://:hunter2@127.0.0.1:" + std::to_string(port) + "/0",
                                   "--http", "127.0.0.1:0"});
  CHECK(down.exit_code == 1);
  CHECK(down.err.find("127.0.0.1:" + std::to_string(port)) != std::string::npos);
  CHECK(down.err.find("hunter2") == std::string::npos);
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));
}

TEST_CASE("reliableq web serves until SIGTERM") {
  std::string bin = BuildPath("RELIABLEQ_BIN");
  int port = FreeLoopbackPort();
  std::string log = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
                    "/web_api_test_" + std::to_string(getpid()) + ".log";
  ChildProcess web({bin, "web", "--redis", RedisServer::Shared().Url(), "--http",
                    "127.0.0.1:" + std::to_string(port)},
                   {}, log);
  httplib::Client client("127.0.0.1", port);
  bool up = WaitUntil([&] {
    httplib::Result r = client.Get("/healthz");
    return r && r->status == 200;
  });
  CHECK_MESSAGE(up, web.Log());
  web.Signal(SIGTERM);
  std::optional<int> status = web.Wait(std::chrono::seconds(10));
  REQUIRE(status);
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
  std::remove(log.c_str());
}

TEST_CASE_FIXTURE(WebFixture, "sequences: listed oldest first, released and skipped, audited") {
  Keys keys;
  auto keyed = [](const std::string& jid) { return Job(jid, "default", R"(,"sequence":"acct")"); };
  // "acct" held by j1 (oldest) with j2, j3 waiting; "x\u001b" by k1.
  Run({"HSET", keys.Sequences(), "acct", "j1", "x\x1b", "k1"});
  Run({"ZADD", keys.SequencesSince(), "1700000000.5", "acct", "1700000100", "x\x1b"});
  Run({"RPUSH", keys.SequenceWaiting("acct"), keyed("j2"), keyed("j3")});
  Start();

  rapidjson::Document listed = GetJson("/api/sequences");
  CHECK(listed["held"].GetInt64() == 2);
  REQUIRE(listed["sequences"].Size() == 2);
  const rapidjson::Value& first = listed["sequences"][0];
  CHECK(std::string(first["key"].GetString()) == "acct");
  CHECK(std::string(first["holder"].GetString()) == "j1");
  CHECK(first["held_since"].GetDouble() == 1700000000.5);
  CHECK(first["waiting"].GetInt64() == 2);
  CHECK(std::string(listed["sequences"][1]["key"].GetString()) == "x\x1b");
  CHECK(GetJson("/api/sequences?limit=1")["sequences"].Size() == 1);
  GetJson("/api/sequences?limit=0", 400);

  httplib::Result metrics = client().Get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->body.find("reliableq_sequences_held 2\n") != std::string::npos);
  CHECK(metrics->body.find("reliableq_sequence_oldest_hold_seconds ") != std::string::npos);
  CHECK(metrics->body.find("reliableq_sequence_oldest_hold_seconds 0\n") == std::string::npos);

  rapidjson::Document skipped = Act("/api/sequences/skip", R"({"key":"acct"})");
  CHECK(std::string(skipped["jid"].GetString()) == "j2");
  CHECK(ZRange("dead") == std::vector<std::string>{keyed("j2")});
  rapidjson::Document released = Act("/api/sequences/release", R"({"key":"acct"})");
  CHECK(std::string(released["holder"].GetString()) == "j1");
  CHECK(std::string(released["next"].GetString()) == "j3");
  CHECK(HGet(keys.Sequences(), "acct") == "j3");
  CHECK(LRange("queue:default") == std::vector<std::string>{keyed("j3")});
  Act("/api/sequences/release", R"({"key":"free"})", 404);
  Act("/api/sequences/skip", R"({"key":"acct"})", 404);  // nothing waits now
  Act("/api/sequences/skip", R"({"key":""})", 400);
  // Without the CSRF token: refused, nothing done.
  httplib::Result forged = PostJson("/api/sequences/release", R"({"key":"acct"})", {});
  REQUIRE(forged);
  CHECK(forged->status == 403);
  CHECK(HGet(keys.Sequences(), "acct") == "j3");

  rapidjson::Document audit = GetJson("/api/audit");
  std::vector<std::string> actions;
  for (const auto& entry : audit["entries"].GetArray()) {
    actions.push_back(std::string(entry["action"].GetString()) + " " + entry["target"].GetString() +
                      " " + entry["result"].GetString());
  }
  REQUIRE(actions.size() == 4);
  CHECK(actions[3] == "sequence_skip acct skipped=j2");
  CHECK(actions[2] == "sequence_release acct holder=j1 next=j3");
  CHECK(actions[1].rfind("sequence_release free error: ", 0) == 0);
  CHECK(actions[0].rfind("sequence_skip acct error: ", 0) == 0);
  CHECK(Contains(Log(), R"("action":"sequence_release","target":"acct")"));
}
