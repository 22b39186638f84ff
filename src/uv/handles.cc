#include "uv/handles.h"

#include <algorithm>

namespace reliableq::uv {

namespace {

// Every handle here is one of these; the libuv handle's `data` points back
// at its block, which the close callback frees.
template <typename UvHandle, typename Callback>
struct Block {
  UvHandle uv;
  Callback callback;
  // Set by Close: the callback is never called again, but it is destroyed
  // only with the block, in the close callback, since Close may run inside
  // it and its captures must live until it returns.
  bool closed = false;
};

template <typename B>
void CloseBlock(B*& block) {
  if (block == nullptr) return;
  block->closed = true;
  uv_close(reinterpret_cast<uv_handle_t*>(&block->uv),
           [](uv_handle_t* h) { delete static_cast<B*>(h->data); });
  block = nullptr;
}

}  // namespace

struct Timer::Handle : Block<uv_timer_t, std::function<void()>> {};
struct Wakeup::Handle : Block<uv_async_t, std::function<void()>> {};
struct SignalWatch::Handle : Block<uv_signal_t, std::function<void(int)>> {};

Timer::Timer(EventLoop& loop, std::function<void()> on_fire) : handle_(new Handle) {
  handle_->callback = std::move(on_fire);
  uv_timer_init(loop.get(), &handle_->uv);  // cannot fail for a valid loop
  handle_->uv.data = handle_;
}

void Timer::Start(std::chrono::milliseconds delay, std::chrono::milliseconds repeat) {
  if (handle_ == nullptr) return;
  // Never due at once: libuv runs the timers whose time is at or before the
  // loop's cached time in one pass, and a timer its own callback starts
  // again at 0 ms is due again within that pass, so a callback that keeps
  // doing so (a call that fails at once, tried again) would hold the loop in
  // its timer phase for good: no I/O, no signal, no other handle.
  delay = std::max(delay, kMinDelay);
  uv_timer_start(
      &handle_->uv,
      [](uv_timer_t* t) {
        auto* self = static_cast<Handle*>(t->data);
        if (!self->closed) self->callback();
      },
      static_cast<uint64_t>(delay.count()),
      static_cast<uint64_t>(std::max<int64_t>(0, repeat.count())));
}

void Timer::Stop() {
  if (handle_ != nullptr) uv_timer_stop(&handle_->uv);
}

bool Timer::active() const {
  return handle_ != nullptr && uv_is_active(reinterpret_cast<const uv_handle_t*>(&handle_->uv));
}

void Timer::Close() { CloseBlock(handle_); }

Wakeup::Wakeup(EventLoop& loop, std::function<void()> on_wake) : handle_(new Handle) {
  handle_->callback = std::move(on_wake);
  uv_async_init(loop.get(), &handle_->uv, [](uv_async_t* a) {
    auto* self = static_cast<Handle*>(a->data);
    if (!self->closed) self->callback();
  });
  handle_->uv.data = handle_;
}

void Wakeup::Send() {
  Handle* handle = handle_;
  if (handle != nullptr) uv_async_send(&handle->uv);
}

void Wakeup::Unref() {
  if (handle_ != nullptr) uv_unref(reinterpret_cast<uv_handle_t*>(&handle_->uv));
}

void Wakeup::Close() { CloseBlock(handle_); }

SignalWatch::SignalWatch(EventLoop& loop, int signum, std::function<void(int)> on_signal)
    : handle_(new Handle) {
  handle_->callback = std::move(on_signal);
  uv_signal_init(loop.get(), &handle_->uv);
  handle_->uv.data = handle_;
  uv_signal_start(&handle_->uv, [](uv_signal_t* s, int signum) {
    auto* self = static_cast<Handle*>(s->data);
    if (!self->closed) self->callback(signum);
  }, signum);
}

void SignalWatch::Close() { CloseBlock(handle_); }

}  // namespace reliableq::uv
