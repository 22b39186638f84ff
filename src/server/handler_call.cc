#include "server/handler_call.h"

#include <cxxabi.h>

#include <cstdlib>
#include <exception>
#include <functional>
#include <typeinfo>

namespace reliableq::server {

namespace {

std::string Demangle(const char* name) {
  int status = 0;
  char* readable = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && readable != nullptr ? readable : name;
  std::free(readable);
  return out;
}

}  // namespace

HandlerEnding CallHandler(const Handler& handler, const std::vector<ServerMiddleware>& middleware,
                          const JobView& view) {
  HandlerEnding ending;
  try {
    if (middleware.empty()) {
      handler(view);
    } else {
      std::function<void(size_t)> call = [&](size_t i) {
        if (i == middleware.size()) {
          handler(view);
        } else {
          middleware[i](view, [&call, i] { call(i + 1); });
        }
      };
      call(0);
    }
  } catch (const JobSnooze& e) {
    ending.snooze = e.delay();
  } catch (const JobFailure& e) {
    ending.error.error_class =
        e.error_class().empty() ? Demangle(typeid(e).name()) : e.error_class();
    ending.error.message = e.what();
    ending.backtrace = e.backtrace();
    ending.then = e.then();
  } catch (const std::exception& e) {
    ending.error.error_class = Demangle(typeid(e).name());
    ending.error.message = e.what();
  } catch (...) {
    std::type_info* type = abi::__cxa_current_exception_type();
    ending.error.error_class = type != nullptr ? Demangle(type->name()) : "unknown exception";
    ending.error.message = "a non-standard exception was thrown";
  }
  return ending;
}

}  // namespace reliableq::server
