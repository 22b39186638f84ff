#include "exec/outcome_channel.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>

#include "base/utf8.h"

namespace reliableq::exec {

namespace {

// How much of a line too long the splitter keeps, for the warning.
constexpr size_t kTooLongHead = 64;

// "30", "0.5": digits, then maybe a '.' and digits; no sign, no exponent,
// no "inf": a program's number is read one way only.
std::optional<double> DecimalNumber(std::string_view text) {
  if (text.empty() || text.find_first_not_of("0123456789.") != std::string_view::npos ||
      std::count(text.begin(), text.end(), '.') > 1 || text.front() == '.' || text.back() == '.') {
    return std::nullopt;
  }
  double value = 0;
  auto [end, error] =
      std::from_chars(text.data(), text.data() + text.size(), value, std::chars_format::fixed);
  // A number too large for a double is out of range: as large as any bound.
  if (error == std::errc::result_out_of_range) return HUGE_VAL;
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Seconds as a delay, at most kMostChannelDelay.
std::chrono::milliseconds Delay(double seconds) {
  double most = static_cast<double>(kMostChannelDelay.count());
  return std::chrono::milliseconds(std::llround(std::min(seconds, most) * 1000));
}

// The first word of `text` and what follows the spaces after it.
std::pair<std::string_view, std::string_view> FirstWord(std::string_view text) {
  size_t space = text.find(' ');
  if (space == std::string_view::npos) return {text, {}};
  std::string_view rest = text.substr(space);
  rest.remove_prefix(std::min(rest.find_first_not_of(' '), rest.size()));
  return {text.substr(0, space), rest};
}

std::optional<LogLevel> LevelNamed(std::string_view name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warn") return LogLevel::kWarn;
  if (name == "error") return LogLevel::kError;
  return std::nullopt;
}

constexpr std::pair<std::string_view, ChannelLine::Verb> kVerbs[] = {
    {"snooze", ChannelLine::Verb::kSnooze},     {"retry", ChannelLine::Verb::kRetry},
    {"discard", ChannelLine::Verb::kDiscard},   {"dead", ChannelLine::Verb::kDead},
    {"fail", ChannelLine::Verb::kFail},         {"result", ChannelLine::Verb::kResult},
    {"progress", ChannelLine::Verb::kProgress}, {"log", ChannelLine::Verb::kLog},
};

}  // namespace

std::string_view VerbName(ChannelLine::Verb verb) {
  for (const auto& [name, value] : kVerbs) {
    if (value == verb) return name;
  }
  return "?";
}

Result<ChannelLine> ParseChannelLine(std::string_view line) {
  if (line.empty()) return Status::InvalidArgument("an empty line");
  if (!base::IsValidUtf8(line)) return Status::InvalidArgument("a line that is not UTF-8");
  auto [word, rest] = FirstWord(line);
  ChannelLine parsed;
  auto known = std::find_if(std::begin(kVerbs), std::end(kVerbs),
                            [word = word](const auto& entry) { return entry.first == word; });
  if (known == std::end(kVerbs)) return Status::InvalidArgument("an unknown verb");
  parsed.verb = known->second;
  switch (parsed.verb) {
    case ChannelLine::Verb::kSnooze: {
      std::optional<double> seconds = DecimalNumber(rest);
      if (!seconds) return Status::InvalidArgument("snooze needs SECONDS, a number from 0");
      parsed.delay = Delay(*seconds);
      break;
    }
    case ChannelLine::Verb::kRetry: {
      auto [number, message] = FirstWord(rest);
      std::optional<double> seconds = DecimalNumber(number);
      if (!seconds || *seconds <= 0) {
        return Status::InvalidArgument("retry needs SECONDS, a number above 0");
      }
      parsed.delay = std::max(Delay(*seconds), std::chrono::milliseconds(1));
      parsed.text = message;
      break;
    }
    case ChannelLine::Verb::kDiscard:
    case ChannelLine::Verb::kDead:
    case ChannelLine::Verb::kFail:
      parsed.text = rest;
      break;
    case ChannelLine::Verb::kResult: {
      rapidjson::Document document;
      document.Parse(rest.data(), rest.size());
      if (rest.empty() || document.HasParseError()) {
        return Status::InvalidArgument("result needs one JSON value");
      }
      parsed.text = rest;
      break;
    }
    case ChannelLine::Verb::kProgress: {
      auto [number, message] = FirstWord(rest);
      std::optional<double> percent = DecimalNumber(number);
      if (!percent || *percent > 100) {
        return Status::InvalidArgument("progress needs a number from 0 to 100");
      }
      parsed.percent = *percent;
      parsed.text = message;
      break;
    }
    case ChannelLine::Verb::kLog: {
      auto [name, text] = FirstWord(rest);
      std::optional<LogLevel> level = LevelNamed(name);
      if (!level) return Status::InvalidArgument("log needs a level: debug, info, warn or error");
      parsed.level = *level;
      parsed.text = text;
      break;
    }
  }
  return parsed;
}

void LineSplitter::Feed(std::string_view bytes) {
  while (!bytes.empty()) {
    size_t newline = bytes.find('\n');
    std::string_view piece = bytes.substr(0, newline);
    // Beyond the bound only the length is counted: the line will be
    // dropped, and its head is all the warning shows.
    size_t room = pending_length_ <= kMaxChannelLine ? kMaxChannelLine + 1 - pending_length_ : 0;
    pending_.append(piece.substr(0, std::min(room, piece.size())));
    pending_length_ += piece.size();
    if (newline == std::string_view::npos) return;
    Emit();
    bytes.remove_prefix(newline + 1);
  }
}

void LineSplitter::Finish() {
  if (pending_length_ > 0) Emit();
}

void LineSplitter::Emit() {
  if (pending_length_ > kMaxChannelLine) {
    on_line_(std::string_view(pending_).substr(0, kTooLongHead), true, pending_length_);
  } else {
    std::string_view line = pending_;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    on_line_(line, false, line.size());
  }
  pending_.clear();
  pending_length_ = 0;
}

}  // namespace reliableq::exec
