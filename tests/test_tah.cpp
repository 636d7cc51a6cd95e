// TaH2: the mixture and decider-loss arithmetic against their definitions,
// the coverage cut, the whole-model gradient check with the decider loss on
// (labels frozen, tokens stopping at every depth, no decider output near the
// threshold), the lookahead's attention (executed keys plus its own private
// key, nothing left behind in the store), and cached decoding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "train/cpu_instances.h"
#include "gradcheck.h"
#include "method_test_util.h"
#include "methods/tah.h"

using namespace ada;
using namespace ada::test;
using Bd = CpuBackend<double>;

namespace {

struct TahCase : MethodCase<TahMethod<Bd>> {
  TahCase(TahOptions o, uint64_t seed, int B, int T, double score_scale) : MethodCase(o) {
    random_params(*m, seed, [&](const ParamInfo& p, double v) {
      return p.name == "tah.decider.score.weight" ? v * score_scale : v;  // deciders that differ between tokens
    });
    b = random_batch(B, T, m->cfg.vocab, seed + 1);
    b.targets[3] = -1;
  }
  // min |g - tau_exit| over every decider output of the last forward
  double margin() const {
    double mg = 1e9;
    for (auto& d : method->decisions()) mg = std::min(mg, std::abs(std::get<2>(d) - method->options().exit));
    return mg;
  }
  int distinct_depths() const {
    return (int)std::set<int>(method->exit_depth().begin(), method->exit_depth().end()).size();
  }
};

}  // namespace

TEST(Tah, MixtureMatchesDefinitionAndDifferences) {
  // one token, M = 4, stopped at depth 3 (k* = 2): q^m[y] and g^m given
  const int N = 1, K = 3, ks = 2, sup = 1;
  std::vector<double> logp = {std::log(0.2), std::log(0.5), std::log(0.7), 0.0};
  std::vector<double> g = {0.8, 0.6, 0.3, 0.0};
  auto run = [&](double* glp, double* gg) {
    double l, x[4], y[4];
    TahToken<double>{N, K, &ks, &sup, logp.data(), g.data(), 1.0, &l, glp ? glp : x, gg ? gg : y}(0);
    return l;
  };
  // omega = [1 - 0.8, 0.8 (1 - 0.6), 0.8 * 0.6]: the stopping depth takes the remaining mass
  EXPECT_NEAR(run(nullptr, nullptr), -std::log(0.2 * 0.2 + 0.8 * 0.4 * 0.5 + 0.48 * 0.7), 1e-14);
  std::vector<double> glp(4), gg(4);
  run(glp.data(), gg.data());
  auto ce = [&] { return run(nullptr, nullptr); };
  const auto nlp = numeric_grad(logp.data(), 3, ce);
  for (int k = 0; k < 3; k++) EXPECT_NEAR(glp[k], nlp[k], 1e-9);
  const auto ng = numeric_grad(g.data(), 3, ce);
  for (int k = 0; k < 3; k++) EXPECT_NEAR(gg[k], ng[k], 1e-9);
  EXPECT_EQ(gg[2], 0.0);  // the stopping depth's g does not enter the mixture
  EXPECT_EQ(ng[2], 0.0);
  EXPECT_EQ(glp[3], 0.0);
}

TEST(Tah, DeciderBceMatchesDefinitionAndDifferences) {
  const int rows[2] = {0, 1};
  const double c[2] = {1.0, 0.0}, w[2] = {0.3, 0.7}, pw = 2.5, scale = 0.25;
  for (double u0 : {-3.0, -0.2, 0.4, 5.0}) {
    std::vector<double> u = {u0, -u0 / 2};
    auto run = [&](double* du) {
      double l[2], d[2];
      for (int r = 0; r < 2; r++) TahDeciderBce<double>{u.data(), rows, c, w, pw, scale, l, du ? du : d}(r);
      return l[0] + l[1];
    };
    auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
    const double want = scale * (w[0] * pw * -std::log(sig(u[0])) + w[1] * -std::log(1 - sig(u[1])));
    EXPECT_NEAR(run(nullptr), want, 1e-13);
    double du[2];
    run(du);
    const auto nd = numeric_grad(u.data(), 2, [&] { return run(nullptr); });
    for (int r = 0; r < 2; r++) EXPECT_NEAR(du[r], nd[r], 1e-9);
  }
}

TEST(Tah, CoverageCut) {
  double cut = -1;
  // gains 0.5 0.3 0.1 0.05 0.05 (total 1): 0.8 of it is reached at 0.3
  EXPECT_TRUE(coverage_cut({0.05, 0.3, 0.5, 0.05, 0.1}, 0.8, &cut));
  EXPECT_EQ(cut, 0.3);
  EXPECT_TRUE(coverage_cut({0.05, 0.3, 0.5, 0.05, 0.1}, 0.99, &cut));
  EXPECT_EQ(cut, 0.05);
  EXPECT_TRUE(coverage_cut({0.05, 0.3, 0.5, 0.05, 0.1}, 0.5, &cut));  // the largest alone holds half
  EXPECT_EQ(cut, 0.5);
  EXPECT_TRUE(coverage_cut({0.2}, 0.99, &cut));
  EXPECT_EQ(cut, 0.2);
  EXPECT_FALSE(coverage_cut({}, 0.99, &cut));  // no positive gain: no token is labelled "continue"
}

// The whole model, every tensor (backbone, updater, decider), with the decider
// loss on. Its labels, weights and positive weights are no-grad constants, so
// they are frozen at the first forward and each finite-difference evaluation
// checks that it would have computed the same binary labels and candidate
// sets, that every token stops at the same depth and that every decider reads
// the same top-D columns. The seed is one for which all of that holds and
// the third derivative of the loss is small enough for central differences
// with the project's step (with seed 31, for one, an embedding entry's error
// is 8e-6 at eps = 1e-5 and falls exactly as eps^2: truncation, not the
// gradient).
TEST(Tah, GradCheckWithDeciderLoss) {
  TahOptions o;
  o.M = 3, o.alpha = 0.5, o.rho = 0.9;
  TahCase c(o, 596, 2, 6, 3.0);
  c.method->freeze_labels(true);
  c.loss();
  const std::vector<int> depths = c.method->exit_depth();
  EXPECT_EQ(c.distinct_depths(), 3);          // tokens stop at every depth
  EXPECT_GT(c.margin(), 0.02);                // no decider output near tau_exit
  const auto& cand = c.method->label_candidates();
  const auto& lab = c.method->label_targets();
  int pos = 0, neg = 0, deep = 0;
  for (size_t i = 0; i < cand.size(); i++)
    if (cand[i]) (lab[i] > 0 ? pos : neg)++, deep += i >= (size_t)c.b.B * c.b.T;
  EXPECT_GT(pos, 0);   // both BCE branches carry gradient
  EXPECT_GT(neg, 0);
  EXPECT_GT(deep, 0);  // and the depth-2 decider is supervised too
  c.m->zero_grads();
  c.m->arena.reset();
  c.method->forward(*c.m, c.b, true);
  c.method->backward(*c.m, 1.0);
  std::vector<double> grads(c.m->grads.data(), c.m->grads.data() + c.m->num_params());
  const std::vector<int> cols = c.method->topk_columns(*c.m);
  int decision_changes = 0, selection_changes = 0;
  for (auto& p : c.m->layout.tensors()) {
    std::vector<double> a(grads.begin() + p.offset, grads.begin() + p.offset + p.numel);
    expect_grad_close(p.name, a, numeric_grad(c.m->params.data() + p.offset, p.numel, [&] {
                        const double l = c.loss();
                        decision_changes += c.method->exit_depth() != depths;
                        selection_changes += c.method->topk_columns(*c.m) != cols;
                        return l;
                      }));
  }
  EXPECT_EQ(decision_changes, 0);
  EXPECT_EQ(selection_changes, 0);  // every top_D(q) kept its columns and their order
  EXPECT_EQ(c.method->label_mismatches(), 0);
}

// The lookahead rows see the executed keys and their own key, never another
// lookahead's: each batched lookahead equals the same token's lookahead run
// alone with an ordinary key; the store is left as the executed grid; with
// public lookahead keys (the negative control) some lookahead changes.
TEST(Tah, LookaheadSeesExecutedKeysAndItsOwnOnly) {
  TahOptions o;
  o.M = 3;
  TahCase c(o, 41, 2, 9, 3.0);
  c.loss();
  Model<Bd>& m = *c.m;
  TahMethod<Bd>& meth = *c.method;
  const int N = c.b.B * c.b.T, T = c.b.T, D = m.cfg.dim, V = m.cfg.vocab;
  const std::vector<int> ks = meth.exit_depth();
  const std::vector<double> look = meth.lookahead_nll();
  // the store holds exactly the executed cells
  KvStore<Bd>& kv = meth.kv();
  for (int t = 0; t < N; t++)
    for (int k = 0; k < o.M; k++) EXPECT_EQ(kv.valid[meth.slot(t, k)], k <= ks[t] ? 1 : 0) << t << " " << k;
  // two lookahead rows of one sequence at one depth: the case the private keys are for
  int pairs = 0, n_look = 0;
  for (int k = 0; k + 1 < o.M; k++)
    for (int t = 0; t < N; t++) {
      if (std::isnan(look[(size_t)k * N + t])) continue;
      n_look++;
      for (int s = (t / T) * T; s < t; s++) pairs += !std::isnan(look[(size_t)k * N + s]);
    }
  ASSERT_GT(pairs, 0);
  // reference: one lookahead token at a time, its key an ordinary one
  double max_diff = 0;
  for (int k = 0; k + 1 < o.M; k++)
    for (int t = 0; t < N; t++) {
      if (std::isnan(look[(size_t)k * N + t])) continue;
      const auto& rows = meth.step_rows(k);
      const int r = (int)(std::find(rows.begin(), rows.end(), t) - rows.begin());
      auto up = meth.updater(m, meth.step_embeddings(k) + (size_t)r * D, meth.step_states(k) + (size_t)r * D, 1);
      PassPlan p;
      p.B = c.b.B, p.S = T * o.M, p.slot = {meth.slot(t, k + 1)}, p.pos = {t % T};
      p.finish();
      auto ro = m.readout_forward(m.forward_pass(p, kv, up.out()).out(), 1);
      double mx = -1e300, sum = 0;
      for (int v = 0; v < V; v++) mx = std::max(mx, ro.logits[v]);
      for (int v = 0; v < V; v++) sum += std::exp(ro.logits[v] - mx);
      const double nll = -(ro.logits[c.b.targets[t]] - mx - std::log(sum));
      max_diff = std::max(max_diff, std::abs(nll - look[(size_t)k * N + t]));
      kv.valid[p.slot[0]] = 0;
      kv.upload_meta(m.be);
    }
  EXPECT_LT(max_diff, 1e-12) << n_look << " lookahead rows";
  // negative control: public lookahead keys are seen by later lookahead rows
  meth.set_private_lookahead(false);
  c.loss();
  EXPECT_EQ(meth.exit_depth(), ks);
  double changed = 0;
  for (size_t i = 0; i < look.size(); i++)
    if (!std::isnan(look[i])) changed = std::max(changed, std::abs(meth.lookahead_nll()[i] - look[i]));
  EXPECT_GT(changed, 1e-6);
  for (int t = 0; t < N; t++)
    for (int k = 0; k < o.M; k++) EXPECT_EQ(meth.kv().valid[meth.slot(t, k)], k <= ks[t] ? 1 : 0);
}

// Token by token through the grid cache: the same mixture and the same depth
// for every token as the parallel forward.
TEST(Tah, CachedDecodingMatchesForward) {
  TahOptions o;
  o.M = 4;
  const int T = 12;
  TahCase c(o, 51, 1, T, 3.0);
  c.b.targets[3] = 1;
  c.m->arena.reset();
  c.method->forward(*c.m, c.b, false);
  EXPECT_GE(c.distinct_depths(), 3);
  std::vector<double> full;
  c.method->probabilities(*c.m, full);
  const std::vector<int> ks = c.method->exit_depth();
  auto dec = c.method->decoder(*c.m, T);
  const int V = c.m->cfg.vocab;
  for (int t = 0; t < T; t++) {
    const auto& p = dec->step(c.b.inputs[t]);
    EXPECT_EQ(dec->passes_last(), ks[t] + 1.0) << t;
    double sum = 0;
    for (int v = 0; v < V; v++) {
      EXPECT_NEAR(p[v], full[(size_t)t * V + v], 1e-12);
      sum += p[v];
    }
    EXPECT_NEAR(sum, 1.0, 1e-12);  // the mixture is a distribution
  }
}

// Statistics: depth histogram, the lookahead counted as training cost only,
// the loss = L_CE + alpha L_dec.
TEST(Tah, StatsAndFlops) {
  TahOptions o;
  o.M = 3;
  TahCase c(o, 61, 2, 7, 3.0);
  c.loss();
  const StepStats with = c.method->stats(*c.m);
  auto get = [&](const StepStats& s, const std::string& k) {
    for (auto& [n, v] : s.halting)
      if (n == k) return v;
    ADD_FAILURE() << k;
    return 0.0;
  };
  EXPECT_NEAR(get(with, "exit_1") + get(with, "exit_2") + get(with, "exit_3"), 1.0, 1e-12);
  double passes = 0;
  for (int k : c.method->exit_depth()) passes += k + 1;
  EXPECT_NEAR(get(with, "passes"), passes / 14, 1e-12);
  EXPECT_GT(get(with, "lookahead"), 0.0);
  EXPECT_GT(with.train_flops, 3 * with.fwd_flops);  // the lookahead
  EXPECT_NEAR(with.loss, with.ce + 0.05 * get(with, "l_dec"), 1e-12);
  EXPECT_GT(get(with, "l_dec"), 0.0);
  c.method->set_alpha(0);
  c.loss();
  const StepStats without = c.method->stats(*c.m);
  EXPECT_EQ(without.fwd_flops, with.fwd_flops);
  EXPECT_EQ(without.train_flops, 3 * without.fwd_flops);
  EXPECT_EQ(without.loss, with.ce);
}
