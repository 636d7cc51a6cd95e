// The readout of a pondering pass (methods/pondering_readout.h) against what
// it replaces: the final norm and head over all n rows at once
// (Model::readout_forward), the log-softmax of the targets, the soft
// embedding (soft_embedding.h), and in the backward the soft embedding's
// backward, the cross-entropy's and readout_backward with a gate's dhn.
// Same lse, log q(y), argmax, phi, probabilities, input gradient and head,
// embedding and final-norm weight gradients, at every chunk size, with the
// logits kept and recomputed, in double. Then whole ponder and adaponder
// steps: --recompute-logits changes no bit of the loss or the gradients, and
// holds less memory.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "train/cpu_instances.h"
#include "method_test_util.h"
#include "methods/next_token_loss.h"
#include "methods/pondering_readout.h"
#include "methods/ponder.h"
#include "methods/registry.h"
#include "methods/soft_embedding.h"

using namespace ada;
using namespace ada::test;

namespace {

using Bd = CpuBackend<double>;

struct Case {
  bool targets = true;  // some rows carry a target
  bool ponders = true;  // phi = s softmax(z) E, and a dphi in the backward
  bool gate = true;     // a dhn_extra in the backward
};

struct Result {
  std::vector<double> lse, logp, phi, probs, dx, dhead, dembed, dnorm;
  std::vector<int> argmax;
};

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double e = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); i++) e = std::max(e, std::fabs(a[i] - b[i]));
  return e;
}

struct Inputs {
  int n = 13;
  std::vector<double> x, dphi, dhn_extra, g;
  std::vector<int> y;
};

Inputs inputs(const ModelConfig& cfg) {
  Inputs in;
  const int n = in.n, D = cfg.dim;
  Rng r(11);
  in.x.resize((size_t)n * D), in.dphi.resize((size_t)n * D), in.dhn_extra.resize((size_t)n * D);
  for (auto& v : in.x) v = r.normal();
  for (auto& v : in.dphi) v = 0.3 * r.normal();
  for (auto& v : in.dhn_extra) v = 0.2 * r.normal();
  in.y.resize(n), in.g.resize(n);
  for (int i = 0; i < n; i++) in.y[i] = i % 3 == 1 ? -1 : (int)r.below(cfg.vocab);  // rows that do not end here
  for (int i = 0; i < n; i++) in.g[i] = -0.7 / n;
  return in;
}

void grads(Model<Bd>& m, Result& r, const std::vector<double>& dx) {
  const int D = m.cfg.dim, V = m.cfg.vocab;
  r.dx = dx;
  r.dhead.assign(m.g.head, m.g.head + (size_t)V * D);
  r.dembed.assign(m.g.embed, m.g.embed + (size_t)V * D);
  r.dnorm.assign(m.g.final_norm, m.g.final_norm + D);
}

// The unfused pass: every logit at once, kept from the forward to the backward.
Result reference(Model<Bd>& m, const Inputs& in, const Case& k, double s) {
  const int n = in.n, D = m.cfg.dim, V = m.cfg.vocab;
  Result r;
  m.arena.reset();
  m.zero_grads();
  auto ro = m.readout_forward(in.x.data(), n);
  std::vector<int> y = in.y;
  r.lse.assign(n, 0), r.logp.assign(n, 0);
  if (k.targets) m.be.logsoftmax_target_forward(r.lse.data(), r.logp.data(), ro.logits, y.data(), n, V, V);
  argmax_to_host(m, ro.logits, n, r.argmax);
  probabilities_to_host(m, ro.logits, n, r.probs);
  SoftEmbedding<Bd> se;
  if (k.ponders) {
    const double* phi = se.forward(m, ro.logits, n, s);
    r.phi.assign(phi, phi + (size_t)n * D);
  }
  std::vector<double> dz((size_t)n * V, 0.0);
  if (k.ponders) {
    const double* dzs = se.backward(m, in.dphi.data());
    dz.assign(dzs, dzs + (size_t)n * V);
  }
  if (k.targets) {
    std::vector<double> dce((size_t)n * V);
    m.be.logsoftmax_target_backward(dce.data(), ro.logits, r.lse.data(), y.data(), in.g.data(), nullptr, n, V, V);
    for (size_t i = 0; i < dz.size(); i++) dz[i] += dce[i];
  }
  std::vector<double> dx((size_t)n * D, 0.25);  // the backward accumulates into what dx holds
  m.readout_backward(ro, dz.data(), dx.data(), k.gate ? in.dhn_extra.data() : nullptr);
  grads(m, r, dx);
  return r;
}

Result pondering(Model<Bd>& m, const Inputs& in, const Case& k, double s) {
  const int n = in.n, D = m.cfg.dim;
  Result r;
  m.arena.reset();
  m.zero_grads();
  int* y = m.arena.alloc<int>(n);
  m.be.to_device(y, in.y.data(), n);
  PonderingReadout<Bd> pr;
  pr.forward(m, in.x.data(), n, k.targets ? y : nullptr, k.ponders ? s : 0.0, true);
  EXPECT_EQ(pr.phi != nullptr, k.ponders);
  if (k.targets) r.lse.assign(pr.lse, pr.lse + n), r.logp.assign(pr.logp, pr.logp + n);
  else r.lse.assign(n, 0), r.logp.assign(n, 0);
  if (k.ponders) r.phi.assign(pr.phi, pr.phi + (size_t)n * D);
  pr.argmax(m, r.argmax);
  std::vector<double> dx((size_t)n * D, 0.25);
  pr.backward(m, k.targets ? in.g.data() : nullptr, k.ponders ? in.dphi.data() : nullptr,
              k.gate ? in.dhn_extra.data() : nullptr, dx.data());
  EXPECT_THROW(pr.backward(m, nullptr, nullptr, nullptr, dx.data()), Error);  // once per forward
  pr.probabilities(m, r.probs);  // after the backward: recomputed from hn
  grads(m, r, dx);
  return r;
}

}  // namespace

TEST(PonderingReadout, MatchesTheUnfusedReadoutAndSoftEmbeddingAtEveryChunkSize) {
  Bd be;
  PonderMethod<Bd> meth(2);
  ModelConfig cfg = preset_config("test");  // V 23, D 16
  auto m = make_model(be, cfg, meth);
  random_params(*m, 3);
  const Inputs in = inputs(cfg);
  const double s = std::sqrt((double)cfg.dim);
  for (const Case k : {Case{true, true, true}, Case{false, true, false}, Case{true, false, false}, Case{false, true, true}}) {
    const Result want = reference(*m, in, k, s);
    for (bool recompute : {false, true})
      for (int C : {1, 4, 5, 13, 100}) {
        SCOPED_TRACE("targets " + std::to_string(k.targets) + " ponders " + std::to_string(k.ponders) + " gate " +
                     std::to_string(k.gate) + ", recompute " + std::to_string(recompute) + ", chunk rows " +
                     std::to_string(C));
        m->classifier_chunk_rows = C;
        m->recompute_logits = recompute;
        const Result got = pondering(*m, in, k, s);
        EXPECT_LT(max_diff(got.lse, want.lse), 1e-13);
        EXPECT_LT(max_diff(got.logp, want.logp), 1e-13);
        EXPECT_EQ(got.argmax, want.argmax);
        EXPECT_LT(max_diff(got.phi, want.phi), 1e-13);
        EXPECT_LT(max_diff(got.probs, want.probs), 1e-14);
        EXPECT_LT(max_diff(got.dx, want.dx), 1e-13);
        EXPECT_LT(max_diff(got.dhead, want.dhead), 1e-13);
        EXPECT_LT(max_diff(got.dembed, want.dembed), 1e-13);
        EXPECT_LT(max_diff(got.dnorm, want.dnorm), 1e-13);
      }
  }
}

TEST(PonderingReadout, RefusesABackwardItCannotTake) {
  Bd be;
  PonderMethod<Bd> meth(2);
  auto m = make_model(be, preset_config("test"), meth);
  random_params(*m, 3);
  const Inputs in = inputs(m->cfg);
  std::vector<double> dx(in.x.size(), 0.0);
  PonderingReadout<Bd> eval;
  eval.forward(*m, in.x.data(), in.n, nullptr, 4.0, false);  // evaluation: keeps no logits, has no backward
  EXPECT_EQ(eval.z, nullptr);
  EXPECT_THROW(eval.backward(*m, nullptr, in.dphi.data(), nullptr, dx.data()), Error);
  PonderingReadout<Bd> last;
  last.forward(*m, in.x.data(), in.n, nullptr, 0.0, true);  // does not ponder: no phi, so no dphi
  EXPECT_THROW(last.backward(*m, nullptr, in.dphi.data(), nullptr, dx.data()), Error);
}

// Whole steps of the pondering methods, in double and in float: the
// recomputed logits are the kept ones bit for bit (the same GEMM on the same
// rows), so the loss and every gradient are identical; and the arena holds
// less at its peak, by up to one (n, V) buffer per pass.
template <class Bk>
void same_step_less_memory(const std::string& name, const MethodOptions& mo) {
  using T = typename Bk::Real;
  Bk be;
  ModelConfig cfg = preset_config("test");
  const Batch b = random_batch(2, 16, cfg.vocab, 9);  // 32 rows: 7 chunks of 5 (tests/test_environment.cpp)
  std::vector<double> loss(2);
  std::vector<std::vector<T>> g(2);
  std::vector<size_t> peak(2);
  for (int rc = 0; rc < 2; rc++) {
    auto meth = make_method<Bk>(name, mo);
    auto m = make_model(be, cfg, *meth);
    random_params(*m, 5);
    m->recompute_logits = rc == 1;
    meth->set_step(60, 100);
    m->arena.reset();
    m->zero_grads();
    meth->forward(*m, b, true);
    meth->backward(*m, 1.0);
    loss[rc] = meth->stats(*m).loss;
    g[rc].assign(m->grads.data(), m->grads.data() + m->num_params());
    peak[rc] = m->arena.step_peak();
  }
  EXPECT_EQ(loss[0], loss[1]) << name;
  ASSERT_EQ(g[0].size(), g[1].size());
  size_t differ = 0;
  for (size_t i = 0; i < g[0].size(); i++) differ += g[0][i] != g[1][i];
  EXPECT_EQ(differ, 0u) << name << ": gradient entries that differ";
  const size_t one_pass_logits = (size_t)b.B * b.T * cfg.vocab * sizeof(T);
  EXPECT_LE(peak[1] + one_pass_logits, peak[0]) << name << ": peak " << peak[1] << " bytes recomputing, " << peak[0]
                                                << " keeping";
}

TEST(PonderingReadout, RecomputedLogitsChangeNoBitAndHoldLessMemory) {
  MethodOptions mo;
  mo.ponder_steps = 3;
  same_step_less_memory<CpuBackend<double>>("ponder", mo);
  same_step_less_memory<CpuBackend<float>>("ponder", mo);
  same_step_less_memory<CpuBackend<double>>("adaponder", mo);
  mo.ada.tau = 0.5;  // pruning: the later passes have fewer rows
  same_step_less_memory<CpuBackend<float>>("adaponder", mo);
}
