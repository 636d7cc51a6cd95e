// GPT-2 tokenizer: ids equal to an independent Python reference and to ids
// known from GPT-2 itself, the pre-tokenizer's regex semantics, the
// invalid-UTF-8 fallback, decoding round trips, and load errors.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <unistd.h>

#include "core/common.h"
#include "text/gpt2_tokenizer.h"
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

template <class Fn>
void expect_error(Fn fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an ada::Error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}

// Loaded once for the whole suite (~0.15 s).
const Tokenizer& gpt2() {
  static std::unique_ptr<Tokenizer> tok = load_tokenizer(data_dir() + "/gpt2");
  return *tok;
}

std::vector<std::string> chunks(const std::string& s) {
  std::vector<std::string> out;
  for (std::string_view c : pretokenize(s)) out.emplace_back(c);
  return out;
}

using Ids = std::vector<int32_t>;

TEST(Gpt2Tokenizer, IdsKnownFromGpt2) {
  const Tokenizer& tok = gpt2();
  EXPECT_EQ(tok.name(), "gpt2");
  EXPECT_EQ(tok.vocab_size(), 50257u);
  EXPECT_EQ(tok.eot_id(), 50256);
  EXPECT_EQ(tok.encode("Hello world"), (Ids{15496, 995}));
  EXPECT_EQ(tok.encode(" the"), (Ids{262}));
  EXPECT_EQ(tok.encode("\n"), (Ids{198}));
  EXPECT_EQ(tok.encode("\n\n"), (Ids{628}));
  EXPECT_EQ(tok.decode_token(50256), "<|endoftext|>");
  // Special tokens are not recognised inside text: "<|endoftext|>" is encoded
  // as the plain characters "<", "|", "end", "of", "text", "|", ">".
  EXPECT_EQ(tok.encode("<|endoftext|>"), (Ids{27, 91, 437, 1659, 5239, 91, 29}));
  EXPECT_EQ(tok.encode(""), Ids{});
}

// Expected ids produced by the independent Python reference:
//   python3 tests/gpt2_reference.py data/gpt2 --self-check
// (the --self-check also confirmed its hand-written pre-tokenizer against the
// `regex` module running GPT-2's real pattern on these strings).
struct Case {
  std::string text;
  Ids ids;
};
const Case kReferenceCases[] = {
    {std::string("Hello world", 11), {15496, 995}},
    {std::string("Hello, world! How's it going? I'm fine; we'll see, they've done, you'd think, we're here.", 89), {15496, 11, 995, 0, 1374, 338, 340, 1016, 30, 314, 1101, 3734, 26, 356, 1183, 766, 11, 484, 1053, 1760, 11, 345, 1549, 892, 11, 356, 821, 994, 13}},
    {std::string("don't DON'T 'S 'twas rock'n'roll '' ''s x's ?'s", 47), {9099, 470, 23917, 6, 51, 705, 50, 705, 4246, 292, 3881, 6, 77, 6, 2487, 10148, 10148, 82, 2124, 338, 5633, 6, 82}},
    {std::string("  leading spaces and trailing   ", 32), {220, 3756, 9029, 290, 25462, 220, 220, 220}},
    {std::string("a  b   c    d", 13), {64, 220, 275, 220, 220, 269, 220, 220, 220, 288}},
    {std::string("line1\012line2\012\012line3\012\012\012  indented\012", 32), {1370, 16, 198, 1370, 17, 198, 198, 1370, 18, 628, 198, 220, 773, 4714, 198}},
    {std::string("\011\011tabs\011and\015\012CRLF \012\012", 19), {197, 197, 8658, 82, 197, 392, 201, 198, 34, 7836, 37, 220, 628}},
    {std::string("Numbers: 3.14159, 1,000,000 and 2024-05-20; 12345678901234567890", 64), {49601, 25, 513, 13, 1415, 19707, 11, 352, 11, 830, 11, 830, 290, 48609, 12, 2713, 12, 1238, 26, 17031, 2231, 3134, 4531, 486, 1954, 2231, 30924, 3829}},
    {std::string("\302\275 \342\205\253 \331\243 \302\262 10\302\275", 17), {23141, 2343, 227, 104, 18923, 96, 1587, 110, 838, 23141}},
    {std::string("na\303\257ve caf\303\251 r\303\251sum\303\251 \316\251mega Stra\303\237e \320\234\320\276\321\201\320\272\320\262\320\260", 49), {2616, 38776, 40304, 40560, 16345, 2634, 7377, 102, 13731, 15195, 39683, 68, 12466, 250, 15166, 21727, 31583, 38857, 16142}},
    {std::string("\344\270\255\346\226\207\345\255\227\347\254\246\346\265\213\350\257\225 \346\227\245\346\234\254\350\252\236\343\201\256\343\203\206\343\202\255\343\202\271\343\203\210 \355\225\234\352\265\255\354\226\264", 53), {40792, 23877, 229, 27764, 245, 163, 105, 99, 38184, 233, 46237, 243, 10545, 245, 98, 17312, 105, 45739, 252, 5641, 24336, 25084, 43302, 220, 47991, 250, 166, 113, 255, 168, 244, 112}},
    {std::string("emoji \360\237\230\200\360\237\221\215\360\237\217\275 and flags \360\237\207\272\360\237\207\270! family \360\237\221\250\342\200\215\360\237\221\251\342\200\215\360\237\221\247", 64), {368, 31370, 30325, 222, 41840, 235, 8582, 237, 121, 290, 9701, 12520, 229, 118, 8582, 229, 116, 0, 1641, 50169, 101, 447, 235, 41840, 102, 447, 235, 41840, 100}},
    {std::string("mixed: hello123world 123abc ...!!! ??? --- *** (parens) [brackets] {braces}", 75), {76, 2966, 25, 23748, 10163, 6894, 17031, 39305, 2644, 10185, 34913, 11420, 17202, 357, 11730, 82, 8, 685, 1671, 25180, 60, 1391, 1671, 2114, 92}},
    {std::string("<|endoftext|>", 13), {27, 91, 437, 1659, 5239, 91, 29}},
    {std::string("   ", 3), {220, 220, 220}},
    {std::string("\012", 1), {198}},
    {std::string(" ", 1), {220}},
    {std::string("x \302\240y\343\200\200z \342\200\203 w", 15), {87, 220, 1849, 88, 5099, 222, 89, 564, 225, 266}},
    {std::string("e\314\201 decomposed \342\200\213 zero width", 29), {68, 136, 223, 38237, 1335, 20126, 6632, 9647}},
    {std::string("def f(x):\012    return x**2  # comment\012", 37), {4299, 277, 7, 87, 2599, 198, 220, 220, 220, 1441, 2124, 1174, 17, 220, 1303, 2912, 198}},
    {std::string("nul\000byte\001\177", 10), {77, 377, 188, 26327, 189, 221}},
    {std::string("  2 And the earth was without form, and void;", 45), {220, 362, 843, 262, 4534, 373, 1231, 1296, 11, 290, 7951, 26}},
};

TEST(Gpt2Tokenizer, MatchesPythonReference) {
  const Tokenizer& tok = gpt2();
  for (const Case& c : kReferenceCases) {
    EXPECT_EQ(tok.encode(c.text), c.ids) << "text: " << c.text;
    EXPECT_EQ(tok.decode(c.ids), c.text);
  }
}

TEST(Gpt2Tokenizer, WholeCorpusMatchesPythonReference) {
  // From the same Python reference over all of data/kjv.txt: token count, sum
  // of ids, first/last ids, and h = (h * 1000003 + id) mod 2^64 over all ids.
  const std::string text = slurp(data_dir() + "/kjv.txt");
  const Tokenizer& tok = gpt2();
  const auto t0 = std::chrono::steady_clock::now();
  const Ids ids = tok.encode(text);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ timing ] gpt2 encode kjv.txt: %zu bytes -> %zu tokens in %.2f s (%.2fM tokens/s)\n", text.size(),
              ids.size(), s, ids.size() / s / 1e6);
  ASSERT_EQ(ids.size(), 1091511u);
  uint64_t sum = 0, hash = 0;
  for (int32_t id : ids) {
    sum += uint64_t(id);
    hash = hash * 1000003u + uint64_t(id);
  }
  EXPECT_EQ(sum, 4178633962u);
  EXPECT_EQ(hash, 13885150325476873522u);
  EXPECT_EQ(Ids(ids.begin(), ids.begin() + 8), (Ids{198, 13746, 9339, 352, 628, 220, 352, 554}));
  EXPECT_EQ(Ids(ids.end() - 8, ids.end()), (Ids{307, 351, 345, 477, 13, 34717, 13, 198}));
  EXPECT_EQ(tok.decode(ids), text);
}

// Expected chunks written by hand from the pattern; each was also checked
// with Python's `regex` module: regex.findall(GPT2_PATTERN, s).
TEST(Gpt2Pretokenizer, RegexRules) {
  using V = std::vector<std::string>;
  // Contractions split off (lowercase only), even mid-word.
  // " 'sup" starts with a space, so " ?[^\s\p{L}\p{N}]+" takes " '" first.
  EXPECT_EQ(chunks("don't we'll I'M 'sup"), (V{"don", "'t", " we", "'ll", " I", "'", "M", " '", "sup"}));
  EXPECT_EQ(chunks("'sup"), (V{"'s", "up"}));
  // Letters, numbers and other characters form separate runs; one leading space joins.
  EXPECT_EQ(chunks("abc123 456def ...x"), (V{"abc", "123", " 456", "def", " ...", "x"}));
  // A run of spaces before a word leaves its last space to the word.
  EXPECT_EQ(chunks("a   b"), (V{"a", "  ", " b"}));
  // ...but only U+0020 can join: a tab stays alone (\s+ for a single character).
  EXPECT_EQ(chunks("a \tb"), (V{"a", " ", "\t", "b"}));
  // Whitespace at the end is one chunk; newlines before a word split as n-1, 1.
  EXPECT_EQ(chunks("x\n\n\ny  "), (V{"x", "\n\n", "\n", "y", "  "}));
  // Unicode classes: letters with accents, CJK, a non-ASCII number, NBSP as space.
  EXPECT_EQ(chunks("caf\u00e9 \u4e2d\u6587 \u00bd\xc2\xa0z"),
            (V{"caf\u00e9", " \u4e2d\u6587", " \u00bd", "\xc2\xa0", "z"}));
  // U+001C..U+001F are not \s for regex (though str.isspace says so).
  EXPECT_EQ(chunks("a\x1c b"), (V{"a", "\x1c", " b"}));
  EXPECT_EQ(char_class(0x1C), CharClass::kOther);
  EXPECT_EQ(char_class(0x3000), CharClass::kSpace);
  EXPECT_EQ(char_class(0x0663), CharClass::kNumber);  // ARABIC-INDIC DIGIT THREE
  EXPECT_EQ(char_class(0x01C5), CharClass::kLetter);  // Dz with caron, titlecase
  EXPECT_EQ(char_class(0x0301), CharClass::kOther);   // combining acute accent (Mn)
}

TEST(Gpt2Pretokenizer, InvalidUtf8BytesAreOtherCharacters) {
  using V = std::vector<std::string>;
  // A stray continuation byte, a lone 0xFF, a truncated 3-byte sequence, an
  // overlong '/', and an encoded surrogate: each byte is one "other" character.
  EXPECT_EQ(chunks("ab\xff\xfe cd"), (V{"ab", "\xff\xfe", " cd"}));
  EXPECT_EQ(chunks("x\x80y"), (V{"x", "\x80", "y"}));
  EXPECT_EQ(chunks("\xe4\xb8 z"), (V{"\xe4\xb8", " z"}));
  EXPECT_EQ(chunks("a\xc0\xaf!b"), (V{"a", "\xc0\xaf!", "b"}));
  EXPECT_EQ(chunks(" \xed\xa0\x80"), (V{" \xed\xa0\x80"}));
  // The tokenizer encodes them chunk by chunk and decodes back exactly.
  const Tokenizer& tok = gpt2();
  const std::string s = "ab\xff\xfe cd";
  Ids expected = tok.encode("ab");
  for (const char* part : {"\xff\xfe", " cd"}) {
    const Ids more = tok.encode(part);
    expected.insert(expected.end(), more.begin(), more.end());
  }
  EXPECT_EQ(tok.encode(s), expected);
  EXPECT_EQ(tok.decode(tok.encode(s)), s);
  EXPECT_EQ(tok.encode("\xff"), (Ids{187}));  // byte 0xFF is token "\u00ff" = 187
}

TEST(Gpt2Tokenizer, RoundTripRandomText) {
  const Tokenizer& tok = gpt2();
  std::mt19937 rng(42);
  const std::vector<std::string> pool = {"a", "Z", "7", " ", "  ", "\n", "\t", "'", "'s", ".", "\xc3\xa9", "\xe4\xb8\xad",
                                         "\xf0\x9f\x98\x80", "\xe2\x80\x8d", "\xc2\xa0", "\xd9\xa3", std::string(1, '\0')};
  for (int trial = 0; trial < 300; ++trial) {
    std::string s;
    const int len = std::uniform_int_distribution<int>(0, 60)(rng);
    for (int i = 0; i < len; ++i) {
      if (trial % 3 == 2) s += char(rng() & 0xFF);  // arbitrary bytes, mostly invalid UTF-8
      else s += pool[rng() % pool.size()];
    }
    const Ids ids = tok.encode(s);
    for (int32_t id : ids) ASSERT_LT(uint32_t(id), tok.vocab_size());
    ASSERT_EQ(tok.decode(ids), s) << "trial " << trial;
  }
}

TEST(Gpt2Tokenizer, ByteToUnicodeMap) {
  EXPECT_EQ(gpt2_byte_to_unicode('!'), uint32_t('!'));
  EXPECT_EQ(gpt2_byte_to_unicode(' '), 0x120u);  // 'Ġ'
  EXPECT_EQ(gpt2_byte_to_unicode(0x00), 0x100u);
  EXPECT_EQ(gpt2_byte_to_unicode(0x7F), 0x121u);
  EXPECT_EQ(gpt2_byte_to_unicode(0xAD), 0x143u);  // the last non-printable byte
  EXPECT_EQ(gpt2_byte_to_unicode(0xFF), 0xFFu);
}

TEST(Gpt2Tokenizer, JsonParser) {
  const auto kv = parse_json_string_to_int(
      R"( {"a": 0, "\u0120the" : 262, "\"\\\/\n": 7, "\ud83d\ude00": 9, "\u00e9": 12} )", "test");
  ASSERT_EQ(kv.size(), 5u);
  EXPECT_EQ(kv[1].first, "\xc4\xa0the");
  EXPECT_EQ(kv[1].second, 262);
  EXPECT_EQ(kv[2].first, "\"\\/\n");
  EXPECT_EQ(kv[3].first, "\xf0\x9f\x98\x80");
  EXPECT_EQ(kv[4].first, "\xc3\xa9");
  EXPECT_TRUE(parse_json_string_to_int("{}", "test").empty());
  expect_error([] { parse_json_string_to_int(R"({"a": 1)", "enc.json"); }, "enc.json: expected '}' at byte 7");
  expect_error([] { parse_json_string_to_int(R"({"a\q": 1})", "enc.json"); }, "invalid escape");
  expect_error([] { parse_json_string_to_int(R"({"\ud83d": 1})", "enc.json"); }, "unpaired surrogate");
  expect_error([] { parse_json_string_to_int(R"({"a": -1})", "enc.json"); }, "the id of token \"a\" is not a non-negative integer");
  expect_error([] { parse_json_string_to_int(R"({"a": 1} x)", "enc.json"); }, "unexpected text after the JSON value");
}

TEST(Gpt2Tokenizer, LoadErrors) {
  const std::string dir = testing::TempDir() + "ada_gpt2_" + std::to_string(::getpid());
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  expect_error([&] { load_tokenizer(dir); }, "GPT-2 tokenizer files not found: " + dir + "/encoder.json");
  const auto write = [](const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
  };
  // A truncated encoder.json names the file and the byte offset.
  const std::string full = slurp(data_dir() + "/gpt2/encoder.json");
  write(dir + "/encoder.json", full.substr(0, 5000));
  write(dir + "/vocab.bpe", slurp(data_dir() + "/gpt2/vocab.bpe"));
  expect_error([&] { load_tokenizer(dir); }, dir + "/encoder.json: unterminated string at byte 4997");  // the offset where the cut string starts
  write(dir + "/encoder.json", "");
  expect_error([&] { load_tokenizer(dir + "/encoder.json"); }, "GPT-2 encoder.json is empty");
  // A vocab.bpe without its version line, or with a merge of unknown tokens.
  write(dir + "/encoder.json", full);
  write(dir + "/vocab.bpe", "\u0120 t\n");
  expect_error([&] { load_tokenizer(dir); }, "first line should be '#version: 0.2'");
  write(dir + "/vocab.bpe", "#version: 0.2\n\xc4\xa0 t\nqqqqqqqqqq zzzzzzzzzzzz\n");
  expect_error([&] { load_tokenizer(dir); }, "vocab.bpe line 3: merge of tokens that are not in encoder.json");
  std::remove((dir + "/vocab.bpe").c_str());
  expect_error([&] { load_tokenizer(dir); }, "GPT-2 vocab.bpe not found");
  std::remove((dir + "/encoder.json").c_str());
  ::rmdir(dir.c_str());
  expect_error([] { gpt2().decode_token(50257); }, "outside the gpt2 vocabulary");
}

// A small GPT-2 tokenizer folder: the 256 byte tokens, then `extra` tokens
// (raw bytes), then <|endoftext|>; vocab.bpe holds `merges` (raw bytes, one
// pair per entry), in rank order.
std::string write_small_gpt2(const std::string& name, const std::vector<std::string>& extra,
                             const std::vector<std::pair<std::string, std::string>>& merges) {
  const std::string dir = testing::TempDir() + "ada_gpt2_" + name + "_" + std::to_string(::getpid());
  EXPECT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  // Bytes -> GPT-2's token string, UTF-8 (all mapped code points are below U+0800).
  const auto token_string = [](const std::string& bytes) {
    std::string out;
    for (unsigned char b : bytes) {
      const uint32_t cp = gpt2_byte_to_unicode(b);
      if (cp < 0x80) {
        out += char(cp);
      } else {
        out += char(0xC0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3F));
      }
    }
    return out;
  };
  const auto json_key = [&](const std::string& bytes) {
    std::string out = "\"";
    for (char c : token_string(bytes)) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    return out + "\": ";
  };
  std::string json = "{";
  int id = 0;
  for (int b = 0; b < 256; ++b) json += json_key(std::string(1, char(b))) + std::to_string(id++) + ", ";
  for (const std::string& t : extra) json += json_key(t) + std::to_string(id++) + ", ";
  json += "\"<|endoftext|>\": " + std::to_string(id) + "}";
  std::ofstream(dir + "/encoder.json", std::ios::binary) << json;
  std::string bpe = "#version: 0.2\n";
  for (const auto& [left, right] : merges) bpe += token_string(left) + " " + token_string(right) + "\n";
  std::ofstream(dir + "/vocab.bpe", std::ios::binary) << bpe;
  return dir;
}

void remove_small_gpt2(const std::string& dir) {
  std::remove((dir + "/encoder.json").c_str());
  std::remove((dir + "/vocab.bpe").c_str());
  ::rmdir(dir.c_str());
}

// Issue 14: absurd sizes and repeated merges are refused with the file and line.
TEST(Gpt2Tokenizer, LoadRefusesAbsurdFiles) {
  // A valid small folder loads and merges.
  std::string dir = write_small_gpt2("ok", {"ab", "abc"}, {{"a", "b"}, {"ab", "c"}});
  EXPECT_EQ(load_tokenizer(dir)->encode("abc"), (Ids{257}));
  remove_small_gpt2(dir);
  // A repeated merge.
  dir = write_small_gpt2("dup", {"ab"}, {{"a", "b"}, {"a", "b"}});
  expect_error([&] { load_tokenizer(dir); }, "vocab.bpe " + dir + "/vocab.bpe line 3: duplicate merge");
  remove_small_gpt2(dir);
  // A token longer than kMaxTokenBytes (257 bytes; 256 would be fine).
  dir = write_small_gpt2("long", {std::string(256, 'a'), std::string(257, 'a')}, {});
  expect_error([&] { load_tokenizer(dir); }, "encoder.json: token 257 is 257 bytes long, above the limit of 256");
  remove_small_gpt2(dir);
  // More merges than tokens: every pair of "a" runs whose join is a token.
  std::vector<std::string> runs;
  std::vector<std::pair<std::string, std::string>> merges;
  for (int n = 2; n <= 40; ++n) runs.push_back(std::string(n, 'a'));
  for (int i = 1; i < 40; ++i) {
    for (int j = 1; i + j <= 40; ++j) merges.push_back({std::string(i, 'a'), std::string(j, 'a')});
  }
  dir = write_small_gpt2("many", runs, merges);  // 296 tokens, 780 merges
  expect_error([&] { load_tokenizer(dir); }, "vocab.bpe line 298: more merges than the 296 tokens of encoder.json");
  remove_small_gpt2(dir);
  // A vocabulary above kMaxBpeVocab.
  std::vector<std::string> names;
  for (uint32_t i = 0; i < kMaxBpeVocab - 256; ++i) names.push_back("t" + std::to_string(i));
  dir = write_small_gpt2("huge", names, {});
  expect_error([&] { load_tokenizer(dir); }, "encoder.json: 262145 tokens, above the limit of 262144");
  // A file above the size limit is refused before it is read (a sparse file).
  ASSERT_EQ(::truncate((dir + "/encoder.json").c_str(), off_t(kMaxTokenizerFileBytes) + 1), 0);
  expect_error([&] { load_tokenizer(dir); },
               "GPT-2 encoder.json " + dir + "/encoder.json is 67108865 bytes, above the limit of 67108864");
  remove_small_gpt2(dir);
  // An endless device is read no further than the limit.
  expect_error([] { Gpt2Tokenizer("/dev/zero", "/dev/null"); },
               "GPT-2 encoder.json /dev/zero is larger than the limit of 67108864 bytes");
}

}  // namespace
}  // namespace ada
