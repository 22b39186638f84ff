#include "cli/retry_options.h"

#include <charconv>
#include <chrono>
#include <cmath>
#include <system_error>
#include <vector>

#include "cli/commands.h"

namespace reliableq::cli {

namespace {

// Retries may be spread over weeks (Sidekiq's default schedule spans about
// 20 days): a delay or a retry_for of up to a year.
constexpr double kLongestSeconds = 365.0 * 24 * 3600;

// A plain number of seconds above 0 and at most kLongestSeconds, or empty.
std::optional<double> PositiveSeconds(std::string_view text) {
  double seconds = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || !(seconds > 0) ||
      seconds > kLongestSeconds) {
    return std::nullopt;
  }
  return seconds;
}

std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

}  // namespace

std::optional<Backoff> ParseBackoff(std::string_view text) {
  Backoff backoff;
  std::vector<std::string_view> words = Split(text, ':');
  if (words.size() == 1) {
    for (std::string_view entry : Split(text, ',')) {
      std::optional<double> seconds = PositiveSeconds(entry);
      if (!seconds) return std::nullopt;
      backoff.table.push_back(*seconds);
    }
    return backoff;
  }
  if (words.size() > 3) return std::nullopt;
  if (words[0] == "linear") {
    backoff.curve = Backoff::Curve::kLinear;
  } else if (words[0] == "exponential") {
    backoff.curve = Backoff::Curve::kExponential;
  } else {
    return std::nullopt;
  }
  std::optional<double> step = PositiveSeconds(words[1]);
  if (!step) return std::nullopt;
  backoff.step = *step;
  if (words.size() == 3) {
    std::optional<double> max = PositiveSeconds(words[2]);
    if (!max) return std::nullopt;
    backoff.max = *max;
  }
  return backoff;
}

std::optional<std::string> ReadRetryOptions(const ParsedArgs& args, ServerOptions* options) {
  for (const std::string& value : args.Values("backoff")) {
    auto assignment = SplitAssignment(value);
    std::optional<Backoff> backoff;
    if (assignment) backoff = ParseBackoff(assignment->second);
    if (!backoff) {
      return "--backoff needs CLASS=SEC[,SEC]..., CLASS=linear:SEC[:MAX] or "
             "CLASS=exponential:SEC[:MAX], seconds above 0 and at most a year (31536000), "
             "not '" +
             value + "'";
    }
    ClassRetry& retry = options->class_retries[assignment->first];
    if (retry.backoff) return "--backoff: class '" + assignment->first + "' given twice";
    retry.backoff = std::move(*backoff);
  }
  for (const std::string& value : args.Values("retry-for")) {
    auto assignment = SplitAssignment(value);
    std::optional<double> seconds;
    if (assignment) seconds = PositiveSeconds(assignment->second);
    if (!seconds) {
      return "--retry-for needs CLASS=SECONDS, seconds above 0 and at most a year (31536000), "
             "not '" +
             value + "'";
    }
    ClassRetry& retry = options->class_retries[assignment->first];
    if (retry.retry_for) return "--retry-for: class '" + assignment->first + "' given twice";
    retry.retry_for = std::chrono::seconds(static_cast<int64_t>(std::ceil(*seconds)));
  }
  return std::nullopt;
}

}  // namespace reliableq::cli
