// PonderLM-2: the whole-model gradient check through every pass (growing,
// Jacobi, final) with a fixed Jacobi count; the training Jacobi count drawn
// from {2, 3} as a function of the seed and the step; sequential decoding
// against a forward with enough Jacobi passes to be the exact solution; the
// FLOPs of the passes run and of the sequential decode.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <set>

#include "train/cpu_instances.h"
#include "gradcheck.h"
#include "method_test_util.h"
#include "methods/ponderlm2.h"
#include "methods/standard.h"

using namespace ada;
using namespace ada::test;
using Bd = CpuBackend<double>;

namespace {

struct Plm2Case : MethodCase<PonderLM2Method<Bd>> {
  Plm2Case(PonderLM2Options o, int B, int T, uint64_t seed) : MethodCase(o) {
    random_params(*m, seed);
    b = random_batch(B, T, m->cfg.vocab, seed + 1);
  }
};

PonderLM2Options options(int K, int jacobi_train, int jacobi_eval) {
  PonderLM2Options o;
  o.K = K, o.jacobi_train = jacobi_train, o.jacobi_eval = jacobi_eval;
  return o;
}

// The forward FLOPs of the passes the method runs, counted here from the
// schedule: pass p runs c_p = min(p+1, K+1) stages, i.e. T c_p rows per
// sequence, row r of them seeing r + 1 keys (causal over the rows present),
// plus the head on the N stage-K rows of the final pass.
double expected_fwd_flops(const ModelConfig& c, int B, int T, int K, int nJ) {
  double f = 0;
  for (int p = 0; p < K + nJ + 1; p++) {
    const double R = (double)T * std::min(p + 1, K + 1);
    f += B * (2.0 * R * (double)c.num_block_matmul_params() + 4.0 * c.dim * c.layers * R * (R + 1) / 2);
  }
  return f + 2.0 * B * T * c.dim * c.vocab;
}

}  // namespace

// Every parameter (embedding through S^0 and through nothing else, the
// backbone through all K + n_J + 1 passes, the final norm through the head
// and through every latent input), in double precision, K = 2 so that the
// growing passes differ from the Jacobi ones.
TEST(PonderLM2, GradCheckThroughEveryPass) {
  for (int nJ : {1, 2}) {
    SCOPED_TRACE("n_J " + std::to_string(nJ));
    Plm2Case c(options(2, nJ, nJ), 2, 5, 11);
    c.b.targets[3] = -1;  // an unsupervised position contributes nothing
    c.m->zero_grads();
    c.m->arena.reset();
    c.method->forward(*c.m, c.b, true);
    EXPECT_EQ(c.method->last_passes(), 2 + nJ + 1);
    c.method->backward(*c.m, 1.0);
    std::vector<double> g(c.m->grads.data(), c.m->grads.data() + c.m->num_params());
    for (auto& p : c.m->layout.tensors()) {
      std::vector<double> a(g.begin() + p.offset, g.begin() + p.offset + p.numel);
      expect_grad_close(p.name, a, numeric_grad(c.m->params.data() + p.offset, p.numel, [&] { return c.loss(); }));
    }
  }
}

// n_J in training: 2 or 3, about half each, the same for the same seed and
// step (a fresh method, as after a resume, draws the same), different
// sequences for different seeds; the forward runs exactly that many.
TEST(PonderLM2, JacobiDrawIsTwoOrThreeAndDeterministic) {
  std::vector<int> first;
  for (uint64_t seed : {0ull, 1ull, 1234ull}) {
    int threes = 0;
    std::vector<int> seq;
    for (long long step = 0; step < 400; step++) {
      const int n = PonderLM2Method<Bd>::jacobi_draw(seed, step);
      ASSERT_TRUE(n == 2 || n == 3) << n;
      EXPECT_EQ(n, PonderLM2Method<Bd>::jacobi_draw(seed, step));
      threes += n == 3;
      seq.push_back(n);
    }
    EXPECT_GT(threes, 150);
    EXPECT_LT(threes, 250);
    if (first.empty()) first = seq;
    else EXPECT_NE(seq, first) << "seed " << seed << " draws the same sequence as seed 0";
  }

  const int K = 1;
  Plm2Case a(options(K, 0, 5), 1, 4, 3), b(options(K, 0, 5), 1, 4, 3);
  std::set<int> seen;
  for (long long step : {0, 1, 2, 3, 4, 5, 6, 7, 17, 99}) {
    a.method->set_run_seed(42), a.method->set_step(step, 100);
    a.m->arena.reset();
    a.method->forward(*a.m, a.b, true);
    const int nJ = a.method->last_passes() - K - 1;
    EXPECT_EQ(nJ, PonderLM2Method<Bd>::jacobi_draw(42, step));
    seen.insert(nJ);
    const double loss = a.method->stats(*a.m).loss;
    b.method->set_run_seed(42), b.method->set_step(step, 100);  // "resumed" at this step
    b.m->arena.reset();
    b.method->forward(*b.m, b.b, true);
    EXPECT_EQ(b.method->last_passes(), a.method->last_passes());
    EXPECT_EQ(b.method->stats(*b.m).loss, loss);
  }
  EXPECT_EQ(seen, (std::set<int>{2, 3}));
  a.m->arena.reset();
  a.method->forward(*a.m, a.b, false);  // evaluation: --jacobi-eval
  EXPECT_EQ(a.method->last_passes(), K + 5 + 1);
  Plm2Case fixed(options(K, 4, 3), 1, 4, 3);  // --jacobi-train 4: no draw
  for (long long step : {0, 1, 2}) {
    fixed.method->set_step(step, 10);
    fixed.m->arena.reset();
    fixed.method->forward(*fixed.m, fixed.b, true);
    EXPECT_EQ(fixed.method->last_passes(), K + 4 + 1);
  }
}

// The decoder runs the K+1 rows of every token one at a time, exactly. A
// forward whose Jacobi passes reach n_J = (K+1) T is the same function: the
// distributions agree to rounding. (With the paper's 3 passes they are only
// close; printed under ADA_VERBOSE, not asserted.)
TEST(PonderLM2, DecoderMatchesConvergedForward) {
  for (int K : {1, 2}) {
    SCOPED_TRACE("K " + std::to_string(K));
    const int T = 7;
    Plm2Case c(options(K, 0, (K + 1) * T), 1, T, 21);
    for (size_t i = 0; i < c.m->num_params(); i++) c.m->params.data()[i] *= 2;  // far from uniform
    auto max_diff_to_decoder = [&](int jacobi_eval, double* max_p) {
      PonderLM2Method<Bd> meth(options(K, 0, jacobi_eval));
      c.m->arena.reset();
      meth.forward(*c.m, c.b, false);
      std::vector<double> full;
      meth.probabilities(*c.m, full);
      auto dec = meth.decoder(*c.m, T);
      double diff = 0;
      for (int t = 0; t < T; t++) {
        const std::vector<double>& p = dec->step(c.b.inputs[t]);
        for (int v = 0; v < c.m->cfg.vocab; v++) {
          diff = std::max(diff, std::abs(p[v] - full[(size_t)t * c.m->cfg.vocab + v]));
          if (max_p) *max_p = std::max(*max_p, p[v]);
        }
      }
      return diff;
    };
    double max_p = 0;
    EXPECT_LT(max_diff_to_decoder((K + 1) * T, &max_p), 1e-12);
    EXPECT_GT(max_p, 2.0 / c.m->cfg.vocab);  // not a uniform distribution
    if (std::getenv("ADA_VERBOSE"))
      std::printf("K %d: n_J 3 differs from the sequential decode by %.3g (max |dp|)\n", K,
                  max_diff_to_decoder(3, nullptr));
  }
}

// fwd_flops counts the passes actually run (training 3x); infer_flops is the
// sequential decode's, which is what the decoder spends, whatever n_J.
TEST(PonderLM2, FlopsOfThePassesAndOfTheDecode) {
  const int K = 2, T = 6;
  for (int nJ : {2, 3}) {
    Plm2Case c(options(K, nJ, nJ), 2, T, 5);
    c.m->arena.reset();
    c.method->forward(*c.m, c.b, true);
    const StepStats s = c.method->stats(*c.m);
    const double want = expected_fwd_flops(c.m->cfg, 2, T, K, nJ);
    EXPECT_NEAR(s.fwd_flops, want, 1e-9 * want);
    EXPECT_EQ(s.train_flops, 3 * s.fwd_flops);
    EXPECT_NEAR(s.inference_flops(), PonderLM2Method<Bd>::decode_flops(c.m->cfg, 2, T, K), 1e-9 * want);
    EXPECT_LT(s.inference_flops(), s.fwd_flops);
  }
  Plm2Case one(options(K, 2, 2), 1, T, 5);
  auto dec = one.method->decoder(*one.m, T);
  for (int t = 0; t < T; t++) dec->step(one.b.inputs[t]);
  one.m->arena.reset();
  one.method->forward(*one.m, one.b, false);
  const double inf = one.method->stats(*one.m).inference_flops();
  EXPECT_NEAR(dec->flops(), inf, 1e-9 * inf);
  EXPECT_EQ(dec->passes_last(), K + 1);

  // every other method: the inference figure is the forward's
  StandardMethod<Bd> st;
  auto m = make_model(one.be, preset_config("test"), st);
  m->arena.reset();
  st.forward(*m, one.b, false);
  const StepStats ss = st.stats(*m);
  EXPECT_EQ(ss.inference_flops(), ss.fwd_flops);
}

// The trainer hands the method its --seed: the training forward runs the
// draw of that seed (not of seed 0) at the step it is at.
TEST(PonderLM2, TheTrainerPassesItsSeed) {
  using Cpu = CpuBackend<float>;
  TrainOptions o;
  o.method = "ponderlm2", o.config = "test", o.seq = 16, o.seed = 1234, o.out = "unused";
  Cpu be;
  Trainer<Cpu> tr(be, o);
  auto* meth = dynamic_cast<PonderLM2Method<Cpu>*>(&tr.method());
  ASSERT_NE(meth, nullptr);
  const Batch b = random_batch(1, 4, tr.model().cfg.vocab, 2);
  int differ = 0;
  for (long long step = 0; step < 40; step++) {
    meth->set_step(step, 40);
    tr.model().arena.reset();
    meth->forward(tr.model(), b, true);
    EXPECT_EQ(meth->last_passes() - 2, PonderLM2Method<Cpu>::jacobi_draw(1234, step)) << "step " << step;
    differ += PonderLM2Method<Cpu>::jacobi_draw(1234, step) != PonderLM2Method<Cpu>::jacobi_draw(0, step);
  }
  EXPECT_GT(differ, 0);  // the check can tell the seeds apart
}

TEST(PonderLM2, BadOptionsAreRejected) {
  EXPECT_THROW(PonderLM2Method<Bd>{options(0, 0, 3)}, Error);
  EXPECT_THROW(PonderLM2Method<Bd>{options(kPonderLM2MaxThoughts + 1, 0, 3)}, Error);
  EXPECT_THROW(PonderLM2Method<Bd>{options(1, -1, 3)}, Error);
  EXPECT_THROW(PonderLM2Method<Bd>{options(1, 0, -1)}, Error);
}
