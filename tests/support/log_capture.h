// Log lines a test reads back: a LogSink that keeps each line. The sink may
// be called from several threads (the loop and the processor threads) while
// the test reads, so every access takes the lock.

#ifndef RELIABLEQ_TESTS_LOG_CAPTURE_H_
#define RELIABLEQ_TESTS_LOG_CAPTURE_H_

#include <algorithm>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "reliableq/logging.h"

namespace reliableq {

class LogCapture {
 public:
  // The sink refers to this capture: keep it alive while a logger may write
  // (a shared_ptr when a server outlives the test's scope).
  LogSink Sink() {
    return [this](LogLevel, std::string_view line) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.emplace_back(line);
    };
  }

  // A copy of the lines so far, in order.
  std::vector<std::string> Lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

  // How many lines so far contain `what`.
  long Count(std::string_view what) {
    std::lock_guard<std::mutex> lock(mu_);
    return std::count_if(lines_.begin(), lines_.end(), [&](const std::string& line) {
      return line.find(what) != std::string::npos;
    });
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

}  // namespace reliableq

#endif  // RELIABLEQ_TESTS_LOG_CAPTURE_H_
