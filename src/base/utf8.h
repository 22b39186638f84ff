// UTF-8 validation and scrubbing, for the job codec and for escaping: which strings Sidekiq
// can read, and how bytes from elsewhere (error messages, backtraces) are
// made into such strings.
//
// Thread safety: pure functions; any thread.

#ifndef RELIABLEQ_BASE_UTF8_H_
#define RELIABLEQ_BASE_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace reliableq::base {

// True when `in` is well-formed UTF-8: no overlong forms, surrogates or code
// points above U+10FFFF.
bool IsValidUtf8(std::string_view in);

// `in` with each invalid sequence replaced by U+FFFD, cut after `max_chars`
// characters (code points), never inside one.
std::string Scrub(std::string_view in, size_t max_chars = SIZE_MAX);

}  // namespace reliableq::base

#endif  // RELIABLEQ_BASE_UTF8_H_
