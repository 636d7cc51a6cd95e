// The heap-based merge of BpeEncoder::encode_chunk against the simple
// quadratic algorithm (GPT-2's encoder.py, kept here as the reference): on
// random rule sets, random strings, long words, and every distinct chunk of
// data/kjv.txt, for our BPE and for GPT-2's. Ids must be identical.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>

#include "text/bpe.h"
#include "text/gpt2_tokenizer.h"
#include "text/pretokenize.h"

namespace ada {
namespace {

using Ids = std::vector<int32_t>;

std::string data_dir() {
  const char* d = std::getenv("ADA_DATA_DIR");
  return d ? d : "data";
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The reference: while some adjacent pair has a rule, take the pair whose
// rule has the lowest rank (the first rule of a repeated pair counts) and
// replace all its occurrences, scanning left to right.
class ReferenceBpe {
 public:
  explicit ReferenceBpe(const BpeEncoder& enc) : byte_ids_(enc.byte_ids()) {
    const auto& rules = enc.rules();
    for (size_t r = 0; r < rules.size(); ++r) {
      rank_.emplace(std::make_pair(rules[r].left, rules[r].right), std::make_pair(int32_t(r), rules[r].result));
    }
  }

  Ids encode_chunk(std::string_view chunk) const {
    Ids syms;
    for (char c : chunk) syms.push_back(byte_ids_[static_cast<unsigned char>(c)]);
    while (true) {
      int32_t best_rank = -1, best_result = 0, left = 0, right = 0;
      for (size_t i = 0; i + 1 < syms.size(); ++i) {
        auto it = rank_.find({syms[i], syms[i + 1]});
        if (it != rank_.end() && (best_rank < 0 || it->second.first < best_rank)) {
          best_rank = it->second.first;
          best_result = it->second.second;
          left = syms[i];
          right = syms[i + 1];
        }
      }
      if (best_rank < 0) return syms;
      Ids merged;
      for (size_t i = 0; i < syms.size();) {
        if (i + 1 < syms.size() && syms[i] == left && syms[i + 1] == right) {
          merged.push_back(best_result);
          i += 2;
        } else {
          merged.push_back(syms[i++]);
        }
      }
      syms = merged;
    }
  }

 private:
  std::array<int32_t, 256> byte_ids_;
  std::map<std::pair<int32_t, int32_t>, std::pair<int32_t, int32_t>> rank_;  // pair -> (rank, result)
};

Ids fast_encode_chunk(const BpeEncoder& enc, std::string_view chunk) {
  Ids out;
  enc.encode_chunk(chunk, out);
  return out;
}

// Every distinct pre-tokenizer chunk of the text, each encoded both ways.
void expect_same_on_chunks(const BpeEncoder& enc, const std::string& text) {
  const ReferenceBpe ref(enc);
  std::set<std::string_view> seen;
  for (std::string_view chunk : pretokenize(text)) {
    if (!seen.insert(chunk).second) continue;
    ASSERT_EQ(fast_encode_chunk(enc, chunk), ref.encode_chunk(chunk)) << "chunk '" << chunk << "'";
  }
}

// Strings that make long chunks with many merges: letters from a small
// alphabet (one long word), runs of one letter, and two-letter cycles.
std::vector<std::string> hard_strings(std::mt19937& rng, const std::string& alphabet, int count, int max_len) {
  std::vector<std::string> out;
  for (int t = 0; t < count; ++t) {
    const int len = std::uniform_int_distribution<int>(1, max_len)(rng);
    std::string s;
    for (int i = 0; i < len; ++i) {
      switch (t % 4) {
        case 0: s += alphabet[rng() % alphabet.size()]; break;
        case 1: s += alphabet[rng() % 3]; break;
        case 2: s += alphabet[0]; break;
        default: s += alphabet[i % 2]; break;
      }
    }
    out.push_back(s);
  }
  return out;
}

TEST(BpeMerge, RandomRuleSetsMatchReference) {
  // Arbitrary rules over a small alphabet, including the unusual cases the
  // heap must still get right: repeated pairs (the first counts), a result
  // equal to one of its inputs, and pairs made by a merge whose rank is lower
  // than the merge's own.
  std::mt19937 rng(7);
  int merges_seen = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::array<int32_t, 256> byte_ids;
    for (int b = 0; b < 256; ++b) byte_ids[b] = b % 6;
    std::vector<BpeRule> rules;
    const int n_rules = std::uniform_int_distribution<int>(1, 30)(rng);
    for (int r = 0; r < n_rules; ++r) {
      rules.push_back({int32_t(rng() % 10), int32_t(rng() % 10), int32_t(rng() % 12)});
    }
    const BpeEncoder enc(byte_ids, rules);
    const ReferenceBpe ref(enc);
    for (int s = 0; s < 20; ++s) {
      std::string chunk;
      const int len = std::uniform_int_distribution<int>(0, 40)(rng);
      for (int i = 0; i < len; ++i) chunk += char(rng() % 6);
      const Ids want = ref.encode_chunk(chunk);
      merges_seen += int(chunk.size() - want.size());
      ASSERT_EQ(fast_encode_chunk(enc, chunk), want) << "trial " << trial << " string " << s;
    }
  }
  EXPECT_GT(merges_seen, 10000);  // the rule sets really merged
}

TEST(BpeMerge, ShippedBpeMatchesReference) {
  const BpeTokenizer tok(load_bpe(data_dir() + "/kjv_bpe4096.txt"));
  const std::string kjv = slurp(data_dir() + "/kjv.txt");
  ASSERT_GT(kjv.size(), 4000000u);
  expect_same_on_chunks(tok.encoder(), kjv);
  std::mt19937 rng(11);
  const ReferenceBpe ref(tok.encoder());
  for (const std::string& s : hard_strings(rng, "etaoinshrdlu", 200, 300)) {
    ASSERT_EQ(fast_encode_chunk(tok.encoder(), s), ref.encode_chunk(s)) << s;
  }
  // One long word: the letters of the corpus without anything between them.
  std::string word;
  for (char c : kjv.substr(0, 8000)) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) word += c;
  }
  EXPECT_EQ(fast_encode_chunk(tok.encoder(), word), ref.encode_chunk(word));
}

TEST(BpeMerge, Gpt2MatchesReference) {
  const Gpt2Tokenizer tok(data_dir() + "/gpt2/encoder.json", data_dir() + "/gpt2/vocab.bpe");
  const std::string kjv = slurp(data_dir() + "/kjv.txt");
  ASSERT_GT(kjv.size(), 4000000u);
  expect_same_on_chunks(tok.encoder(), kjv);
  std::mt19937 rng(13);
  const ReferenceBpe ref(tok.encoder());
  for (const std::string& s : hard_strings(rng, "etaoinshrdlu", 200, 300)) {
    ASSERT_EQ(fast_encode_chunk(tok.encoder(), s), ref.encode_chunk(s)) << s;
  }
  // Random bytes (invalid UTF-8 included) as single chunks.
  for (int t = 0; t < 200; ++t) {
    std::string s;
    const int len = std::uniform_int_distribution<int>(1, 100)(rng);
    for (int i = 0; i < len; ++i) s += char(rng() & 0xFF);
    ASSERT_EQ(fast_encode_chunk(tok.encoder(), s), ref.encode_chunk(s)) << "trial " << t;
  }
  std::string word;
  for (char c : kjv.substr(0, 8000)) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) word += c;
  }
  EXPECT_EQ(fast_encode_chunk(tok.encoder(), word), ref.encode_chunk(word));
}

}  // namespace
}  // namespace ada
