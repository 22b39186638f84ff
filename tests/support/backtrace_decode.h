// Reads Sidekiq's error_backtrace back: base64 (MIME or strict) of a
// zlib-deflated JSON array. For tests that check what was stored.

#ifndef RELIABLEQ_TESTS_BACKTRACE_DECODE_H_
#define RELIABLEQ_TESTS_BACKTRACE_DECODE_H_

#include <doctest/doctest.h>
#include <zlib.h>

#include <cstdint>
#include <string>

namespace reliableq::testing {

inline std::string Base64Decode(const std::string& text) {
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t buffer = 0;
  int bits = 0;
  for (char c : text) {
    size_t index = kAlphabet.find(c);
    if (index == std::string::npos) continue;  // '=' and newlines
    buffer = (buffer << 6) | static_cast<uint32_t>(index);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xff));
    }
  }
  return out;
}

inline std::string Inflate(const std::string& deflated) {
  std::string out(1 << 16, '\0');
  uLongf size = out.size();
  int rc = uncompress(reinterpret_cast<Bytef*>(out.data()), &size,
                      reinterpret_cast<const Bytef*>(deflated.data()), deflated.size());
  REQUIRE(rc == Z_OK);
  out.resize(size);
  return out;
}

}  // namespace reliableq::testing

#endif  // RELIABLEQ_TESTS_BACKTRACE_DECODE_H_
