// StallProxy: a unix-socket proxy in front of a Redis server that a test can
// stall, to cut a worker off from Redis the way a partition does: every
// connection stays open at both ends (Redis still lists the worker's
// clients, the worker sees no error), and no byte crosses either way until
// the test resumes it.
//
// Thread safety: Stall, StallAfter and Resume from any thread, StallAfter
// once at a time; the forwarding runs on a
// thread of its own.

#ifndef RELIABLEQ_TESTS_STALL_PROXY_H_
#define RELIABLEQ_TESTS_STALL_PROXY_H_

#include <atomic>
#include <string>
#include <thread>

namespace reliableq::testing {

class StallProxy {
 public:
  // Listens on `listen_path` and forwards each connection to the unix
  // socket `upstream_path`. Aborts the test binary when it cannot listen.
  StallProxy(std::string listen_path, std::string upstream_path);
  ~StallProxy();
  StallProxy(const StallProxy&) = delete;
  StallProxy& operator=(const StallProxy&) = delete;

  const std::string& path() const { return listen_path_; }
  // From now on nothing is read or written on any connection, and new ones
  // are accepted but not forwarded.
  void Stall() { stalled_ = true; }
  void Resume() { stalled_ = false; }
  // Stalls as soon as a client has sent bytes holding `needle` (after they
  // are passed on): a process held exactly after the command that names
  // it, before the next one.
  void StallAfter(std::string needle);
  bool stalled() const { return stalled_; }

 private:
  void Run();

  std::string listen_path_;
  std::string upstream_path_;
  int listen_fd_ = -1;
  std::atomic<bool> stalled_{false};
  // Set before armed_, read after it.
  std::string needle_;
  std::atomic<bool> armed_{false};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace reliableq::testing

#endif  // RELIABLEQ_TESTS_STALL_PROXY_H_
