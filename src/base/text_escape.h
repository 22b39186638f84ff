// Escapes for text that came from outside (job fields, Redis replies, remote
// signal names, error messages) before it is logged or printed, so that it
// can neither start a line of its own nor reach a terminal as a control
// sequence. The log (Logger::Log) and the `reliableq` program share them;
// reliableq(1) documents them under OUTPUT.
//
// Pure functions; any thread.

#ifndef RELIABLEQ_BASE_TEXT_ESCAPE_H_
#define RELIABLEQ_BASE_TEXT_ESCAPE_H_

#include <string>
#include <string_view>

namespace reliableq::base {

// Appends `text` to `out` with
//   \n, \r, \t      for those three bytes,
//   \xNN            (two lower-case hex digits) for every other byte below
//                   0x20, for DEL (0x7f) and for every byte that is not part
//                   of well-formed UTF-8 (overlong forms and surrogates
//                   included),
//   \uNNNN          for the C1 control characters U+0080..U+009F,
// and everything else, printable ASCII and well-formed UTF-8, as it is. A
// backslash is not escaped: the result is for people to read, and cannot
// be taken apart again without ambiguity.
void AppendEscaped(std::string_view text, std::string* out);

// AppendEscaped to an empty string.
std::string Escaped(std::string_view text);

// True when Escaped(text) would differ from `text`.
bool NeedsEscaping(std::string_view text);

// `json`, the output of a JSON writer (which escapes the characters below
// 0x20 in its strings and never writes them raw), with the bytes that a
// terminal could act on or that are not UTF-8 replaced inside its strings:
// DEL and the C1 controls as \u007f and \u0080..\u009f, which decode to the
// same characters, and each byte that is not part of well-formed UTF-8 as
// \ufffd (U+FFFD, the replacement character). The result is valid JSON in
// UTF-8 whatever bytes the strings held.
std::string TerminalSafeJson(std::string_view json);

}  // namespace reliableq::base

#endif  // RELIABLEQ_BASE_TEXT_ESCAPE_H_
