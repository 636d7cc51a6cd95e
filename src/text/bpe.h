// Byte-level BPE (byte-pair encoding): the merge-applying encoder shared by our
// BPE and GPT-2's, and our own BPE tokenizer with its trainer and file format.
//
// Model. Text is first split into chunks by the GPT-2 pre-tokenizer
// (pretokenize.h). Each chunk starts as one token per byte; then merge rules
// are applied by rank: repeatedly find the adjacent pair with the lowest-ranked
// rule and replace every occurrence of that pair, left to right, by the rule's
// result token -- until no adjacent pair has a rule. (This is exactly the
// algorithm of OpenAI's GPT-2 encoder.py.) Merges never cross chunk
// boundaries.
//
// Our BPE. Ids 0..255 are the bytes; merge k (0-based) joins two existing ids
// into the new id 256 + k, so vocab_size = 256 + number of merges and a
// merge's rank is its index. There is no end-of-text token.
//
// File format ("ada-bpe", version 1), plain text, '\n' line ends:
//
//   ada-bpe 1 4096        magic, format version, vocabulary size
//   116 104               merge 0 -> id 256 joins ids 116 ('t') and 104 ('h')
//   32 256                merge 1 -> id 257 joins ' ' and id 256 ("th")
//   ...                   exactly vocab_size - 256 merge lines, each two
//                         decimal ids that already exist at that line
//                         (< 256 + line's merge index); no duplicate pairs;
//                         vocab_size <= kMaxBpeVocab, and no token longer
//                         than kMaxTokenBytes bytes
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/tokenizer.h"

namespace ada {

// Bounds on every BPE vocabulary, checked when one is loaded or trained, so
// that a hostile file cannot exhaust memory: a chain of merges ("97 97",
// "256 256", "257 257", ...) doubles a token's length at each line. GPT-2 has
// 50,257 tokens of at most 128 bytes; the worst vocabulary within both bounds
// holds 64 MiB of token bytes.
constexpr uint32_t kMaxBpeVocab = 1u << 18;  // 262,144 tokens
constexpr size_t kMaxTokenBytes = 256;
// A tokenizer file above this size is refused (GPT-2's two files are 1.5 MB).
constexpr size_t kMaxTokenizerFileBytes = size_t(64) << 20;  // 64 MiB

// Reads a whole tokenizer file of at most kMaxTokenizerFileBytes; also from a
// pipe or a device, which is read no further than the limit. `what` names the
// kind of file in errors ("BPE file"): not found, a folder, unreadable, too
// large, empty.
std::string read_tokenizer_file(const std::string& path, const std::string& what);

// Adjacent tokens `left` then `right` become token `result`.
struct BpeRule {
  int32_t left, right, result;
};

// Applies ranked merge rules to text. Immutable after construction, so one
// encoder may be used from several threads.
class BpeEncoder {
 public:
  BpeEncoder() = default;
  // byte_ids[b]: the token of the single byte b. rules[r] has rank r (lower
  // ranks merge first); for a repeated (left, right) pair the first one counts.
  BpeEncoder(const std::array<int32_t, 256>& byte_ids, const std::vector<BpeRule>& rules);

  // Pre-tokenizes text and encodes each chunk. Chunks repeat a lot in natural
  // text, so each distinct chunk is encoded once per call (a local cache).
  std::vector<int32_t> encode(std::string_view text) const;
  // Appends the tokens of one chunk to out. Cost: O(len log len).
  void encode_chunk(std::string_view chunk, std::vector<int32_t>& out) const;

  const std::array<int32_t, 256>& byte_ids() const { return byte_ids_; }
  const std::vector<BpeRule>& rules() const { return rules_; }

 private:
  struct Merge {
    int32_t rank, result;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
  }
  std::array<int32_t, 256> byte_ids_{};
  std::vector<BpeRule> rules_;  // by rank
  std::unordered_map<uint64_t, Merge> merges_;
};

// One merge of our BPE: ids `left` and `right` join into a new id.
struct BpeMerge {
  int32_t left, right;
  bool operator==(const BpeMerge& o) const { return left == o.left && right == o.right; }
};

// Learns vocab_size - 256 merges from text. Greedy: each step merges the most
// frequent adjacent pair over all chunks (counted with chunk multiplicity).
// Ties go to the smallest (left, right) pair, so the result is deterministic.
// Stops early, returning fewer merges, when no pair occurs at least twice.
// A pair whose token would be longer than kMaxTokenBytes is never merged, and
// vocab_size may not exceed kMaxBpeVocab.
std::vector<BpeMerge> train_bpe(std::string_view text, uint32_t vocab_size);

// Writes / reads the "ada-bpe" file format above. load_bpe throws ada::Error
// naming the file (and line) for a missing, empty or malformed file.
void save_bpe(const std::string& path, const std::vector<BpeMerge>& merges);
std::vector<BpeMerge> load_bpe(const std::string& path);

class BpeTokenizer : public Tokenizer {
 public:
  // Throws ada::Error when a merge uses an id that does not exist yet,
  // repeats an earlier pair or makes a token longer than kMaxTokenBytes, or
  // when there are more than kMaxBpeVocab - 256 merges.
  explicit BpeTokenizer(std::vector<BpeMerge> merges);

  std::vector<int32_t> encode(const std::string& text) const override;
  std::string decode_token(int32_t id) const override;
  uint32_t vocab_size() const override { return uint32_t(token_bytes_.size()); }
  std::string name() const override { return "bpe" + std::to_string(vocab_size()); }
  const std::vector<BpeMerge>& merges() const { return merges_; }
  const BpeEncoder& encoder() const { return encoder_; }

 private:
  std::vector<BpeMerge> merges_;
  std::vector<std::string> token_bytes_;  // id -> bytes
  BpeEncoder encoder_;
};

}  // namespace ada
