// A program that uses reliableq the way a C++ team would, through the
// installed public headers only: it pushes one job to the Redis at argv[1]
// (a URL), runs a Server with one handler until that job ran, and exits 0
// only if the handler saw the job's jid and args. tests/package/consumer/check.py
// builds it against an installed tree with CMake and with pkg-config.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "reliableq/reliableq.h"

namespace {

constexpr char kQueue[] = "consumer";
constexpr char kJobClass[] = "ConsumerJob";
// Besides the exact job (its jid), its args must arrive intact.
constexpr char kArgs[] = R"(["installed", 42])";
constexpr auto kGiveUpAfter = std::chrono::seconds(30);

bool ArgsAreExpected(const rapidjson::Value& args) {
  return args.IsArray() && args.Size() == 2 && args[0].IsString() &&
         std::string(args[0].GetString()) == "installed" && args[1].IsInt() &&
         args[1].GetInt() == 42;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s REDIS_URL\n", argv[0]);
    return 2;
  }
  reliableq::Result<reliableq::RedisOptions> redis = reliableq::RedisOptions::FromUrl(argv[1]);
  if (!redis.ok()) {
    std::fprintf(stderr, "consumer: %s\n", redis.status().ToString().c_str());
    return 1;
  }

  auto client = reliableq::Client::Open(*redis);
  if (!client.ok()) {
    std::fprintf(stderr, "consumer: client: %s\n", client.status().ToString().c_str());
    return 1;
  }
  reliableq::Job job;
  job.job_class = kJobClass;
  job.args = kArgs;
  job.queue = kQueue;
  reliableq::Result<reliableq::PushResult> pushed = (*client)->Push(job);
  if (!pushed.ok() || !pushed->stored()) {
    std::fprintf(stderr, "consumer: push failed: %s\n",
                 pushed.ok() ? pushed->reason.ToString().c_str()
                             : pushed.status().ToString().c_str());
    return 1;
  }
  const std::string jid = pushed->jid;

  // Set by the handler, on a processor thread, before it asks for the stop.
  std::atomic<bool> ran{false};
  std::atomic<bool> args_ok{false};
  std::atomic<reliableq::Server*> running{nullptr};
  reliableq::HandlerRegistry registry;
  registry.Register(kJobClass, [&](const reliableq::JobView& view) {
    args_ok = view.jid() == jid && ArgsAreExpected(view.args());
    ran = true;
    if (reliableq::Server* server = running.load()) server->Stop();
  });

  reliableq::ServerOptions options;
  options.redis = *redis;
  options.queues = {{kQueue, 0}};
  options.concurrency = 1;
  auto server = reliableq::Server::Open(options, std::move(registry));
  if (!server.ok()) {
    std::fprintf(stderr, "consumer: server: %s\n", server.status().ToString().c_str());
    return 1;
  }
  // Set before Run: no handler runs before it.
  running = server->get();
  // A job that never comes must not hang the test: a watchdog stops the
  // server after kGiveUpAfter.
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    const auto deadline = std::chrono::steady_clock::now() + kGiveUpAfter;
    while (!done && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!done) (*server)->Stop();
  });
  reliableq::Status status = (*server)->Run();
  done = true;
  watchdog.join();

  if (!status.ok()) {
    std::fprintf(stderr, "consumer: run: %s\n", status.ToString().c_str());
    return 1;
  }
  if (!ran) {
    std::fprintf(stderr, "consumer: job %s did not run within %lld s\n", jid.c_str(),
                 static_cast<long long>(kGiveUpAfter.count()));
    return 1;
  }
  if (!args_ok) {
    std::fprintf(stderr, "consumer: the handler saw another job or other args\n");
    return 1;
  }
  std::printf("consumer: job %s ran with its args\n", jid.c_str());
  return 0;
}
