// The training workflow end to end: bit-exact resume, the metrics log across
// a resume, NaN and mismatch handling, option restoring, evaluation
// statistics, sampling and generation, the loss plot, and the programs
// themselves (when ADA_BIN_DIR names the folder of the built binaries).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include "train/cpu_instances.h"
#include "text/shards.h"
#include "train/checkpoint.h"
#include "train/evaluation.h"
#include "train/generation.h"
#include "core/json.h"
#include "train/svg_plot.h"
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

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> out;
  std::stringstream ss(read_bytes(path));
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}

long long step_of(const std::string& line) {
  uint64_t s = 0;
  parse_json(line, "metrics").find("step")->to_u64(&s);
  return (long long)s;
}

// A tokenizer for the 23-token test model: id 0 is end-of-text, ids 1..22
// are the letters a..v (other bytes map onto them).
class LetterTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(1 + (c >= 'a' && c <= 'v' ? c - 'a' : c % 22));
    return ids;
  }
  std::string decode_token(int32_t id) const override {
    check(id >= 0 && id < 23, "token id " + std::to_string(id) + " is outside the vocabulary");
    return id == 0 ? "<|eot|>" : std::string(1, char('a' + id - 1));
  }
  uint32_t vocab_size() const override { return 23; }
  int32_t eot_id() const override { return 0; }
  std::string name() const override { return "letters"; }
};

}  // namespace

// ---- resume ------------------------------------------------------------------

// Train 30 steps; separately, resume from the checkpoint of step 10 and train
// to 30: the 20 losses after the resume are the same bits, and so are the
// final parameters. On one thread, and for the standard method on two (the
// parallel reductions of the CPU ops keep a fixed order).
class ResumeBitExact : public testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(ResumeBitExact, LossesAfterResumeEqualTheUninterruptedRun) {
  const std::string method = std::get<0>(GetParam());
  const int threads = std::get<1>(GetParam());
  const std::string dir = scratch_dir("resume_" + method + std::to_string(threads));
  const Dataset d = toy_data();
  auto train = [&](const TrainOptions& o, const Dataset& data) {
    ScopedThreads t(threads);
    Cpu be;
    Trainer<Cpu> trainer(be, o);
    return trainer.run(data, false);
  };
  TrainOptions a = toy_options(dir + "/a", method, 30);
  a.save_every = 10;
  const TrainResult ra = train(a, d);
  ASSERT_EQ(ra.losses.size(), 30u);
  EXPECT_NE(ra.losses.front(), ra.losses.back()) << "the run must actually train";
  for (const char* c : {"ckpt_10", "ckpt_20", "ckpt_30"}) EXPECT_TRUE(exists(dir + "/a/" + c + "/state.safetensors")) << c;
  EXPECT_EQ(read_bytes(dir + "/a/latest"), "ckpt_30\n");

  TrainOptions b = toy_options(dir + "/b", method, 30);
  b.resume = dir + "/a/ckpt_10";
  const TrainResult rb = train(b, d);
  EXPECT_EQ(rb.first_step, 10);
  ASSERT_EQ(rb.losses.size(), 20u);
  for (size_t i = 0; i < 20; i++)
    EXPECT_TRUE(same_bits(rb.losses[i], ra.losses[10 + i])) << "step " << 11 + i << ": " << rb.losses[i] << " vs "
                                                             << ra.losses[10 + i];
  EXPECT_TRUE(same_bits(rb.final_val_loss, ra.final_val_loss));
  EXPECT_EQ(rb.tokens, ra.tokens);
  EXPECT_EQ(rb.train_flops, ra.train_flops);
  EXPECT_EQ(rb.train_other_flops, ra.train_other_flops) << "the checkpoint carries the non-matmul total";
  EXPECT_GT(ra.train_other_flops, 0);
  EXPECT_EQ(read_bytes(dir + "/b/ckpt_30/model.safetensors"), read_bytes(dir + "/a/ckpt_30/model.safetensors"));

  // The resumed run's log starts with the first 10 lines of the original.
  const auto la = lines_of(dir + "/a/metrics.jsonl"), lb = lines_of(dir + "/b/metrics.jsonl");
  ASSERT_EQ(lb.size(), 30u);
  for (size_t i = 0; i < 10; i++) EXPECT_EQ(lb[i], la[i]);
  for (size_t i = 0; i < 30; i++) {
    EXPECT_EQ(step_of(lb[i]), (long long)i + 1);
    EXPECT_EQ(parse_json(lb[i], "b").find("loss")->text, parse_json(la[i], "a").find("loss")->text);
  }
}

INSTANTIATE_TEST_SUITE_P(Methods, ResumeBitExact,
                         testing::Values(std::make_tuple("standard", 1), std::make_tuple("ponder", 1),
                                         std::make_tuple("adaponder", 1), std::make_tuple("standard", 2),
                                         std::make_tuple("ponderlm2", 1)));  // its Jacobi count is drawn per step

// A run that died after step 25 with its last checkpoint at 20: resuming the
// output directory continues from `latest`, rewrites the log without the
// steps after 20 (the cut-short last line included) and reaches the same end.
TEST(Resume, FromTheOutputDirectoryAfterACrash) {
  const std::string dir = scratch_dir("resume_crash"), out = dir + "/run";
  const Dataset d = toy_data();
  TrainOptions a = toy_options(out, "standard", 30);
  a.save_every = 10;
  const TrainResult ra = train(a, d);
  const auto original = lines_of(out + "/metrics.jsonl");
  // Simulate the crash.
  ASSERT_EQ(std::system(("rm -rf " + out + "/ckpt_30").c_str()), 0);
  write_bytes(out + "/latest", "ckpt_20\n");
  std::string log;
  for (int i = 0; i < 25; i++) log += original[i] + "\n";
  write_bytes(out + "/metrics.jsonl", log + "{\"step\": 26, \"lo");

  TrainOptions b = toy_options("", "standard", 30);
  b.resume = out;
  const TrainResult rb = train(b, d);
  EXPECT_EQ(rb.first_step, 20);
  for (size_t i = 0; i < 10; i++) EXPECT_TRUE(same_bits(rb.losses[i], ra.losses[20 + i]));
  const auto now = lines_of(out + "/metrics.jsonl");
  ASSERT_EQ(now.size(), 30u);
  for (size_t i = 0; i < 30; i++) EXPECT_EQ(step_of(now[i]), (long long)i + 1);
  EXPECT_EQ(read_bytes(out + "/latest"), "ckpt_30\n");
  EXPECT_TRUE(exists(out + "/loss.svg"));
}

TEST(Resume, AFinishedRunNeedsMoreSteps) {
  const std::string dir = scratch_dir("resume_more"), out = dir + "/run";
  const Dataset d = toy_data();
  train(toy_options(out, "standard", 10), d);
  TrainOptions b = toy_options(out, "standard", 10);
  b.resume = out;
  expect_error([&] { train(b, d); }, {"is at step 10, and --steps is 10: raise --steps"});
  b.steps = 15;
  const TrainResult r = train(b, d);
  EXPECT_EQ(r.first_step, 10);
  EXPECT_EQ(r.steps, 15);
  EXPECT_EQ(read_bytes(out + "/latest"), "ckpt_15\n");
  EXPECT_EQ(lines_of(out + "/metrics.jsonl").size(), 15u);
}

TEST(Resume, NanLossStopsWithoutTouchingTheLastCheckpoint) {
  const std::string dir = scratch_dir("resume_nan"), out = dir + "/run";
  const Dataset d = toy_data();
  train(toy_options(out, "standard", 10), d);
  const std::string model = read_bytes(out + "/ckpt_10/model.safetensors");
  const std::string state = read_bytes(out + "/ckpt_10/state.safetensors");
  TrainOptions b = toy_options(out, "standard", 20);
  b.resume = out;
  b.save_every = 1;
  ScopedThreads one(1);
  Cpu be;
  Trainer<Cpu> t(be, b);
  t.model().param("norm.weight")[0] = NAN;  // every logit becomes NaN
  expect_error([&] { t.run(d, false); }, {"the training loss became NaN at step 11; stopping"});
  EXPECT_EQ(read_bytes(out + "/ckpt_10/model.safetensors"), model);
  EXPECT_EQ(read_bytes(out + "/ckpt_10/state.safetensors"), state);
  EXPECT_EQ(read_bytes(out + "/latest"), "ckpt_10\n");
  EXPECT_FALSE(exists(out + "/ckpt_11"));
}

TEST(Resume, ADifferentModelMethodOrDataIsAnError) {
  const std::string dir = scratch_dir("resume_mismatch"), out = dir + "/run";
  const Dataset d = toy_data();
  train(toy_options(out, "standard", 10), d);
  const std::string file = out + "/ckpt_10/model.safetensors";
  TrainOptions o = toy_options(out, "ponder", 20);
  o.resume = out;
  expect_error([&] { train(o, d); }, {"checkpoint " + file + " was trained with method standard but the model is configured for ponder"});
  o = toy_options(out, "standard", 20), o.resume = out, o.vocab = 40;
  expect_error([&] { train(o, d); }, {file + " has vocabulary 23 but the model was configured with 40"});
  o = toy_options(out, "standard", 20), o.resume = out, o.hidden = 32;
  expect_error([&] { train(o, d); }, {"SwiGLU hidden width 24 but the model was configured with 32"});
  o = toy_options(out, "standard", 20), o.resume = out;
  expect_error([&] { train(o, toy_data(23, 2000)); }, {"the training data has 1800 tokens but checkpoint", "was trained on 2700"});
}

// ---- options -----------------------------------------------------------------

namespace {
void parse(Flags& f, std::vector<std::string> args) {
  args.insert(args.begin(), "train_cpu");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  f.parse((int)argv.size(), argv.data());
}
}  // namespace

TEST(Options, EveryFlagIsRecordedInCheckpoints) {
  TrainOptions o;
  Flags f("train_cpu", "");
  add_train_flags(f, o);
  std::set<std::string> flags, recorded;
  for (auto& kv : f.values()) flags.insert(kv.first);
  for (auto& kv : option_values(o)) recorded.insert(kv.first);
  EXPECT_EQ(flags, recorded);
}

TEST(Options, ResumeTakesTheCheckpointsOptionsUnlessGiven) {
  const std::string dir = scratch_dir("resume_options"), out = dir + "/run";
  TrainOptions a = toy_options(out, "ponder", 10);
  a.lr = 0.0123456789012345678;  // 17 significant digits survive the round trip
  a.beta2 = 0.987654321;
  train(a, toy_data());
  const std::string ckpt = resolve_checkpoint(out);
  {
    TrainOptions o;
    Flags f("train_cpu", "");
    add_train_flags(f, o);
    parse(f, {"--resume", out, "--steps", "20", "--eval-every", "3"});
    resume_options(o, f, read_train_options(ckpt), ckpt);
    EXPECT_TRUE(same_bits(o.lr, a.lr));
    EXPECT_TRUE(same_bits(o.beta2, a.beta2));
    EXPECT_EQ(o.method, "ponder");
    EXPECT_EQ(o.config, "test");
    EXPECT_EQ(o.method_opts.ponder_steps, 2);
    EXPECT_EQ(o.batch, 2);
    EXPECT_EQ(o.seq, 16);
    EXPECT_EQ(o.tokenizer, "bytes");
    EXPECT_EQ(o.steps, 20);      // given: overrides
    EXPECT_EQ(o.eval_every, 3);  // given: overrides
    EXPECT_EQ(o.out, "");        // never restored: defaults to the checkpoint's run
    EXPECT_EQ(o.resume, out);
  }
  for (auto& [flag, value, saved] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"--method", "looped", "ponder"}, {"--config", "tiny", "test"}, {"--ponder-steps", "3", "2"}}) {
    TrainOptions o;
    Flags f("train_cpu", "");
    add_train_flags(f, o);
    parse(f, {"--resume", out, flag, value});
    expect_error([&] { resume_options(o, f, read_train_options(ckpt), ckpt); },
                 {flag + " " + value + " does not match the checkpoint " + ckpt + ", which was trained with " + flag + " " + saved});
  }
}

TEST(Options, ImpossibleFlagsAreRejected) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--batch", "0"}, "--batch must be between 1 and 65536 (got 0)"},
      {{"--config", "test", "--seq", "65"}, "--seq 65 is longer than the model context 64"},
      {{"--method", "nope"}, "unknown --method 'nope' (available: standard"},
      {{"--steps", "many"}, "--steps expects an integer, got 'many'"},
      {{"--save-every", "-1"}, "--save-every must be between 0 and 1000000000000 (got -1)"},
      {{"--bogus", "1"}, "unknown flag --bogus"},
  };
  for (auto& [args, needle] : cases) {
    SCOPED_TRACE(needle);
    TrainOptions o;
    Flags f("train_cpu", "");
    add_train_flags(f, o);
    expect_error([&] { parse(f, args), o.validate(); }, {needle});
  }
}

TEST(Data, TokenIdsOutsideTheVocabularyAreRejected) {
  const std::string dir = scratch_dir("bad_ids");
  for (int32_t bad : {23, -1}) {
    std::vector<int32_t> t(500, 3);
    t[123] = bad;
    Dataset d;
    d.train = std::make_shared<VectorTokens>(t);
    d.val = std::make_shared<VectorTokens>(std::vector<int32_t>(100, 1));
    expect_error([&] { train(toy_options(dir + "/run", "standard", 5), d); },
                 {"token id " + std::to_string(bad) + " at position 123 is outside the vocabulary (size 23)"});
  }
}

// ---- evaluation ----------------------------------------------------------------

TEST(Eval, MatchesTheTrainersValidationLossAndCountsBytes) {
  const std::string dir = scratch_dir("eval"), out = dir + "/run";
  const Dataset d = toy_data();
  const TrainResult r = train(toy_options(out, "ponder", 20), d);
  ScopedThreads one(1);
  Cpu be;
  auto ck = load_checkpoint_model(be, out);
  LetterTokenizer tok;
  // The trainer's windows (batch 2 x 16, 2 batches): its logged val_loss.
  const EvalReport e = evaluate_model(*ck.model, *ck.method, *d.val, &tok, 2, 16, 2);
  EXPECT_EQ(e.tokens, 64);
  EXPECT_NEAR(e.loss(), r.final_val_loss, 1e-6);
  EXPECT_NEAR(e.perplexity(), std::exp(r.final_val_loss), 1e-4);
  // Bytes: every target decodes to one letter, except end-of-text (0 bytes).
  std::vector<int32_t> val(d.val->size());
  d.val->read(0, val.size(), val.data());
  EXPECT_LE(e.bytes, e.tokens);
  EXPECT_NEAR(e.bits_per_byte(), e.nll_sum / std::log(2.0) / e.bytes, 1e-12);
  EXPECT_EQ(e.mean_passes(), 3.0);  // ponder, P = 2
  EXPECT_EQ(e.pass_histogram(), (std::map<long long, long long>{{3, 64}}));
  EXPECT_TRUE(std::isnan(e.passes_nll_correlation())) << "constant passes: no correlation";
  ASSERT_FALSE(e.halting.empty());
  EXPECT_EQ(e.halting[0].first, "passes");
  EXPECT_EQ(e.halting[0].second, 3.0);
  EXPECT_GT(e.flops_per_token(), 2.5 * standard_flops_per_token(ck.meta.cfg, 16)) << "three passes per token";

  // Every token once: windows of T overlapping by one cover the stream.
  const EvalReport all = evaluate_model(*ck.model, *ck.method, *d.val, &tok, 4, 16, 0);
  EXPECT_EQ(all.tokens, (double)((d.val->size() - 1) / 16 * 16));
  expect_error([&] { evaluate_model(*ck.model, *ck.method, *d.val, &tok, 2, 65, 1); },
               {"--seq 65 is longer than the model context 64"});
}

TEST(Eval, HaltingStatistics) {
  EvalReport r;
  r.passes = {1, 2, 3, 4, 4};
  r.nll = {0.5, 1.0, 1.5, 2.0, 2.0};
  EXPECT_NEAR(r.passes_nll_correlation(), 1.0, 1e-12);
  r.nll = {2.0, 1.5, 1.0, 0.5, 0.5};
  EXPECT_NEAR(r.passes_nll_correlation(), -1.0, 1e-12);
  EXPECT_NEAR(EvalReport::pearson({1, 2, 3}, {1, 3, 2}), 0.5, 1e-12);
  EXPECT_EQ(r.mean_passes(), 14.0 / 5);
  EXPECT_EQ(r.pass_histogram(), (std::map<long long, long long>{{1, 1}, {2, 1}, {3, 1}, {4, 2}}));
}

// A checkpoint loads with behaviour-only overrides of its method options
// (adaponder's masked mode gives the same losses as compaction), while an
// override that changes the parameters is refused.
TEST(Eval, MethodOverridesChangeBehaviourNotParameters) {
  ScopedThreads threads(1);
  const std::string dir = scratch_dir("overrides");
  Dataset d = toy_data();
  {
    CpuBackend<float> be;
    Trainer<CpuBackend<float>> tr(be, toy_options(dir, "adaponder", 12));
    tr.run(d, false);
  }
  CpuBackend<float> be;
  auto plain = load_checkpoint_model(be, dir);
  auto masked = load_checkpoint_model(be, dir, "compaction=0,tau=0.3");
  auto compact = load_checkpoint_model(be, dir, "tau=0.3");
  ByteTokenizer tok;
  const EvalReport a = evaluate_model(*compact.model, *compact.method, *d.val, &tok, 2, 16, 2);
  const EvalReport b = evaluate_model(*masked.model, *masked.method, *d.val, &tok, 2, 16, 2);
  EXPECT_NEAR(a.loss(), b.loss(), 1e-5);
  EXPECT_EQ(a.passes, b.passes);
  EXPECT_EQ(masked.meta.method_opts.ada.compaction, false);
  EXPECT_EQ(plain.meta.method_opts.ada.compaction, true);
  expect_error([&] { load_checkpoint_model(be, dir, "ponder-steps=3"); }, {"ponder"});
  expect_error([&] { load_checkpoint_model(be, dir, "no-such-flag=1"); }, {"unknown flag --no-such-flag"});
}

// ---- generation ------------------------------------------------------------------

TEST(Generate, Utf8StreamHoldsBackSplitCharacters) {
  Utf8Stream s;
  EXPECT_EQ(s.push("a\xC3"), "a");
  EXPECT_EQ(s.push("\xA9"), "\xC3\xA9");        // é completed
  EXPECT_EQ(s.push("\xF0\x9F"), "");            // first half of an emoji
  EXPECT_EQ(s.push("\x98"), "");
  EXPECT_EQ(s.push("\x80!"), "\xF0\x9F\x98\x80!");
  EXPECT_EQ(s.push("\xFF"), "\xFF");            // never valid: passed through
  EXPECT_EQ(s.push("x\xE2\x82"), "x");
  EXPECT_EQ(s.finish(), "\xE2\x82");            // an unfinished end is flushed as is
  EXPECT_EQ(s.finish(), "");
}

TEST(Generate, SamplingRespectsTemperatureAndTopK) {
  const std::vector<double> p = {0.1, 0.6, 0.0, 0.3};
  Rng rng(5);
  EXPECT_EQ(sample_token(p, 0.0, 0, rng), 1);
  std::vector<int> counts(4, 0);
  for (int i = 0; i < 4000; i++) counts[sample_token(p, 1.0, 0, rng)]++;
  EXPECT_EQ(counts[2], 0) << "zero probability is never drawn";
  EXPECT_NEAR(counts[1] / 4000.0, 0.6, 0.04);
  EXPECT_NEAR(counts[3] / 4000.0, 0.3, 0.04);
  for (int i = 0; i < 200; i++) EXPECT_EQ(sample_token(p, 1.0, 1, rng), 1) << "top-1 is greedy";
  for (int i = 0; i < 200; i++) EXPECT_NE(sample_token(p, 2.0, 2, rng), 0) << "top-2 excludes the third";
  int sharp = 0;
  for (int i = 0; i < 1000; i++) sharp += sample_token(p, 0.05, 0, rng) == 1;
  EXPECT_GT(sharp, 990) << "a low temperature is almost greedy";
}

TEST(Generate, GreedyDecodingMatchesTheFullForward) {
  const std::string dir = scratch_dir("generate"), out = dir + "/run";
  train(toy_options(out, "ponder", 20), toy_data());
  ScopedThreads one(1);
  Cpu be;
  auto ck = load_checkpoint_model(be, out);
  LetterTokenizer tok;
  GenerateOptions g;
  g.max_tokens = 12, g.temperature = 0, g.stop_at_eot = false;
  std::string streamed;
  const GenerateResult r = generate(*ck.model, *ck.method, tok, "abcab", g, [&](const std::string& s) { streamed += s; });
  ASSERT_EQ(r.tokens.size(), 12u);
  EXPECT_EQ(streamed, r.text);
  EXPECT_EQ(r.prompt, (std::vector<int32_t>{0, 1, 2, 3, 1, 2}));
  EXPECT_EQ(r.mean_passes(), 3.0);
  EXPECT_EQ(r.fed, 6 + 11);
  // The same sequence through the training forward: each generated token is its argmax.
  std::vector<int> seq(r.prompt.begin(), r.prompt.end());
  seq.insert(seq.end(), r.tokens.begin(), r.tokens.end());
  Batch b;
  b.B = 1, b.T = (int)seq.size() - 1;
  b.inputs.assign(seq.begin(), seq.end() - 1);
  b.targets.assign(seq.begin() + 1, seq.end());
  ck.model->arena.reset();
  ck.method->forward(*ck.model, b, false);
  std::vector<double> probs;
  ck.method->probabilities(*ck.model, probs);
  for (size_t i = 0; i < r.tokens.size(); i++) {
    const size_t row = r.prompt.size() - 1 + i;
    const auto first = probs.begin() + row * 23;
    EXPECT_EQ(std::max_element(first, first + 23) - first, r.tokens[i]) << "token " << i;
  }
  // Seeded sampling is reproducible.
  g.temperature = 0.9, g.top_k = 5, g.seed = 11;
  auto s1 = generate(*ck.model, *ck.method, tok, "abc", g, [](const std::string&) {});
  auto s2 = generate(*ck.model, *ck.method, tok, "abc", g, [](const std::string&) {});
  EXPECT_EQ(s1.tokens, s2.tokens);
}

TEST(Generate, BadPromptsAreRejected) {
  const std::string dir = scratch_dir("generate_bad"), out = dir + "/run";
  train(toy_options(out, "standard", 5), toy_data());
  ScopedThreads one(1);
  Cpu be;
  auto ck = load_checkpoint_model(be, out);
  LetterTokenizer tok;
  GenerateOptions g;
  auto gen = [&](const std::string& prompt) { generate(*ck.model, *ck.method, tok, prompt, g, [](const std::string&) {}); };
  expect_error([&] { gen("ab\xFF"); }, {"the prompt is not valid UTF-8: byte 0xFF at byte offset 2"});
  expect_error([&] { gen("ab\xC3"); }, {"not valid UTF-8: byte 0xC3"});
  g.max_tokens = 60;
  expect_error([&] { gen("abcd"); }, {"the prompt (5 tokens) plus --max-tokens 60 is longer than the model context 64"});
  g.max_tokens = 0;
  expect_error([&] { gen("abcd"); }, {"--max-tokens must be positive"});
  g.max_tokens = 5, g.temperature = -1;
  expect_error([&] { gen("abcd"); }, {"--temperature must be >= 0"});
}

// ---- plot ------------------------------------------------------------------------

TEST(Plot, TrainerWritesTheLossPlot) {
  const std::string dir = scratch_dir("plot"), out = dir + "/run";
  train(toy_options(out, "standard", 30), toy_data());
  const std::string svg = read_bytes(out + "/loss.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  const RunCurves c = read_run_curves(out + "/metrics.jsonl", "run");
  EXPECT_EQ(c.loss.size(), 30u);
  EXPECT_EQ(c.val_loss.size(), 3u);  // eval every 10
  EXPECT_LT(c.tokens.front(), c.tokens.back());
  RunCurves other = c;
  other.label = "a <second> & run";
  const std::string two = loss_plot_svg({c, other}, "two runs");
  size_t polylines = 0, circles = 0;
  for (size_t i = 0; (i = two.find("<polyline", i)) != std::string::npos; i++) polylines++;
  for (size_t i = 0; (i = two.find("<circle", i)) != std::string::npos; i++) circles++;
  EXPECT_EQ(polylines, 4u) << "a line per run and panel";
  EXPECT_EQ(circles, 12u) << "a dot per evaluation, run and panel";
  EXPECT_NE(two.find("a &lt;second&gt; &amp; run"), std::string::npos) << "labels are escaped";
  EXPECT_NE(two.find("training FLOPs (log scale)"), std::string::npos);
  expect_error([&] { read_run_curves(dir + "/none.jsonl", "x"); }, {"metrics file not found"});
}

// ---- the programs ------------------------------------------------------------------

// train_cpu -> eval -> generate -> plot on a small text file, then every bad
// input: each exits with status 1 and one "error:" line, and the good
// checkpoint stays byte-identical.
TEST(Programs, WorkflowAndBadInput) {
  const std::string train_cpu = program("train_cpu"), eval = program("eval"), gen = program("generate"),
                    plot = program("plot");
  if (train_cpu.empty() || eval.empty() || gen.empty() || plot.empty())
    GTEST_SKIP() << "set ADA_BIN_DIR to the folder of the built programs to run them";
  const std::string dir = scratch_dir("programs"), run = dir + "/run", text = dir + "/text.txt";
  std::string t;
  for (int i = 0; i < 60; i++) t += "In the beginning God created the heaven and the earth. \xC3\xA9t\xC3\xA9 " + std::to_string(i) + "\n";
  write_bytes(text, t);
  const std::string model = " --config test --vocab 256 --tokenizer bytes --data " + text;
  ProgramResult r = run_program(train_cpu + model + " --steps 12 --batch 2 --seq 16 --eval-every 6 --eval-batches 2"
                                " --save-every 6 --out " + run, dir);
  ASSERT_EQ(r.status, 0) << r.err;
  // The memory the run holds, once the first step has sized the arena and again at the end.
  EXPECT_NE(r.out.find("memory  after the first step: "), std::string::npos) << r.out;
  EXPECT_LT(r.out.find("memory  after the first step: "), r.out.find("step     6/12")) << r.out;
  EXPECT_NE(r.out.find("\nmemory  0."), std::string::npos) << r.out;
  EXPECT_EQ(read_bytes(run + "/latest"), "ckpt_12\n");
  EXPECT_TRUE(exists(run + "/loss.svg"));
  r = run_program(train_cpu + " --resume " + run + " --steps 16", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("resumed from " + run + "/ckpt_12 at step 12"), std::string::npos) << r.out;
  EXPECT_EQ(lines_of(run + "/metrics.jsonl").size(), 16u);
  r = run_program(eval + " --ckpt " + run + " --json " + dir + "/eval.json", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("bits/byte"), std::string::npos);
  const Json ej = parse_json(read_bytes(dir + "/eval.json"), "eval.json");
  EXPECT_EQ(ej.find("step")->number, 16);
  EXPECT_GT(ej.find("loss")->number, 0);
  r = run_program(gen + " --ckpt " + run + " --prompt 'In the ' --max-tokens 8 --seed 3", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("In the ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("passes/token"), std::string::npos) << r.out;
  r = run_program(plot + " " + run + " --out " + dir + "/p.svg", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(exists(dir + "/p.svg"));

  const std::string good_model = read_bytes(run + "/ckpt_16/model.safetensors");
  const std::string good_state = read_bytes(run + "/ckpt_16/state.safetensors");
  write_bytes(dir + "/latin1.txt", std::string(200, 'a') + "caf\xE9\n");
  ASSERT_EQ(std::system(("mkdir -p " + dir + "/empty_ckpt && touch " + dir + "/empty_ckpt/model.safetensors").c_str()), 0);
  ASSERT_EQ(std::system(("cp -r " + run + "/ckpt_6 " + dir + "/trunc && truncate -s 5000 " + dir +
                         "/trunc/model.safetensors").c_str()), 0);
  write_shard(dir + "/bad_val_000000.bin", std::vector<int32_t>(300, 300), 512);  // ids fit the shard, not the model
  struct Case {
    std::string cmd, needle;
  };
  const std::vector<Case> cases = {
      {train_cpu + " --batch 0", "--batch must be between 1 and 65536 (got 0)"},
      {train_cpu + " --config test --seq 65", "--seq 65 is longer than the model context 64"},
      {train_cpu + " --method nope", "unknown --method 'nope'"},
      {train_cpu + " --resume " + run + " --method ponder", "--method ponder does not match the checkpoint"},
      {train_cpu + " --resume " + run + " --dim 32 --steps 20", "has width (dim) 16 but the model was configured with 32"},
      {train_cpu + " --resume " + dir + "/nowhere", "checkpoint not found"},
      {train_cpu + " --config test --vocab 256 --tokenizer bytes --seq 16 --data " + dir + "/latin1.txt --out " + dir + "/r2",
       "is not valid UTF-8: byte 0xE9"},
      {eval, "--ckpt is required"},
      {eval + " --ckpt " + dir + "/missing", "checkpoint not found"},
      {eval + " --ckpt " + dir + "/empty_ckpt", "is empty (0 bytes)"},
      {eval + " --ckpt " + dir + "/trunc", "is truncated: tensor"},
      {eval + " --ckpt " + run + " --seq 65", "--seq 65 is longer than the model context 64"},
      {eval + " --ckpt " + run + " --batch 0", "--batch must be between 1 and 65536 (got 0)"},
      {eval + " --ckpt " + run + " --data " + dir + "/latin1.txt --split all", "is not valid UTF-8"},
      {eval + " --ckpt " + run + " --data " + dir + "/bad_val_000000.bin", "token id 300 at position 0 of shard " + dir + "/bad_val_000000.bin is outside the vocabulary"},
      {gen + " --ckpt " + run + " --prompt \"$(printf 'ab\\377')\"", "the prompt is not valid UTF-8: byte 0xFF"},
      {gen + " --ckpt " + run + " --prompt hello --max-tokens 100", "is longer than the model context 64"},
      {gen + " --prompt hello", "--ckpt is required"},
      {plot + " " + dir + "/nothing", "metrics file not found"},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.cmd);
    expect_program_error(run_program(c.cmd, dir), c.needle);
  }
  EXPECT_EQ(read_bytes(run + "/ckpt_16/model.safetensors"), good_model);
  EXPECT_EQ(read_bytes(run + "/ckpt_16/state.safetensors"), good_state);
  EXPECT_EQ(read_bytes(run + "/latest"), "ckpt_16\n");
}

// compare's table has the non-matmul ops and the measured inference time per
// token beside the inference FLOPs, for every method; eval prints and writes
// the ops per token; the metrics log carries their training total.
TEST(Programs, CompareAndEvalReportOtherOpsAndInferenceTime) {
  const std::string compare = program("compare"), eval = program("eval");
  if (compare.empty() || eval.empty()) GTEST_SKIP() << "set ADA_BIN_DIR to the folder of the built programs to run them";
  const std::string dir = scratch_dir("compare_costs"), text = dir + "/text.txt";
  std::string t;
  for (int i = 0; i < 60; i++) t += "In the beginning God created the heaven and the earth. " + std::to_string(i) + "\n";
  write_bytes(text, t);
  ProgramResult r = run_program(compare + " --methods standard,adaponder --config test --vocab 256 --tokenizer bytes"
                                " --data " + text + " --steps 4 --warmup 1 --batch 2 --seq 16 --eval-batches 2"
                                " --out " + dir + "/cmp", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<std::string> md = lines_of(dir + "/cmp/compare.md");
  const auto header = std::find_if(md.begin(), md.end(), [](const std::string& l) { return l.rfind("| method", 0) == 0; });
  ASSERT_NE(header, md.end());
  const std::vector<std::string> cols = {"method", "val loss", "train FLOPs", "inference FLOPs/token", "other ops/token",
                                         "passes/token", "inference us/token", "tokens/s", "wall"};
  auto cells = [](const std::string& line) {
    std::vector<std::string> c;
    std::stringstream ss(line.substr(1));
    for (std::string x; std::getline(ss, x, '|');) c.push_back(x.substr(1, x.size() - 2));  // trim the spaces
    return c;
  };
  EXPECT_EQ(cells(*header), cols) << *header;
  for (const std::string method : {"standard", "adaponder"}) {
    SCOPED_TRACE(method);
    const auto row = std::find_if(md.begin(), md.end(), [&](const std::string& l) { return l.rfind("| " + method + " |", 0) == 0; });
    ASSERT_NE(row, md.end());
    const auto c = cells(*row);
    ASSERT_EQ(c.size(), cols.size()) << *row;
    EXPECT_GT(std::stod(c[4]), 0) << "other ops/token: " << c[4];  // e.g. "37.1k": stod reads the number
    const double us = std::stod(c[6]);
    EXPECT_TRUE(std::isfinite(us) && us > 0) << "inference us/token: " << c[6];
  }
  // the run's metrics log: a growing training total of the other ops
  const std::vector<std::string> ml = lines_of(dir + "/cmp/adaponder/metrics.jsonl");
  ASSERT_EQ(ml.size(), 4u);
  double prev = 0;
  for (auto& l : ml) {
    const Json j = parse_json(l, "metrics");
    ASSERT_NE(j.find("other_flops"), nullptr) << l;
    EXPECT_GT(j.find("other_flops")->number, prev) << l;
    prev = j.find("other_flops")->number;
  }
  // --reuse takes a finished run only if it was trained with the spec's options (here the
  // folder of label adaponder holds gate bias 0, the default)
  expect_program_error(run_program(compare + " --methods adaponder:gate-bias=4:label=adaponder --reuse --config test --vocab 256"
                                   " --tokenizer bytes --data " + text + " --steps 4 --warmup 1 --batch 2 --seq 16 --eval-batches 2"
                                   " --out " + dir + "/cmp", dir),
                       "checkpoint " + dir + "/cmp/adaponder/ckpt_4 was made with --gate-bias 0, this study has 4");
  // and a run of the old default met by the new one says which spec reuses it (compare's folders have no seed suffix)
  const std::string small = " --config test --vocab 256 --tokenizer bytes --data " + text +
                            " --steps 4 --warmup 1 --batch 2 --seq 16 --eval-batches 2 --out " + dir + "/cmp4";
  r = run_program(compare + " --methods adaponder:gate-bias=4:label=ada_steps" + small, dir);
  ASSERT_EQ(r.status, 0) << r.err;
  expect_program_error(run_program(compare + " --methods adaponder:label=ada_steps --reuse" + small, dir),
                       "the default until 2026-12-08, and this study has 0: to reuse it, add :gate-bias=4:label=ada_steps to the spec");
  r = run_program(eval + " --ckpt " + dir + "/cmp/adaponder --seq 16 --batch 2 --json " + dir + "/eval.json", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("other ops   "), std::string::npos) << r.out;
  const Json ej = parse_json(read_bytes(dir + "/eval.json"), "eval.json");
  ASSERT_NE(ej.find("fwd_other_ops_per_token"), nullptr);
  EXPECT_GT(ej.find("fwd_other_ops_per_token")->number, 0);
  EXPECT_GT(ej.find("fwd_flops_per_token")->number, 0);
}
