// The row-chunked readout (methods/chunked_readout.h) against what it
// replaces: the final norm and head over all n rows at once
// (Model::readout_forward), the log-softmax of the targets, the soft
// embedding (soft_embedding.h), the top-K probabilities (TaH's decider
// input), and in the backward the soft embedding's backward, the top-K
// selection's through the softmax, the cross-entropy's (with a dL/dlse, as
// CYB's DK probability has) and readout_backward with another path's dhn.
// Same lse, log q(y), argmax, phi, top-K, probabilities, input gradient and
// head, embedding and final-norm weight gradients, at every chunk size, with
// the logits kept and recomputed, in double. Then whole steps of every
// method that reads a chunked readout: --recompute-logits changes no bit of
// the loss or the gradients, and holds less memory.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "train/cpu_instances.h"
#include "method_test_util.h"
#include "methods/next_token_loss.h"
#include "methods/chunked_readout.h"
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
  bool gate = true;     // a dL/dhn by another path in the backward
  int K = 0;            // top-K probabilities, and a dqtop in the backward
  bool dlse = false;    // a dL/dlse beside dL/dlogp
  std::string name() const {
    return "targets " + std::to_string(targets) + " ponders " + std::to_string(ponders) + " gate " +
           std::to_string(gate) + " K " + std::to_string(K) + " dlse " + std::to_string(dlse);
  }
};

struct Result {
  std::vector<double> lse, logp, phi, qtop, probs, dx, dhead, dembed, dnorm;
  std::vector<int> argmax, qidx;
};

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double e = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); i++) e = std::max(e, std::fabs(a[i] - b[i]));
  return e;
}

struct Inputs {
  static constexpr int kMaxK = 4;
  int n = 13;
  std::vector<double> x, dphi, dhn_extra, g, glse, gq;  // gq: (n, kMaxK), the first K columns used
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
  in.glse.resize(n), in.gq.resize((size_t)n * Inputs::kMaxK);
  for (auto& v : in.glse) v = 0.4 * r.normal();
  for (auto& v : in.gq) v = 0.5 * r.normal();
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
  if (k.K) {  // the top-K of each row's probabilities, on the host
    r.qtop.resize((size_t)n * k.K), r.qidx.resize((size_t)n * k.K);
    topk_values_forward(r.qtop.data(), r.qidx.data(), r.probs.data(), n, V, k.K);
  }
  if (k.ponders) {
    const double* dzs = se.backward(m, in.dphi.data());
    dz.assign(dzs, dzs + (size_t)n * V);
  }
  if (k.K)  // dz += p (dq - <p, dq>), dq = dqtop scattered to its columns
    for (int i = 0; i < n; i++) {
      std::vector<double> dq(V, 0.0);
      for (int j = 0; j < k.K; j++) dq[r.qidx[(size_t)i * k.K + j]] += in.gq[(size_t)i * Inputs::kMaxK + j];
      const double* p = r.probs.data() + (size_t)i * V;
      double dot = 0;
      for (int v = 0; v < V; v++) dot += p[v] * dq[v];
      for (int v = 0; v < V; v++) dz[(size_t)i * V + v] += p[v] * (dq[v] - dot);
    }
  if (k.targets) {
    std::vector<double> dce((size_t)n * V);
    m.be.logsoftmax_target_backward(dce.data(), ro.logits, r.lse.data(), y.data(), in.g.data(),
                                    k.dlse ? in.glse.data() : nullptr, n, V, V);
    for (size_t i = 0; i < dz.size(); i++) dz[i] += dce[i];
  }
  std::vector<double> dx((size_t)n * D, 0.25);  // the backward accumulates into what dx holds
  m.readout_backward(ro, dz.data(), dx.data(), k.gate ? in.dhn_extra.data() : nullptr);
  grads(m, r, dx);
  return r;
}

Result chunked(Model<Bd>& m, const Inputs& in, const Case& k, double s) {
  const int n = in.n, D = m.cfg.dim;
  Result r;
  m.arena.reset();
  m.zero_grads();
  int* y = m.arena.alloc<int>(n);
  m.be.to_device(y, in.y.data(), n);
  ChunkedReadout<Bd> ro;
  ro.top_probs = k.K;
  ro.forward(m, in.x.data(), n, k.targets ? y : nullptr, k.ponders ? s : 0.0, true);
  EXPECT_EQ(ro.phi != nullptr, k.ponders);
  EXPECT_EQ(ro.qtop != nullptr, k.K > 0);
  if (k.targets) r.lse.assign(ro.lse, ro.lse + n), r.logp.assign(ro.logp, ro.logp + n);
  else r.lse.assign(n, 0), r.logp.assign(n, 0);
  if (k.ponders) r.phi.assign(ro.phi, ro.phi + (size_t)n * D);
  if (k.K) r.qtop.assign(ro.qtop, ro.qtop + (size_t)n * k.K), r.qidx.assign(ro.qidx, ro.qidx + (size_t)n * k.K);
  ro.argmax(m, r.argmax);
  std::vector<double> gq((size_t)n * std::max(k.K, 1));  // dqtop (n, K), from the first K columns of in.gq
  for (int i = 0; i < n; i++)
    for (int j = 0; j < k.K; j++) gq[(size_t)i * k.K + j] = in.gq[(size_t)i * Inputs::kMaxK + j];
  typename ChunkedReadout<Bd>::Grad g;
  g.logp = k.targets ? in.g.data() : nullptr;
  g.lse = k.targets && k.dlse ? in.glse.data() : nullptr;
  g.phi = k.ponders ? in.dphi.data() : nullptr;
  g.qtop = k.K ? gq.data() : nullptr;
  g.hn = k.gate ? in.dhn_extra.data() : nullptr;
  std::vector<double> dx((size_t)n * D, 0.25);
  ro.backward(m, g, dx.data());
  EXPECT_THROW(ro.backward(m, g, dx.data()), Error);  // once per forward
  ro.probabilities(m, r.probs);  // after the backward: recomputed from hn
  grads(m, r, dx);
  return r;
}

}  // namespace

TEST(ChunkedReadout, MatchesTheUnfusedReadoutSoftEmbeddingAndTopKAtEveryChunkSize) {
  Bd be;
  PonderMethod<Bd> meth(2);
  ModelConfig cfg = preset_config("test");  // V 23, D 16
  auto m = make_model(be, cfg, meth);
  random_params(*m, 3);
  const Inputs in = inputs(cfg);
  const double s = std::sqrt((double)cfg.dim);
  const std::vector<Case> cases = {
      {true, true, true},                  // adaponder: CE of the rows that end, phi of those that go on, the gate's dhn
      {false, true, false},                // ponder's pondering passes
      {true, false, false},                // a pass that only scores
      {false, true, true},                 // a pass no row ends in
      {true, false, true, 0, true},        // CYB: log p(y) and dL/dlse (the DK probability), the DK head's dhn
      {true, false, false, 3, false},      // TaH2's steps before the last: CE and the decider's top-3
      {false, false, true, 4, false},      // the top-K alone, beside the next step's dhn
      {true, true, true, 2, true},         // everything at once
      {false, false, true, 0, false},      // only dhn: the head carries nothing
  };
  for (const Case& k : cases) {
    const Result want = reference(*m, in, k, s);
    for (bool recompute : {false, true})
      for (int C : {1, 4, 5, 13, 100}) {
        SCOPED_TRACE(k.name() + ", recompute " + std::to_string(recompute) + ", chunk rows " + std::to_string(C));
        m->classifier_chunk_rows = C;
        m->recompute_logits = recompute;
        const Result got = chunked(*m, in, k, s);
        EXPECT_LT(max_diff(got.lse, want.lse), 1e-13);
        EXPECT_LT(max_diff(got.logp, want.logp), 1e-13);
        EXPECT_EQ(got.argmax, want.argmax);
        EXPECT_LT(max_diff(got.phi, want.phi), 1e-13);
        EXPECT_EQ(got.qidx, want.qidx);
        EXPECT_LT(max_diff(got.qtop, want.qtop), 1e-14);
        EXPECT_LT(max_diff(got.probs, want.probs), 1e-14);
        EXPECT_LT(max_diff(got.dx, want.dx), 1e-13);
        EXPECT_LT(max_diff(got.dhead, want.dhead), 1e-13);
        EXPECT_LT(max_diff(got.dembed, want.dembed), 1e-13);
        EXPECT_LT(max_diff(got.dnorm, want.dnorm), 1e-13);
      }
  }
}

TEST(ChunkedReadout, RefusesABackwardItCannotTake) {
  Bd be;
  PonderMethod<Bd> meth(2);
  auto m = make_model(be, preset_config("test"), meth);
  random_params(*m, 3);
  const Inputs in = inputs(m->cfg);
  std::vector<double> dx(in.x.size(), 0.0);
  using Grad = ChunkedReadout<Bd>::Grad;
  Grad dphi;
  dphi.phi = in.dphi.data();
  ChunkedReadout<Bd> eval;
  eval.forward(*m, in.x.data(), in.n, nullptr, 4.0, false);  // evaluation: keeps no logits, has no backward
  EXPECT_EQ(eval.z, nullptr);
  EXPECT_THROW(eval.backward(*m, dphi, dx.data()), Error);
  ChunkedReadout<Bd> last;
  last.forward(*m, in.x.data(), in.n, nullptr, 0.0, true);  // does not ponder: no phi, so no dphi
  EXPECT_THROW(last.backward(*m, dphi, dx.data()), Error);
  Grad dq;
  dq.qtop = in.gq.data();  // no top probabilities were read
  EXPECT_THROW(last.backward(*m, dq, dx.data()), Error);
  Grad dlse;
  dlse.lse = in.glse.data();  // a dL/dlse without dL/dlogp
  EXPECT_THROW(last.backward(*m, dlse, dx.data()), Error);
  EXPECT_THROW(last.backward(*m, Grad{}, dx.data()), Error);  // no gradient at all
  ChunkedReadout<Bd> no_argmax;
  no_argmax.want_argmax = false;
  no_argmax.forward(*m, in.x.data(), in.n, nullptr, 0.0, false);
  std::vector<int> top;
  EXPECT_THROW(no_argmax.argmax(*m, top), Error);
  ChunkedReadout<Bd> too_many;
  too_many.top_probs = m->cfg.vocab + 1;
  EXPECT_THROW(too_many.forward(*m, in.x.data(), in.n, nullptr, 0.0, true), Error);
}

// Whole steps of the methods that read a chunked readout, in double and in float: the
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

TEST(ChunkedReadout, RecomputedLogitsChangeNoBitAndHoldLessMemory) {
  MethodOptions mo;
  mo.ponder_steps = 3;
  same_step_less_memory<CpuBackend<double>>("ponder", mo);
  same_step_less_memory<CpuBackend<float>>("ponder", mo);
  same_step_less_memory<CpuBackend<double>>("adaponder", mo);
  mo.ada.tau = 0.5;  // pruning: the later passes have fewer rows
  same_step_less_memory<CpuBackend<float>>("adaponder", mo);
  // CYB: one readout over the B T (pauses + 1) rows of the flattened sequence,
  // its loss reading LSE(o_V) too (dL/dlse)
  same_step_less_memory<CpuBackend<double>>("cyb", MethodOptions{});
  same_step_less_memory<CpuBackend<float>>("cyb", MethodOptions{});
  // latent CoT and TaH: one readout per step, on the rows still running it;
  // TaH's decider reads top_D(q) off each step's probabilities (dL/dqtop)
  same_step_less_memory<CpuBackend<double>>("latent_cot", MethodOptions{});
  same_step_less_memory<CpuBackend<float>>("latent_cot", MethodOptions{});
  same_step_less_memory<CpuBackend<double>>("tah", MethodOptions{});
  same_step_less_memory<CpuBackend<float>>("tah", MethodOptions{});
}
