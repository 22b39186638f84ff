// ScriptCall: one run of an embedded script, with its KEYS and ARGV. Built
// by the functions of script_calls.h, one per script, and run by
// Connection::Eval or AsyncConnection::Eval.

#ifndef RELIABLEQ_REDIS_SCRIPT_CALL_H_
#define RELIABLEQ_REDIS_SCRIPT_CALL_H_

#include <string>
#include <vector>

#include "lua_scripts.h"

namespace reliableq {

struct ScriptCall {
  ScriptId script;
  std::vector<std::string> keys;
  std::vector<std::string> args;
};

}  // namespace reliableq

#endif  // RELIABLEQ_REDIS_SCRIPT_CALL_H_
