// Catch Your Breath: the stopping-time loss against a direct evaluation of
// its definition, gradient checks for each deadline / visibility choice,
// the W = 1 case (plain cross-entropy), and decoding that stops pausing.
#include <gtest/gtest.h>

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
  void check_all_grads() {
    m->zero_grads();
    m->arena.reset();
    method->forward(*m, b, true);
    method->backward(*m, 1.0);
    std::vector<double> g(m->grads.data(), m->grads.data() + m->num_params());
    for (auto& p : m->layout.tensors()) {
      std::vector<double> a(g.begin() + p.offset, g.begin() + p.offset + p.numel);
      expect_grad_close(p.name, a, numeric_grad(m->params.data() + p.offset, p.numel, [&] { return loss(); }));
    }
  }
};

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
    CybMethod<Bd> meth(o);
    std::vector<double> lw, lgt, lg;
    meth.schedule(lw, lgt, lg);
    int sup = 1;
    auto run = [&](double* g_lp, double* g_lse, double* g_dk) {
      double loss, greedy, steps, a[W], b[W], c[W];
      CybToken<double>{W, x.data(), lp.data(), &sup, lw.data(), lgt.data(), lg.data(), 1.0, &loss, &greedy, &steps,
                       g_lp ? g_lp : a, g_lse ? g_lse : b, g_dk ? g_dk : c}(0);
      return loss;
    };
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
