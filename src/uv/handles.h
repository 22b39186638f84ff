// RAII libuv handles for the worker's loop: Timer, Wakeup (uv_async_t) and
// SignalWatch (uv_signal_t).
//
// Each allocates its libuv handle on the heap, closes it when destroyed (or
// on Close()) and frees it in the close callback, as libuv requires. The
// callback given at construction is never called after Close() or the
// destructor. Destroy handles before their EventLoop (see event_loop.h).
//
// Thread safety: loop thread only, except Wakeup::Send.

#ifndef RELIABLEQ_UV_HANDLES_H_
#define RELIABLEQ_UV_HANDLES_H_

#include <uv.h>

#include <chrono>
#include <functional>

#include "uv/event_loop.h"

namespace reliableq::uv {

// A one-shot or repeating timer on the loop's clock.
class Timer {
 public:
  Timer(EventLoop& loop, std::function<void()> on_fire);
  ~Timer() { Close(); }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // The shortest delay Start arms: a shorter one, 0 included, is taken as
  // this, so that the loop turns (polls I/O, runs signals and other
  // handles) before the timer fires again.
  static constexpr std::chrono::milliseconds kMinDelay{1};

  // (Re)starts: fires after `delay` (at least kMinDelay), then every
  // `repeat` when that is not 0.
  void Start(std::chrono::milliseconds delay,
             std::chrono::milliseconds repeat = std::chrono::milliseconds(0));
  void Stop();
  bool active() const;
  void Close();

 private:
  struct Handle;
  Handle* handle_;  // null once closed; freed in its close callback
};

// Wakes the loop from any thread, or from a signal handler: Send() calls
// uv_async_send, which libuv documents as safe from both. Sends made before
// the loop looks are coalesced into one call of `on_wake`.
class Wakeup {
 public:
  Wakeup(EventLoop& loop, std::function<void()> on_wake);
  ~Wakeup() { Close(); }
  Wakeup(const Wakeup&) = delete;
  Wakeup& operator=(const Wakeup&) = delete;

  // Any thread, any time between construction and Close(); async-signal-safe.
  void Send();
  // An unreferenced wake-up does not keep EventLoop::Run from returning.
  void Unref();
  void Close();

 private:
  struct Handle;
  Handle* handle_;
};

// Calls `on_signal` on the loop thread when the process gets `signum`, in
// place of the signal's default action, until Close().
class SignalWatch {
 public:
  SignalWatch(EventLoop& loop, int signum, std::function<void(int signum)> on_signal);
  ~SignalWatch() { Close(); }
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  void Close();

 private:
  struct Handle;
  Handle* handle_;
};

}  // namespace reliableq::uv

#endif  // RELIABLEQ_UV_HANDLES_H_
