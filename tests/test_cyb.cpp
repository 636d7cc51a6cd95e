// Catch Your Breath: the stopping-time loss against a direct evaluation of
// its definition, gradient checks for each deadline / visibility choice,
// the W = 1 case (plain cross-entropy), and decoding that stops pausing.
#include <gtest/gtest.h>

#include <map>

#include "train/cpu_instances.h"
#include "gradcheck.h"
#include "method_test_util.h"
#include "methods/cyb.h"

using namespace ada;
using namespace ada::test;
using Bd = CpuBackend<double>;

namespace {

struct CybCase : MethodCase<CybMethod<Bd>> {
  CybCase(CybOptions o, uint64_t seed, double dk_scale = 1.0) : MethodCase(o) {
    random_params(*m, seed, [&](const ParamInfo& p, double v) { return p.name == "cyb.dk_head.weight" ? v * dk_scale : v; });
    b = random_batch(2, 5, m->cfg.vocab, seed + 1);
    b.targets[2] = -1;
  }
  // The training loss (forward with training = true: the warm-up's loss
  // while it lasts) against finite differences of the same forward.
  // In the warm-up the loss does not depend on the DK head (skip_dk): its
  // analytic gradient must be exactly zero and the numeric one negligible.
  void check_all_grads(bool skip_dk = false) {
    m->zero_grads();
    m->arena.reset();
    method->forward(*m, b, true);
    method->backward(*m, 1.0);
    std::vector<double> g(m->grads.data(), m->grads.data() + m->num_params());
    auto train_loss = [&] {
      m->arena.reset();
      method->forward(*m, b, true);
      return method->stats(*m).loss;
    };
    for (auto& p : m->layout.tensors()) {
      std::vector<double> a(g.begin() + p.offset, g.begin() + p.offset + p.numel);
      const auto n = numeric_grad(m->params.data() + p.offset, p.numel, train_loss);
      if (skip_dk && p.name.rfind("cyb.dk_head", 0) == 0) {
        for (size_t i = 0; i < a.size(); i++) EXPECT_EQ(a[i], 0.0) << p.name;
        for (double v : n) EXPECT_LT(std::abs(v), 1e-9) << p.name;
        continue;
      }
      expect_grad_close(p.name, a, n);
    }
  }
};

// One supervised token through CybToken with o's schedule (W = o.pauses + 1
// steps, x = o_DK - LSE and log r per step): returns loss_t and writes the
// gradients (times scale) and the greedy step where the pointers are non-null.
double token_loss(const CybOptions& o, const std::vector<double>& x, const std::vector<double>& lp, double scale,
                  bool anytime, double* g_lp = nullptr, double* g_lse = nullptr, double* g_dk = nullptr,
                  double* steps = nullptr) {
  std::vector<double> lw, lgt, lg;
  CybMethod<Bd>(o).schedule(lw, lgt, lg);
  const int W = o.pauses + 1, sup = 1;
  std::vector<double> a(W), b(W), c(W);
  double loss, greedy, st;
  CybToken<double>{W, x.data(), lp.data(), &sup, lw.data(), lgt.data(), lg.data(), scale, &loss, &greedy, &st,
                   g_lp ? g_lp : a.data(), g_lse ? g_lse : b.data(), g_dk ? g_dk : c.data(), anytime ? 1 : 0}(0);
  if (steps) *steps = st;
  return loss;
}

}  // namespace

// The per-token arithmetic against the definition evaluated directly:
// A = sum_i D_{i-1} [(1-d_i) Omega_{>i} + omega_i] gamma_i r_i, and its
// derivatives by central differences in x = o_DK - LSE and logp.
TEST(Cyb, TokenLossMatchesDefinitionAndDifferences) {
  const int W = 4;
  std::vector<double> x = {0.7, -0.3, 1.9, -2.2}, lp = {-2.1, -0.4, -1.3, -0.9};
  for (std::string deadline : {"last", "uniform"}) {
    CybOptions o;
    o.pauses = W - 1, o.deadline = deadline, o.gamma0 = 0.9;
    std::vector<double> lw, lgt, lg;
    CybMethod<Bd>(o).schedule(lw, lgt, lg);
    auto run = [&](double* g_lp, double* g_lse, double* g_dk) { return token_loss(o, x, lp, 1.0, false, g_lp, g_lse, g_dk); };
    // direct evaluation
    double A = 0, Dprev = 1;
    for (int i = 0; i < W; i++) {
      const double d = 1 / (1 + std::exp(-x[i]));
      A += Dprev * ((1 - d) * std::exp(lgt[i]) + std::exp(lw[i])) * std::exp(lg[i]) * std::exp(lp[i]);
      Dprev *= d;
    }
    EXPECT_NEAR(run(nullptr, nullptr, nullptr), -std::log(A), 1e-12) << deadline;
    std::vector<double> glp(W), glse(W), gdk(W);
    run(glp.data(), glse.data(), gdk.data());
    auto L = [&] { return run(nullptr, nullptr, nullptr); };
    expect_grad_close("dlogp " + deadline, glp, numeric_grad(lp.data(), W, L));
    expect_grad_close("dx " + deadline, gdk, numeric_grad(x.data(), W, L));
    for (int i = 0; i < W; i++) EXPECT_EQ(glse[i], -gdk[i]);
  }
}

// The warm-up's anytime loss, -(1/W) sum_i log r_i, against its definition
// and central differences; it sends nothing to the DK logit.
TEST(Cyb, WarmupTokenLossIsTheMeanOverSteps) {
  const int W = 4;
  std::vector<double> x = {0.7, -0.3, 1.9, -2.2}, lp = {-2.1, -0.4, -1.3, -0.9};
  CybOptions o;
  o.pauses = W - 1;
  auto run = [&](double* g_lp, double* g_lse, double* g_dk) {
    double steps = 0;
    const double loss = token_loss(o, x, lp, 0.5, true, g_lp, g_lse, g_dk, &steps);
    EXPECT_EQ(steps, 2.0);  // the greedy step is reported as outside the warm-up
    return loss;
  };
  EXPECT_NEAR(run(nullptr, nullptr, nullptr), (2.1 + 0.4 + 1.3 + 0.9) / W, 1e-15);
  std::vector<double> glp(W), glse(W, 1.0), gdk(W, 1.0);
  run(glp.data(), glse.data(), gdk.data());
  auto L = [&] { return 0.5 * run(nullptr, nullptr, nullptr); };  // scale 0.5 multiplies the gradients
  expect_grad_close("dlogp", glp, numeric_grad(lp.data(), W, L));
  for (int i = 0; i < W; i++) {
    EXPECT_EQ(gdk[i], 0.0);
    EXPECT_EQ(glse[i], 0.0);
  }
}

// --cyb-warmup-steps: before the step it names, training uses the anytime
// loss (the DK head gets no gradient, every row's prediction does, and the
// whole model's gradient matches finite differences of that loss); from
// that step on, the stopping-time loss; evaluation (training = false)
// always reports the stopping-time loss.
TEST(Cyb, WarmupTrainsEveryStepAndLeavesTheDkHead) {
  CybOptions o;
  o.pauses = 2, o.warmup = -1;
  CybCase c(o, 9, 2.0);
  c.method->set_step(4, 10);  // -1: half of 10 steps, so step 4 is in the warm-up
  c.m->zero_grads();
  c.m->arena.reset();
  c.method->forward(*c.m, c.b, true);
  c.method->backward(*c.m, 1.0);
  std::vector<double> logr;
  c.method->target_log_probs(*c.m, logr);
  double mean = 0;
  int sup = 0;
  for (int t = 0; t < 10; t++)
    if (c.b.targets[t] >= 0) {
      for (int i = 0; i < 3; i++) mean -= logr[(size_t)t * 3 + i] / 3;
      sup++;
    }
  EXPECT_NEAR(c.method->stats(*c.m).loss, mean / sup, 1e-12);
  EXPECT_EQ(c.m->grad("cyb.dk_head.bias")[0], 0.0);
  for (int j = 0; j < c.m->cfg.dim; j++) EXPECT_EQ(c.m->grad("cyb.dk_head.weight")[j], 0.0);
  double pause_grad = 0;
  for (int j = 0; j < c.m->cfg.dim; j++) pause_grad += std::abs(c.m->grad("pause.embedding")[j]);
  EXPECT_GT(pause_grad, 0.0);
  c.check_all_grads(true);  // the training loss, in the warm-up
  // evaluation reports the stopping-time loss, in the warm-up too
  c.m->arena.reset();
  c.method->forward(*c.m, c.b, false);
  const double eval_loss = c.method->stats(*c.m).loss;
  EXPECT_GT(std::abs(eval_loss - mean / sup), 1e-3);
  // after the warm-up: the DK head learns
  c.method->set_step(5, 10);
  c.m->zero_grads();
  c.m->arena.reset();
  c.method->forward(*c.m, c.b, true);
  c.method->backward(*c.m, 1.0);
  EXPECT_NE(c.m->grad("cyb.dk_head.bias")[0], 0.0);
  EXPECT_NEAR(c.method->stats(*c.m).loss, eval_loss, 1e-12);
  c.check_all_grads();
}

// methods.md 10.3's sanity check: with W = 1 (no pauses) the loss is the
// plain cross-entropy -log r_1, whatever the DK head says.
TEST(Cyb, OneStepIsCrossEntropy) {
  CybOptions o;
  o.pauses = 0, o.gamma0 = 1.0;
  CybCase c(o, 3, 5.0);
  c.m->arena.reset();
  c.method->forward(*c.m, c.b, false);
  const StepStats st = c.method->stats(*c.m);
  EXPECT_GT(st.loss, 0.5);
  EXPECT_NEAR(st.loss, st.ce, 1e-12);
  // and the DK head gets no gradient
  c.m->zero_grads();
  c.m->arena.reset();
  c.method->forward(*c.m, c.b, true);
  c.method->backward(*c.m, 1.0);
  const double* g = c.m->grad("cyb.dk_head.weight");
  for (int j = 0; j < c.m->cfg.dim; j++) EXPECT_EQ(g[j], 0.0);
  EXPECT_EQ(c.m->grad("cyb.dk_head.bias")[0], 0.0);
}

TEST(Cyb, GradCheckUniformDeadlineOwnVisibility) {
  CybOptions o;
  o.pauses = 2, o.deadline = "uniform", o.gamma0 = 0.8, o.visibility = "own";
  CybCase c(o, 5, 4.0);
  c.check_all_grads();
}

TEST(Cyb, DecodingStopsPausingAndMatchesTraining) {
  for (std::string vis : {"all", "own"}) {
    SCOPED_TRACE(vis);
    CybOptions o;
    o.pauses = 3, o.visibility = vis;
    CybCase c(o, 7, 20.0);  // a strong DK head: some steps abstain, some answer
    Batch b = random_batch(1, 8, c.m->cfg.vocab, 9);
    c.m->arena.reset();
    c.method->forward(*c.m, b, false);
    std::vector<double> full, nll, steps;
    c.method->probabilities(*c.m, full);
    c.method->per_token(*c.m, nll, steps);
    double early = 0;
    for (double s : steps) early += s < 4;
    EXPECT_GT(early, 0);
    EXPECT_LT(early, 8);
    auto dec = c.method->decoder(*c.m, 8);
    const int V = c.m->cfg.vocab;
    for (int t = 0; t < 8; t++) {
      const auto& p = dec->step(b.inputs[t]);
      EXPECT_EQ(dec->passes_last(), vis == "own" ? steps[t] : 4.0);
      for (int v = 0; v < V; v++) EXPECT_NEAR(p[v], full[(size_t)t * V + v], 1e-12);
    }
  }
}

// The per-step diagnostics of stats(): nll_step<i> is the mean -log r_i at
// step i over the supervised tokens, wait_pays the fraction of them with
// max_{i>1} gamma_i r_i > r_1; recomputed here from the rows' log r, with one
// target masked out (-1) to check that only supervised tokens count.
TEST(Cyb, StatsReportWhetherWaitingPays) {
  CybOptions o;
  o.pauses = 2, o.gamma0 = 0.9;
  CybCase c(o, 5, 3.0);
  Batch b = random_batch(2, 6, c.m->cfg.vocab, 21);
  b.targets[4] = -1;
  c.m->arena.reset();
  c.method->forward(*c.m, b, false);
  std::vector<double> logr;
  c.method->target_log_probs(*c.m, logr);
  const int W = 3, n = 12;
  ASSERT_EQ(logr.size(), (size_t)n * W);
  std::vector<double> nll(W, 0.0);
  double pays = 0, sup = 0, somewhere = 0;
  for (int t = 0; t < n; t++) {
    if (b.targets[t] < 0) continue;
    sup += 1;
    double best_later = -1;
    for (int i = 0; i < W; i++) {
      const double r = std::exp(logr[(size_t)t * W + i]);
      nll[i] -= std::log(r);
      if (i > 0) best_later = std::max(best_later, std::pow(0.9, i) * r);
    }
    pays += best_later > std::exp(logr[(size_t)t * W]);
    somewhere += 1;
  }
  ASSERT_EQ(sup, 11);
  const auto h = c.method->stats(*c.m).halting;
  std::map<std::string, double> got(h.begin(), h.end());
  for (int i = 0; i < W; i++) EXPECT_NEAR(got.at("nll_step" + std::to_string(i + 1)), nll[i] / sup, 1e-12);
  EXPECT_NEAR(got.at("wait_pays"), pays / sup, 1e-12);
  EXPECT_EQ(got.count("nll_step4"), 0u);
  // random weights: the rows differ, so both outcomes occur among 11 tokens
  EXPECT_GT(pays, 0);
  EXPECT_LT(pays, somewhere);
}

// The DK bias b_DK = logit(d_init) + log V sets the initial DK probability
// (on average over rows, at the real initialisation); it has no weight decay,
// the DK weight row keeps the output head's.
TEST(Cyb, DkBiasSetsInitialProbability) {
  for (double d0 : {0.05, 0.5, 0.9}) {
    SCOPED_TRACE(d0);
    CybOptions o;
    o.dk_init = d0;
    MethodCase<CybMethod<Bd>> c(o);
    c.m->init_params(11);
    c.b = random_batch(2, 9, c.m->cfg.vocab, 12);
    c.m->arena.reset();
    c.method->forward(*c.m, c.b, false);
    std::vector<double> d;
    c.method->dk_probabilities(*c.m, d);
    double logit = 0;
    for (double v : d) logit += std::log(v / (1 - v)) / d.size();
    EXPECT_NEAR(logit, std::log(d0 / (1 - d0)), 0.1);
    const auto stats = c.method->stats(*c.m).halting;
    ASSERT_EQ(stats[3].first, "dk");
    EXPECT_NEAR(stats[3].second, d0, 0.05);
    EXPECT_FALSE(c.m->layout.get("cyb.dk_head.bias").decay);
    EXPECT_TRUE(c.m->layout.get("cyb.dk_head.weight").decay);
  }
  CybOptions bad;
  bad.dk_init = 1.0;
  EXPECT_THROW(CybMethod<Bd>{bad}, Error);
}

namespace {

// Blocks [a, b, =, c] with a, b uniform in 0..n-1, '=' = token 20 and
// c = table[a n + b]; targets of three kinds (below): easy at b, hard at '=',
// noise at a and c.
Batch table_task_batch(int B, int T, int n, const std::vector<int>& table, Rng& r) {
  Batch b;
  b.B = B, b.T = T;
  for (int s = 0; s < B; s++)
    for (int k = 0; k < T / 4; k++) {
      const int x = (int)r.below(n), y = (int)r.below(n);
      for (int v : {x, y, 20, table[x * n + y]}) b.inputs.push_back(v);
    }
  for (size_t i = 0; i < b.inputs.size(); i++) b.targets.push_back((i + 1) % T ? b.inputs[i + 1] : -1);
  return b;
}

// The learning task. Sequences of blocks [a, b, =, c] with a, b uniform
// digits 0..2, '=' = token 20 and c = (a + b) mod 3. Its targets fall in
// three kinds:
//   easy   at b, the target is '=': a fixed pattern, learned in one step;
//   hard   at '=', the target c needs two tokens gathered and combined;
//   noise  at a and c, the target is the next uniform digit: nothing helps.
// Why this task: with L layers a pause row is no deeper than its real row
// (attention at layer l reads the layer l-1 states of earlier rows, pause
// rows included), so a pause buys width, not depth: one more row whose
// attention and MLP can gather and combine the operands for the answer. A
// combination of two earlier tokens is the smallest such computation, and a
// narrow model (D = 32, 2 layers) is where one extra row should matter most.
// A pause pays for a token when the later step predicts it better (CYB's
// gradient into d_1 is D_0 (Q_2 - Omega_{>1} gamma_1 r_1)), so a mechanism
// that learns what it should raises d on the hard targets above the easy ones
// AND above the noise; the noise kind separates "the model is unsure" (a
// flat distribution also lowers LSE and so raises d) from "waiting helps".
Batch sum_task_batch(int B, int T, Rng& r) {
  std::vector<int> table(9);
  for (int x = 0; x < 3; x++)
    for (int y = 0; y < 3; y++) table[x * 3 + y] = (x + y) % 3;
  return table_task_batch(B, T, 3, table, r);
}

// Per kind (0 easy, 1 hard, 2 noise), over the targets of the last forward:
// the mean d_1 and the mean -log r at the real step (1) and the pause step (2).
struct KindMeans {
  double d1[3] = {0, 0, 0}, nll1[3] = {0, 0, 0}, nll2[3] = {0, 0, 0};
};
template <class Bk>
KindMeans kind_means(CybMethod<Bk>& meth, Model<Bk>& m, const Batch& b) {
  const int W = meth.window();
  std::vector<double> d, logr;
  meth.dk_probabilities(m, d);
  meth.target_log_probs(m, logr);
  KindMeans k;
  double cnt[3] = {0, 0, 0};
  for (int t = 0; t < b.B * b.T; t++) {
    if (b.targets[t] < 0) continue;
    const int pos = t % 4, kd = pos == 1 ? 0 : pos == 2 ? 1 : 2;
    k.d1[kd] += d[(size_t)t * W], k.nll1[kd] -= logr[(size_t)t * W], k.nll2[kd] -= logr[(size_t)t * W + 1];
    cnt[kd]++;
  }
  for (int i = 0; i < 3; i++) k.d1[i] /= cnt[i], k.nll1[i] /= cnt[i], k.nll2[i] /= cnt[i];
  return k;
}

// AdamW over the model's one parameter buffer with its own moments; step()
// applies the gradients accumulated since the last zero_grads.
struct Adam {
  using Bf = CpuBackend<float>;
  std::vector<float> mom, var;
  AdamWHyper h;
  int t = 0;
  Adam(size_t n, double lr) : mom(n, 0.f), var(n, 0.f) { h.lr = lr; }
  void step(Bf& be, Model<Bf>& m) {
    h.step = ++t;
    be.adamw_step(m.params.data(), m.grads.data(), mom.data(), var.data(), mom.size(), m.layout.decay_count(), h, 1.0);
  }
};

// Adds the gradient of meth's training loss on b to m's gradients.
template <class Bk>
void add_grads(CybMethod<Bk>& meth, Model<Bk>& m, const Batch& b) {
  meth.forward(m, b, true);
  meth.backward(m, 1.0);
}

}  // namespace

// DISABLED: the mechanism does not learn this task (nor the variants tried),
// and the assertion is kept as it should be rather than weakened. Observed
// (float, 400 steps of 16 x 16 tokens, AdamW lr 3e-3; also 800 steps at lr
// 1e-2, (a - b) mod 2, (a + b) mod 8, one head): the easy targets are learned
// (CE < 0.01), but the hard ones stay at chance at BOTH steps (CE 1.10 = log 3
// at the real row and at the pause row), so waiting never helps, every pause
// costs gamma, and d_1 falls from 0.5 to below 1e-3 on all three kinds alike.
// A task the model does learn was tried too (2026-12-03, not kept): c a fixed
// random table of (a, b) over 8 x 8 pairs, D = 32, 3000 steps with the anytime
// warm-up for the first 1500 and gamma0 0.99, 0.999 or 1. The real row learns
// the table (CE 0.05 by step 1500) and the pause row only slightly sooner
// (0.01): the extra width barely helps, and once the stopping-time loss is on
// d_1 falls to 0 on the hard targets while it rises on the noise (0.75 at
// gamma0 = 1, where waiting is free and a flat distribution lowers LSE):
// "unsure", not "waiting helps". Again on 2026-12-03, a 16 x 16 table with
// the anytime loss for all 4000 steps, at sizes that starve the real row
// (D 16 / F 24; D 16 / F 16 / 1 head; D 32 / F 32 / 1 layer): the pause row
// ends worse than the real row every time (CE 0.125 vs 0.119, 1.009 vs
// 0.484, 0.128 vs 0.040; docs/methods/cyb.md). Run it with --gtest_also_run_disabled_tests (ADA_VERBOSE=1 prints the
// trajectory). A task where the pause step demonstrably predicts better than
// the real step is still to be found; see docs/methods/cyb.md.
TEST(Cyb, DISABLED_LearnsToPauseOnHardTargets) {
  using Bf = CpuBackend<float>;
  Bf be;
  CybOptions o;
  o.pauses = 1, o.dk_init = 0.5;
  CybMethod<Bf> meth(o);
  ModelConfig cfg = preset_config("test");
  cfg.dim = 32, cfg.hidden = 64;
  auto m = make_model(be, cfg, meth);
  m->init_params(1);
  Adam opt(m->num_params(), 3e-3);
  Rng r(2);
  const int B = 16, T = 16, steps = 400;
  for (int s = 1; s <= steps; s++) {
    Batch b = sum_task_batch(B, T, r);
    m->arena.reset();
    m->zero_grads();
    add_grads(meth, *m, b);
    opt.step(be, *m);
    if (std::getenv("ADA_VERBOSE") && s % 50 == 0) {
      const KindMeans k = kind_means(meth, *m, b);
      std::printf("step %d: d_1 easy %.4f hard %.4f noise %.4f | -log r step 1: %.3f %.3f %.3f, step 2: %.3f %.3f %.3f\n",
                  s, k.d1[0], k.d1[1], k.d1[2], k.nll1[0], k.nll1[1], k.nll1[2], k.nll2[0], k.nll2[1], k.nll2[2]);
    }
  }
  Rng rv(99);
  Batch b = sum_task_batch(64, T, rv);
  m->arena.reset();
  meth.forward(*m, b, false);
  const KindMeans k = kind_means(meth, *m, b);
  EXPECT_LT(k.nll1[0], 0.1) << "the easy targets must be learned";
  EXPECT_GT(k.d1[1], k.d1[0] + 0.2) << "d_1 easy " << k.d1[0] << " hard " << k.d1[1];
  EXPECT_GT(k.d1[1], k.d1[2] + 0.2) << "d_1 noise " << k.d1[2] << " hard " << k.d1[1];
}

// Does CYB's stopping-time loss teach the DK head to pause where the pause
// step answers better, and only there? The end-to-end form of this question
// (above, disabled) fails because at unit-test sizes the pause row never
// answers better than the real row. Here that precondition is BUILT, and the
// test asks only whether the halting mechanism then learns where it holds:
//   phase 1 (the construction, 1000 steps): each step trains the pause rows on
//     the true targets (the DK bias held at +1000, so d = 1 and, under the
//     `last` deadline, the loss is -log r at the pause step alone) and the real
//     rows on the same batch with every hard target replaced by a placeholder
//     token (the DK bias at -1000, d = 0: the loss is -log r at the real step).
//     With d(1 - d) = 0 exactly in float, nothing reaches the DK head or LSE
//     through d. After it the real step answers the hard targets wrongly and
//     the pause step rightly (asserted); on the easy and noise targets waiting
//     gains nothing.
//   phase 2 (the mechanism, 100 steps): the DK bias back at CYB's
//     initialisation (d_init 0.05), fresh moments, CYB with its default
//     options (1 pause, uniform deadline, gamma0 0.95) trains the DK head by
//     its loss; every other tensor is held at phase 1's values, so the pause
//     stays worth taking exactly where it was built to be.
// The DK head must pause on the hard targets (d_1 > 0.9: greedy decoding
// waits) and not on the easy ones nor on the noise, whose flat distributions
// lower LSE(o_V) and so raise d = sigmoid(o_DK - LSE) unless the head learns
// that waiting does not help there. Measured (2026-12-07, 10 table and data
// seeds): d_1 hard 0.998-1.000, noise 0.000-0.027, easy 0.0000; with the DK
// gradient zeroed or its sign turned, hard ends at 0.0000. What it does
// NOT show (docs/methods/cyb.md): (1) the old defaults (d_init 2.4e-4, `last`
// deadline) pass it too, so it is not the test that would have caught item 1
// of issue 10: when the real step is wrong by ~20 nats, the log loss undoes
// the small d (1 - d); (2) with every tensor trained in phase 2 (CYB's own
// training, lr 1e-3), d_1 on the hard targets ends below 0.2 on 8 of 10 seeds:
// on 7 the real row has learned them too within the 100 steps (NLL <= 0.16)
// and answers them better than the pause row, so waiting no longer pays; on
// the 8th the pause row has got worse than the real row. Anything a pause row
// computes here, the real row learns faster.
TEST(Cyb, LearnsToPauseWhereThePauseStepAnswersBetter) {
  using Bf = CpuBackend<float>;
  Bf be;
  CybOptions o;  // the defaults, with one pause
  o.pauses = 1;
  CybMethod<Bf> cyb(o);
  CybOptions ol = o;
  ol.deadline = "last";
  CybMethod<Bf> pause_only(ol);  // with d ~ 1: the loss is -log r at the pause step
  ModelConfig cfg = preset_config("test");
  cfg.dim = 32, cfg.hidden = 64;
  auto m = make_model(be, cfg, cyb);
  m->init_params(1);
  const size_t n = m->num_params();
  const int nt = 4, B = 16, T = 16, placeholder = 21;
  Rng rt(15);
  std::vector<int> table(nt * nt);
  for (auto& v : table) v = (int)rt.below(nt);
  Rng r(5);
  float* bias = m->param("cyb.dk_head.bias");
  const float b_init = *bias;
  Adam build(n, 3e-3);
  for (int s = 1; s <= 1000; s++) {
    const Batch b = table_task_batch(B, T, nt, table, r);
    Batch bp = b;  // the real rows' batch: hard targets replaced by the placeholder
    for (size_t i = 0; i < bp.targets.size(); i++)
      if (i % 4 == 2) bp.targets[i] = placeholder;
    m->arena.reset();
    m->zero_grads();
    *bias = 1000;
    add_grads(pause_only, *m, b);
    *bias = -1000;
    add_grads(cyb, *m, bp);
    build.step(be, *m);
  }
  *bias = b_init;
  Rng rv(99);
  const Batch held = table_task_batch(64, T, nt, table, rv);
  m->arena.reset();
  cyb.forward(*m, held, false);
  const KindMeans k0 = kind_means(cyb, *m, held);
  // the construction: the pause step answers the hard targets and the real step does not
  if (std::getenv("ADA_VERBOSE"))
    std::printf("phase 1: -log r step 1: %.3f %.3f %.3f, step 2: %.3f %.3f %.3f\n", k0.nll1[0], k0.nll1[1],
                k0.nll1[2], k0.nll2[0], k0.nll2[1], k0.nll2[2]);
  ASSERT_LT(k0.nll2[1], 0.5) << "pause step, hard targets";
  ASSERT_GT(k0.nll1[1], 5.0) << "real step, hard targets";
  ASSERT_LT(k0.nll1[0], 0.01) << "real step, easy targets";
  ASSERT_LT(k0.nll1[2], 1.45) << "real step, noise (ln 4 = 1.386)";

  Adam learn(n, 1e-2);  // fresh moments
  const std::vector<float> frozen(m->params.data(), m->params.data() + n);
  const ParamInfo &dw = m->layout.get("cyb.dk_head.weight"), &db = m->layout.get("cyb.dk_head.bias");
  auto in_dk_head = [&](size_t i) {
    return (i >= dw.offset && i < dw.offset + dw.numel) || (i >= db.offset && i < db.offset + db.numel);
  };
  for (int s = 1; s <= 100; s++) {
    const Batch b = table_task_batch(B, T, nt, table, r);
    m->arena.reset();
    m->zero_grads();
    add_grads(cyb, *m, b);
    learn.step(be, *m);
    for (size_t i = 0; i < n; i++)  // every tensor but the DK head's back to phase 1's values
      if (!in_dk_head(i)) m->params.data()[i] = frozen[i];
  }
  m->arena.reset();
  cyb.forward(*m, held, false);
  const KindMeans k = kind_means(cyb, *m, held);
  if (std::getenv("ADA_VERBOSE"))
    std::printf("d_1 easy %.4f hard %.4f noise %.4f | -log r step 1: %.3f %.3f %.3f, step 2: %.3f %.3f %.3f\n", k.d1[0],
                k.d1[1], k.d1[2], k.nll1[0], k.nll1[1], k.nll1[2], k.nll2[0], k.nll2[1], k.nll2[2]);
  EXPECT_GT(k.d1[1], 0.9) << "hard targets: the pause step answers better, greedy decoding must wait";
  EXPECT_LT(k.d1[0], 0.01) << "easy targets: the real step already answers";
  EXPECT_LT(k.d1[2], 0.1) << "noise targets: waiting does not help";
}
