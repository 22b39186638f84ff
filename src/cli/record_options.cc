#include "cli/record_options.h"

#include <charconv>
#include <chrono>
#include <cstdint>
#include <system_error>

#include "cli/commands.h"
#include "server/options_check.h"

namespace reliableq::cli {

namespace {

constexpr int64_t kLongestRetention = server::kMaxRecordRetention.count();
constexpr int64_t kFewestRecordBytes = server::kMinRecordBytes;
constexpr int64_t kMostRecordBytes = server::kMaxRecordBytes;

// A whole number from `low` to `high`, or empty.
std::optional<int64_t> WholeNumber(std::string_view text, int64_t low, int64_t high) {
  int64_t n = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || n < low ||
      n > high) {
    return std::nullopt;
  }
  return n;
}

}  // namespace

std::optional<std::string> ReadRecordOptions(const ParsedArgs& args, ServerOptions* options) {
  JobRecords& records = options->records;
  if (auto text = args.Value("records")) {
    std::optional<int64_t> seconds = WholeNumber(*text, 0, kLongestRetention);
    if (!seconds) {
      return "--records needs whole seconds from 0 (no records) to a year (31536000), not '" +
             *text + "'";
    }
    records.retention = std::chrono::seconds(*seconds);
  }
  for (const std::string& value : args.Values("record")) {
    auto assignment = SplitAssignment(value);
    std::optional<int64_t> seconds;
    if (assignment) seconds = WholeNumber(assignment->second, 0, kLongestRetention);
    if (!seconds) {
      return "--record needs CLASS=SECONDS, whole seconds from 0 (none for the class) to a year "
             "(31536000), not '" +
             value + "'";
    }
    if (!records.class_retention.emplace(assignment->first, std::chrono::seconds(*seconds))
             .second) {
      return "--record: class '" + assignment->first + "' given twice";
    }
  }
  if (auto text = args.Value("record-max-bytes")) {
    std::optional<int64_t> bytes = WholeNumber(*text, kFewestRecordBytes, kMostRecordBytes);
    if (!bytes) {
      return "--record-max-bytes needs a whole number from 256 to 1048576, not '" + *text + "'";
    }
    records.max_bytes = static_cast<size_t>(*bytes);
  }
  return std::nullopt;
}

}  // namespace reliableq::cli
