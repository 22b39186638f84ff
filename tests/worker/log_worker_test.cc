// A worker logging in JSON (--log-format json): every line it writes while
// it starts, runs a job that succeeds and one that fails, and stops, is one
// JSON object, and the job lines carry the job's fields apart.

#include <doctest/doctest.h>
#include <rapidjson/document.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/log_capture.h"
#include "reliableq/client.h"
#include "reliableq/server.h"
#include "support/running_server.h"
#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::testing;
using namespace std::chrono_literals;

namespace {

// The parsed lines, each checked to be one valid JSON object.
std::vector<rapidjson::Document> ParseAll(const std::vector<std::string>& lines) {
  std::vector<rapidjson::Document> docs;
  for (const std::string& line : lines) {
    CHECK(line.find('\n') == std::string::npos);
    rapidjson::Document doc;
    doc.Parse<rapidjson::kParseValidateEncodingFlag>(line.data(), line.size());
    REQUIRE_MESSAGE(!doc.HasParseError(), line);
    REQUIRE_MESSAGE(doc.IsObject(), line);
    REQUIRE_MESSAGE(doc.HasMember("event"), line);
    docs.push_back(std::move(doc));
  }
  return docs;
}

std::string Text(const rapidjson::Document& doc, const char* key) {
  auto it = doc.FindMember(key);
  if (it == doc.MemberEnd() || !it->value.IsString()) return "<absent>";
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

// The first line of `event` about job `jid`, or nullptr.
const rapidjson::Document* Find(const std::vector<rapidjson::Document>& docs, const char* event,
                                const std::string& jid) {
  for (const rapidjson::Document& doc : docs) {
    if (Text(doc, "event") == event && Text(doc, "jid") == jid) return &doc;
  }
  return nullptr;
}

bool HasEvent(LogCapture& log, const char* event) {
  return log.Count(std::string("\"event\":\"") + event + "\"") > 0;
}

}  // namespace

TEST_CASE_FIXTURE(RedisFixture,
                  "a worker logging JSON writes one object a line, job fields apart") {
  auto log = std::make_shared<LogCapture>();
  HandlerRegistry registry;
  registry.Register("Works", [](const JobView&) {});
  registry.Register("Fails",
                    [](const JobView&) { throw std::runtime_error("bad\nthing \x1b[2J"); });
  ServerOptions opts;
  opts.redis = options();
  opts.queues = {{"mail", 0}};
  opts.concurrency = 2;
  opts.heartbeat_ttl = 1000ms;
  opts.heartbeat_interval = 200ms;
  opts.idle_poll_interval = 50ms;
  opts.log_level = LogLevel::kDebug;  // job_start and job_done too
  opts.log_format = LogFormat::kJson;
  opts.log_sink = log->Sink();
  std::string works_jid;
  std::string fails_jid;
  {
    RunningServer server(opts, std::move(registry));
    auto client = Client::Open(options());
    REQUIRE_MESSAGE(client.ok(), client.status().ToString());
    Job job;
    job.queue = "mail";
    job.args = "[]";
    job.job_class = "Works";
    works_jid = AcceptedJid((*client)->Push(job));
    job.job_class = "Fails";
    fails_jid = AcceptedJid((*client)->Push(job));
    REQUIRE(WaitUntil([&] { return Integer({"ZCARD", "retry"}) == 1; }, 10s));
    REQUIRE(
        WaitUntil([&] { return log->Count(works_jid) >= 2 && HasEvent(*log, "job_retry"); }, 10s));
    CHECK(server.StopAndWait());
  }
  std::vector<rapidjson::Document> docs = ParseAll(log->Lines());
  INFO("lines: " << docs.size());
  for (const char* event : {"started", "stopping", "stopped"}) {
    CHECK_MESSAGE(HasEvent(*log, event), event);
  }

  const rapidjson::Document* done = Find(docs, "job_done", works_jid);
  REQUIRE(done != nullptr);
  CHECK(Text(*done, "level") == "DEBUG");
  CHECK(Text(*done, "class") == "Works");
  CHECK(Text(*done, "queue") == "mail");
  REQUIRE(done->HasMember("duration"));
  CHECK((*done)["duration"].IsNumber());
  CHECK(!done->HasMember("error"));
  REQUIRE(Find(docs, "job_start", works_jid) != nullptr);

  const rapidjson::Document* fail = Find(docs, "job_fail", fails_jid);
  REQUIRE(fail != nullptr);
  CHECK(Text(*fail, "level") == "WARN");
  CHECK(Text(*fail, "class") == "Fails");
  CHECK(Text(*fail, "queue") == "mail");
  REQUIRE(fail->HasMember("duration"));
  CHECK((*fail)["duration"].IsNumber());
  CHECK((*fail)["duration"].GetDouble() >= 0);
  // The error apart from the message, escaped as the text format shows it.
  CHECK(Text(*fail, "error") == "std::runtime_error: bad\\nthing \\x1b[2J");
  CHECK(Text(*fail, "tid").rfind("p", 0) == 0);
  REQUIRE((*fail)["pid"].IsInt());

  const rapidjson::Document* retry = Find(docs, "job_retry", fails_jid);
  REQUIRE(retry != nullptr);
  CHECK(Text(*retry, "class") == "Fails");
  CHECK(Text(*retry, "queue") == "mail");
  CHECK(Text(*retry, "error") == "std::runtime_error: bad\\nthing \\x1b[2J");
}
