#include "uv/event_loop.h"

#include <cassert>
#include <cstdio>
#include <string>
#include <vector>

namespace reliableq::uv {

namespace {

struct WorkRequest {
  uv_work_t request;
  std::function<void()> work;
  std::function<void()> done;
};

}  // namespace

Result<std::unique_ptr<EventLoop>> EventLoop::Create() {
  std::unique_ptr<EventLoop> loop(new EventLoop());
  int rc = uv_loop_init(&loop->loop_);
  if (rc != 0) {
    loop->closed_ = true;
    return Status::IoError(std::string("cannot create the event loop: ") + uv_strerror(rc));
  }
  return loop;
}

EventLoop::~EventLoop() {
  Status closed = Close();
  if (!closed.ok()) {
    std::fprintf(stderr, "reliableq: %s\n", closed.ToString().c_str());
    uv_print_all_handles(&loop_, stderr);
    // A handle left open is a bug in the code that owns it; tests run with
    // assertions, so it fails the test that leaked it. Without them the
    // loop's memory is left as it is rather than freed under libuv.
    assert(false && "event loop closed with handles still open");
  }
}

void EventLoop::Run() { uv_run(&loop_, UV_RUN_DEFAULT); }

void EventLoop::QueueWork(std::function<void()> work, std::function<void()> done) {
  auto* request = new WorkRequest{{}, std::move(work), std::move(done)};
  request->request.data = request;
  int rc = uv_queue_work(
      &loop_, &request->request,
      [](uv_work_t* r) { static_cast<WorkRequest*>(r->data)->work(); },
      [](uv_work_t* r, int) {
        std::unique_ptr<WorkRequest> owned(static_cast<WorkRequest*>(r->data));
        owned->done();
      });
  // uv_queue_work fails only for a null callback, which cannot happen here;
  // should it ever, the work still runs, on the loop thread.
  if (rc != 0) {
    std::unique_ptr<WorkRequest> owned(request);
    owned->work();
    owned->done();
  }
}

Status EventLoop::Close() {
  if (closed_) return Status::OK();
  // Closing handles finish on the next turn; a loop with nothing active
  // returns at once.
  uv_run(&loop_, UV_RUN_DEFAULT);
  int rc = uv_loop_close(&loop_);
  if (rc == 0) {
    closed_ = true;
    return Status::OK();
  }
  std::vector<std::string> open;
  uv_walk(
      &loop_,
      [](uv_handle_t* handle, void* names) {
        static_cast<std::vector<std::string>*>(names)->push_back(
            uv_handle_type_name(uv_handle_get_type(handle)));
      },
      &open);
  std::string list;
  for (const std::string& name : open) list += (list.empty() ? "" : ", ") + name;
  return Status::IoError("event loop closed with " + std::to_string(open.size()) +
                         " handles still open (" + list + "; " + uv_err_name(rc) + ")");
}

}  // namespace reliableq::uv
