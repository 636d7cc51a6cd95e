// Adaptive latent CoT: the per-token mixture loss against its definition,
// whole-model gradient checks of the full loss L_LM + lambda L_ada with and
// without pruning (the values inside L_ada's stop-gradient frozen at the
// analytic forward, so finite differences hold them constant too), and
// decoding with pruning.
#include <gtest/gtest.h>

#include <algorithm>

#include "train/cpu_instances.h"
#include "gradcheck.h"
#include "method_test_util.h"
#include "methods/latent_cot.h"

using namespace ada;
using namespace ada::test;
using Bd = CpuBackend<double>;

namespace {

struct LatentCase : MethodCase<LatentCotMethod<Bd>> {
  LatentCase(LatentCotOptions o, uint64_t seed) : MethodCase(o) {
    random_params(*m, seed, [](const ParamInfo& p, double v) {
      if (p.name == "latent_cot.router.w2") return v * 4;  // routers that differ between tokens
      if (p.name == "latent_cot.router.b2") return 0.5;
      return v;
    });
    b = random_batch(2, 6, m->cfg.vocab, seed + 1);
    b.targets[3] = -1;
  }
  // Every parameter tensor against central differences of the loss. The
  // values inside sg() are frozen at the forward of the analytic gradient, and
  // every evaluation must run the same cells (no reach crosses tau).
  void check() {
    method->freeze_stop_gradient(true);
    m->zero_grads();
    m->arena.reset();
    method->forward(*m, b, true);
    method->backward(*m, 1.0);
    const std::vector<int> ks = method->last_step();
    std::vector<double> g(m->grads.data(), m->grads.data() + m->num_params());
    int cell_changes = 0;
    for (auto& p : m->layout.tensors()) {
      std::vector<double> a(g.begin() + p.offset, g.begin() + p.offset + p.numel);
      expect_grad_close(p.name, a, numeric_grad(m->params.data() + p.offset, p.numel, [&] {
                          const double l = loss();
                          cell_changes += method->last_step() != ks;
                          return l;
                        }));
    }
    EXPECT_EQ(cell_changes, 0);
    method->freeze_stop_gradient(false);
  }
};

// A tau in the middle of the widest gap between the reach probabilities.
double tau_in_gap(std::vector<double> r, double lo, double hi) {
  std::sort(r.begin(), r.end());
  double best = 0, at = 0;
  for (size_t i = 1; i < r.size(); i++)
    if (r[i - 1] >= lo && r[i] <= hi && r[i] - r[i - 1] > best) best = r[i] - r[i - 1], at = 0.5 * (r[i] + r[i - 1]);
  EXPECT_GT(best, 1e-4);
  return at;
}

}  // namespace

TEST(LatentCot, TokenLossMatchesDefinitionAndDifferences) {
  // one token, K = 3, stopped after step 2 (k* = 2): p^k[y] and g^k given
  const int N = 1, K = 3, ks = 2;
  std::vector<double> logp = {std::log(0.2), std::log(0.5), std::log(0.7), 0.0};
  std::vector<double> g = {0.8, 0.6, 0.3, 0.0};
  int sup = 1;
  auto run = [&](double* glp, double* gg, double* ada) {
    double lm, a, x[4], y[4];
    LatentCotToken<double>{N, K, &ks, &sup, logp.data(), logp.data(), g.data(), 0.5, 2.0, 1.0, &lm, &a, glp ? glp : x, gg ? gg : y}(0);
    if (ada) *ada = a;
    return lm;
  };
  // pi = [1 - 0.8, 0.8 (1 - 0.6), 0.8 * 0.6]  (residual mass on step 2)
  const double A = 0.2 * 0.2 + 0.8 * 0.4 * 0.5 + 0.48 * 0.7;
  double ada = 0;
  EXPECT_NEAR(run(nullptr, nullptr, &ada), -std::log(A), 1e-14);
  EXPECT_NEAR(ada, 0.8 * 0.04 + 0.6 * 0.25 + 0.3 * 0.49, 1e-14);  // every computed router output, g a^beta
  std::vector<double> glp(4), gg(4);
  run(glp.data(), gg.data(), nullptr);
  auto lm = [&] { return run(nullptr, nullptr, nullptr); };
  auto nlp = numeric_grad(logp.data(), 3, lm);
  for (int k = 0; k < 3; k++) EXPECT_NEAR(glp[k], nlp[k], 1e-9);
  auto ng = numeric_grad(g.data(), 2, lm);  // the mixture depends on g^0, g^1 only
  for (int k = 0; k < 2; k++) EXPECT_NEAR(gg[k] - 0.5 * std::exp(2 * logp[k]), ng[k], 1e-9);
  EXPECT_NEAR(gg[2], 0.5 * 0.49, 1e-14);  // g^{k*}: only the halting loss
  EXPECT_EQ(glp[3], 0.0);
}

TEST(LatentCot, GradCheckNoPruning) {
  LatentCotOptions o;
  o.K = 2, o.tau = 0, o.lambda = 0.7;
  LatentCase c(o, 21);
  c.check();
}

TEST(LatentCot, GradCheckWithPruning) {
  LatentCotOptions o;
  o.K = 3, o.tau = 0, o.lambda = 0.4, o.beta = 2;
  LatentCase c(o, 22);
  c.loss();
  c.method->set_tau(tau_in_gap(c.method->reach_seen(), 0.05, 0.6));
  c.loss();
  // some cells are pruned (reach < tau), and tokens stop at different steps
  std::vector<int> ks = c.method->last_step();
  int pruned = 0;
  for (int k : ks) pruned += k < o.K;
  ASSERT_GT(pruned, 0);
  std::sort(ks.begin(), ks.end());
  ASSERT_GE(std::unique(ks.begin(), ks.end()) - ks.begin(), 2);
  c.check();
}

// The negative control of the frozen stop-gradient: with lambda > 0 and the
// values inside sg() left free, finite differences see L_ada through p and
// disagree with the analytic gradient (which must hold sg(p) constant); frozen,
// they agree.
TEST(LatentCot, StopGradientMustBeFrozenForTheCheck) {
  LatentCotOptions o;
  o.K = 2, o.tau = 0, o.lambda = 0.7;
  LatentCase c(o, 21);
  const ParamInfo& p = c.m->layout.get("norm.weight");
  auto analytic = [&] {
    c.m->zero_grads();
    c.m->arena.reset();
    c.method->forward(*c.m, c.b, true);
    c.method->backward(*c.m, 1.0);
    return std::vector<double>(c.m->grads.data() + p.offset, c.m->grads.data() + p.offset + p.numel);
  };
  const std::vector<double> a = analytic();
  const double free_err = grad_error(a, numeric_grad(c.m->params.data() + p.offset, p.numel, [&] { return c.loss(); }));
  EXPECT_GT(free_err, 1e-3);
  c.method->freeze_stop_gradient(true);
  EXPECT_EQ(analytic(), a);  // freezing does not change the analytic gradient
  const double frozen_err = grad_error(a, numeric_grad(c.m->params.data() + p.offset, p.numel, [&] { return c.loss(); }));
  EXPECT_LT(frozen_err, kGradTol);
}

TEST(LatentCot, DecodingWithPruningMatchesFullForward) {
  LatentCotOptions o;
  o.K = 3, o.tau = 0;
  LatentCase c(o, 23);
  Batch b = random_batch(1, 9, c.m->cfg.vocab, 4);
  c.b = b;
  c.loss();
  c.method->set_tau(tau_in_gap(c.method->reach_seen(), 0.05, 0.6));
  c.m->arena.reset();
  c.method->forward(*c.m, b, false);
  std::vector<double> full;
  c.method->probabilities(*c.m, full);
  const auto ks = c.method->last_step();
  int pruned = 0;
  for (int k : ks) pruned += k < 3;
  EXPECT_GT(pruned, 0);
  auto dec = c.method->decoder(*c.m, 9);
  const int V = c.m->cfg.vocab;
  for (int t = 0; t < 9; t++) {
    const auto& p = dec->step(b.inputs[t]);
    EXPECT_EQ(dec->passes_last(), ks[t] + 1.0);
    double sum = 0;
    for (int v = 0; v < V; v++) {
      EXPECT_NEAR(p[v], full[(size_t)t * V + v], 1e-12);
      sum += p[v];
    }
    EXPECT_NEAR(sum, 1.0, 1e-12);  // the mixture is a distribution
  }
}
