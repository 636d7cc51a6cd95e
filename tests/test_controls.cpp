// The controls that isolate one mechanism from the rest of a method:
//   --embed-scale      any method at another method's input scale
//   --init-from        a run started from another run's backbone (TaH2 post-training)
//   tah --tah-policy fixed      TaH2's fixed-depth baseline (every token, all M depths)
//   adaponder --policy matched  random exits with the learned gates' exit histogram
// Each is checked for what it promises: the gradient (double, central
// differences), cached decoding against the full forward, and the behaviour
// (scale used, tensors loaded, depths run, histogram followed), with one clear
// error per bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <sstream>

#include "train/cpu_instances.h"
#include "gradcheck.h"
#include "method_test_util.h"
#include "methods/registry.h"
#include "train/checkpoint.h"
#include "train/options.h"
#include "train/svg_plot.h"
#include "workflow_util.h"

using namespace ada;
using namespace ada::test;
using Bd = CpuBackend<double>;

namespace {

// Whole-model gradient check of one method configuration at random
// parameters (check_param_grads, method_test_util.h).
void check_method_gradients(const std::string& name, const MethodOptions& mo, ModelConfig cfg, uint64_t seed,
                            const std::string& unused = "") {
  Bd be;
  auto method = make_method<Bd>(name, mo);
  auto m = make_model(be, cfg, *method);
  random_params(*m, seed);
  Batch b = random_batch(2, 7, cfg.vocab, seed + 1);
  b.targets[3] = -1;
  check_param_grads(*method, *m, b, unused);
}

// The decoder against the full forward, at weights far from uniform.
double decode_vs_forward(const std::string& name, const MethodOptions& mo, const ModelConfig& cfg) {
  Bd be;
  auto method = make_method<Bd>(name, mo);
  auto m = make_model(be, cfg, *method);
  m->init_params(3);
  for (size_t i = 0; i < m->num_params(); i++) m->params.data()[i] *= 8;
  return ada::test::decode_vs_forward(*method, *m, random_batch(1, 11, cfg.vocab, 4));
}

}  // namespace

// ---- --embed-scale -------------------------------------------------------------

// The names --embed-scale accepts give exactly the scale each method uses by
// default, so "standard at latent_cot's scale" is latent_cot's scale.
TEST(EmbedScale, NamesResolveToEachMethodsOwnScale) {
  const ModelConfig cfg = preset_config("tiny");
  MethodOptions mo;
  for (const std::string& name : method_names()) {
    SCOPED_TRACE(name);
    Bd be;
    auto method = make_method<Bd>(name, mo);
    auto m = make_model(be, preset_config("test"), *method);
    EXPECT_DOUBLE_EQ(resolve_embed_scale(name, m->cfg, mo), m->embed_scale);
    EXPECT_DOUBLE_EQ(method->default_embed_scale(m->cfg), m->embed_scale);  // no override: the method's own
  }
  EXPECT_DOUBLE_EQ(resolve_embed_scale("latent_cot", cfg, mo), std::sqrt(2.5 * 128));
  EXPECT_DOUBLE_EQ(resolve_embed_scale("ponder", cfg, mo), 3 * std::sqrt(128.0));
  EXPECT_DOUBLE_EQ(resolve_embed_scale("2.5", cfg, mo), 2.5);
  EXPECT_EQ(resolve_embed_scale("method", cfg, mo), 0.0);
  for (const char* bad : {"0", "-1", "nan", "abc", "3x"})
    expect_error([&] { resolve_embed_scale(bad, cfg, mo); }, {"--embed-scale", bad});
}

// An override changes the input (x = s E[x]) of any method, and the backward
// follows: the gradient check passes at a scale that is not the method's own.
TEST(EmbedScale, OverrideIsUsedAndGradientChecks) {
  ModelConfig cfg = preset_config("test");
  cfg.embed_scale = 3.7;
  MethodOptions mo;
  mo.ponder_steps = 2;
  {
    Bd be;
    auto method = make_method<Bd>("ponder", mo);
    auto m = make_model(be, cfg, *method);
    EXPECT_DOUBLE_EQ(m->embed_scale, 3.7);
    m->init_params(1);
    const double* x = m->embed({5});
    const double* E = m->params.data() + m->layout.get("tok_embeddings.weight").offset;
    for (int j = 0; j < cfg.dim; j++) EXPECT_DOUBLE_EQ(x[j], 3.7 * E[5 * cfg.dim + j]);
  }
  check_method_gradients("standard", mo, cfg, 11);
  check_method_gradients("ponder", mo, cfg, 12);
}

// The scale is part of the model: a checkpoint records it and refuses to load
// into a model configured with another.
TEST(EmbedScale, CheckpointRecordsTheScale) {
  ScopedThreads one(1);
  const std::string dir = scratch_dir("embed_scale");
  TrainOptions o = toy_options(dir + "/run", "standard", 4);
  o.embed_scale = "latent_cot";
  Dataset d = toy_data();
  CpuBackend<float> be;
  Trainer<CpuBackend<float>> tr(be, o);
  const std::string ckpt = tr.run(d, false).last_checkpoint;
  SafetensorsFile f(ckpt + "/model.safetensors", "checkpoint");
  const ModelMeta meta = read_model_meta(f);
  EXPECT_DOUBLE_EQ(meta.cfg.embed_scale, std::sqrt(2.5 * 16));
  auto loaded = load_checkpoint_model(be, ckpt);
  EXPECT_DOUBLE_EQ(loaded.model->embed_scale, std::sqrt(2.5 * 16));
  ModelMeta want = meta;
  want.cfg.embed_scale = 0;
  expect_error([&] { check_model_meta(meta, want, "x"); }, {"embedding scale", "the method's own"});
}

// ---- --init-from -----------------------------------------------------------------

// A tah run started from a standard run: every backbone tensor is the
// standard run's, every tah tensor is the fresh initialisation of the same
// seed, and the optimizer starts at step 0.
TEST(InitFrom, LoadsTheBackboneAndLeavesTheMethodFresh) {
  ScopedThreads one(1);
  const std::string dir = scratch_dir("init_from");
  Dataset d = toy_data();
  CpuBackend<float> be;
  TrainOptions src_o = toy_options(dir + "/standard", "standard", 6);
  Trainer<CpuBackend<float>> src(be, src_o);
  src.run(d, false);
  std::vector<float> src_params(src.model().params.data(), src.model().params.data() + src.model().num_params());

  TrainOptions o = toy_options(dir + "/tah", "tah", 3);
  Trainer<CpuBackend<float>> fresh(be, o);  // the same seed, no --init-from: the reference initialisation
  o.init_from = dir + "/standard";
  Trainer<CpuBackend<float>> tr(be, o);
  const Model<CpuBackend<float>>& m = tr.model();
  int backbone = 0, own = 0;
  for (auto& p : m.layout.tensors()) {
    const bool is_own = p.name.rfind("tah.", 0) == 0;
    (is_own ? own : backbone)++;
    for (size_t i = 0; i < p.numel; i++) {
      const float got = m.params.data()[p.offset + i];
      if (is_own)
        ASSERT_EQ(got, fresh.model().params.data()[p.offset + i]) << p.name;
      else
        ASSERT_EQ(got, src_params[src.model().layout.get(p.name).offset + i]) << p.name;
    }
  }
  EXPECT_EQ(backbone, (int)(3 + 6 * 2));  // embedding, 6 tensors per layer, final norm, head
  EXPECT_GT(own, 10);
  const TrainResult r = tr.run(d, false);
  EXPECT_EQ(r.first_step, 0);
  EXPECT_EQ(r.steps, 3);
  EXPECT_TRUE(std::isfinite(r.final_train_loss));
}

TEST(InitFrom, BadSourcesGiveOneClearError) {
  ScopedThreads one(1);
  const std::string dir = scratch_dir("init_from_bad");
  Dataset d = toy_data();
  CpuBackend<float> be;
  TrainOptions src_o = toy_options(dir + "/standard", "standard", 2);
  Trainer<CpuBackend<float>>(be, src_o).run(d, false);

  TrainOptions o = toy_options(dir + "/wide", "tah", 2);
  o.dim = 32;  // another width: every block tensor has another shape
  o.init_from = dir + "/standard";
  expect_error([&] { Trainer<CpuBackend<float>> tr(be, o); }, {"--init-from", "tok_embeddings.weight", "shape"});

  o = toy_options(dir + "/tied", "standard", 2);
  o.tied = 0;
  TrainOptions tied_src = toy_options(dir + "/tied_src", "standard", 2);
  tied_src.tied = 1;
  Trainer<CpuBackend<float>>(be, tied_src).run(d, false);
  o.init_from = dir + "/tied_src";
  expect_error([&] { Trainer<CpuBackend<float>> tr(be, o); }, {"--init-from", "output.weight", "tied"});

  o = toy_options(dir + "/missing", "tah", 2);
  o.init_from = dir + "/nothing_here";
  expect_error([&] { Trainer<CpuBackend<float>> tr(be, o); }, {"nothing_here"});

  o = toy_options(dir + "/both", "tah", 2);
  o.init_from = dir + "/standard";
  o.resume = dir + "/standard";
  expect_error([&] { o.validate(); }, {"--resume and --init-from"});
}

// ---- tah --tah-policy fixed -----------------------------------------------------------

// Every token runs all M depths, the output is the even mixture over depths,
// there is no decider, and the gradient and the decoder are right.
TEST(TahFixed, EveryTokenRunsAllDepthsWithTheEvenMixture) {
  MethodOptions mo;
  mo.tah.policy = "fixed";
  mo.tah.M = 3;
  const ModelConfig cfg = preset_config("test");
  Bd be;
  auto method = make_method<Bd>("tah", mo);
  auto m = make_model(be, cfg, *method);
  for (auto& p : m->layout.tensors()) EXPECT_EQ(p.name.find("tah.decider"), std::string::npos) << p.name;
  random_params(*m, 21);
  Batch b = random_batch(2, 6, cfg.vocab, 22);
  m->arena.reset();
  method->forward(*m, b, false);
  std::vector<double> nll, passes, probs;
  method->per_token(*m, nll, passes);
  for (double p : passes) EXPECT_EQ(p, 3.0);
  // the mixture against the even average of the depths' own distributions
  method->probabilities(*m, probs);
  auto& tah = dynamic_cast<TahMethod<Bd>&>(*method);
  for (int t = 0; t < b.B * b.T; t++) {
    double s = 0;
    for (int v = 0; v < cfg.vocab; v++) s += probs[(size_t)t * cfg.vocab + v];
    EXPECT_NEAR(s, 1.0, 1e-12);
    EXPECT_NEAR(nll[t], -std::log(probs[(size_t)t * cfg.vocab + b.targets[t]]), 1e-10);
  }
  EXPECT_NEAR(tah.fixed_continue(0), 2.0 / 3.0, 1e-15);
  EXPECT_NEAR(tah.fixed_continue(1), 1.0 / 2.0, 1e-15);
  check_method_gradients("tah", mo, cfg, 23);
  EXPECT_LT(decode_vs_forward("tah", mo, cfg), 1e-12);
}

// The even mixture against an independent construction: with M = 2, the
// decider model whose score weight w_s is 0 gives g = sigmoid(0) = 1/2 to every
// token, so (with tau_exit below 1/2) every token runs both depths and the
// halting chain's weights are 1 - g = 1/2 and g = 1/2: the even mixture. The
// fixed model with the same backbone and updater must give the same distributions.
TEST(TahFixed, MatchesTheDeciderModelAtGOneHalf) {
  const ModelConfig cfg = preset_config("test");
  MethodOptions dec_o;
  dec_o.tah.M = 2, dec_o.tah.exit = 0.4;
  MethodOptions fix_o = dec_o;
  fix_o.tah.policy = "fixed";
  Bd be;
  auto dec = make_method<Bd>("tah", dec_o);
  auto md = make_model(be, cfg, *dec);
  random_params(*md, 31);
  const ParamInfo& ws = md->layout.get("tah.decider.score.weight");
  for (size_t i = 0; i < ws.numel; i++) md->params.data()[ws.offset + i] = 0;
  auto fix = make_method<Bd>("tah", fix_o);
  auto mf = make_model(be, cfg, *fix);
  EXPECT_LT(mf->num_params(), md->num_params());
  for (auto& p : mf->layout.tensors()) {
    const ParamInfo& q = md->layout.get(p.name);
    std::copy(md->params.data() + q.offset, md->params.data() + q.offset + q.numel, mf->params.data() + p.offset);
  }
  Batch b = random_batch(2, 5, cfg.vocab, 32);
  std::vector<double> pd, pf;
  md->arena.reset();
  dec->forward(*md, b, false);
  dec->probabilities(*md, pd);
  mf->arena.reset();
  fix->forward(*mf, b, false);
  fix->probabilities(*mf, pf);
  ASSERT_EQ(pd.size(), pf.size());
  for (size_t i = 0; i < pd.size(); i++) ASSERT_NEAR(pd[i], pf[i], 1e-12) << i;
  EXPECT_EQ(dynamic_cast<TahMethod<Bd>&>(*fix).exit_depth(), std::vector<int>(10, 1));
  MethodOptions bad = fix_o;
  bad.tah.policy = "sometimes";
  expect_error([&] { make_method<Bd>("tah", bad); }, {"--tah-policy", "sometimes"});
}

// ---- adaponder --policy matched --------------------------------------------------------

// Random tokens exit with the given per-pass histogram; the loss has the
// right gradient; decoding follows the same exits.
TEST(AdaPonderMatched, ExitsFollowTheHistogram) {
  const int K = 3;
  const std::vector<double> cdf = policy_hist_cdf("0.1/0/0.3/0.6", K);
  ASSERT_EQ(cdf.size(), 4u);
  EXPECT_NEAR(cdf[0], 0.1, 1e-15);
  EXPECT_NEAR(cdf[2], 0.4, 1e-15);
  EXPECT_NEAR(cdf[3], 1.0, 1e-15);
  std::vector<double> count(K + 2, 0);
  const int n = 40000;
  for (int t = 0; t < n; t++) count[fixed_policy_exit("matched", 0, K, 9, (uint64_t)t, &cdf)]++;
  EXPECT_NEAR(count[1] / n, 0.1, 0.01);
  EXPECT_EQ(count[2], 0);
  EXPECT_NEAR(count[3] / n, 0.3, 0.01);
  EXPECT_NEAR(count[4] / n, 0.6, 0.01);
  EXPECT_NEAR(policy_hist_cdf("1/1/2/0", K)[1], 0.5, 1e-15);  // normalised
  for (const char* bad : {"0.5/0.5", "a/b/c/d", "0/0/0/0", "-1/1/1/1", "0.1/0.2/0.3/0.4/0"})
    expect_error([&] { policy_hist_cdf(bad, K); }, {"--policy-hist"});

  MethodOptions mo;
  mo.ponder_steps = 2;
  mo.ada.policy = "matched";
  mo.ada.policy_hist = "0.3/0.3/0.4";
  const ModelConfig cfg = preset_config("test");
  check_method_gradients("adaponder", mo, cfg, 41, "adaponder.gate.");
  EXPECT_LT(decode_vs_forward("adaponder", mo, cfg), 1e-12);
  // the exits of a batch, as the method reports them
  Bd be;
  auto method = make_method<Bd>("adaponder", mo);
  auto m = make_model(be, cfg, *method);
  m->init_params(5);
  Batch b = random_batch(4, 50, cfg.vocab, 6);
  m->arena.reset();
  method->forward(*m, b, false);
  std::vector<double> nll, passes;
  method->per_token(*m, nll, passes);
  std::vector<double> hist(3, 0);
  for (double p : passes) hist[(int)p - 1] += 1.0 / passes.size();
  EXPECT_NEAR(hist[0], 0.3, 0.08);
  EXPECT_NEAR(hist[1], 0.3, 0.08);
  EXPECT_NEAR(hist[2], 0.4, 0.08);
  mo.ada.policy_hist = "";
  expect_error([&] { make_method<Bd>("adaponder", mo); }, {"--policy-hist"});
  mo.ada.policy = "matched-gated";
  expect_error([&] { make_method<Bd>("adaponder", mo); }, {"--policy-hist"});
  mo.ada.policy = "sometimes";
  expect_error([&] { make_method<Bd>("adaponder", mo); }, {"--policy", "matched-gated", "sometimes"});
}

// ---- eval --per-token / --paired ---------------------------------------------------------

namespace {
std::vector<double> column(const std::string& csv, int col) {
  std::vector<double> v;
  std::stringstream ss(csv);
  std::string line;
  std::getline(ss, line);  // header
  while (std::getline(ss, line)) {
    const size_t c = line.find(',');
    v.push_back(std::stod(col == 0 ? line.substr(0, c) : line.substr(c + 1)));
  }
  return v;
}
}  // namespace

// Two runs evaluated on the same tokens: the paired difference eval prints is
// the mean of the per-token differences of the two --per-token files, with
// the standard error of that mean; a run against itself gives 0 +- 0.
TEST(EvalPaired, PerTokenFilesAndThePairedDifference) {
  const std::string train_cpu = program("train_cpu"), eval = program("eval");
  if (train_cpu.empty() || eval.empty()) GTEST_SKIP() << "set ADA_BIN_DIR to the folder of the built programs to run them";
  const std::string dir = scratch_dir("paired"), text = dir + "/text.txt";
  std::string t;
  for (int i = 0; i < 80; i++) t += "And God said, Let there be light: and there was light. " + std::to_string(i % 7) + "\n";
  write_bytes(text, t);
  const std::string model = " --config test --vocab 256 --tokenizer bytes --data " + text +
                            " --steps 8 --batch 2 --seq 16 --eval-every 8 --eval-batches 2";
  ASSERT_EQ(run_program(train_cpu + model + " --out " + dir + "/a", dir).status, 0);
  ASSERT_EQ(run_program(train_cpu + model + " --method ponder --ponder-steps 1 --out " + dir + "/b", dir).status, 0);
  ProgramResult r = run_program(eval + " --ckpt " + dir + "/a --batches 0 --per-token " + dir + "/a.csv", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_program(eval + " --ckpt " + dir + "/b --batches 0 --per-token " + dir + "/b.csv --paired " + dir + "/a.csv", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<double> a = column(read_bytes(dir + "/a.csv"), 0), b = column(read_bytes(dir + "/b.csv"), 0);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GT(a.size(), 100u);
  double d = 0, d2 = 0;
  for (size_t i = 0; i < a.size(); i++) d += b[i] - a[i], d2 += (b[i] - a[i]) * (b[i] - a[i]);
  const double n = (double)a.size(), mean = d / n, se = std::sqrt((d2 - d * d / n) / (n - 1) / n);
  char want[128];
  std::snprintf(want, sizeof want, "diff %+.4f +- %.4f", mean, se);
  EXPECT_NE(r.out.find("paired with"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(want), std::string::npos) << "expected '" << want << "' in\n" << r.out;
  EXPECT_NE(r.out.find("2 passes"), std::string::npos) << r.out;  // ponder with P = 1: every token 2 passes
  r = run_program(eval + " --ckpt " + dir + "/a --batches 0 --paired " + dir + "/a.csv", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("diff +0.0000 +- 0.0000"), std::string::npos) << r.out;
  // another number of tokens, and a file that is not a per-token file
  expect_program_error(run_program(eval + " --ckpt " + dir + "/a --batches 1 --paired " + dir + "/a.csv", dir),
                       "evaluate both with the same data");
  expect_program_error(run_program(eval + " --ckpt " + dir + "/a --paired " + text, dir), "is not a per-token file");
}

// plot --field: any per-step metric of metrics.jsonl (e.g. CYB's DK
// probability), with its name on the y axis and no validation dots.
TEST(PlotField, AnyMetricOfTheLog) {
  const std::string dir = scratch_dir("plot_field"), path = dir + "/metrics.jsonl";
  write_bytes(path,
              "{\"step\": 1, \"tokens\": 100, \"flops\": 1e9, \"loss\": 5.0, \"dk\": 0.05}\n"
              "{\"step\": 2, \"tokens\": 200, \"flops\": 2e9, \"loss\": 4.5, \"dk\": 0.01, \"val_loss\": 4.8}\n"
              "{\"step\": 3, \"tokens\": 300, \"flops\": 3e9, \"loss\": 4.2}\n");
  const RunCurves dk = read_run_curves(path, "cyb", "dk");
  EXPECT_EQ(dk.loss, (std::vector<double>{0.05, 0.01}));
  EXPECT_EQ(dk.tokens, (std::vector<double>{100, 200}));
  EXPECT_TRUE(dk.val_loss.empty());
  const std::string svg = loss_plot_svg({dk}, "DK");
  EXPECT_NE(svg.find("rotate(-90)' text-anchor='middle'>dk</text>"), std::string::npos);
  EXPECT_NE(svg.find("line: dk of each training step"), std::string::npos);
  const RunCurves loss = read_run_curves(path, "cyb");
  EXPECT_EQ(loss.loss.size(), 3u);
  EXPECT_EQ(loss.val_loss, (std::vector<double>{4.8}));
  const std::string plot = program("plot");
  if (plot.empty()) return;
  expect_program_error(run_program(plot + " --field nope " + path + " --out " + dir + "/x.svg", dir), "no numeric field 'nope'");
  ASSERT_EQ(run_program(plot + " --field dk " + path + " --out " + dir + "/dk.svg", dir).status, 0);
  EXPECT_TRUE(exists(dir + "/dk.svg"));
}
