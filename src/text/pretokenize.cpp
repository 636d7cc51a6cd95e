// GPT-2 pre-tokenization by hand; see pretokenize.h for the pattern.
//
// How each alternative maps to the code below, at the chunk start i:
//   's 't 're 'd ...     an ASCII apostrophe followed by one of the suffixes
//                        (case-sensitive, and it matches even inside a word:
//                        "'sup" splits as "'s" "up").
//   ' ?\p{L}+' etc.      if s[i] is U+0020 and the next character is a letter,
//                        number or "other", the chunk is the space plus the
//                        longest run of that class; if s[i] itself is of one of
//                        those classes, the chunk is its run.
//   \s+(?!\S)            a whitespace run reaching the end of the text is one
//                        chunk; a run of n >= 2 followed by a non-space leaves
//                        its last character (so " word" can take the space).
//   \s+                  a single whitespace character before a non-space.
#include "text/pretokenize.h"

#include <algorithm>

#include "text/unicode_tables.h"
#include "text/utf8.h"

namespace ada {

namespace {

template <size_t N>
bool in_ranges(const CodeRange (&table)[N], uint32_t cp) {
  // First range whose upper end is >= cp; cp is in it if its lower end is <= cp.
  const CodeRange* it = std::lower_bound(table, table + N, cp,
                                         [](const CodeRange& r, uint32_t c) { return r.hi < c; });
  return it != table + N && it->lo <= cp;
}

// Class of every ASCII character, so that the common case skips the searches.
struct AsciiClasses {
  CharClass cls[128];
  AsciiClasses() {
    for (uint32_t c = 0; c < 128; ++c) {
      cls[c] = in_ranges(kLetterRanges, c)       ? CharClass::kLetter
               : in_ranges(kNumberRanges, c)     ? CharClass::kNumber
               : in_ranges(kWhitespaceRanges, c) ? CharClass::kSpace
                                                 : CharClass::kOther;
    }
  }
};
const AsciiClasses kAscii;

struct Char {
  CharClass cls;
  int len;  // bytes
};

Char char_at(std::string_view s, size_t i) {
  const unsigned char b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) return {kAscii.cls[b], 1};
  const Utf8Char c = utf8_decode(s, i);
  if (!c.valid) return {CharClass::kOther, 1};  // invalid byte: its own "other" char
  return {char_class(c.cp), c.len};
}

// End of the run of characters of class cls that starts at i.
size_t run_end(std::string_view s, size_t i, CharClass cls) {
  while (i < s.size()) {
    const Char c = char_at(s, i);
    if (c.cls != cls) break;
    i += c.len;
  }
  return i;
}

// Length of a contraction suffix match at s[i] == '\'' (0 when none).
size_t contraction_len(std::string_view s, size_t i) {
  static const char* const kSuffixes[] = {"s", "t", "re", "ve", "m", "ll", "d"};
  const std::string_view rest = s.substr(i + 1);
  for (const char* suf : kSuffixes) {
    const std::string_view sv(suf);
    if (rest.substr(0, sv.size()) == sv) return 1 + sv.size();
  }
  return 0;
}

}  // namespace

CharClass char_class(uint32_t cp) {
  if (cp < 128) return kAscii.cls[cp];
  if (in_ranges(kLetterRanges, cp)) return CharClass::kLetter;
  if (in_ranges(kNumberRanges, cp)) return CharClass::kNumber;
  if (in_ranges(kWhitespaceRanges, cp)) return CharClass::kSpace;
  return CharClass::kOther;
}

size_t pretoken_end(std::string_view s, size_t i) {
  if (s[i] == '\'') {
    const size_t n = contraction_len(s, i);
    if (n > 0) return i + n;
  }
  // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": an optional leading space.
  if (s[i] == ' ' && i + 1 < s.size()) {
    const Char next = char_at(s, i + 1);
    if (next.cls != CharClass::kSpace) return run_end(s, i + 1, next.cls);
  }
  const Char first = char_at(s, i);
  if (first.cls != CharClass::kSpace) return run_end(s, i, first.cls);

  // Whitespace: "\s+(?!\S)" then "\s+".
  size_t last_start = i;  // start of the run's last character
  size_t end = i;
  while (end < s.size()) {
    const Char c = char_at(s, end);
    if (c.cls != CharClass::kSpace) break;
    last_start = end;
    end += c.len;
  }
  if (end == s.size()) return end;         // run reaches the end of the text
  if (last_start > i) return last_start;   // leave the last whitespace to the next chunk
  return end;                              // a single whitespace character
}

std::vector<std::string_view> pretokenize(std::string_view text) {
  std::vector<std::string_view> chunks;
  size_t i = 0;
  while (i < text.size()) {
    const size_t end = pretoken_end(text, i);
    chunks.push_back(text.substr(i, end - i));
    i = end;
  }
  return chunks;
}

}  // namespace ada
