#include "core/format.h"

#include <cstdio>
#include <cstdlib>

namespace ada {

std::string quote_untrusted(std::string_view text, size_t max_bytes) {
  const size_t n = text.size() < max_bytes ? text.size() : max_bytes;
  std::string out = "'";
  for (size_t i = 0; i < n; i++) {
    const unsigned char c = (unsigned char)text[i];
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\0': out += "\\0"; break;
      case '\'': out += "\\'"; break;
      case '\\': out += "\\\\"; break;
      default:
        if (c >= 0x20 && c < 0x7F) {
          out += (char)c;
        } else {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02X", c);
          out += buf;
        }
    }
  }
  out += "'";
  if (n < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

std::string shortest_double(double x) {
  char buf[40];
  for (int digits = 1; digits <= 17; digits++) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, x);
    if (std::strtod(buf, nullptr) == x) break;  // NaN never compares equal: it ends at 17 digits, "nan"
  }
  return buf;
}

}  // namespace ada
