// GPT-2's pre-tokenizer: splits text into the chunks ("words") that BPE merges
// never cross. It is the regular expression of OpenAI's GPT-2 encoder,
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// evaluated by hand over UTF-8 code points (findall semantics: at each
// position the first alternative that matches wins, then scanning resumes after
// the match). Both our own BPE and the GPT-2 tokenizer use it.
//
// Any byte string is accepted: a byte that does not start a well-formed UTF-8
// character counts as one character that is neither a letter, a number nor
// whitespace (so it lands in a " ?[^\s\p{L}\p{N}]+" chunk). The chunks always
// concatenate back to the input exactly.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace ada {

// Returns the end (exclusive byte offset) of the chunk that starts at byte
// `start` of text (start < text.size()).
size_t pretoken_end(std::string_view text, size_t start);

// All chunks of text, in order; views into text.
std::vector<std::string_view> pretokenize(std::string_view text);

// Character classes of the pattern, exposed for tests.
enum class CharClass { kLetter, kNumber, kSpace, kOther };
CharClass char_class(uint32_t code_point);

}  // namespace ada
