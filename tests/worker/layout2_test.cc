// Layout 2 on a single Redis: real worker processes (RELIABLEQ_BIN) serving
// a queue group run every feature through the same code paths as on Redis
// Cluster, and every key they, the client, the admin verbs and the
// dashboard name, in a command or inside a script, is under
// "<prefix>{<group>}:" (or is the directory "<prefix>groups"), so no script
// can ever touch two slots. The commands are read from MONITOR while the
// features run, so a key only read, or written and deleted again, counts
// too.

#include <doctest/doctest.h>
#include <httplib.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "protocol/keys.h"
#include "support/process.h"
#include "reliableq/admin.h"
#include "reliableq/client.h"
#include "support/testutil.h"

using namespace reliableq;
using namespace reliableq::protocol;
using namespace reliableq::testing;
using namespace std::chrono_literals;

namespace {

// The arguments of one MONITOR line as redis-cli prints it
// (`<time> [<db> <client>] "ARG" "ARG" ...`, each argument quoted with
// C-style escapes, \xHH for other bytes); empty for another line.
std::vector<std::string> MonitorArgs(const std::string& line) {
  std::vector<std::string> args;
  size_t at = line.find("] \"");
  if (at == std::string::npos) return args;
  at += 2;
  while (at < line.size() && line[at] == '"') {
    std::string arg;
    for (++at; at < line.size() && line[at] != '"'; ++at) {
      char c = line[at];
      if (c != '\\' || at + 1 >= line.size()) {
        arg += c;
        continue;
      }
      char e = line[++at];
      if (e == 'n')
        arg += '\n';
      else if (e == 'r')
        arg += '\r';
      else if (e == 't')
        arg += '\t';
      else if (e == 'a')
        arg += '\a';
      else if (e == 'b')
        arg += '\b';
      else if (e == 'x' && at + 2 < line.size()) {
        arg += static_cast<char>(std::stoi(line.substr(at + 1, 2), nullptr, 16));
        at += 2;
      } else {
        arg += e;
      }
    }
    args.push_back(std::move(arg));
    at += 2;  // the closing quote and the space
  }
  return args;
}

// Every command the Redis runs while it watches, through `redis-cli
// monitor` (the commands scripts send included).
class CommandWatch {
 public:
  CommandWatch(const std::string& socket_path, const std::string& log)
      : log_(log), process_({FindProgram("redis-cli"), "-s", socket_path, "monitor"}, {}, log) {
    // MONITOR is on once redis-cli printed its OK.
    REQUIRE(WaitUntil([&] { return process_.Log().find("OK") != std::string::npos; }, 5s));
  }
  // Stops watching; the distinct commands seen, each as its arguments.
  std::set<std::vector<std::string>> Stop() {
    process_.Signal(SIGTERM);
    REQUIRE(process_.Wait(5s).has_value());
    std::set<std::vector<std::string>> commands;
    std::ifstream in(log_);
    for (std::string line; std::getline(in, line);) {
      std::vector<std::string> args = MonitorArgs(line);
      if (!args.empty()) commands.insert(std::move(args));
    }
    return commands;
  }

 private:
  std::string log_;
  ChildProcess process_;
};

constexpr const char* kGroup = "eu-1";
constexpr const char* kTag = "reliableq:{eu-1}:";

struct Layout2 : RedisFixture {
  Layout2() {
    char templ[] = "/tmp/rq_layout2_XXXXXX";
    dir_ = mkdtemp(templ);
  }
  ~Layout2() {
    workers_.clear();  // SIGKILLs what still runs
    std::string cmd = "rm -rf '" + dir_ + "'";
    int ignored = std::system(cmd.c_str());
    (void)ignored;
  }

  RedisOptions GroupOptions() const {
    RedisOptions options = RedisServer::Shared().Options();
    options.group = kGroup;
    return options;
  }

  // `reliableq --redis URL --group eu-1 ARGS...`, to completion.
  CommandResult Cli(std::vector<std::string> args) {
    std::vector<std::string> argv = {BuildPath("RELIABLEQ_BIN"), "--redis", server().Url(),
                                     "--group", kGroup};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }

  ChildProcess& StartWorker(std::vector<std::string> extra) {
    std::vector<std::string> argv = {BuildPath("RELIABLEQ_BIN"),
                                     "worker",
                                     "--redis",
                                     server().Url(),
                                     "--group",
                                     kGroup,
                                     "-r",
                                     BuildPath("RELIABLEQ_DEMO_PLUGIN"),
                                     "--heartbeat-ttl",
                                     "2",
                                     "--heartbeat-interval",
                                     "0.25",
                                     "--janitor-interval",
                                     "0.3",
                                     "--poll-interval",
                                     "0.2"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    std::string log = dir_ + "/worker" + std::to_string(workers_.size()) + ".log";
    workers_.push_back(std::make_unique<ChildProcess>(
        argv, std::vector<std::string>{"RELIABLEQ_DEMO_LOG=" + dir_ + "/ran.log"}, log));
    return *workers_.back();
  }

  // The identity of the worker with process id `pid` once it registered.
  std::string IdentityOf(pid_t pid) {
    std::string found;
    WaitUntil(
        [&] {
          for (const std::string& id : SMembers(std::string(kTag) + "processes")) {
            if (id.find(":" + std::to_string(pid) + ":") != std::string::npos) found = id;
          }
          return !found.empty();
        },
        10s);
    return found;
  }

  long long Counter(const std::string& name) {
    std::string value = Get(std::string(kTag) + name);
    return value.empty() ? 0 : std::stoll(value);
  }

  // Every key any of `commands` names (COMMAND GETKEYS, which knows where
  // each command takes its keys, EVALSHA's KEYS included): under the
  // group's tag, or the directory.
  void CheckEveryKeyNamedInTheGroup(const std::set<std::vector<std::string>>& commands) {
    size_t with_keys = 0;
    for (const std::vector<std::string>& command : commands) {
      if (command.size() < 2) continue;  // a command alone names no key
      redis::Argv getkeys = {"COMMAND", "GETKEYS"};
      for (const std::string& arg : command) getkeys.push_back(arg);
      auto keys = redis().Command(getkeys);
      if (!keys.ok()) {
        // A command that names no key; GETKEYS parses every other.
        CHECK_MESSAGE(keys.status().message().find("no key arguments") != std::string::npos,
                      command.front() << ": " << keys.status().ToString());
        continue;
      }
      ++with_keys;
      for (size_t i = 0; i < (*keys)->elements; ++i) {
        std::string key((*keys)->element[i]->str, (*keys)->element[i]->len);
        CHECK_MESSAGE((key.starts_with(kTag) || key == "reliableq:groups"),
                      key << " named by " << command.front());
      }
    }
    CHECK(with_keys > 100);
  }

  // Every key in the whole Redis: under the group's tag, or the directory.
  void CheckEveryKeyInTheGroup() {
    std::vector<std::string> keys;
    std::string cursor = "0";
    do {
      auto reply = redis().Command({"SCAN", cursor, "COUNT", "1000"});
      REQUIRE(reply.ok());
      cursor = redis::View((*reply)->element[0]);
      for (size_t i = 0; i < (*reply)->element[1]->elements; ++i) {
        keys.emplace_back(redis::View((*reply)->element[1]->element[i]));
      }
    } while (cursor != "0");
    REQUIRE(keys.size() > 3);
    for (const std::string& key : keys) {
      CAPTURE(key);
      CHECK((key.starts_with(kTag) || key == "reliableq:groups"));
    }
    CHECK(SMembers("reliableq:groups") == std::vector<std::string>{kGroup});
  }

  std::string dir_;
  std::vector<std::unique_ptr<ChildProcess>> workers_;
};

std::string HttpBody(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(5, 0);
  auto result = client.Get(path.c_str());
  return result && result->status == 200 ? result->body : "";
}

Job MakeJob(const std::string& cls, const std::string& queue, const std::string& args = "[1]") {
  Job job;
  job.job_class = cls;
  job.args = args;
  job.queue = queue;
  return job;
}

}  // namespace

TEST_CASE_FIXTURE(Layout2, "layout 2: every feature of a worker of a group, and only P{G}: keys") {
  const std::string tag = kTag;
  const int port = FreeLoopbackPort();
  CommandWatch watch(server().socket_path(), dir_ + "/monitor.log");
  ChildProcess& worker = StartWorker(
      {"-q", "default", "-q", "mail", "--http", "127.0.0.1:" + std::to_string(port), "--periodic",
       R"(beat={"cron":"* * * * * *","class":"NoopJob","queue":"ticks","args":[1]})", "--limit",
       "api=concurrency=1,classes=RecordJob"});
  const std::string id = IdentityOf(worker.pid());
  REQUIRE_MESSAGE(!id.empty(), worker.Log());
  CHECK(Get(tag + "schema") == "2");

  auto client = Client::Open(GroupOptions(), {});
  REQUIRE(client.ok());
  auto admin = Admin::Open(GroupOptions(), {});
  REQUIRE(admin.ok());

  // A client with a spool pushes with push_once.lua: the record of its jid
  // is the group's too (a queue nobody serves, so no count below moves).
  ClientOptions spooling;
  spooling.spool_dir = dir_ + "/spool-watched";
  auto spooled = Client::Open(GroupOptions(), spooling);
  REQUIRE(spooled.ok());
  CHECK(Exists(tag + "pushed:" + AcceptedJid((*spooled)->Push(MakeJob("NoopJob", "spooled")))));

  // Push and run.
  AcceptedJid((*client)->Push(MakeJob("NoopJob", "default")));
  bool ran = WaitUntil([&] { return Counter("stat:processed") >= 1; }, 10s);
  REQUIRE_MESSAGE(ran, worker.Log());

  // Retry and dead: a failure with retries left waits in the group's
  // retry set, one without goes to its dead set.
  Job retried = MakeJob("FailingJob", "default");
  retried.retry = Retry::Times(3);
  AcceptedJid((*client)->Push(retried));
  Job doomed = MakeJob("FailingJob", "default");
  doomed.retry = Retry::Times(0);
  AcceptedJid((*client)->Push(doomed));
  REQUIRE(WaitUntil([&] { return Integer({"ZCARD", tag + "retry"}) == 1; }, 10s));
  REQUIRE(WaitUntil([&] { return Integer({"ZCARD", tag + "dead"}) == 1; }, 10s));
  CHECK(Counter("stat:failed") == 2);

  // Schedule: due in a second, promoted by the worker's poller and run.
  long long before = Counter("stat:processed");
  AcceptedJid((*client)->PushIn(MakeJob("NoopJob", "default"), 1.0));
  CHECK(Integer({"ZCARD", tag + "schedule"}) == 1);
  REQUIRE(WaitUntil([&] { return Counter("stat:processed") == before + 1; }, 10s));
  CHECK(Integer({"ZCARD", tag + "schedule"}) == 0);

  // Pause, and a unique job that waits in the paused queue.
  // "mail" has had no job yet: paused ahead of it. The group's worker is
  // told on the group's channel, and applies it at once.
  Result<PauseChange> paused = (*admin)->PauseQueue("mail", {.allow_unknown = true});
  REQUIRE(paused.ok());
  CHECK(paused->workers_told == 1);
  Job unique = MakeJob("NoopJob", "mail");
  unique.unique = Uniqueness{.key = "u1"};
  AcceptedJid((*client)->Push(unique));
  auto second = (*client)->Push(unique);
  REQUIRE(second.ok());
  CHECK(second->outcome == PushOutcome::kDuplicate);
  CHECK(Exists(tag + "unique:u1"));
  std::this_thread::sleep_for(1s);
  CHECK(Integer({"LLEN", tag + "queue:mail"}) == 1);
  before = Counter("stat:processed");
  REQUIRE((*admin)->ResumeQueue("mail").ok());
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", tag + "queue:mail"}) == 0; }, 10s));
  REQUIRE(WaitUntil([&] { return !Exists(tag + "unique:u1"); }, 10s));

  // A limit: one RecordJob at a time, the others parked in the group's
  // waiting list meanwhile.
  std::vector<Job> limited(3, MakeJob("RecordJob", "default", R"(["x", 700])"));
  AcceptedJids((*client)->PushBulk(limited));
  bool parked = WaitUntil([&] { return Integer({"LLEN", tag + "limit:api:waiting"}) >= 1; }, 5s);
  CHECK(parked);
  CHECK(Integer({"HLEN", tag + "limit:api"}) <= 1);
  REQUIRE(WaitUntil([&] { return Counter("stat:processed") >= before + 4; }, 15s));
  CHECK(Exists(tag + "limits"));

  // Periodic: the ticks land in the group's queue:ticks, served by nobody.
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", tag + "queue:ticks"}) >= 1; }, 5s));
  CHECK(Exists(tag + "periodic:beat"));

  // The admin verbs read the group.
  CommandResult stats = Cli({"stats", "--json"});
  CHECK(stats.exit_code == 0);
  CHECK(stats.out.find("\"retries\":1") != std::string::npos);
  CHECK(stats.out.find("\"dead\":1") != std::string::npos);
  CHECK(stats.out.find("\"processes\":1") != std::string::npos);
  CommandResult queues = Cli({"queues", "--json"});
  CHECK(queues.out.find("\"name\":\"ticks\"") != std::string::npos);
  CHECK(Cli({"retries", "list", "--json"}).out.find("FailingJob") != std::string::npos);
  CHECK(Cli({"dead", "list", "--json"}).out.find("FailingJob") != std::string::npos);

  // The directory, read by `reliableq groups`.
  CommandResult groups = Cli({"groups", "--json"});
  CHECK(groups.exit_code == 0);
  CHECK(groups.out.find(R"({"name":"eu-1",)") != std::string::npos);
  CHECK(groups.out.find(R"("processes":1,"layout":"2")") != std::string::npos);

  // The dashboard reads the group too: its API, and the cluster's gauges.
  const int web_port = FreeLoopbackPort();
  ChildProcess web({BuildPath("RELIABLEQ_BIN"), "--redis", server().Url(), "--group", kGroup, "web",
                    "--http", "127.0.0.1:" + std::to_string(web_port)},
                   {}, dir_ + "/web.log");
  std::string overview;
  REQUIRE_MESSAGE(WaitUntil(
                      [&] {
                        overview = HttpBody(web_port, "/api/overview");
                        return !overview.empty();
                      },
                      10s),
                  web.Log());
  CHECK(overview.find("\"retries\":1") != std::string::npos);
  CHECK(overview.find("\"dead\":1") != std::string::npos);
  CHECK(HttpBody(web_port, "/api/session").find("\"group\":\"eu-1\"") != std::string::npos);
  web.Signal(SIGTERM);
  CHECK(web.Wait(10s).has_value());

  // The metrics endpoint counts what the group's worker ran.
  std::string metrics = HttpBody(port, "/metrics");
  CHECK(metrics.find("reliableq_jobs_processed_total") != std::string::npos);

  worker.Signal(SIGTERM);
  REQUIRE(worker.Wait(20s).has_value());
  CheckEveryKeyNamedInTheGroup(watch.Stop());
  CheckEveryKeyInTheGroup();
  CHECK_FALSE(Exists("reliableq:schema"));
  // Without the group the same verbs see layout 1's keys: nothing.
  CommandResult plain =
      RunCommand({BuildPath("RELIABLEQ_BIN"), "--redis", server().Url(), "stats", "--json"});
  CHECK(plain.out.find("\"retries\":0") != std::string::npos);
}

TEST_CASE_FIXTURE(Layout2, "layout 2: the dashboard's Busy page and quiet-all read the group") {
  ChildProcess& worker = StartWorker({"-q", "default", "-q", "mail"});
  const std::string id = IdentityOf(worker.pid());
  REQUIRE_MESSAGE(!id.empty(), worker.Log());
  const int web_port = FreeLoopbackPort();
  ChildProcess web({BuildPath("RELIABLEQ_BIN"), "--redis", server().Url(), "--group", kGroup, "web",
                    "--http", "127.0.0.1:" + std::to_string(web_port)},
                   {}, dir_ + "/web.log");
  httplib::Client http("127.0.0.1", web_port);
  http.set_connection_timeout(2, 0);
  http.set_read_timeout(5, 0);
  auto get = [&](const std::string& path) {
    rapidjson::Document doc;
    httplib::Result result = http.Get(path.c_str());
    if (result && result->status == 200) doc.Parse(result->body.data(), result->body.size());
    return doc;
  };
  rapidjson::Document session;
  REQUIRE_MESSAGE(WaitUntil(
                      [&] {
                        session = get("/api/session");
                        return session.IsObject();
                      },
                      10s),
                  web.Log());

  // The process's record is its hash in the group (P{G}:<identity>), not a
  // key named after the identity alone.
  rapidjson::Document busy = get("/api/busy");
  REQUIRE_MESSAGE(busy.IsObject(), web.Log());
  REQUIRE(busy["processes"].Size() == 1);
  const rapidjson::Value& p = busy["processes"][0];
  CHECK(std::string(p["identity"].GetString()) == id);
  const std::string hostname = p["hostname"].GetString();
  CHECK_FALSE(hostname.empty());
  CHECK(id.starts_with(hostname + ":"));
  CHECK(p["pid"].GetInt64() == worker.pid());
  std::vector<std::string> queues;
  for (const auto& q : p["queues"].GetArray()) queues.emplace_back(q.GetString());
  std::sort(queues.begin(), queues.end());
  CHECK(queues == std::vector<std::string>{"default", "mail"});
  CHECK(p["concurrency"].GetInt64() > 0);
  CHECK(p["beat"].IsNumber());
  CHECK_FALSE(p["quiet"].GetBool());

  // Quiet all: every process of the group is signalled, and its record
  // then says it is quiet.
  httplib::Result quieted =
      http.Post("/api/processes/quiet", {{"X-CSRF-Token", session["csrf_token"].GetString()}},
                R"({"all":true})", "application/json");
  REQUIRE(quieted);
  CHECK_MESSAGE(quieted->status == 200, quieted->body);
  CHECK(quieted->body.find("\"signalled\":1") != std::string::npos);
  bool quiet = WaitUntil(
      [&] {
        rapidjson::Document now = get("/api/busy");
        return now.IsObject() && now["processes"].Size() == 1 &&
               now["processes"][0]["quiet"].GetBool() &&
               now["processes"][0]["pid"].GetInt64() == worker.pid();
      },
      10s);
  CHECK_MESSAGE(quiet, worker.Log());

  web.Signal(SIGTERM);
  CHECK(web.Wait(10s).has_value());
  worker.Signal(SIGTERM);
  REQUIRE(worker.Wait(20s).has_value());
  CheckEveryKeyInTheGroup();
}

TEST_CASE_FIXTURE(Layout2,
                  "layout 2: a second worker's janitor recovers the jobs of a SIGKILLed one") {
  const std::string tag = kTag;
  ChildProcess& doomed = StartWorker({"-q", "default"});
  const std::string doomed_id = IdentityOf(doomed.pid());
  REQUIRE(!doomed_id.empty());
  auto client = Client::Open(GroupOptions(), {});
  REQUIRE(client.ok());
  AcceptedJid((*client)->Push(MakeJob("SleepJob", "default", "[60000]")));
  const std::string working = tag + "working:" + doomed_id + ":default";
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", working}) == 1; }, 10s));
  doomed.Signal(SIGKILL);
  REQUIRE(doomed.Wait(5s).has_value());
  // The rescuer serves another queue, so the job it recovers stays queued.
  ChildProcess& rescuer = StartWorker({"-q", "other"});
  REQUIRE(!IdentityOf(rescuer.pid()).empty());
  REQUIRE(WaitUntil([&] { return Integer({"LLEN", tag + "queue:default"}) == 1; }, 20s));
  CHECK(Integer({"LLEN", working}) == 0);
  REQUIRE(WaitUntil([&] { return HGet(tag + "registry", doomed_id).empty(); }, 10s));
  CHECK(LRange(tag + "queue:default").front().find("SleepJob") != std::string::npos);
  rescuer.Signal(SIGTERM);
  REQUIRE(rescuer.Wait(20s).has_value());
  CheckEveryKeyInTheGroup();
}

TEST_CASE_FIXTURE(Layout2, "layout 2: a bad group, or a prefix with braces beside one, exits 2") {
  for (std::vector<std::string> args : {std::vector<std::string>{"--group", "a b"},
                                        {"--group", std::string(65, 'g')},
                                        {"--group", "g", "--prefix", "rq{x}:"}}) {
    std::vector<std::string> argv = {BuildPath("RELIABLEQ_BIN"), "--redis", server().Url()};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"worker", "-r", BuildPath("RELIABLEQ_DEMO_PLUGIN"), "-q", "x"});
    CommandResult result = RunCommand(argv);
    CAPTURE(result.err);
    CHECK(result.exit_code == 2);
    CHECK(std::count(result.err.begin(), result.err.end(), '\n') == 1);
  }
  CHECK(Snapshot().empty());
}

TEST_CASE_FIXTURE(Layout2, "groups: a long name stays whole, and an unreadable group its own row") {
  // Anyone may write the directory: a name far past any column, with
  // multi-byte characters and a control character; a group whose queues key
  // is a STRING (WRONGTYPE); and a group that reads well.
  std::string long_name;
  for (int i = 0; i < 150; ++i) long_name += "\xc3\xa9";  // é, 300 bytes
  long_name += "\x1b[31m-end";
  Run({"SADD", "reliableq:groups", "eu-1", "x", long_name});
  Run({"SET", "reliableq:{eu-1}:schema", "2"});
  Run({"SADD", "reliableq:{eu-1}:queues", "default"});
  Run({"RPUSH", "reliableq:{eu-1}:queue:default", "a", "b"});
  Run({"SET", "reliableq:{x}:queues", "not a set"});
  auto groups = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = {BuildPath("RELIABLEQ_BIN"), "--redis", server().Url(),
                                     "groups"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunCommand(argv);
  };

  CommandResult text = groups({});
  CAPTURE(text.out);
  CAPTURE(text.err);
  CHECK(text.exit_code == 1);
  CHECK(std::count(text.err.begin(), text.err.end(), '\n') == 1);
  CHECK(text.err.find("1 of 3 groups could not be read (x)") != std::string::npos);
  std::vector<std::string> lines;
  for (size_t at = 0; at < text.out.size();) {
    size_t end = text.out.find('\n', at);
    REQUIRE(end != std::string::npos);  // every row ends its line
    lines.push_back(text.out.substr(at, end - at));
    at = end + 1;
  }
  REQUIRE(lines.size() == 4);  // the heading and one line per group
  CHECK(lines[1].starts_with("eu-1 "));
  CHECK(lines[1].ends_with(" 2          0  2"));
  CHECK(lines[2].starts_with("x "));
  CHECK(lines[2].find("error: ") != std::string::npos);
  CHECK(lines[2].find("reliableq:{x}:queues") != std::string::npos);
  CHECK(lines[2].find("WRONGTYPE") != std::string::npos);
  // The long name whole, its escape sequence shown, not sent.
  CHECK(lines[3].starts_with(long_name.substr(0, long_name.size() - 9) + "\\x1b[31m-end "));
  CHECK(lines[3].ends_with(" 0          0  none"));
  CHECK(text.out.find('\x1b') == std::string::npos);

  CommandResult json = groups({"--json"});
  CAPTURE(json.out);
  CHECK(json.exit_code == 1);
  rapidjson::Document doc;
  doc.Parse(json.out.data(), json.out.size());
  REQUIRE_FALSE(doc.HasParseError());
  const rapidjson::Value& rows = doc["groups"];
  REQUIRE(rows.Size() == 3);
  CHECK(std::string(rows[0]["name"].GetString()) == "eu-1");
  CHECK(rows[0]["queued"].GetInt64() == 2);
  CHECK(rows[0]["error"].IsNull());
  CHECK(std::string(rows[1]["name"].GetString()) == "x");
  CHECK(rows[1]["queued"].IsNull());
  CHECK(rows[1]["processes"].IsNull());
  REQUIRE(rows[1]["error"].IsString());
  CHECK(std::string(rows[1]["error"].GetString()).find("WRONGTYPE") != std::string::npos);
  CHECK(std::string(rows[2]["name"].GetString()) == long_name);
  CHECK(rows[2]["error"].IsNull());

  // With the bad key fixed, every group is read: exit 0.
  Run({"DEL", "reliableq:{x}:queues"});
  CHECK(groups({}).exit_code == 0);
}

TEST_CASE_FIXTURE(Layout2, "layout 2: a spooled push drains into the group's queue") {
  RedisOptions away;
  away.host = "127.0.0.1";
  away.port = FreeLoopbackPort();  // nobody listens: the push is spooled
  away.connect_timeout = 300ms;
  away.group = kGroup;
  ClientOptions options;
  options.spool_dir = dir_ + "/spool";
  {
    auto client = Client::Open(away, options);
    REQUIRE(client.ok());
    auto pushed = (*client)->Push(MakeJob("NoopJob", "default"));
    REQUIRE(pushed.ok());
    CHECK(pushed->outcome == PushOutcome::kSpooled);
  }
  CommandResult drained = Cli({"spool", "drain", dir_ + "/spool"});
  CAPTURE(drained.err);
  CHECK(drained.exit_code == 0);
  CHECK(Integer({"LLEN", std::string(kTag) + "queue:default"}) == 1);
  CHECK(SMembers(std::string(kTag) + "queues") == std::vector<std::string>{"default"});
  CHECK_FALSE(Exists("queue:default"));
}
