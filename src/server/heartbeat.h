// Heartbeat: this process's liveness and its records, written by one script
// (heartbeat.lua) every heartbeat_interval and whenever the shell asks: the
// heartbeat key with its ttl (its value: the id of the command connection
// the beat is sent on), the registry entry a janitor finds its working
// lists and connections by, Sidekiq's process hash and work hashes, and the
// pop of one remote signal.
//
// Invariant it keeps: a beat is never sent while another is on its way (a
// request meanwhile sends one more when the reply is in), so the published
// client ids and the lease always describe the latest beat Redis confirmed.
// After Stop() nothing is sent, so a stopped process is never registered
// again once it unregistered itself.
//
// Thread safety: loop thread only.

#ifndef RELIABLEQ_SERVER_HEARTBEAT_H_
#define RELIABLEQ_SERVER_HEARTBEAT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "protocol/keys.h"
#include "base/log.h"
#include "redis/async_connection.h"
#include "reliableq/clock.h"
#include "server/worker_jobs.h"
#include "uv/handles.h"

namespace reliableq::server {

// What a beat says about this process, besides its fixed description.
struct BeatSnapshot {
  // Every queue served now, by index: the description's, then those a
  // namespace added (the registry entry must name each working list).
  std::vector<std::string> queues;
  std::vector<int64_t> clients;  // ids of the connections that may move jobs
  std::string clients_run;       // the server run that gave out all of them
  std::vector<RunningJob> running;
  bool quiet = false;
};

// Who this process is, as its records show it.
struct ProcessDescription {
  std::string identity;
  std::string hostname;
  int64_t pid = 0;
  std::string tag;
  std::vector<std::string> labels;
  int concurrency = 0;
  std::vector<std::string> queues;  // names, in the worker's order
};

class Heartbeat {
 public:
  // What a confirmed beat found.
  enum class Found {
    kFirst,            // the first confirmed beat: the process is registered
    kAlive,            // a beat of a registered process
    kDeclaredDead,     // the key was gone: a janitor may have taken its jobs
  };
  struct Events {
    std::function<BeatSnapshot()> snapshot;
    // After each confirmed beat: what it found, the signal it popped (empty
    // when none), and until when (on the clock's Monotonic()) no janitor
    // can have declared this process dead as long as one of the connections
    // the beat published stays open (once they are all gone, a janitor may
    // recover the process at once: recovery.h).
    std::function<void(Found found, const std::string& signal,
                       std::chrono::steady_clock::time_point lease_until)>
        on_beat;
  };

  Heartbeat(uv::EventLoop& loop, redis::AsyncConnection& command, const protocol::Keys& keys,
            ProcessDescription self, std::chrono::milliseconds ttl,
            std::chrono::milliseconds interval, const Clock& clock, const base::Logger& log,
            Events events);

  // Beats every interval from now on, and records the start time.
  void Start();
  // Sends a beat now, or once the one on its way is answered.
  void Beat();
  // The command connection broke: the beat on its way is lost.
  void OnConnectionLost() { in_flight_ = false; }
  // No beat is sent any more.
  void Stop();

  bool registered() const { return registered_; }
  // Whether the last confirmed beat published this client id.
  bool Published(int64_t client_id) const { return published_.count(client_id) > 0; }
  // How many of the snapshot's queues the last confirmed beat listed.
  size_t published_queues() const { return published_queues_; }
  int64_t rtt_us() const { return rtt_us_; }

 private:
  void OnReply(const Status& status, redis::ReplyRef reply, std::set<int64_t> published,
               size_t queue_count,
               std::chrono::steady_clock::time_point sent_at);
  std::string InfoJson(const std::vector<std::string>& queues) const;

  redis::AsyncConnection& command_;
  const protocol::Keys& keys_;
  const ProcessDescription self_;
  const std::chrono::milliseconds ttl_;
  const std::chrono::milliseconds interval_;
  const Clock& clock_;
  const base::Logger& log_;
  Events events_;
  uv::Timer timer_;

  double started_at_ = 0;
  bool stopped_ = false;
  bool registered_ = false;
  bool in_flight_ = false;
  bool again_ = false;
  std::set<int64_t> published_;
  size_t published_queues_ = 0;
  int64_t rtt_us_ = 0;
};

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_HEARTBEAT_H_
