// The checks ServerOptions must pass before a Server opens, and the limits
// they enforce. Pure. reliableq(1) documents the limits with the worker's
// options; `reliableq worker` checks them before it loads anything.

#ifndef RELIABLEQ_SERVER_OPTIONS_CHECK_H_
#define RELIABLEQ_SERVER_OPTIONS_CHECK_H_

#include <chrono>
#include <cstddef>

#include "reliableq/job.h"  // kMaxQueueNameBytes, CheckQueueName
#include "reliableq/server.h"
#include "reliableq/status.h"

namespace reliableq::server {

// Processor threads. Each is a thread with its own stack; Sidekiq advises
// far fewer (its default is 5, and it warns above 50).
inline constexpr int kMaxConcurrency = 1000;
// Queues. A worker's connections do not grow with them, but a fetch looks
// at every queue in one script call (and the idle wake-up subscribes two
// channels per queue): this bounds how long Redis spends in one call.
inline constexpr size_t kMaxQueues = 1000;
// A queue's weight: each weighted fetch shuffles sum-of-weights entries.
inline constexpr int kMaxQueueWeight = 1000;
// The bytes of the key prefix. It is also part of the connections' CLIENT
// SETNAME, which Redis refuses outside printable ASCII.
inline constexpr size_t kMaxPrefixBytes = 128;
// The bytes of the tag and of each label, and the number of labels: they
// are written with every heartbeat.
inline constexpr size_t kMaxTagBytes = 256;
inline constexpr size_t kMaxLabels = 100;
// Every duration: the shutdown timeout, the heartbeat ttl and interval,
// the janitor and poll intervals, the idle block timeout and the Redis
// connect and command timeouts. Far beyond any sensible setting, far below
// what overflows a deadline on the clock.
inline constexpr std::chrono::milliseconds kMaxDuration = std::chrono::hours(24);
// How long the dead set keeps a job (Sidekiq's default is 180 days).
inline constexpr std::chrono::seconds kMaxDeadTimeout = std::chrono::hours(24 * 365 * 10);
// A job record's retention (JobRecords), and the bounds of its size.
inline constexpr std::chrono::seconds kMaxRecordRetention = std::chrono::hours(24 * 365);
inline constexpr size_t kMinRecordBytes = 256;
inline constexpr size_t kMaxRecordBytes = 1024 * 1024;

// OK, or kInvalidArgument with a one-line message that names the option at
// fault and its limit.
Status CheckServerOptions(const ServerOptions& options);

}  // namespace reliableq::server

#endif  // RELIABLEQ_SERVER_OPTIONS_CHECK_H_
