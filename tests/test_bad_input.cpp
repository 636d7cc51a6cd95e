// Bad input, by class (issue 14): token ids outside the vocabulary wherever
// they enter (shards of both widths, text, prompts, the model itself), file
// contents echoed in messages (one bounded, printable line), non-finite
// checkpoints, special values in exp_fast, and the help and presets a new
// user meets first.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu_backend.h"
#include "core/format.h"
#include "core/json.h"
#include "ops/cross_entropy.h"
#include "ops/fast_exp.h"
#include "text/dataset.h"
#include "text/shards.h"
#include "train/checkpoint.h"
#include "train/cpu_instances.h"
#include "train/data.h"
#include "train/flags.h"
#include "train/generation.h"
#include "train/trainer.h"
#include "workflow_util.h"

using namespace ada;
using namespace ada::test;

namespace {

using Cpu = CpuBackend<float>;

TrainResult train(const TrainOptions& o, const Dataset& d) {
  ScopedThreads one(1);
  Cpu be;
  Trainer<Cpu> t(be, o);
  return t.run(d, /*verbose=*/false);
}

// Overwrites token `pos` of a shard file in place (a flipped token), keeping
// its header, whose vocabulary word then no longer tells the truth.
void poke_token(const std::string& path, size_t pos, uint32_t id) {
  std::string b = read_bytes(path);
  int32_t magic;
  std::memcpy(&magic, b.data(), 4);
  if (magic == kShardMagicU16) {
    const uint16_t v = (uint16_t)id;
    std::memcpy(&b[kShardHeaderBytes + 2 * pos], &v, 2);
  } else {
    std::memcpy(&b[kShardHeaderBytes + 4 * pos], &id, 4);
  }
  write_bytes(path, b);
}

// A message fit for a terminal: printable ASCII only, bounded in length.
void expect_clean(const std::string& msg, size_t max_len = 400) {
  for (unsigned char c : msg) ASSERT_TRUE(c >= 0x20 && c < 0x7F) << "byte " << int(c) << " in: " << msg;
  EXPECT_LE(msg.size(), max_len) << msg;
}

// fn() throws an ada::Error containing needle, as one clean line.
template <class Fn>
void expect_clean_error(Fn fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(needle), std::string::npos) << m;
    expect_clean(m);
  }
}

// ---- token ids ------------------------------------------------------------------

// Every width, every kind of bad id (just above the vocabulary, far above,
// the largest uint16, uint32 ids that do not fit int32, 0xFFFFFFFF that a
// cast would make -1), and every place (first, inside, last token, a later
// shard): refused with the shard's file and the position in it, whatever the
// header's vocabulary word says.
TEST(BadTokenIds, ShardsOfEitherWidthAreScannedNotTrusted) {
  const std::string dir = scratch_dir("bad_shards");
  struct Case {
    uint32_t vocab_in_header, bad_id;
  };
  const Case cases[] = {{256, 256}, {256, 16628}, {256, 65535}, {70000, 70000}, {70000, 0x80000000u}, {70000, 0xFFFFFFFFu}};
  ByteTokenizer bytes;
  for (const Case& c : cases) {
    for (size_t pos : {size_t(0), size_t(37), size_t(99)}) {
      for (int shard : {0, 1}) {
        SCOPED_TRACE("id " + std::to_string(c.bad_id) + " at " + std::to_string(pos) + " of shard " + std::to_string(shard));
        const std::string d = dir + "/s" + std::to_string(c.bad_id) + "_" + std::to_string(pos) + "_" + std::to_string(shard);
        ASSERT_EQ(std::system(("mkdir -p " + d).c_str()), 0);
        std::vector<int32_t> t(100);
        for (size_t i = 0; i < t.size(); i++) t[i] = int32_t(i % 200);
        write_shard(d + "/x_train_000000.bin", t, c.vocab_in_header);
        write_shard(d + "/x_train_000001.bin", t, c.vocab_in_header);
        write_shard(d + "/x_val_000000.bin", t, c.vocab_in_header);
        const std::string bad_file = d + "/x_train_00000" + std::to_string(shard) + ".bin";
        poke_token(bad_file, pos, c.bad_id);
        const std::string where = "at position " + std::to_string(pos) + " of shard " + bad_file;
        // With a tokenizer (train_cpu, eval): checked as the data is opened.
        expect_clean_error([&] { open_dataset(d, &bytes); }, where);
        // Without one: the reader itself never hands out a wrapped id, and
        // check_vocab (the trainer's, eval's) names the same place.
        const Dataset ds = open_dataset(d, nullptr);
        expect_clean_error([&] { check_vocab(*ds.train, 256, "training data"); }, where);
        if (c.bad_id > uint32_t(INT32_MAX)) {
          std::vector<int32_t> all(ds.train->size());
          expect_clean_error([&] { ds.train->read(0, all.size(), all.data()); }, "larger than any vocabulary");
        }
      }
    }
  }
}

TEST(BadTokenIds, TheTrainerRefusesThemBeforeAnyStep) {
  const std::string dir = scratch_dir("bad_train");
  std::vector<int32_t> t(600);
  for (size_t i = 0; i < t.size(); i++) t[i] = int32_t(i % 23);
  write_shard(dir + "/x_train_000000.bin", t, 23);
  write_shard(dir + "/x_val_000000.bin", t, 23);
  poke_token(dir + "/x_train_000000.bin", 321, 23);  // one past the model's vocabulary of 23
  const Dataset d = open_dataset(dir, nullptr);
  expect_clean_error([&] { train(toy_options(dir + "/run", "standard", 3), d); },
                     "token id 23 at position 321 of shard " + dir + "/x_train_000000.bin");
  EXPECT_FALSE(exists(dir + "/run/latest"));
}

// check_vocab reads each token once however often it is asked (train_cpu
// checks against the tokenizer, then the model), and remembers only what its
// own scan found.
struct CountingTokens : VectorTokens {
  using VectorTokens::VectorTokens;
  mutable size_t reads = 0;
  void read(size_t start, size_t n, int32_t* out) const override {
    reads += n;
    VectorTokens::read(start, n, out);
  }
};

TEST(BadTokenIds, CheckingIsOneLinearPass) {
  std::vector<int32_t> t(3000);
  for (size_t i = 0; i < t.size(); i++) t[i] = int32_t(i % 200);
  CountingTokens c(t);
  check_vocab(c, 256);
  check_vocab(c, 300);
  check_vocab(c, 200);
  EXPECT_EQ(c.reads, t.size());
  EXPECT_EQ(c.scanned_below, 200u);
  expect_clean_error([&] { check_vocab(c, 199); }, "token id 199 at position 199 is outside the vocabulary (size 199)");
}

TEST(BadTokenIds, PromptsAndTheModelItselfRefuseThem) {
  // A tokenizer with more ids than the model (bytes: 256 > 23): the prompt's
  // own ids are checked, naming the token.
  ByteTokenizer bytes;
  expect_clean_error([&] { prompt_tokens("ab~", bytes, 4, 64, 100); },
                     "the prompt's token 2 (id 126, from tokenizer bytes) is outside the model's vocabulary (size 100)");
  EXPECT_EQ(prompt_tokens("ab", bytes, 4, 64, 256).size(), 2u);
  // The model's embedding lookup: the last line of defence, for any caller.
  Cpu be;
  auto method = make_method<Cpu>("standard", MethodOptions());
  auto m = make_model(be, preset_config("test"), *method);
  for (int bad : {23, -1, std::numeric_limits<int>::max(), std::numeric_limits<int>::min()}) {
    m->arena.reset();
    expect_clean_error([&] { m->embed({0, 5, bad}); },
                       "token id " + std::to_string(bad) + " (input 2 of 3) is outside the model's vocabulary (size 23)");
  }
  Batch b;
  b.B = 1, b.T = 2, b.inputs = {1, 40}, b.targets = {2, 3};
  m->arena.reset();
  expect_clean_error([&] { method->forward(*m, b, false); }, "token id 40");
}

// ---- messages -------------------------------------------------------------------

TEST(Messages, QuoteUntrustedIsOneBoundedPrintablePiece) {
  EXPECT_EQ(quote_untrusted("ckpt_100"), "'ckpt_100'");
  EXPECT_EQ(quote_untrusted(std::string("ckpt_1\0x", 8)), "'ckpt_1\\0x'");
  EXPECT_EQ(quote_untrusted("a\nb\tc\r'\\"), "'a\\nb\\tc\\r\\'\\\\'");
  EXPECT_EQ(quote_untrusted("\x1b[2J\xEF\xBB\xBF\x7F"), "'\\x1B[2J\\xEF\\xBB\\xBF\\x7F'");
  EXPECT_EQ(quote_untrusted(std::string(5000, 'a'), 10), "'aaaaaaaaaa'... (5000 bytes)");
  // Any bytes at all: printable, bounded.
  Rng r(5);
  for (int k = 0; k < 200; k++) {
    std::string s(r.below(300), '\0');
    for (char& c : s) c = char(r.below(256));
    const std::string q = quote_untrusted(s);
    expect_clean(q, 4 * 64 + 40);
  }
}

// The contents of hostile files reach messages only through quote_untrusted.
const std::vector<std::string>& hostile_names() {
  static const std::vector<std::string> v = {std::string("ckpt_1\0evil", 11), std::string(5000, 'x'),
                                             "ckpt_1\n\x1b[31mred", "ckpt_\xE2\x80\xAE" "1", "a\tb\r"};
  return v;
}

TEST(Messages, LatestIsQuotedWhateverItHolds) {
  const std::string dir = scratch_dir("latest");
  for (const std::string& name : hostile_names()) {
    write_bytes(dir + "/latest", name + "\n");
    try {
      resolve_checkpoint(dir);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(dir + "/latest names '"), std::string::npos) << e.what();
      expect_clean(e.what());
    }
  }
  // A NUL must not cut the name to one that exists.
  ASSERT_EQ(std::system(("mkdir -p " + dir + "/ckpt_1 && touch " + dir + "/ckpt_1/model.safetensors").c_str()), 0);
  write_bytes(dir + "/latest", std::string("ckpt_1\0x\n", 9));
  expect_clean_error([&] { resolve_checkpoint(dir); }, "latest names 'ckpt_1\\0x', which is not a checkpoint directory name");
  write_bytes(dir + "/latest", "..\n");
  expect_clean_error([&] { resolve_checkpoint(dir); }, "which is not a checkpoint directory name");
  write_bytes(dir + "/latest", "ckpt_1\n");
  EXPECT_EQ(resolve_checkpoint(dir), dir + "/ckpt_1");
}

TEST(Messages, SafetensorsAndJsonQuoteWhatTheyRead) {
  const std::string dir = scratch_dir("st_quote"), p = dir + "/x.safetensors";
  auto raw = [&](const std::string& header, const std::string& data) {
    std::string bytes(8, '\0');
    const uint64_t n = header.size();
    std::memcpy(&bytes[0], &n, 8);
    write_bytes(p, bytes + header + data);
  };
  const std::string eight(8, '\0');
  for (const std::string& name : hostile_names()) {
    SCOPED_TRACE(quote_untrusted(name));
    const std::string q = json_quote(name);  // a NUL travels as \u0000
    raw("{" + q + ":{\"dtype\":" + q + ",\"shape\":[2],\"data_offsets\":[0,8]}}", eight);
    expect_clean_error([&] { SafetensorsFile f(p, "checkpoint"); }, "has unknown dtype '");
    raw("{" + q + ":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]," + q + ":1}}", eight);
    expect_clean_error([&] { SafetensorsFile f(p, "checkpoint"); }, "has unknown field '");
    raw("{\"__metadata__\":{" + q + ":1}}", "");
    expect_clean_error([&] { SafetensorsFile f(p, "checkpoint"); }, "metadata value of '");
    raw("{" + q + ":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", "");
    expect_clean_error([&] { SafetensorsFile f(p, "checkpoint"); }, "is truncated: tensor '");
    expect_clean_error([&] { parse_json("{" + q + ":1," + q + ":2}", "doc"); }, "doc: duplicate key '");
  }
  // The byte a JSON parser stops at is shown escaped, as a whole character.
  expect_clean_error([&] { parse_json("[\xC3\xA9]", "doc"); }, "unexpected character '\\xC3\\xA9' at byte 1");
  expect_clean_error([&] { parse_json("\x01", "doc"); }, "unexpected character '\\x01' at byte 0");
}

// A UTF-8 byte order mark (Windows editors write one) is accepted by the
// JSON parser and by GPT-2's vocab.bpe: the tokenizer loads and encodes the same.
TEST(Messages, ByteOrderMarksAreAccepted) {
  EXPECT_EQ(parse_json("\xEF\xBB\xBF{\"a\": 1}", "doc").find("a")->number, 1);
  expect_clean_error([&] { parse_json("\xEF\xBB\xBF", "doc"); }, "doc: unexpected end of input at byte 3");
  expect_clean_error([&] { parse_json("{\"a\": 1}\xEF\xBB\xBF", "doc"); }, "unexpected text after the JSON value");
  const char* data = std::getenv("ADA_DATA_DIR");
  const std::string src = std::string(data ? data : "data") + "/gpt2", dir = scratch_dir("bom_gpt2");
  if (!exists(src + "/encoder.json")) GTEST_SKIP() << "no " << src;
  for (const char* f : {"encoder.json", "vocab.bpe"}) write_bytes(dir + "/" + f, "\xEF\xBB\xBF" + read_bytes(src + "/" + f));
  const auto plain = load_tokenizer(src), bom = load_tokenizer(dir);
  EXPECT_EQ(bom->vocab_size(), plain->vocab_size());
  EXPECT_EQ(bom->encode("Hello world, caf\xC3\xA9!"), plain->encode("Hello world, caf\xC3\xA9!"));
}

// A checkpoint holding a NaN or an infinity is refused as it is read (the
// writer refuses to write one), naming the tensor and element; eval exits 1.
TEST(Messages, NonFiniteCheckpointsAreRefusedAtLoad) {
  const std::string dir = scratch_dir("nan_ckpt"), run = dir + "/run";
  TrainOptions o = toy_options(run, "standard", 2);
  train(o, toy_data());
  const std::string model = run + "/ckpt_2/model.safetensors", good = read_bytes(model);
  uint64_t header_len;
  std::memcpy(&header_len, good.data(), 8);
  const TensorEntry t = SafetensorsFile(model).get("layers.1.attn.wo.weight");
  const std::string eval = program("eval");
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    std::string b = good;
    std::memcpy(&b[8 + header_len + t.begin + 4 * 7], &bad, 4);  // element 7
    write_bytes(model, b);
    const std::string what = std::isnan(bad) ? "NaN" : "infinity";
    Cpu be;
    expect_clean_error([&] { load_checkpoint_model(be, run); },
                       "has a non-finite value (" + what + ") in tensor layers.1.attn.wo.weight at element 7");
    TrainOptions r = o;
    r.resume = run, r.steps = 3;
    expect_error([&] { train(r, toy_data()); }, {"non-finite value (" + what + ")"});
    if (!eval.empty())
      expect_program_error(run_program(eval + " --ckpt " + run + " --data " + dir + "/none.txt", dir), "non-finite value");
  }
  write_bytes(model, good);
  Cpu be;
  EXPECT_EQ(load_checkpoint_model(be, run).meta.step, 2);
}

// ---- exp_fast on special values (UBSan: no int conversion of NaN) ------------------

TEST(FastExp, SpecialValuesAndAccuracy) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(exp_fast(nan)));
  EXPECT_TRUE(std::isnan(exp_fast(-nan)));
  EXPECT_EQ(exp_fast(inf), inf);
  EXPECT_EQ(exp_fast(-inf), 0.0f);
  EXPECT_EQ(exp_fast(-1000.0f), 0.0f);
  EXPECT_EQ(exp_fast(0.0f), 1.0f);
  double worst = 0;
  for (float x = -87.0f; x < 88.0f; x += 0.01f) {
    const double want = std::exp((double)x);
    worst = std::max(worst, std::fabs(exp_fast(x) - want) / want);
  }
  EXPECT_LT(worst, 3e-7);
  // Through the log-softmax of the loss: a NaN or +inf in a row makes that
  // row's values NaN; -inf is a zero probability; other rows are untouched.
  const int V = 5;
  const std::vector<float> z = {0, 1, 2, 3, 4,  0, nan, 2, 3, 4,  0, 1, inf, 3, 4,  0, -inf, 2, 3, 4};
  const std::vector<int> y = {4, 4, 4, 4};
  std::vector<float> lse(4), logp(4);
  logsoftmax_target_forward(lse.data(), logp.data(), z.data(), y.data(), 4, V, V);
  const double ref = std::log(1 + std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(4.0));
  EXPECT_NEAR(lse[0], ref, 1e-5);
  EXPECT_TRUE(std::isnan(lse[1]) && std::isnan(logp[1]));
  EXPECT_TRUE(std::isnan(lse[2]));
  EXPECT_NEAR(lse[3], std::log(1 + std::exp(2.0) + std::exp(3.0) + std::exp(4.0)), 1e-5);
}

// ---- help and presets -----------------------------------------------------------

TEST(HelpAndPresets, DefaultsPrintInTheirShortestExactForm) {
  for (double x : {0.1, 0.003, 0.95, 1e-8, 1.0 / 3.0, 2.0 / 3.0 * 1e-300, 5e-324, 1e308, -0.0, 123456789.0, 0.1 + 0.2}) {
    const std::string s = shortest_double(x);
    EXPECT_EQ(std::strtod(s.c_str(), nullptr), x) << s;
    EXPECT_LE(s.size(), 24u) << s;
  }
  EXPECT_EQ(shortest_double(0.1), "0.1");
  EXPECT_EQ(shortest_double(3e-4), "0.0003");
  EXPECT_EQ(shortest_double(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(shortest_double(std::numeric_limits<double>::infinity()), "inf");
  TrainOptions o;
  Flags f("train_cpu", "");
  add_train_flags(f, o);
  const std::string help = f.usage();
  EXPECT_NE(help.find("[0.1]"), std::string::npos) << help;
  EXPECT_EQ(help.find("000000"), std::string::npos) << help;
  EXPECT_EQ(help.find("999999"), std::string::npos) << help;
  for (auto& kv : f.values()) {  // and every value still reads back exactly as the checkpoints need
    if (kv.first == "lr") {
      EXPECT_EQ(kv.second, "0.003");
    }
  }
}

TEST(HelpAndPresets, TheTestPresetSaysWhatItNeeds) {
  TrainOptions o;
  o.config = "test";
  expect_clean_error([&] { o.validate(); }, "--config test --seq 64 --vocab 256 --tokenizer bytes");
  // What the message asks for works.
  o.seq = 64, o.vocab = 256, o.tokenizer = "bytes";
  o.validate();
  EXPECT_EQ(run_tokenizer(o.tokenizer, o.model_config())->vocab_size(), 256u);
  // A vocabulary too small for the tokenizer names the --vocab that fits.
  o.vocab = 0;
  expect_clean_error([&] { run_tokenizer("bytes", o.model_config()); }, "pass --vocab 256 or more");
}

}  // namespace
