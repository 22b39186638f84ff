// Backtraces in a failed job, as Sidekiq stores them: which lines the job's
// `backtrace` field asks for, and error_backtrace, the MIME base64 of the
// zlib-deflated JSON array of those lines.
//
// Thread safety: pure functions; any thread.

#ifndef RELIABLEQ_CODEC_BACKTRACE_H_
#define RELIABLEQ_CODEC_BACKTRACE_H_

#include <rapidjson/document.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "reliableq/status.h"

namespace reliableq::codec {

// Ruby's Base64.encode64 of `size` bytes at `data`: a newline after every 60
// characters and after the last line.
std::string Base64Mime(const unsigned char* data, size_t size);

// Sidekiq's compress_backtrace: base64(zlib deflate(JSON array of lines)),
// of the first `count` of `lines` (count <= lines.size()), invalid UTF-8
// replaced by U+FFFD. kInvalidArgument when zlib fails.
Result<std::string> CompressBacktrace(const std::vector<std::string>& lines, size_t count);

// How many backtrace lines the job's `backtrace` field asks for: Ruby's
// `true` (all) or `backtrace[0...n]` for a number n, where a negative n
// counts from the end. At most `available`; nullopt for any other value,
// which asks for none.
std::optional<size_t> BacktraceLines(const rapidjson::Value& field, size_t available);

}  // namespace reliableq::codec

#endif  // RELIABLEQ_CODEC_BACKTRACE_H_
