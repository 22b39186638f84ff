#include "codec/backtrace.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "codec/ruby_json.h"
#include "base/utf8.h"

namespace reliableq::codec {

using base::Scrub;

std::string Base64Mime(const unsigned char* data, size_t size) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((size + 2) / 3 * 4 + size / 45 + 2);
  size_t line = 0;
  for (size_t i = 0; i < size; i += 3) {
    uint32_t chunk = static_cast<uint32_t>(data[i]) << 16;
    if (i + 1 < size) chunk |= static_cast<uint32_t>(data[i + 1]) << 8;
    if (i + 2 < size) chunk |= data[i + 2];
    out.push_back(kAlphabet[(chunk >> 18) & 63]);
    out.push_back(kAlphabet[(chunk >> 12) & 63]);
    out.push_back(i + 1 < size ? kAlphabet[(chunk >> 6) & 63] : '=');
    out.push_back(i + 2 < size ? kAlphabet[chunk & 63] : '=');
    line += 4;
    // Ruby's Base64.encode64 ends every line of 60 characters, and the
    // last one, with a newline.
    if (line == 60) {
      out.push_back('\n');
      line = 0;
    }
  }
  if (line != 0) out.push_back('\n');
  return out;
}

Result<std::string> CompressBacktrace(const std::vector<std::string>& lines, size_t count) {
  std::string json = "[";
  for (size_t i = 0; i < count; ++i) {
    if (i != 0) json.push_back(',');
    AppendString(Scrub(lines[i]), &json);
  }
  json.push_back(']');
  uLongf size = compressBound(static_cast<uLong>(json.size()));
  std::string deflated(size, '\0');
  int rc = compress2(reinterpret_cast<Bytef*>(deflated.data()), &size,
                     reinterpret_cast<const Bytef*>(json.data()), static_cast<uLong>(json.size()),
                     Z_DEFAULT_COMPRESSION);
  if (rc != Z_OK)
    return Status::InvalidArgument("cannot deflate the backtrace: zlib error " +
                                   std::to_string(rc));
  return Base64Mime(reinterpret_cast<const unsigned char*>(deflated.data()), size);
}

std::optional<size_t> BacktraceLines(const rapidjson::Value& field, size_t available) {
  if (field.IsTrue()) return available;
  if (!field.IsNumber()) return std::nullopt;
  double size = static_cast<double>(available);
  double n = field.IsInt64()    ? static_cast<double>(field.GetInt64())
             : field.IsUint64() ? size
                                : std::trunc(field.GetDouble());
  if (n < 0) n = std::max(0.0, size + n);
  return static_cast<size_t>(std::min(n, size));
}

}  // namespace reliableq::codec
