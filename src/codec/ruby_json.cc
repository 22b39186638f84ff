#include "codec/ruby_json.h"

#include <locale.h>
#include <rapidjson/document.h>
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "codec/json_writer.h"

namespace reliableq::codec {

namespace {

// Objects of up to this many members (a job's have 7 to 20) are checked for
// a name given twice without allocating, in a few instructions a member:
// DecodeJob does it for every job.
constexpr size_t kSmallObject = 63;

// A few bits of a member name, hashed: its length and its first, middle and
// last bytes, all that tell job field names apart. Names that differ
// elsewhere only cost a comparison.
unsigned NameBits(std::string_view name) {
  if (name.empty()) return 0;
  auto byte = [name](size_t i) {
    return static_cast<uint64_t>(static_cast<unsigned char>(name[i]));
  };
  uint64_t key =
      name.size() ^ byte(0) << 16 ^ byte(name.size() / 2) << 24 ^ byte(name.size() - 1) << 32;
  return static_cast<unsigned>((key * 0x9E3779B97F4A7C15u) >> 57);  // 0 to 127
}

// True when the `count` (at most kSmallObject) names name_at(0) ... all
// differ. A 128-bit Bloom filter of NameBits on the stack; only a name
// whose bit is already set is compared with those before it. Names are
// read where they stand, not copied.
template <typename NameAt>
bool AllDifferentSmall(size_t count, NameAt name_at) {
  uint64_t seen[2] = {0, 0};
  for (size_t i = 0; i < count; ++i) {
    std::string_view name = name_at(i);
    unsigned bits = NameBits(name);
    uint64_t bit = uint64_t{1} << (bits & 63);
    uint64_t& word = seen[bits >> 6];
    if (word & bit) {
      for (size_t j = 0; j < i; ++j) {
        if (name_at(j) == name) return false;
      }
    }
    word |= bit;
  }
  return true;
}

}  // namespace

size_t EncodedLowSurrogate(std::string_view text) {
  if (text.size() < 3) return 0;
  auto byte = [text](size_t i) { return static_cast<unsigned char>(text[i]); };
  if (byte(0) != 0xED || byte(1) < 0xB0 || byte(1) > 0xBF || byte(2) < 0x80 || byte(2) > 0xBF) {
    return 0;
  }
  return 0xD000u | (byte(1) & 0x3Fu) << 6 | (byte(2) & 0x3Fu);
}

bool HasEncodedLowSurrogate(std::string_view text) {
  for (size_t i = text.find('\xED'); i != std::string_view::npos; i = text.find('\xED', i + 1)) {
    if (EncodedLowSurrogate(text.substr(i)) != 0) return true;
  }
  return false;
}

bool RubyMembers(std::span<const std::string_view> names, std::vector<KeptMember>* kept) {
  if (names.size() < 2) return false;
  if (names.size() <= kSmallObject &&
      AllDifferentSmall(names.size(), [names](size_t i) { return names[i]; })) {
    return false;
  }
  // Where each name stands in *kept.
  std::unordered_map<std::string_view, size_t> place;
  place.reserve(names.size());
  kept->clear();
  for (size_t i = 0; i < names.size(); ++i) {
    auto [it, added] = place.try_emplace(names[i], kept->size());
    if (added) {
      kept->push_back({i, i});
    } else {
      (*kept)[it->second].last = i;
    }
  }
  return kept->size() != names.size();
}

void KeepRubyMembers(rapidjson::Value* object) {
  size_t count = object->MemberCount();
  auto members = object->MemberBegin();
  auto name_at = [members](size_t i) {
    const rapidjson::Value& name = members[static_cast<ptrdiff_t>(i)].name;
    return std::string_view(name.GetString(), name.GetStringLength());
  };
  if (count < 2 || (count <= kSmallObject && AllDifferentSmall(count, name_at))) return;
  std::vector<std::string_view> names(count);
  for (size_t i = 0; i < count; ++i) names[i] = name_at(i);
  std::vector<KeptMember> kept;
  if (!RubyMembers(names, &kept)) return;
  // Each name's first member takes the value of its last...
  for (const KeptMember& k : kept) {
    if (k.last != k.first) members[k.first].value.Swap(members[k.last].value);
  }
  // ...and the first members close up, in order. kept[i].first >= i, and
  // rises: what stands at i when its turn comes is no longer needed.
  for (size_t i = 0; i < kept.size(); ++i) {
    if (kept[i].first == i) continue;
    members[i].name.Swap(members[kept[i].first].name);
    members[i].value.Swap(members[kept[i].first].value);
  }
  object->EraseMember(members + kept.size(), object->MemberEnd());
}

void AppendString(std::string_view text, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t plain = 0;  // start of the run of bytes copied as they are
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\' && c != 0xED) continue;
    if (c == 0xED) {
      size_t low = EncodedLowSurrogate(text.substr(i));
      if (low == 0) continue;
      out->append(text.data() + plain, i - plain);
      *out += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4) out->push_back(kHex[(low >> shift) & 15]);
      i += 2;
      plain = i + 1;
      continue;
    }
    out->append(text.data() + plain, i - plain);
    plain = i + 1;
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default:
        *out += "\\u00";
        out->push_back(kHex[c >> 4]);
        out->push_back(kHex[c & 15]);
    }
  }
  out->append(text.data() + plain, text.size() - plain);
  out->push_back('"');
}

void AppendFloat(double value, std::string* out) {
  // Ruby refuses to write NaN and infinities; null keeps the output JSON.
  if (!std::isfinite(value)) {
    *out += "null";
    return;
  }
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string_view text(buf, static_cast<size_t>(result.ptr - buf));
  if (!text.empty() && text.front() == '-') {
    out->push_back('-');
    text.remove_prefix(1);
  }
  size_t e = text.find('e');
  std::string digits;
  for (char c : text.substr(0, e)) {
    if (c != '.') digits.push_back(c);
  }
  std::string_view exponent = text.substr(e + 1);
  bool negative_exponent = exponent.front() == '-';
  int exp = 0;
  std::from_chars(exponent.data() + 1, exponent.data() + exponent.size(), exp);
  if (negative_exponent) exp = -exp;
  // Ruby's decpt: the value is 0.DIGITS times 10^decpt.
  int decpt = exp + 1;
  int ndigits = static_cast<int>(digits.size());
  if (decpt > 0 && decpt <= 16) {
    if (ndigits <= decpt) {
      *out += digits;
      out->append(static_cast<size_t>(decpt - ndigits), '0');
      *out += ".0";
    } else {
      out->append(digits, 0, static_cast<size_t>(decpt));
      out->push_back('.');
      out->append(digits, static_cast<size_t>(decpt));
    }
  } else if (decpt > -4 && decpt <= 0) {
    *out += "0.";
    out->append(static_cast<size_t>(-decpt), '0');
    *out += digits;
  } else {
    out->push_back(digits[0]);
    out->push_back('.');
    if (ndigits > 1) {
      out->append(digits, 1);
    } else {
      out->push_back('0');
    }
    char tail[16];
    std::snprintf(tail, sizeof(tail), "e%+03d", decpt - 1);
    *out += tail;
  }
}

std::optional<double> NumberValue(std::string_view literal) {
  const char* end = literal.data() + literal.size();
  double value = 0;
  auto [ptr, ec] = std::from_chars(literal.data(), end, value);
  if (ec == std::errc() && ptr == end) return value;
  // Out of range, above or below: strtod tells which, rounding a tiny
  // value to ±0 or a subnormal as from_chars would have. The "C" locale
  // reads '.' whatever the process's locale is.
  static const locale_t c_locale = newlocale(LC_ALL_MASK, "C", locale_t{});
  std::string text(literal);
  value = c_locale != locale_t{} ? strtod_l(text.c_str(), nullptr, c_locale)
                                 : std::strtod(text.c_str(), nullptr);
  if (std::isinf(value)) return std::nullopt;
  return value;
}

void AppendNumberLiteral(std::string_view literal, std::string* out) {
  if (!IsIntegerLiteral(literal)) {
    // ParseText refused the literals that have no value.
    AppendFloat(NumberValue(literal).value_or(0), out);
  } else if (literal == "-0") {
    out->push_back('0');
  } else {
    out->append(literal);
  }
}

}  // namespace reliableq::codec
