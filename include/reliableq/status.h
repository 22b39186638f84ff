// Status and Result<T>: how every fallible call in the public API reports.
//
// A Status is either OK or carries a code and a one-line, human-readable
// message. An OK Status holds no message and costs no allocation. Result<T>
// is a value of T or a non-OK Status, never both.
//
// Thread safety: values, no shared state; safe to copy across threads.

#ifndef RELIABLEQ_STATUS_H_
#define RELIABLEQ_STATUS_H_

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace reliableq {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kNotFound,         // a job, key or entry that was asked for is not there
    kInvalidArgument,  // the caller's input is wrong; nothing was written
    kIoError,          // the connection to Redis failed or broke
    kTimeout,          // Redis did not answer within the configured timeout
    kProtocol,         // Redis answered something this code did not expect
    kCorruption,       // a stored payload is not valid job JSON
    kScript,           // Redis returned an error reply (script or command)
    kShutdown,         // the component is stopping or stopped
    kRefused,          // a rule refused the request (a client middleware stopped a
                       // push); the same request is refused again
  };

  // An OK status.
  Status() = default;

  static Status OK() { return Status(); }
  static Status NotFound(std::string msg) { return {Code::kNotFound, std::move(msg)}; }
  static Status InvalidArgument(std::string msg) {
    return {Code::kInvalidArgument, std::move(msg)};
  }
  static Status IoError(std::string msg) { return {Code::kIoError, std::move(msg)}; }
  static Status Timeout(std::string msg) { return {Code::kTimeout, std::move(msg)}; }
  static Status Protocol(std::string msg) { return {Code::kProtocol, std::move(msg)}; }
  static Status Corruption(std::string msg) { return {Code::kCorruption, std::move(msg)}; }
  static Status Script(std::string msg) { return {Code::kScript, std::move(msg)}; }
  static Status Shutdown(std::string msg) { return {Code::kShutdown, std::move(msg)}; }
  static Status Refused(std::string msg) { return {Code::kRefused, std::move(msg)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  bool IsNotFound() const { return code_ == Code::kNotFound; }
  bool IsInvalidArgument() const { return code_ == Code::kInvalidArgument; }
  bool IsIoError() const { return code_ == Code::kIoError; }
  bool IsTimeout() const { return code_ == Code::kTimeout; }
  bool IsCorruption() const { return code_ == Code::kCorruption; }
  bool IsScript() const { return code_ == Code::kScript; }
  bool IsShutdown() const { return code_ == Code::kShutdown; }
  bool IsRefused() const { return code_ == Code::kRefused; }

  // True for the errors after which a new connection may succeed
  // (kIoError, kTimeout).
  bool IsRetryable() const { return code_ == Code::kIoError || code_ == Code::kTimeout; }

  // The message alone, without the code name.
  const std::string& message() const { return message_; }

  // "OK", or "<code name>: <message>", e.g. "IO error: connection refused".
  std::string ToString() const;

  // The same status with "context: " put in front of the message.
  Status WithContext(const std::string& context) const;

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {
    assert(code != Code::kOk);
  }

  Code code_ = Code::kOk;
  std::string message_;
};

// A value of T, or the non-OK Status that says why there is none.
template <typename T>
class Result {
 public:
  // Implicit on purpose, so that `return value;` and `return status;` both work.
  Result(T value) : value_(std::move(value)) {}           // NOLINT
  Result(Status status) : status_(std::move(status)) {    // NOLINT
    assert(!status_.ok() && "a Result made from a Status needs an error");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // Precondition for all four: ok().
  T& value() & { assert(ok()); return *value_; }
  const T& value() const& { assert(ok()); return *value_; }
  T&& value() && { assert(ok()); return std::move(*value_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace reliableq

#endif  // RELIABLEQ_STATUS_H_
