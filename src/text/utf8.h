// Strict UTF-8 decoding of one character, and a validity check for whole texts.
//
// "Strict" means what the Unicode standard calls well-formed UTF-8: no overlong
// forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF, no truncated
// sequences. Callers that must accept any byte string (the tokenizers) treat a
// byte that does not start a well-formed character as a one-byte character of
// its own; see docs/tokenizers.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ada {

struct Utf8Char {
  uint32_t cp;  // the code point; for an invalid byte, the byte value itself
  int len;      // bytes consumed: 1..4
  bool valid;   // false: s[i] does not start a well-formed character (len is 1)
};

// Decodes the character that starts at byte i of s (i < s.size()).
inline Utf8Char utf8_decode(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const uint32_t b0 = byte(i);
  if (b0 < 0x80) return {b0, 1, true};
  int len;
  uint32_t cp, min_cp;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F, min_cp = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F, min_cp = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07, min_cp = 0x10000;
  } else {
    return {b0, 1, false};  // a continuation byte or 0xF8..0xFF
  }
  if (i + len > s.size()) return {b0, 1, false};
  for (int k = 1; k < len; ++k) {
    const uint32_t b = byte(i + k);
    if ((b & 0xC0) != 0x80) return {b0, 1, false};
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {b0, 1, false};
  return {cp, len, true};
}

// Byte offset of the first byte that does not start a well-formed character,
// or std::string_view::npos when all of s is valid UTF-8.
inline size_t utf8_find_invalid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {  // fast path for ASCII
      ++i;
      continue;
    }
    const Utf8Char c = utf8_decode(s, i);
    if (!c.valid) return i;
    i += c.len;
  }
  return std::string_view::npos;
}

// Appends the UTF-8 encoding of code point cp (<= 0x10FFFF) to out.
template <class String>
inline void utf8_append(String& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace ada
