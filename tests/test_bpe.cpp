// Our byte-level BPE: training (first merges computed by hand, determinism,
// the shipped data/kjv_bpe4096.txt), encoding, the round trip on arbitrary
// bytes and on the corpus, and the file format's validation errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <unistd.h>

#include "core/common.h"
#include "text/bpe.h"
#include "text/pretokenize.h"
#include "text/tokenizer.h"

namespace ada {
namespace {

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

std::string temp_path(const std::string& name) {
  return testing::TempDir() + "ada_bpe_" + std::to_string(::getpid()) + "_" + name;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

// Runs fn, expecting an ada::Error whose message contains `needle`.
template <class Fn>
void expect_error(Fn fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an ada::Error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(BpeTrain, FirstMergesByHand) {
  // Chunks: "abab", " abab", " ab".
  // Pair counts: (a,b)=2+2+1=5, (b,a)=1+1=2, (' ',a)=1+1=2  -> merge 0 = (a,b) -> 256.
  // Words become [256,256], [' ',256,256], [' ',256]:
  // (256,256)=2, (' ',256)=2: a tie, broken by the smaller left id ' ' (32)
  //                                                            -> merge 1 = (' ',256) -> 257.
  // Words become [256,256], [257,256], [257]: every pair occurs once, so training stops.
  const auto merges = train_bpe("abab abab ab", 300);
  ASSERT_EQ(merges.size(), 2u);
  EXPECT_EQ(merges[0], (BpeMerge{'a', 'b'}));
  EXPECT_EQ(merges[1], (BpeMerge{' ', 256}));

  BpeTokenizer tok(merges);
  EXPECT_EQ(tok.vocab_size(), 258u);
  EXPECT_EQ(tok.decode_token(257), " ab");
  EXPECT_EQ(tok.encode("abab ab"), (std::vector<int32_t>{256, 256, 257}));
  EXPECT_EQ(tok.encode("ba"), (std::vector<int32_t>{'b', 'a'}));
}

TEST(BpeTrain, OverlappingPairsCountedAndMergedLeftToRight) {
  // "aaa aaa": chunks "aaa", " aaa". (a,a) occurs 2+2 = 4 times -> 256 = "aa";
  // each word becomes "aa"+"a": (256,'a') = 2 -> 257 = "aaa"; then
  // (' ',257) occurs once -> stop.
  const auto merges = train_bpe("aaa aaa", 1000);
  ASSERT_EQ(merges.size(), 2u);
  EXPECT_EQ(merges[0], (BpeMerge{'a', 'a'}));
  EXPECT_EQ(merges[1], (BpeMerge{256, 'a'}));
  BpeTokenizer tok(merges);
  // Left to right: "aaaa" -> "aa" "aa" (never "a" "aaa").
  EXPECT_EQ(tok.encode("aaaa"), (std::vector<int32_t>{256, 256}));
  EXPECT_EQ(tok.encode("aaaaa"), (std::vector<int32_t>{256, 257}));
}

TEST(BpeTrain, StopsAtRequestedSizeAndRejectsTooSmall) {
  const std::string text = "the cat sat on the mat with the hat; the bat ate the rat";
  EXPECT_EQ(train_bpe(text, 256).size(), 0u);
  EXPECT_EQ(train_bpe(text, 260).size(), 4u);
  expect_error([&] { train_bpe(text, 100); }, "at least 256");
}

TEST(BpeTrain, DeterministicAndMergesNeverCrossChunks) {
  const std::string text = slurp(data_dir() + "/kjv.txt").substr(0, 200000);
  const auto a = train_bpe(text, 700);
  const auto b = train_bpe(text, 700);
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), 700u - 256u);
  BpeTokenizer tok(a);
  // No token spans two pre-tokenizer chunks: encoding chunk by chunk gives
  // the same ids as encoding the whole text.
  std::vector<int32_t> by_chunk;
  const std::string sample = text.substr(0, 20000);
  for (std::string_view chunk : pretokenize(sample)) {
    const auto ids = tok.encode(std::string(chunk));
    by_chunk.insert(by_chunk.end(), ids.begin(), ids.end());
  }
  EXPECT_EQ(tok.encode(sample), by_chunk);
}

// The simple trainer the incremental one must equal: recount every pair of
// every word at each step, merge the most frequent allowed pair (ties: the
// smallest pair) left to right everywhere, stop when none occurs twice.
std::vector<BpeMerge> reference_train_bpe(const std::string& text, uint32_t vocab_size) {
  std::map<std::string_view, int64_t> chunk_counts;
  for (std::string_view chunk : pretokenize(text)) ++chunk_counts[chunk];
  std::vector<std::pair<std::vector<int32_t>, int64_t>> words;
  for (const auto& [chunk, count] : chunk_counts) {
    std::vector<int32_t> syms;
    for (char c : chunk) syms.push_back(static_cast<unsigned char>(c));
    words.push_back({syms, count});
  }
  std::vector<BpeMerge> merges;
  std::vector<size_t> len(256, 1);
  while (256 + merges.size() < vocab_size) {
    std::map<std::pair<int32_t, int32_t>, int64_t> counts;
    for (const auto& [syms, count] : words) {
      for (size_t i = 0; i + 1 < syms.size(); ++i) counts[{syms[i], syms[i + 1]}] += count;
    }
    std::pair<int32_t, int32_t> best{-1, -1};
    int64_t best_count = 0;
    for (const auto& [pair, count] : counts) {  // in increasing pair order: the first maximum wins ties
      if (count > best_count && len[pair.first] + len[pair.second] <= kMaxTokenBytes) {
        best = pair;
        best_count = count;
      }
    }
    if (best_count < 2) break;
    const int32_t id = int32_t(256 + merges.size());
    merges.push_back({best.first, best.second});
    len.push_back(len[best.first] + len[best.second]);
    for (auto& [syms, count] : words) {
      std::vector<int32_t> out;
      for (size_t i = 0; i < syms.size();) {
        if (i + 1 < syms.size() && syms[i] == best.first && syms[i + 1] == best.second) {
          out.push_back(id);
          i += 2;
        } else {
          out.push_back(syms[i++]);
        }
      }
      syms = out;
    }
  }
  return merges;
}

TEST(BpeTrain, MatchesSimpleReference) {
  std::mt19937 rng(99);
  const std::string kjv = slurp(data_dir() + "/kjv.txt");
  ASSERT_GT(kjv.size(), 100000u);
  for (int trial = 0; trial < 40; ++trial) {
    std::string text;
    const int len = std::uniform_int_distribution<int>(1, 3000)(rng);
    switch (trial % 4) {
      case 0:  // a slice of the corpus
        text = kjv.substr(rng() % (kjv.size() - 3000), len);
        break;
      case 1:  // short words over a small alphabet
        for (int i = 0; i < len; ++i) text += " abc"[rng() % 4];
        break;
      case 2:  // one long word over a small alphabet
        for (int i = 0; i < len; ++i) text += "ab"[rng() % 2];
        break;
      default:  // runs of one letter, long enough to meet the token length limit
        for (int i = 0; i < len; ++i) text += (rng() % 300 == 0) ? ' ' : 'a';
        break;
    }
    const uint32_t vocab = 256 + std::uniform_int_distribution<uint32_t>(0, 200)(rng);
    ASSERT_EQ(train_bpe(text, vocab), reference_train_bpe(text, vocab)) << "trial " << trial;
  }
}

TEST(BpeTrain, ShippedKjvVocabularyIsReproducible) {
  // data/kjv_bpe4096.txt was written by
  //   ./tokenize --train-bpe 4096 --bpe-out data/kjv_bpe4096.txt data/kjv.txt
  const std::string text = slurp(data_dir() + "/kjv.txt");
  ASSERT_GT(text.size(), 4000000u);
  const auto t0 = std::chrono::steady_clock::now();
  const auto merges = train_bpe(text, 4096);
  std::printf("[ timing ] train_bpe(kjv.txt, 4096): %.2f s\n", seconds_since(t0));
  EXPECT_EQ(merges, load_bpe(data_dir() + "/kjv_bpe4096.txt"));
}

TEST(BpeTokenizer, RoundTripRandomBytes) {
  BpeTokenizer shipped(load_bpe(data_dir() + "/kjv_bpe4096.txt"));
  BpeTokenizer small(train_bpe("abab abab ab aaa aaa \xff\xfe\xff\xfe \n\n  \n", 400));
  std::mt19937 rng(1234);
  // Bytes drawn from a mix that hits every pre-tokenizer class and invalid UTF-8.
  const std::string pool = std::string("aeiou thsnrdAE0129.,'!?\n\t ") + std::string("\0\x80\xbf\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\xff", 14);
  for (int trial = 0; trial < 400; ++trial) {
    const int len = std::uniform_int_distribution<int>(0, 120)(rng);
    std::string s;
    for (int i = 0; i < len; ++i) {
      s += trial % 2 ? char(rng() & 0xFF) : pool[rng() % pool.size()];
    }
    for (const BpeTokenizer* tok : {&shipped, &small}) {
      const auto ids = tok->encode(s);
      for (int32_t id : ids) ASSERT_LT(uint32_t(id), tok->vocab_size());
      ASSERT_EQ(tok->decode(ids), s) << "trial " << trial;
    }
  }
}

TEST(BpeTokenizer, EncodesCorpusQuicklyAndRoundTrips) {
  const std::string text = slurp(data_dir() + "/kjv.txt");
  auto tok = load_tokenizer(data_dir() + "/kjv_bpe4096.txt");
  EXPECT_EQ(tok->name(), "bpe4096");
  EXPECT_EQ(tok->vocab_size(), 4096u);
  EXPECT_EQ(tok->eot_id(), -1);
  const auto t0 = std::chrono::steady_clock::now();
  const auto ids = tok->encode(text);
  const double s = seconds_since(t0);
  std::printf("[ timing ] bpe4096 encode kjv.txt: %zu bytes -> %zu tokens in %.2f s (%.2fM tokens/s)\n",
              text.size(), ids.size(), s, ids.size() / s / 1e6);
  EXPECT_LT(ids.size() * 3, text.size());  // a 4096 vocabulary compresses > 3 bytes/token here
  EXPECT_EQ(tok->decode(ids), text);
}

TEST(BpeFile, SaveLoadRoundTrip) {
  const auto merges = train_bpe("one two three two three three", 270);
  const std::string path = temp_path("roundtrip.txt");
  save_bpe(path, merges);
  EXPECT_EQ(load_bpe(path), merges);
  const std::string text = slurp(path);
  EXPECT_EQ(text.substr(0, text.find('\n')), "ada-bpe 1 " + std::to_string(256 + merges.size()));
  std::remove(path.c_str());
}

TEST(BpeFile, ValidationErrors) {
  const std::string path = temp_path("bad.txt");
  expect_error([&] { load_bpe(path + ".missing"); }, "not found");
  write_text(path, "");
  expect_error([&] { load_bpe(path); }, "empty");
  write_text(path, "#version: 0.2\nx y\n");
  expect_error([&] { load_bpe(path); }, "not an ada-bpe file");
  write_text(path, "ada-bpe 2 258\n97 98\n256 97\n");
  expect_error([&] { load_bpe(path); }, "unsupported ada-bpe version 2");
  write_text(path, "ada-bpe 1 259\n97 98\n256 97\n");
  expect_error([&] { load_bpe(path); }, "header says vocabulary size 259 (3 merges) but the file has 2");
  write_text(path, "ada-bpe 1 258\n97 98\n300 97\n");
  expect_error([&] { load_bpe(path); }, "line 3: merge uses token 300 which is not defined yet");
  write_text(path, "ada-bpe 1 258\n97 98\n97 98\n");
  expect_error([&] { load_bpe(path); }, "line 3: duplicate merge");
  write_text(path, "ada-bpe 1 258\n97 98\n97 x\n");
  expect_error([&] { load_bpe(path); }, "line 3: expected two token ids");
  write_text(path, "ada-bpe 1 257\n97 98 99\n");
  expect_error([&] { load_bpe(path); }, "line 2: expected two token ids");
  std::remove(path.c_str());
  // And through load_tokenizer, which names the path.
  expect_error([&] { load_tokenizer(path + ".nope"); }, "tokenizer not found");
}

// Issue 14: files that would exhaust memory are refused at load, naming the
// file and the line.
TEST(BpeFile, RefusesMergeBombsAndAbsurdSizes) {
  const std::string path = temp_path("bomb.txt");
  // A chain of merges doubles a token at each line: 2, 4, ..., 256 bytes are
  // allowed (8 merges, lines 2..9); the 512-byte token of line 10 is not.
  std::string bomb = "ada-bpe 1 300\n97 97\n";
  for (int id = 256; id < 256 + 43; ++id) bomb += std::to_string(id) + " " + std::to_string(id) + "\n";
  write_text(path, bomb);
  expect_error([&] { load_bpe(path); },
               path + " line 10: merge 263 263 makes a token of 512 bytes, above the limit of 256");
  // The same chain built in memory.
  std::vector<BpeMerge> chain = {{'a', 'a'}};
  for (int32_t id = 256; id < 256 + 8; ++id) chain.push_back({id, id});
  expect_error([&] { BpeTokenizer{chain}; }, "BPE merge 8 makes a token of 512 bytes, above the limit of 256");
  chain.pop_back();
  EXPECT_EQ(BpeTokenizer(chain).decode_token(263), std::string(256, 'a'));  // exactly the limit is fine
  // Vocabulary sizes above the limit, in the header or in memory.
  write_text(path, "ada-bpe 1 2147483647\n97 98\n");
  expect_error([&] { load_bpe(path); }, path + " line 1: vocabulary size 2147483647 is above the limit of 262144");
  write_text(path, "ada-bpe 1 262145\n97 98\n");
  expect_error([&] { load_bpe(path); }, "vocabulary size 262145 is above the limit of 262144");
  expect_error([] { BpeTokenizer(std::vector<BpeMerge>(kMaxBpeVocab - 255, BpeMerge{0, 0})); },
               "BPE vocabulary of 262145 tokens is above the limit of 262144");
  expect_error([] { train_bpe("abc", kMaxBpeVocab + 1); }, "above the limit of 262144");
  // More merge lines than the header announces: refused at the first extra line.
  write_text(path, "ada-bpe 1 257\n97 98\n97 99\n" + std::string(1000, '\n'));
  expect_error([&] { load_bpe(path); }, path + " line 3: more merges than the header's vocabulary size 257 allows (1)");
  // A line with a great many fields is one malformed line.
  std::string many = "ada-bpe 1 257\n";
  for (int i = 0; i < (1 << 19); ++i) many += "7 ";
  write_text(path, many + "\n");
  expect_error([&] { load_bpe(path); }, path + " line 2: expected two token ids");
  // A file above the size limit is refused before it is read (a sparse file).
  write_text(path, "");
  ASSERT_EQ(::truncate(path.c_str(), off_t(kMaxTokenizerFileBytes) + 1), 0);
  expect_error([&] { load_bpe(path); }, "is 67108865 bytes, above the limit of 67108864 for a tokenizer file");
  std::remove(path.c_str());
  // An endless device is read no further than the limit; a folder is named as one.
  expect_error([] { load_bpe("/dev/zero"); }, "BPE file /dev/zero is larger than the limit of 67108864 bytes");
  expect_error([] { load_bpe(testing::TempDir()); }, "is a folder, not a file");
}

TEST(BpeTrain, NeverMakesTokensAboveTheLengthLimit) {
  // One chunk of 5000 'a's: unbounded training would make "a" * 2^k tokens
  // up to 4096 bytes. The trainer stops each chain at kMaxTokenBytes, and the
  // file it writes loads again.
  const auto merges = train_bpe(std::string(5000, 'a') + " " + std::string(5000, 'a'), 400);
  BpeTokenizer tok(merges);
  size_t longest = 0;
  for (uint32_t id = 0; id < tok.vocab_size(); ++id) longest = std::max(longest, tok.decode_token(id).size());
  EXPECT_EQ(longest, kMaxTokenBytes);
  const std::string path = temp_path("long_tokens.txt");
  save_bpe(path, merges);
  EXPECT_EQ(load_bpe(path), merges);
  std::remove(path.c_str());
  const std::string text(3000, 'a');
  EXPECT_EQ(tok.decode(tok.encode(text)), text);
}

TEST(BpeTokenizer, RejectsBadMergesAndIds) {
  expect_error([] { BpeTokenizer({{'a', 256}}); }, "does not exist yet");
  expect_error([] { BpeTokenizer({{'a', 'b'}, {'a', 'b'}}); }, "repeats an earlier pair");
  BpeTokenizer tok({{'a', 'b'}});
  expect_error([&] { tok.decode_token(257); }, "outside the bpe257 vocabulary");
  expect_error([&] { tok.decode_token(-1); }, "outside");
}

TEST(ByteTokenizer, IdentityOnAnyBytes) {
  auto tok = load_tokenizer("bytes");
  const std::string s("a\0\xff\n", 4);
  EXPECT_EQ(tok->encode(s), (std::vector<int32_t>{'a', 0, 255, '\n'}));
  EXPECT_EQ(tok->decode(tok->encode(s)), s);
  EXPECT_EQ(tok->vocab_size(), 256u);
  expect_error([&] { tok->decode_token(256); }, "outside the bytes vocabulary");
}

}  // namespace
}  // namespace ada
