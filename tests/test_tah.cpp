// TaH2: the mixture and decider-loss arithmetic against their definitions,
// the coverage cut, the whole-model gradient check with the decider loss on
// (labels frozen, tokens stopping at every depth, at a point chosen by a
// margin rule: no decider output, top-D selection or label near its cut), the lookahead's attention (executed keys plus its own private
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
// the same top-D columns.
//
// The point of the check is not a hand-picked seed but the first seed whose
// forward keeps every discrete decision away from its cut by a margin that a
// finite-difference step does not cross:
//   |g - tau_exit| > 0.02 for every decider output   (which tokens continue)
//   consecutive log-probabilities among each decider row's D+1 largest differ
//   by more than 1e-3                                 (the top-D selection and its order)
//   every label candidate's gain is more than 1e-4 from its depth's cut, the
//   cut token itself aside                            (the depth labels)
// and tokens stop at every depth, both BCE branches and the depth-2 decider
// are supervised. (Seed 31, which an earlier version of this test showed to
// fail, has a decider output 7e-3 from tau_exit: the rule excludes it.) The
// margins are shown, not assumed, to be wide enough: over every evaluation the
// test measures the largest move of any g (below a tenth of its margin) and
// the smallest top-D gap (above a quarter of the margin; one step of 1e-5
// moves a log-probability by up to ~5e-4 here, but neighbours move together).
TEST(Tah, GradCheckWithDeciderLoss) {
  TahOptions o;
  o.M = 3, o.alpha = 0.5, o.rho = 0.9;
  const double kExitGap = 0.02, kTopGap = 1e-3, kLabelGap = 1e-4;
  auto label_gap = [](const TahMethod<Bd>& meth) {
    // w = clip(|gain - cut|, 1e-6, 1): the cut token has w = 1e-6, one per depth
    const int N = (int)meth.exit_depth().size();
    double gap = 1e300;
    for (int k = 0; k + 1 < meth.options().M; k++) {
      bool cut_seen = false;
      for (int t = 0; t < N; t++) {
        const size_t i = (size_t)k * N + t;
        if (!meth.label_candidates()[i]) continue;
        const double w = meth.label_weights()[i];
        if (w <= 1e-6 && !cut_seen) cut_seen = true;
        else gap = std::min(gap, w);
      }
    }
    return gap;
  };
  auto supervision = [](const TahCase& c, int* pos, int* neg, int* deep) {
    const auto& cand = c.method->label_candidates();
    const auto& lab = c.method->label_targets();
    *pos = *neg = *deep = 0;
    for (size_t i = 0; i < cand.size(); i++)
      if (cand[i]) (lab[i] > 0 ? *pos : *neg)++, *deep += i >= (size_t)c.b.B * c.b.T;
  };
  const long long seed = first_seed(1, 200, [&](uint64_t s) {
    TahCase c(o, s, 2, 6, 3.0);
    c.loss();
    int pos, neg, deep;
    supervision(c, &pos, &neg, &deep);
    const double top_gap = tah_topk_gap(tah_top_logprobs(*c.method, *c.m), c.m->cfg.dim), lab_gap = label_gap(*c.method);
    if (std::getenv("ADA_VERBOSE"))
      std::printf("seed %3d: depths %d pos %d neg %d deep %d exit gap %.2e top gap %.2e label gap %.2e\n", (int)s,
                  c.distinct_depths(), pos, neg, deep, c.margin(), top_gap, lab_gap);
    return c.distinct_depths() == 3 && pos > 0 && neg > 0 && deep > 0 && c.margin() > kExitGap && top_gap > kTopGap &&
           lab_gap > kLabelGap;
  });
  ASSERT_GE(seed, 0) << "no seed in [1, 200) keeps every decision away from its cut";
  if (std::getenv("ADA_VERBOSE")) std::printf("tah decider check at seed %lld\n", seed);
  TahCase c(o, (uint64_t)seed, 2, 6, 3.0);
  c.method->freeze_labels(true);
  c.loss();
  const std::vector<int> depths = c.method->exit_depth();
  const auto g0 = c.method->decisions();
  const std::vector<double> top0 = tah_top_logprobs(*c.method, *c.m);
  const double exit_gap = c.margin(), top_gap = tah_topk_gap(top0, c.m->cfg.dim);
  c.m->zero_grads();
  c.m->arena.reset();
  c.method->forward(*c.m, c.b, true);
  c.method->backward(*c.m, 1.0);
  std::vector<double> grads(c.m->grads.data(), c.m->grads.data() + c.m->num_params());
  const std::vector<int> cols = c.method->topk_columns(*c.m);
  int decision_changes = 0, selection_changes = 0;
  double g_move = 0, q_move = 0;  // the largest move of any g and any top log-probability under one step
  double gap_seen = top_gap;       // the smallest top-k gap at any evaluation
  for (auto& p : c.m->layout.tensors()) {
    std::vector<double> a(grads.begin() + p.offset, grads.begin() + p.offset + p.numel);
    expect_grad_close(p.name, a, numeric_grad(c.m->params.data() + p.offset, p.numel, [&] {
                        const double l = c.loss();
                        decision_changes += c.method->exit_depth() != depths;
                        selection_changes += c.method->topk_columns(*c.m) != cols;
                        const auto g = c.method->decisions();
                        if (g.size() == g0.size())
                          for (size_t i = 0; i < g.size(); i++)
                            g_move = std::max(g_move, std::abs(std::get<2>(g[i]) - std::get<2>(g0[i])));
                        const auto top = tah_top_logprobs(*c.method, *c.m);
                        if (top.size() == top0.size())
                          for (size_t i = 0; i < top.size(); i++) q_move = std::max(q_move, std::abs(top[i] - top0[i]));
                        gap_seen = std::min(gap_seen, tah_topk_gap(top, c.m->cfg.dim));
                        return l;
                      }));
  }
  if (std::getenv("ADA_VERBOSE"))
    std::printf("margins: exit %.2e top-k %.2e; largest moves: g %.2e log q %.2e; smallest top-k gap seen %.2e\n",
                exit_gap, top_gap, g_move, q_move, gap_seen);
  EXPECT_EQ(decision_changes, 0);
  EXPECT_EQ(selection_changes, 0);  // every top_D(q) kept its columns and their order
  EXPECT_EQ(c.method->label_mismatches(), 0);
  EXPECT_LT(g_move, 0.1 * exit_gap);       // no step came near tau_exit
  EXPECT_GT(gap_seen, 0.25 * top_gap);     // no step used up more than 3/4 of the top-k margin
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
