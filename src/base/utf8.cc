#include "base/utf8.h"

#include <algorithm>

namespace reliableq::base {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The length of the valid UTF-8 sequence at the start of `in`, or 0 when it
// is invalid; `*bad` is then the length of its maximal invalid subpart (at
// least 1), which is replaced by one U+FFFD, as Unicode recommends.
size_t SequenceLength(std::string_view in, size_t* bad) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(in[i]); };
  unsigned char lead = byte(0);
  *bad = 1;
  if (lead < 0x80) return 1;
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 3;
    if (lead == 0xE0) lo = 0xA0;  // no overlong forms
    if (lead == 0xED) hi = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 4;
    if (lead == 0xF0) lo = 0x90;  // no overlong forms
    if (lead == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  for (size_t i = 1; i < need; ++i) {
    if (i >= in.size()) return 0;
    unsigned char c = byte(i);
    unsigned char min = i == 1 ? lo : 0x80, max = i == 1 ? hi : 0xBF;
    if (c < min || c > max) return 0;
    *bad = i + 1;
  }
  return need;
}

}  // namespace

bool IsValidUtf8(std::string_view in) {
  while (!in.empty()) {
    size_t bad;
    size_t n = SequenceLength(in, &bad);
    if (n == 0) return false;
    in.remove_prefix(n);
  }
  return true;
}

std::string Scrub(std::string_view in, size_t max_chars) {
  std::string out;
  out.reserve(std::min(in.size(), max_chars));
  for (size_t chars = 0; !in.empty() && chars < max_chars; ++chars) {
    size_t bad;
    size_t n = SequenceLength(in, &bad);
    if (n == 0) {
      out += kReplacement;
      n = bad;
    } else {
      out.append(in.data(), n);
    }
    in.remove_prefix(n);
  }
  return out;
}

}  // namespace reliableq::base
