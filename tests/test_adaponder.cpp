// AdaPonderLM: gradient checks with and without pruning, KV reuse,
// compaction vs masking, the bottom-k ponder loss, fixed policies, decoding.
#include <gtest/gtest.h>

#include <algorithm>

#include "train/cpu_instances.h"
#include "gradcheck.h"
#include "method_test_util.h"
#include "methods/adaponder.h"
#include "methods/registry.h"

using namespace ada;
using namespace ada::test;
using Bd = CpuBackend<double>;

namespace {

struct AdaCase : MethodCase<AdaPonderMethod<Bd>> {
  AdaCase(AdaPonderOptions o, uint64_t seed, double gate_spread = 3.0) : MethodCase(o) {
    random_params(*m, seed, [&](const ParamInfo& p, double v) {
      // gate output weights large enough that gates spread over (0, 1)
      if (p.name.find(".w2") != std::string::npos) return v * gate_spread;
      if (p.name.find(".b2") != std::string::npos) return 0.5;
      return v;
    });
    b = random_batch(2, 7, m->cfg.vocab, seed + 1);
    b.targets[4] = -1;
  }
  std::vector<double> grads() {
    m->zero_grads();
    m->arena.reset();
    method->forward(*m, b, true);
    method->backward(*m, 1.0);
    return std::vector<double>(m->grads.data(), m->grads.data() + m->num_params());
  }
  void check_all_grads() {
    auto g = grads();
    for (auto& p : m->layout.tensors()) {
      std::vector<double> a(g.begin() + p.offset, g.begin() + p.offset + p.numel);
      expect_grad_close(p.name, a, numeric_grad(m->params.data() + p.offset, p.numel, [&] { return loss(); }));
    }
  }
  std::vector<double> sorted_gates() {
    m->arena.reset();
    method->forward(*m, b, false);
    std::vector<double> s;
    for (auto& g : method->gate_values()) s.push_back(std::get<2>(g));
    std::sort(s.begin(), s.end());
    return s;
  }
};

// A threshold in the middle of the widest gap between consecutive sorted gate
// values inside [lo, hi] (so no gate sits near it and the check stays smooth).
double threshold_in_gap(const std::vector<double>& s, double lo, double hi, double* gap) {
  double best = 0, at = 0;
  for (size_t i = 1; i < s.size(); i++)
    if (s[i - 1] >= lo && s[i] <= hi && s[i] - s[i - 1] > best) best = s[i] - s[i - 1], at = 0.5 * (s[i] + s[i - 1]);
  *gap = best;
  return at;
}

// The index j >= first of the widest gap g[j] - g[j-1] between consecutive
// sorted gate values: a bottom-k cut of j gates there is far from every gate.
size_t widest_gap_index(const std::vector<double>& g, size_t first) {
  size_t best = first;
  for (size_t j = first; j + 1 < g.size(); j++)
    if (g[j] - g[j - 1] > g[best] - g[best - 1]) best = j;
  return best;
}

AdaPonderOptions base_options() {
  AdaPonderOptions o;
  o.K = 2;
  o.tau = 0;
  o.lambda = 0.7;
  o.gate_hidden = 5;
  return o;
}

}  // namespace

TEST(AdaPonder, GradCheckNoPruning) {
  AdaPonderOptions o = base_options();
  AdaCase s(o, 11);
  const auto g = s.sorted_gates();
  ASSERT_EQ(g.size(), 2u * 14u);  // no pruning: every token has K gates
  // pick k so that the bottom-k cut falls in a wide gap of the gates
  const size_t best = widest_gap_index(g, 1);
  ASSERT_GT(g[best] - g[best - 1], 1e-4);
  s.method->set_k((double)best / g.size());
  s.check_all_grads();
}

TEST(AdaPonder, GradCheckWithPruning) {
  AdaPonderOptions o = base_options();
  AdaCase s(o, 12);
  double gap = 0;
  const double tau = threshold_in_gap(s.sorted_gates(), 0.15, 0.6, &gap);
  ASSERT_GT(gap, 1e-4);
  s.method->set_tau(tau);
  s.method->set_k(0.3);
  // the setting actually prunes: some tokens stop after pass 1 or 2
  s.loss();
  int pruned = 0;
  for (int p : s.method->last_pass()) pruned += p < 3;
  ASSERT_GT(pruned, 2);
  ASSERT_LT(pruned, 14);
  // and the bottom-k cut is away from every gate
  const auto g = s.sorted_gates();
  const size_t n = (size_t)std::ceil(0.3 * g.size() - 1e-9);
  ASSERT_GT(g[n] - g[n - 1], 1e-5);
  s.check_all_grads();
}

TEST(AdaPonder, PrunedTokensReuseTheirLastKeysAndPrediction) {
  AdaPonderOptions o = base_options();
  AdaCase s(o, 13);
  double gap = 0;
  s.method->set_tau(threshold_in_gap(s.sorted_gates(), 0.2, 0.7, &gap));
  s.m->arena.reset();
  s.method->forward(*s.m, s.b, true);
  const auto& last = s.method->last_pass();
  const int D = s.m->cfg.dim;
  int checked = 0;
  for (int t = 0; t < 14; t++) {
    if (last[t] == 3) continue;  // ran every pass
    const int j = last[t] - 1;     // its last executed pass (0-based)
    for (int i = j + 1; i <= 2; i++)
      for (int l = 0; l < s.m->cfg.layers; l++) {
        const auto& a = s.method->pass_kv(j);
        const auto& b = s.method->pass_kv(i);
        ASSERT_TRUE(b.valid[t]);
        for (int d = 0; d < D; d++) {
          EXPECT_EQ(a.K[l][(size_t)t * D + d], b.K[l][(size_t)t * D + d]);
          EXPECT_EQ(a.V[l][(size_t)t * D + d], b.V[l][(size_t)t * D + d]);
        }
        checked++;
      }
  }
  EXPECT_GT(checked, 0);
  // the pruned token's prediction is that of its last pass: with tau raised so
  // every token stops after pass 1, the model equals a one-pass readout of e^0
  s.method->set_tau(0.9999);
  s.m->arena.reset();
  s.method->forward(*s.m, s.b, false);
  for (int p : s.method->last_pass()) EXPECT_EQ(p, 1);
  std::vector<double> probs;
  s.method->probabilities(*s.m, probs);
  s.m->arena.reset();
  KvStore<Bd> kv;
  kv.init(s.be, s.m->arena, 2, 7, s.m->cfg.layers, D, kAnyDepth, false);
  ASSERT_DOUBLE_EQ(s.m->embed_scale, 2.0 * std::sqrt((double)D));  // e^0 = s0 sqrt(D) E[x], s0 = K = 2
  double* e0 = s.m->embed(s.b.inputs);
  auto ro = s.m->readout_forward(s.m->forward_pass(PassPlan::dense(2, 7, 7), kv, e0).out(), 14);
  std::vector<double> ref;
  probabilities_to_host(*s.m, ro.logits, 14, ref);
  for (size_t i = 0; i < ref.size(); i++) EXPECT_NEAR(probs[i], ref[i], 1e-14);
}

TEST(AdaPonder, CompactionEqualsMasking) {
  AdaPonderOptions o = base_options();
  AdaCase s(o, 14);
  double gap = 0;
  const double tau = threshold_in_gap(s.sorted_gates(), 0.2, 0.7, &gap);
  s.method->set_tau(tau);
  s.method->set_k(0.25);
  const double loss_c = s.loss();
  const auto last_c = s.method->last_pass();
  const auto g_c = s.grads();

  AdaPonderOptions om = o;
  om.compaction = false;
  om.tau = tau;
  AdaPonderMethod<Bd> masked(om);
  masked.set_k(0.25);
  s.m->arena.reset();
  masked.forward(*s.m, s.b, false);
  EXPECT_EQ(masked.last_pass(), last_c);
  EXPECT_NEAR(masked.stats(*s.m).loss, loss_c, 1e-12);
  s.m->zero_grads();
  s.m->arena.reset();
  masked.forward(*s.m, s.b, true);
  masked.backward(*s.m, 1.0);
  std::vector<double> g_m(s.m->grads.data(), s.m->grads.data() + s.m->num_params());
  EXPECT_LT(grad_error(g_m, g_c), 1e-12);
  int pruned = 0;
  for (int p : last_c) pruned += p < 3;
  EXPECT_GT(pruned, 0);
}

TEST(AdaPonder, BottomKPonderLoss) {
  AdaPonderOptions o = base_options();
  AdaCase s(o, 15);
  s.method->set_k(0.25);
  s.m->arena.reset();
  s.method->forward(*s.m, s.b, false);
  auto g = s.method->gate_values();
  std::vector<double> v;
  for (auto& x : g) v.push_back(std::get<2>(x));
  std::sort(v.begin(), v.end());
  const size_t n = (size_t)std::ceil(0.25 * v.size());
  double mean = 0;
  for (size_t i = 0; i < n; i++) mean += v[i] / n;
  const StepStats st = s.method->stats(*s.m);
  EXPECT_NEAR(st.loss - st.ce, o.lambda * mean, 1e-12);
  // the schedule: CE only during warm-up, then k ramps linearly
  AdaPonderOptions o2 = o;
  o2.warmup_ce = 10, o2.k_warmup = 20, o2.ponder_k = 0.2;
  AdaPonderMethod<Bd> sched(o2);
  sched.set_step(5, 100);
  s.m->arena.reset();
  sched.forward(*s.m, s.b, false);
  EXPECT_EQ(sched.stats(*s.m).loss, sched.stats(*s.m).ce);
  sched.set_step(20, 100);
  s.m->arena.reset();
  sched.forward(*s.m, s.b, false);
  double k = 0;
  for (auto& kv : sched.stats(*s.m).halting)
    if (kv.first == "k") k = kv.second;
  EXPECT_NEAR(k, 0.1, 1e-12);  // halfway through the ramp
}

TEST(AdaPonder, FixedPoliciesHitTheirAverageDepth) {
  for (std::string policy : {"uniform", "geometric"}) {
    double passes_sum = 0;
    const int K = 3, n = 20000;
    for (int t = 0; t < n; t++) passes_sum += fixed_policy_exit(policy, 2.5, K, 7, (uint64_t)t);
    EXPECT_NEAR(passes_sum / n, 2.5, 0.03) << policy;
  }
}

TEST(AdaPonder, DecodingWithPruningMatchesFullForward) {
  for (std::string policy : {"gates", "geometric", "matched-gated"}) {
    SCOPED_TRACE(policy);
    AdaPonderOptions o = base_options();
    o.policy = policy;
    o.policy_passes = 2.0;
    o.policy_hist = "0.3/0.3/0.4";
    AdaCase s(o, 16);
    if (policy == "gates") {
      double gap = 0;
      s.method->set_tau(threshold_in_gap(s.sorted_gates(), 0.2, 0.7, &gap));
    }
    Batch b = random_batch(1, 9, s.m->cfg.vocab, 3);
    s.m->arena.reset();
    s.method->forward(*s.m, b, false);
    std::vector<double> full;
    s.method->probabilities(*s.m, full);
    const auto last = s.method->last_pass();
    int pruned = 0;
    for (int p : last) pruned += p < 3;
    EXPECT_GT(pruned, 0);
    auto dec = s.method->decoder(*s.m, 9);
    const int V = s.m->cfg.vocab;
    for (int t = 0; t < 9; t++) {
      const auto& p = dec->step(b.inputs[t]);
      EXPECT_EQ((int)dec->passes_last(), last[t]);
      for (int v = 0; v < V; v++) EXPECT_NEAR(p[v], full[(size_t)t * V + v], 1e-12);
    }
  }
}

// ---- --policy matched-gated --------------------------------------------------

namespace {
AdaPonderOptions matched_gated_options() {
  AdaPonderOptions o = base_options();
  o.policy = "matched-gated";
  o.policy_hist = "0.3/0.3/0.4";
  return o;
}
}  // namespace

// Exits drawn as `matched` draws them; the gates computed on every running
// row, scaling the updates of the rows that go on, and trained by the
// update's gradient and the bottom-k ponder loss: the whole model against
// central differences with all three terms acting.
TEST(AdaPonderMatchedGated, GradCheckWithThePonderLossActing) {
  AdaCase s(matched_gated_options(), 21);
  s.loss();
  std::vector<int> count(4, 0);
  for (int p : s.method->last_pass()) count[p]++;
  ASSERT_GT(count[1], 0);  // tokens exit after pass 1, after pass 2, and run all three
  ASSERT_GT(count[2], 0);
  ASSERT_GT(count[3], 0);
  // A = the gates of every running row: pass 1 all 14 tokens, pass 2 those not yet exited
  const auto g = s.sorted_gates();
  ASSERT_EQ(g.size(), (size_t)(14 + 14 - count[1]));
  const size_t best = widest_gap_index(g, 2);  // k with the cut in the widest gap, at least 2 gates selected
  ASSERT_GT(g[best] - g[best - 1], 1e-4);
  s.method->set_k((double)best / g.size());
  s.loss();
  const StepStats st = s.method->stats(*s.m);
  EXPECT_GT(st.loss - st.ce, 0.0);  // the ponder loss acts
  s.check_all_grads();
  // every gate tensor receives gradient
  const auto grads = s.grads();
  for (auto& p : s.m->layout.tensors()) {
    if (p.name.rfind("adaponder.gate.", 0) != 0) continue;
    double mag = 0;
    for (size_t i = 0; i < p.numel; i++) mag = std::max(mag, std::abs(grads[p.offset + i]));
    EXPECT_GT(mag, 1e-6) << p.name;
  }
}

// The same tokens exit at the same passes as under `matched`; with the gates
// saturated at s = 1 and no ponder loss, matched-gated is `matched` exactly
// (loss and every gradient): the two differ only in the gates' s.
TEST(AdaPonderMatchedGated, IsMatchedWithTheGatesSaturated) {
  AdaPonderOptions o = matched_gated_options();
  o.lambda = 0;
  AdaCase gated(o, 22);
  o.policy = "matched";
  AdaCase matched(o, 22);  // same parameters and batch
  const double l_matched = matched.loss();
  const double l_gated = gated.loss();
  EXPECT_EQ(gated.method->last_pass(), matched.method->last_pass());
  EXPECT_GT(std::abs(l_gated - l_matched), 1e-6);  // with s < 1 the updates differ
  // b2 = 100: s = sigmoid(logit + 100) rounds to 1 in double
  for (auto& p : gated.m->layout.tensors())
    if (p.name.find(".b2") != std::string::npos) gated.m->params.data()[p.offset] = 100.0;
  EXPECT_EQ(gated.loss(), l_matched);
  const auto gg = gated.grads(), gm = matched.grads();
  for (auto& p : gated.m->layout.tensors()) {
    if (p.name.rfind("adaponder.gate.", 0) == 0) continue;  // matched never reads them
    std::vector<double> a(gg.begin() + p.offset, gg.begin() + p.offset + p.numel);
    std::vector<double> b(gm.begin() + p.offset, gm.begin() + p.offset + p.numel);
    EXPECT_LT(grad_error(a, b), 1e-12) << p.name;
  }
}
