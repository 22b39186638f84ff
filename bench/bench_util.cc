#include "bench_util.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <random>
#include <thread>

#include "queue_watch.h"
#include "redis/reply.h"

namespace reliableq::bench {

std::atomic<bool> g_interrupted{false};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double EpochNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// ---------------------------------------------------------------------------
// Flags

std::optional<Flags> Flags::Parse(int argc, char** argv, int first) {
  Flags flags;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i) flags.command_.push_back(argv[i]);
      break;
    }
    if (arg.rfind("--", 0) != 0) {
      std::fprintf(stderr, "reliableq-bench: unexpected argument '%s'\n", arg.c_str());
      return std::nullopt;
    }
    std::string name = arg.substr(2);
    if (name == "single" || name == "shared-client" || name == "unique") {  // no value
      flags.values_[name] = "1";
    } else if (i + 1 < argc) {
      flags.values_[name] = argv[++i];
    } else {
      std::fprintf(stderr, "reliableq-bench: %s needs a value\n", arg.c_str());
      return std::nullopt;
    }
  }
  return flags;
}

std::string Flags::Get(const std::string& name, std::string fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

int64_t Flags::Int(const std::string& name, int64_t fallback, int64_t min) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  char* end = nullptr;
  long long n = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || n < min) {
    std::fprintf(stderr, "reliableq-bench: --%s needs an integer >= %lld\n", name.c_str(),
                 static_cast<long long>(min));
    std::exit(2);
  }
  return n;
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

int Fail(const Status& status, const char* what) {
  std::fprintf(stderr, "reliableq-bench: %s: %s\n", what, status.ToString().c_str());
  return 1;
}

// ---------------------------------------------------------------------------
// Output

JsonLine& JsonLine::Add(const std::string& key, double value) {
  writer_.Key(key.c_str());
  writer_.Double(std::round(value * 1000) / 1000);
  return *this;
}

JsonLine& JsonLine::Add(const std::string& key, int64_t value) {
  writer_.Key(key.c_str());
  writer_.Int64(value);
  return *this;
}

JsonLine& JsonLine::Add(const std::string& key, const std::string& value) {
  writer_.Key(key.c_str());
  writer_.String(value.c_str(), static_cast<rapidjson::SizeType>(value.size()));
  return *this;
}

JsonLine& JsonLine::AddBool(const std::string& key, bool value) {
  writer_.Key(key.c_str());
  writer_.Bool(value);
  return *this;
}

JsonLine& JsonLine::AddPercentiles(const std::string& prefix, std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  double mean = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
  return Add(prefix + "p50_ms", Percentile(ms, 50))
      .Add(prefix + "p90_ms", Percentile(ms, 90))
      .Add(prefix + "p99_ms", Percentile(ms, 99))
      .Add(prefix + "max_ms", ms.back())
      .Add(prefix + "min_ms", ms.front())
      .Add(prefix + "mean_ms", mean);
}

void JsonLine::Print() {
  writer_.EndObject();
  std::printf("%s\n", buffer_.GetString());
  std::fflush(stdout);
}

Progress::Progress() : tty_(::isatty(STDERR_FILENO) != 0) {}

void Progress::Show(const std::string& text, bool force) {
  auto now = Clock::now();
  auto every = tty_ ? milliseconds(200) : milliseconds(2000);
  if (!force && now - last_ < every) return;
  last_ = now;
  if (tty_) {
    std::fprintf(stderr, "\r\033[K  %s", text.c_str());
  } else {
    std::fprintf(stderr, "  %s\n", text.c_str());
  }
  shown_ = true;
}

void Progress::Done() {
  if (tty_ && shown_) std::fprintf(stderr, "\r\033[K");
  shown_ = false;
}

// ---------------------------------------------------------------------------
// Pushes and Redis

Status PushFailure(const Result<PushResult>& pushed) {
  if (!pushed.ok()) return pushed.status();
  if (pushed->stored()) return Status::OK();
  return pushed->reason.WithContext(PushOutcomeName(pushed->outcome));
}

Status PushFailure(const Result<std::vector<PushResult>>& pushed) {
  if (!pushed.ok()) return pushed.status();
  for (const PushResult& one : *pushed) {
    if (!one.stored()) return one.reason.WithContext(PushOutcomeName(one.outcome));
  }
  return Status::OK();
}

namespace {

// The load generator also builds against revisions without queue groups
// (tools/bench --baseline), hence the templates.
template <typename Options>
bool SetGroup(Options* options, const std::string& group) {
  if constexpr (requires { options->group; }) {
    options->group = group;
    return true;
  } else {
    return false;
  }
}
template <typename K, typename Options>
K KeysOf(std::string prefix, const Options& options) {
  if constexpr (requires { K::For(prefix, options); }) {
    return K::For(prefix, options);
  } else {
    return K(std::move(prefix));
  }
}

}  // namespace

Result<RedisOptions> OptionsFrom(const Flags& flags) {
  Result<RedisOptions> options = RedisOptions::FromUrl(flags.Get("redis", ""));
  if (!options.ok()) return options;
  if (std::string group = flags.Get("group", ""); !group.empty() && !SetGroup(&*options, group)) {
    return Status::InvalidArgument("--group: this revision has no queue groups");
  }
  // A 1,000-job bulk push on a loaded two-core machine can take a while.
  options->command_timeout = milliseconds(30000);
  return options;
}

Keys KeysFrom(const Flags& flags, const RedisOptions& options) {
  return KeysOf<Keys>(flags.Get("prefix", "reliableq:"), options);
}

double RedisCpuSeconds(redis::Connection* redis) {
  Result<double> user = ReadInfoField(redis, "cpu", "used_cpu_user");
  Result<double> sys = ReadInfoField(redis, "cpu", "used_cpu_sys");
  return (user.ok() ? *user : 0) + (sys.ok() ? *sys : 0);
}

bool SleepUnlessInterrupted(Clock::duration d) {
  auto until = Clock::now() + d;
  while (!g_interrupted) {
    auto now = Clock::now();
    if (now >= until) return true;
    std::this_thread::sleep_for(std::min<Clock::duration>(until - now, milliseconds(50)));
  }
  return false;
}

double Percentile(const std::vector<double>& sorted, double p) {
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size(), std::max<size_t>(rank, 1)) - 1];
}

std::vector<double> ReadRecords(const std::string& path) {
  std::vector<double> values;
  std::ifstream in(path);
  double v;
  while (in >> v) values.push_back(v);
  return values;
}

std::string RandomJid() {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string jid;
  for (int i = 0; i < 24; ++i) jid.push_back(kHex[generator() % 16]);
  return jid;
}

Result<std::string> FindIdentity(redis::Connection* redis, const Keys& keys, pid_t pid) {
  Result<redis::ReplyPtr> ids = redis->Command({"HKEYS", keys.Registry()});
  if (!ids.ok()) return ids.status();
  const redisReply* reply = ids->get();
  if (reply->type != REDIS_REPLY_ARRAY) {
    return Status::Protocol(std::string("HKEYS answered ") + redis::TypeName(reply));
  }
  // "<host>:<pid>:<hex>": the pid sits between the last two colons, and the
  // host name may hold colons of its own.
  const std::string wanted = ":" + std::to_string(pid) + ":";
  for (size_t i = 0; i < reply->elements; ++i) {
    std::string id(redis::View(reply->element[i]));
    size_t last = id.rfind(':');
    if (last == std::string::npos || last == 0) continue;
    size_t before = id.rfind(':', last - 1);
    if (before != std::string::npos && id.substr(before, last - before + 1) == wanted) return id;
  }
  return Status::NotFound("no registered process with pid " + std::to_string(pid));
}

Result<ClientCount> CountClients(redis::Connection* redis, const std::string& name) {
  ClientCount count;
  Result<double> connected = ReadInfoField(redis, "clients", "connected_clients");
  if (!connected.ok()) return connected.status();
  count.connected = static_cast<int64_t>(*connected);
  if (name.empty()) return count;
  Result<redis::ReplyPtr> list = redis->Command({"CLIENT", "LIST"});
  if (!list.ok()) return list.status();
  Result<std::string> text = redis::ToString(list->get());
  if (!text.ok()) return text.status();
  // Fields are separated by spaces, and a name cannot hold one.
  const std::string field = " name=" + name + " ";
  for (size_t at = text->find(field); at != std::string::npos; at = text->find(field, at + 1)) {
    ++count.named;
  }
  return count;
}

Status WaitReady(redis::Connection* redis, WorkerProcess& worker, const std::string& mode,
                 const Keys& keys, Clock::time_point deadline, Progress& progress) {
  if (mode != "blocked" && mode != "registered" && mode != "idle") {
    return Status::InvalidArgument("--ready takes blocked, registered or idle, not " + mode);
  }
  int64_t last_connected = -1;
  Clock::time_point steady_since{};
  while (true) {
    if (g_interrupted) return Status::Shutdown("interrupted");
    if (!worker.Running())
      return Status::IoError("the worker exited during start-up (see its log)");
    if (Clock::now() > deadline) return Status::Timeout("the worker never became idle");
    if (mode == "registered") {
      Result<redis::ReplyPtr> members = redis->Command({"SCARD", ProcessesKey(keys)});
      if (!members.ok()) return members.status();
      if ((*members)->type == REDIS_REPLY_INTEGER && (*members)->integer >= 1) break;
    } else if (mode == "blocked") {
      Result<double> blocked = ReadInfoField(redis, "clients", "blocked_clients");
      if (!blocked.ok()) return blocked.status();
      if (*blocked >= 1) break;
    } else {
      Result<std::string> identity = FindIdentity(redis, keys, worker.pid());
      if (!identity.ok() && !identity.status().IsNotFound()) return identity.status();
      Result<ClientCount> clients = CountClients(redis, "");
      if (!clients.ok()) return clients.status();
      auto now = Clock::now();
      if (!identity.ok() || clients->connected != last_connected) {
        last_connected = clients->connected;
        steady_since = now;
      } else if (now - steady_since >= milliseconds(1000)) {
        break;
      }
    }
    progress.Show("waiting for the worker to be idle");
    std::this_thread::sleep_for(milliseconds(mode == "idle" ? 50 : 10));
  }
  std::this_thread::sleep_for(milliseconds(500));
  return Status::OK();
}

}  // namespace reliableq::bench
