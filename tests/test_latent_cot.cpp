// Adaptive latent CoT: the per-token mixture loss against its definition,
// gradient checks with and without pruning (the halting loss L_ada, which
// multiplies by sg(p), checked on the router's parameters, whose gradient it
// alone defines), and decoding with pruning.
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
  void check(const std::vector<std::string>& only = {}) {
    m->zero_grads();
    m->arena.reset();
    method->forward(*m, b, true);
    method->backward(*m, 1.0);
    std::vector<double> g(m->grads.data(), m->grads.data() + m->num_params());
    for (auto& p : m->layout.tensors()) {
      if (!only.empty() && std::find(only.begin(), only.end(), p.name) == only.end()) continue;
      std::vector<double> a(g.begin() + p.offset, g.begin() + p.offset + p.numel);
      expect_grad_close(p.name, a, numeric_grad(m->params.data() + p.offset, p.numel, [&] { return loss(); }));
    }
  }
};

const std::vector<std::string> kRouter = {"latent_cot.router.w1", "latent_cot.router.w2", "latent_cot.router.b2"};

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
    LatentCotToken<double>{N, K, &ks, &sup, logp.data(), g.data(), 0.5, 2.0, 1.0, &lm, &a, glp ? glp : x, gg ? gg : y}(0);
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
  o.K = 2, o.tau = 0, o.lambda = 0;
  LatentCase c(o, 21);
  c.check();
  c.method->set_lambda(0.7);  // the halting loss on the router (p does not depend on it)
  c.check(kRouter);
}

TEST(LatentCot, GradCheckWithPruning) {
  LatentCotOptions o;
  o.K = 3, o.tau = 0, o.lambda = 0, o.beta = 2;
  LatentCase c(o, 22);
  c.loss();
  c.method->set_tau(tau_in_gap(c.method->reach_seen(), 0.05, 0.6));
  c.loss();
  // tokens stop at different steps
  std::vector<int> ks = c.method->last_step();
  std::sort(ks.begin(), ks.end());
  ASSERT_GE(std::unique(ks.begin(), ks.end()) - ks.begin(), 2);
  c.check();
  c.method->set_lambda(0.4);
  c.check(kRouter);
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
