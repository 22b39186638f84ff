// EventLoop: one libuv loop and the thread that runs it; the layer the
// worker's components are built on. It knows nothing of jobs or Redis.
//
// Ownership follows libuv's rule that a handle's memory may be reused only
// after its close callback ran: the handle types in uv/handles.h close
// themselves when destroyed and free their memory in the close callback, so
// they must be destroyed before their EventLoop, whose destructor runs the
// loop until every close has completed and then checks that uv_loop_close()
// returns 0. A handle still open at that point is a bug: the destructor
// names the handles left and aborts in builds with assertions (every test
// build), so a forgotten handle fails the test that leaked it.
//
// Thread safety: one thread runs the loop and makes every call here, except
// where a call says otherwise.

#ifndef RELIABLEQ_UV_EVENT_LOOP_H_
#define RELIABLEQ_UV_EVENT_LOOP_H_

#include <uv.h>

#include <functional>
#include <memory>

#include "reliableq/status.h"

namespace reliableq::uv {

class EventLoop {
 public:
  // kIoError when libuv cannot create the loop.
  static Result<std::unique_ptr<EventLoop>> Create();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Runs until no active, referenced handle or request is left.
  void Run();

  // Runs `work` on libuv's thread pool, then `done` on the loop thread. The
  // loop stays alive (Run does not return) until `done` has run, so objects
  // `work` uses must outlive the loop's last Run.
  void QueueWork(std::function<void()> work, std::function<void()> done);

  // Runs the loop until every handle closed so far has finished closing,
  // then closes it. OK, or kIoError naming the handles still open
  // (uv_loop_close() returned UV_EBUSY). Called by the destructor; tests
  // call it to assert on the result.
  Status Close();

  uv_loop_t* get() { return &loop_; }

 private:
  EventLoop() = default;
  uv_loop_t loop_;
  bool closed_ = false;
};

}  // namespace reliableq::uv

#endif  // RELIABLEQ_UV_EVENT_LOOP_H_
