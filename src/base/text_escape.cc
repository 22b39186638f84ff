#include "base/text_escape.h"

#include "base/utf8.h"

namespace reliableq::base {

namespace {

// The length of the well-formed UTF-8 sequence that starts `text` (1 for an
// ASCII byte), or 0 when its first byte starts none.
size_t SequenceLength(std::string_view text) {
  unsigned char lead = static_cast<unsigned char>(text[0]);
  size_t need = lead < 0x80                    ? 1
                : lead >= 0xC2 && lead <= 0xDF ? 2
                : lead >= 0xE0 && lead <= 0xEF ? 3
                : lead >= 0xF0 && lead <= 0xF4 ? 4
                                               : 0;
  if (need <= 1) return need;
  if (text.size() < need || !base::IsValidUtf8(text.substr(0, need))) return 0;
  return need;
}

// The C1 control a two-byte sequence encodes (U+0080..U+009F), or 0.
unsigned C1Control(std::string_view sequence) {
  if (sequence.size() != 2 || static_cast<unsigned char>(sequence[0]) != 0xC2) return 0;
  unsigned code = static_cast<unsigned char>(sequence[1]);
  return code < 0xA0 ? code : 0;
}

void AppendHex(std::string_view prefix, unsigned value, int digits, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->append(prefix);
  for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) {
    out->push_back(kHex[(value >> shift) & 0xF]);
  }
}

bool IsPlainAscii(unsigned char c) { return c >= 0x20 && c < 0x7F; }

}  // namespace

bool NeedsEscaping(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (IsPlainAscii(static_cast<unsigned char>(text[i]))) continue;
    // Not plain ASCII: decide on the rest of the sequence.
    std::string_view rest = text.substr(i);
    size_t n = SequenceLength(rest);
    if (n <= 1 || C1Control(rest.substr(0, n)) != 0) return true;
    i += n - 1;
  }
  return false;
}

void AppendEscaped(std::string_view text, std::string* out) {
  out->reserve(out->size() + text.size());
  while (!text.empty()) {
    unsigned char c = static_cast<unsigned char>(text[0]);
    size_t n = SequenceLength(text);
    if (n == 1) {
      switch (c) {
        case '\n':
          out->append("\\n");
          break;
        case '\r':
          out->append("\\r");
          break;
        case '\t':
          out->append("\\t");
          break;
        default:
          if (IsPlainAscii(c)) {
            out->push_back(static_cast<char>(c));
          } else {
            AppendHex("\\x", c, 2, out);
          }
      }
    } else if (n == 0) {
      AppendHex("\\x", c, 2, out);
      n = 1;
    } else if (unsigned code = C1Control(text.substr(0, n)); code != 0) {
      AppendHex("\\u", code, 4, out);
    } else {
      out->append(text.data(), n);
    }
    text.remove_prefix(n);
  }
}

std::string Escaped(std::string_view text) {
  std::string out;
  AppendEscaped(text, &out);
  return out;
}

std::string TerminalSafeJson(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  while (!json.empty()) {
    unsigned char c = static_cast<unsigned char>(json[0]);
    size_t n = SequenceLength(json);
    if (n == 1) {
      if (c == 0x7F) {
        out.append("\\u007f");
      } else {
        out.push_back(static_cast<char>(c));
      }
    } else if (n == 0) {
      // Outside strings a writer puts only ASCII, so this byte is in one.
      out.append("\\ufffd");
      n = 1;
    } else if (unsigned code = C1Control(json.substr(0, n)); code != 0) {
      AppendHex("\\u", code, 4, &out);
    } else {
      out.append(json.data(), n);
    }
    json.remove_prefix(n);
  }
  return out;
}

}  // namespace reliableq::base
