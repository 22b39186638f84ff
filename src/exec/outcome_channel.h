// The outcome channel of a command handler: the lines a program writes on
// file descriptor 3 (RELIABLEQ_OUTCOME_FD) to say how its job ends, what it
// produced, how far it is, and what to log. reliableq(1), OUTCOMES, is the
// user's contract; this is its grammar, apart from any I/O:
//
//   snooze SECONDS          not a failure: run again in SECONDS
//   retry SECONDS [MESSAGE] a failure, retried in SECONDS
//   discard [MESSAGE]       a failure, dropped (no retry, not in dead)
//   dead [MESSAGE]          a failure, to the dead set now
//   fail [MESSAGE]          a failure, retried with the class's backoff
//   result JSON             the job's result (one JSON value)
//   progress PERCENT [MESSAGE]  how far the job is, 0 to 100, and what it does
//   log LEVEL TEXT          a worker log line (debug, info, warn, error)
//
// SECONDS and PERCENT are decimal numbers ("30", "0.5"; no sign, no
// exponent). A line is UTF-8, ends with '\n' (a '\r' before it is dropped)
// and holds at most kMaxChannelLine bytes.
//
// Pure functions and a value type; any thread.

#ifndef RELIABLEQ_EXEC_OUTCOME_CHANNEL_H_
#define RELIABLEQ_EXEC_OUTCOME_CHANNEL_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "reliableq/logging.h"
#include "reliableq/status.h"

namespace reliableq::exec {

// The descriptor the program gets the channel's write end on.
constexpr int kOutcomeFd = 3;
// The most bytes of one line, its '\n' excluded; a longer line is dropped.
constexpr size_t kMaxChannelLine = 64 * 1024;
// A snooze or retry of more seconds counts as this many: a year, the bound
// JobSnooze has (reliableq/handler.h).
constexpr std::chrono::seconds kMostChannelDelay{365 * 24 * 3600};

struct ChannelLine {
  enum class Verb { kSnooze, kRetry, kDiscard, kDead, kFail, kResult, kProgress, kLog };
  Verb verb = Verb::kFail;
  // kSnooze (>= 0) and kRetry (> 0), at most kMostChannelDelay.
  std::chrono::milliseconds delay{0};
  // kRetry, kDiscard, kDead, kFail, kProgress: the message, maybe empty;
  // kResult: the JSON text; kLog: the text to log.
  std::string text;
  // kProgress: 0 to 100.
  double percent = 0;
  // kLog.
  LogLevel level = LogLevel::kInfo;

  // snooze, retry, discard, dead and fail: the verbs that end the job (the
  // last one a program writes wins).
  bool ends_job() const { return verb <= Verb::kFail; }
};

// Reads one line (without its '\n'). kInvalidArgument, with a reason for
// the worker's log, for an empty line, an unknown verb, a bad number, JSON
// that does not parse, a log level that is none of the four, or text that
// is not UTF-8.
Result<ChannelLine> ParseChannelLine(std::string_view line);

// The verb's name, as the program writes it.
std::string_view VerbName(ChannelLine::Verb verb);

// Cuts what is read from the channel into lines, keeping at most
// kMaxChannelLine bytes of a line not ended yet: memory stays bounded
// whatever the program writes. Not thread-safe; one per program.
class LineSplitter {
 public:
  // `line`: a complete line, its '\n' (and a '\r' before it) removed.
  // `too_long`: true for a line longer than kMaxChannelLine, given as its
  // first 64 bytes only (its whole length in `length`).
  using OnLine = std::function<void(std::string_view line, bool too_long, size_t length)>;

  explicit LineSplitter(OnLine on_line) : on_line_(std::move(on_line)) {}

  // Calls on_line for each line `bytes` completes.
  void Feed(std::string_view bytes);
  // At the end of the channel: a last line without its '\n' counts too.
  void Finish();

 private:
  void Emit();

  OnLine on_line_;
  std::string pending_;
  size_t pending_length_ = 0;  // may exceed pending_.size() for a line too long
};

}  // namespace reliableq::exec

#endif  // RELIABLEQ_EXEC_OUTCOME_CHANNEL_H_
