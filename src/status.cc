#include "reliableq/status.h"

namespace reliableq {

namespace {

const char* CodeName(Status::Code code) {
  switch (code) {
    case Status::Code::kOk: return "OK";
    case Status::Code::kNotFound: return "Not found";
    case Status::Code::kInvalidArgument: return "Invalid argument";
    case Status::Code::kIoError: return "IO error";
    case Status::Code::kTimeout: return "Timeout";
    case Status::Code::kProtocol: return "Protocol error";
    case Status::Code::kCorruption: return "Corruption";
    case Status::Code::kScript: return "Redis error";
    case Status::Code::kShutdown: return "Shutdown";
    case Status::Code::kRefused: return "Refused";
  }
  return "Unknown";
}

}  // namespace

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace reliableq
