// The non-matmul op counter (FlopCount::other, StepStats::fwd_other_flops,
// model/flop_count.h): the standard method against a count by hand, what
// PonderLM's soft embedding adds, AdaPonderLM spending fewer ops when fewer
// tokens run, and the totals in the trainer's metrics log.
#include <gtest/gtest.h>

#include <algorithm>

#include "train/cpu_instances.h"
#include "core/json.h"
#include "method_test_util.h"
#include "methods/adaponder.h"
#include "methods/ponder.h"
#include "methods/standard.h"
#include "train/evaluation.h"
#include "train/trainer.h"
#include "workflow_util.h"

using namespace ada;
using namespace ada::test;
using Bd = CpuBackend<double>;

namespace {

// The standard method's forward non-matmul ops on B sequences of T tokens,
// counted by hand from the convention of model/flop_count.h (one op per
// scalar add, multiply, divide, comparison, exp, log, sqrt).
double standard_other_by_hand(const ModelConfig& c, int B, int T) {
  const double N = (double)B * T, D = c.dim, H = c.heads, F = c.hidden, V = c.vocab;
  const double keys = B * T * (T + 1) / 2.0;  // causal: query t sees t + 1 keys
  const double rmsnorm = N * (2 * D + 4 + 2 * D);  // squares + sum, /D +eps sqrt 1/, x*r*w
  const double rope = N * 2 * D * 3;               // q and k: per pair 4 mul + 2 add
  const double attn = keys * H * 5 + N * (H + D);  // scale max sub exp add per key; log + normalise per row
  const double swiglu = N * F * 5;                 // exp, add, divide, * gate, * up
  const double residual = 2 * N * D;
  const double layer = 2 * rmsnorm + rope + attn + swiglu + residual;
  const double readout = rmsnorm;                  // the final norm
  const double ce = N * (4 * V + 3);               // max sub exp sum over V; log, + max, z_y - lse
  return c.layers * layer + readout + ce;          // the embedding (scale 1) is a copy: 0
}

// One method on the test config in double precision (its options passed on).
template <class M>
struct Case {
  Bd be;
  std::unique_ptr<M> method;
  std::unique_ptr<Model<Bd>> m;
  Batch b;
  template <class... A>
  explicit Case(A&&... a) : method(std::make_unique<M>(a...)), m(make_model(be, preset_config("test"), *method)) {
    m->init_params(5);
  }
};

template <class M>
StepStats forward_stats(Case<M>& s) {
  s.m->arena.reset();
  s.method->forward(*s.m, s.b, false);
  return s.method->stats(*s.m);
}

}  // namespace

TEST(OtherOps, StandardMatchesTheHandCount) {
  Case<StandardMethod<Bd>> s;
  s.b = random_batch(2, 5, s.m->cfg.vocab, 1);
  s.b.targets[3] = -1;  // the op runs over every row, supervised or not
  const StepStats st = forward_stats(s);
  // test config: V 23, D 16, L 2, H 2, F 24; N = 10 rows, 30 visible keys per layer:
  // per layer 2*680 + 960 + 480 + 1200 + 320 = 4320; + norm 680 + CE 950
  EXPECT_EQ(standard_other_by_hand(s.m->cfg, 2, 5), 2 * 4320.0 + 680 + 950);
  EXPECT_EQ(st.fwd_other_flops, standard_other_by_hand(s.m->cfg, 2, 5));
  EXPECT_EQ(st.train_other_flops, 3 * st.fwd_other_flops);
  // the matmul/attention FLOPs are separate and unchanged: the plain model's count
  EXPECT_DOUBLE_EQ(st.fwd_flops, 10 * standard_flops_per_token(s.m->cfg, 5));
}

// Ponder (P = 2) on the same batch: three passes and readouts, two soft
// embeddings (softmax over V, the sqrt(D) scale, e + phi) and the scaled
// input embedding, one cross-entropy.
TEST(OtherOps, PonderCountsTheSoftEmbeddingSoftmax) {
  Case<StandardMethod<Bd>> std_case;
  Case<PonderMethod<Bd>> p(2);
  std_case.b = p.b = random_batch(2, 5, p.m->cfg.vocab, 2);
  const double plain = forward_stats(std_case).fwd_other_flops;
  const StepStats st = forward_stats(p);
  const double N = 10, D = 16, V = 23;
  const double pass_and_readout = plain - N * (4 * V + 3);   // the standard count without its CE
  const double soft = N * (5 * V + 1) + N * D + N * D;       // softmax, * sqrt(D), e + phi
  EXPECT_EQ(st.fwd_other_flops, 3 * pass_and_readout + 2 * soft + N * D + N * (4 * V + 3));
}

// AdaPonderLM: a higher tau stops more tokens early; fewer running rows mean
// fewer non-matmul ops (and fewer FLOPs), never more.
TEST(OtherOps, AdaPonderSpendsFewerOpsWhenFewerTokensRun) {
  AdaPonderOptions o;
  o.K = 2, o.tau = 0, o.gate_hidden = 5;
  Case<AdaPonderMethod<Bd>> s(o);
  random_params(*s.m, 21, [](const ParamInfo& p, double v) {
    if (p.name.find(".w2") != std::string::npos) return 3 * v;  // gates spread over (0, 1)
    if (p.name.find(".b2") != std::string::npos) return 0.5;
    return v;
  });
  s.b = random_batch(2, 7, s.m->cfg.vocab, 22);
  forward_stats(s);
  std::vector<double> gates;
  for (auto& g : s.method->gate_values()) gates.push_back(std::get<2>(g));
  std::sort(gates.begin(), gates.end());
  ASSERT_GT(gates.back() - gates.front(), 0.2) << "the gates must spread for tau to prune some tokens";
  // tau from 0 (every token runs K+1 passes) past the largest gate (every token stops after one)
  std::vector<double> taus = {0.0};
  for (double q : {0.25, 0.5, 0.75}) taus.push_back(gates[(size_t)(q * gates.size())] + 1e-9);
  taus.push_back(gates.back() + 1e-3);
  double last_other = INFINITY, last_fwd = INFINITY, last_passes = INFINITY;
  int drops = 0;  // taus that stopped more tokens than the one before
  for (double tau : taus) {
    SCOPED_TRACE("tau " + std::to_string(tau));
    s.method->set_tau(tau);
    const StepStats st = forward_stats(s);
    const double passes = st.halting[0].second;
    ASSERT_EQ(st.halting[0].first, "passes");
    ASSERT_LE(passes, last_passes);
    EXPECT_GT(st.fwd_other_flops, 0);
    if (passes < last_passes) {
      drops++;
      EXPECT_LT(st.fwd_other_flops, last_other);
      EXPECT_LT(st.fwd_flops, last_fwd);
    } else {
      EXPECT_EQ(st.fwd_other_flops, last_other);
    }
    EXPECT_EQ(st.train_other_flops, 3 * st.fwd_other_flops);
    last_other = st.fwd_other_flops, last_fwd = st.fwd_flops, last_passes = passes;
  }
  EXPECT_EQ(last_passes, 1.0) << "the last tau stops every token after its first pass";
  EXPECT_GE(drops, 4) << "each tau (after the first) stops more tokens";
}

// The trainer's metrics log: `other_flops`, the running total of the
// training non-matmul ops (3 x forward), beside `flops`.
TEST(OtherOps, MetricsLogCarriesTheTrainingTotal) {
  const std::string dir = scratch_dir("other_ops");
  const Dataset d = toy_data();
  TrainOptions o = toy_options(dir + "/run", "standard", 3);
  ModelConfig cfg;
  {
    ScopedThreads one(1);
    CpuBackend<float> be;
    Trainer<CpuBackend<float>> t(be, o);
    cfg = t.model().cfg;
    t.run(d, false);
  }
  std::stringstream ss(read_bytes(dir + "/run/metrics.jsonl"));
  const double per_step = o.accum * 3 * standard_other_by_hand(cfg, o.batch, o.seq);
  int step = 0;
  for (std::string line; std::getline(ss, line);) {
    step++;
    const Json j = parse_json(line, "metrics");
    ASSERT_NE(j.find("other_flops"), nullptr) << line;
    EXPECT_EQ(j.find("other_flops")->number, step * per_step) << line;
  }
  EXPECT_EQ(step, 3);
}
