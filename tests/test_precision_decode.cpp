// Float vs double on the same model and batch (the float path is what
// trains), and KV-cached decoding vs the full training-style forward.
#include <gtest/gtest.h>

#include "train/cpu_instances.h"
#include "gradcheck.h"
#include "method_test_util.h"
#include "method_variants.h"
#include "methods/next_token_loss.h"
#include "methods/registry.h"

#include <algorithm>
#include <cmath>
#include <memory>

using namespace ada;
using namespace ada::test;

namespace {

// A training forward and backward of the same method in double and in float
// (models holding the same values): the losses and every parameter gradient
// agree within 1e-4 (relative, per tensor). `nonzero`: every tensor must also
// have a gradient, or the comparison would be vacuous.
template <class Md, class Mf, class ModelD, class ModelF>
void expect_float_matches_double(Md& md, ModelD& Dm, Mf& mf, ModelF& Fm, const Batch& b, bool nonzero) {
  Dm.zero_grads(), Fm.zero_grads();
  Dm.arena.reset(), Fm.arena.reset();
  md.forward(Dm, b, true);
  mf.forward(Fm, b, true);
  md.backward(Dm, 1.0);
  mf.backward(Fm, 1.0);
  const double ld = md.stats(Dm).loss, lf = mf.stats(Fm).loss;
  EXPECT_LT(std::abs(ld - lf) / std::abs(ld), 1e-4) << "loss " << ld << " vs " << lf;
  for (auto& p : Dm.layout.tensors()) {
    std::vector<double> a(Dm.grads.data() + p.offset, Dm.grads.data() + p.offset + p.numel);
    std::vector<double> f(Fm.grads.data() + p.offset, Fm.grads.data() + p.offset + p.numel);
    EXPECT_LT(grad_error(f, a), 1e-4) << p.name;
    if (!nonzero) continue;
    double mag = 0;
    for (double v : a) mag = std::max(mag, std::abs(v));
    EXPECT_GT(mag, 0.0) << p.name << ": no gradient, the comparison would be vacuous";
  }
}

}  // namespace

// Loss and every parameter gradient agree within 1e-4 (relative, per tensor).
TEST(Precision, FloatMatchesDouble) {
  for (const MethodVariant& var : method_variants()) {
    const std::string& name = var.method;
    SCOPED_TRACE(var.label);
    const MethodOptions mo = var.apply(MethodOptions());
    CpuBackend<double> bd;
    CpuBackend<float> bf;
    auto md = make_method<CpuBackend<double>>(name, mo);
    auto mf = make_method<CpuBackend<float>>(name, mo);
    ModelConfig cfg = preset_config("test");
    auto Md = make_model(bd, cfg, *md);
    auto Mf = make_model(bf, cfg, *mf);
    Md->init_params(7);
    // the float model gets the double model's parameters, rounded
    for (size_t i = 0; i < Md->num_params(); i++) Mf->params.data()[i] = (float)Md->params.data()[i];
    for (size_t i = 0; i < Md->num_params(); i++) Md->params.data()[i] = (double)Mf->params.data()[i];
    Batch b = random_batch(2, 9, cfg.vocab, 8);
    expect_float_matches_double(*md, *Md, *mf, *Mf, b, false);
  }
}

// ---- float vs double with the halting mechanisms acting --------------------
// At initialisation nothing halts (gates ~ 0.98, routers ~ 0.9, DK heads near
// zero), so FloatMatchesDouble above compares the dense paths only. Here each
// halting method gets parameters that make its mechanism act (gate biases,
// larger gate and head weights), the test asserts that it acts (counts the
// tokens that stop, are pruned or pause), and every discrete decision is kept
// further from its cut than float rounding can move it: the threshold is put
// in the middle of the widest gap of the values compared with it, the point
// must leave at least kMargin on every side, and the test measures how far
// float moved the compared values from double (below a tenth of the margin)
// and asserts the decisions are the same. Loss and gradients then agree
// within the same 1e-4 as above.

namespace {

using Bd = CpuBackend<double>;
using Bf = CpuBackend<float>;
constexpr double kMargin = 1e-3;

// One method in double and in float on the same parameters: the double model
// gets the float model's values, so both start from exactly the same numbers.
template <template <class> class Meth, class Options>
struct FloatDouble {
  Bd bd;
  Bf bf;
  std::unique_ptr<Meth<Bd>> md;
  std::unique_ptr<Meth<Bf>> mf;
  std::unique_ptr<Model<Bd>> Md;
  std::unique_ptr<Model<Bf>> Mf;
  Batch b;
  FloatDouble(const Options& o, uint64_t seed, const std::function<double(const ParamInfo&, double)>& adjust, int B,
              int T)
      : md(std::make_unique<Meth<Bd>>(o)),
        mf(std::make_unique<Meth<Bf>>(o)),
        Md(make_model(bd, preset_config("test"), *md)),
        Mf(make_model(bf, preset_config("test"), *mf)) {
    random_params(*Md, seed, adjust);
    for (size_t i = 0; i < Md->num_params(); i++) Mf->params.data()[i] = (float)Md->params.data()[i];
    for (size_t i = 0; i < Md->num_params(); i++) Md->params.data()[i] = (double)Mf->params.data()[i];
    b = random_batch(B, T, Md->cfg.vocab, seed + 1);
    b.targets[2] = -1;
  }
  template <class F>
  void both(F f) {
    f(*md), f(*mf);
  }
  // forward of both (no backward): the decisions of the current point
  void forward() {
    Md->arena.reset(), Mf->arena.reset();
    md->forward(*Md, b, false);
    mf->forward(*Mf, b, false);
  }
  // training forward and backward of both; loss and every gradient agree
  void expect_match() {
    expect_float_matches_double(*md, *Md, *mf, *Mf, b, true);
  }
};

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); i++) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

template <class Tuples>
std::vector<double> third(const Tuples& v) {
  std::vector<double> out;
  for (auto& x : v) out.push_back(std::get<2>(x));
  return out;
}

}  // namespace

// AdaPonderLM: tau in the widest gap of the gates, so that some tokens stop
// after pass 1 or 2; the bottom-k cut of the ponder loss away from every gate.
TEST(Precision, AdaPonderWithPruning) {
  AdaPonderOptions o;
  o.K = 2, o.tau = 0, o.lambda = 0.7, o.gate_hidden = 5;
  using FD = FloatDouble<AdaPonderMethod, AdaPonderOptions>;
  auto adjust = [](const ParamInfo& p, double v) {
    if (p.name.find(".w2") != std::string::npos) return v * 3;  // gates that spread over (0, 1)
    if (p.name.find(".b2") != std::string::npos) return 0.5;
    return v;
  };
  const double k = 0.3;
  double tau = 0;
  auto setup = [&](FD& c) {  // false if this point has no margin
    c.both([&](auto& m) { m.set_tau(0), m.set_k(k); });
    c.forward();
    double gap = 0;
    tau = middle_of_widest_gap(third(c.md->gate_values()), 0.15, 0.6, &gap);
    if (gap < 2 * kMargin) return false;
    c.both([&](auto& m) { m.set_tau(tau); });
    c.forward();
    std::vector<double> g = third(c.md->gate_values());
    std::sort(g.begin(), g.end());
    const size_t n = (size_t)std::ceil(k * g.size() - 1e-9);  // the bottom-k set: the n smallest gates
    return n > 0 && n < g.size() && g[n] - g[n - 1] > kMargin;
  };
  const long long seed = first_seed(1, 100, [&](uint64_t s) {
    FD c(o, s, adjust, 2, 7);
    return setup(c);
  });
  ASSERT_GE(seed, 0);
  if (std::getenv("ADA_VERBOSE")) std::printf("point: seed %lld\n", seed);
  FD c(o, (uint64_t)seed, adjust, 2, 7);
  ASSERT_TRUE(setup(c));
  int stopped = 0;
  for (int p : c.md->last_pass()) stopped += p < o.K + 1;
  EXPECT_GT(stopped, 0);  // pruning acts
  EXPECT_LT(stopped, (int)c.md->last_pass().size());
  EXPECT_EQ(c.mf->last_pass(), c.md->last_pass());
  const auto gd = c.md->gate_values(), gf = c.mf->gate_values();
  ASSERT_EQ(gd.size(), gf.size());
  EXPECT_LT(max_abs_diff(third(gf), third(gd)), 0.1 * kMargin);
  c.expect_match();
}

// Adaptive latent CoT: tau in the widest gap of the reach probabilities, so
// that cells are pruned and tokens stop at different steps.
TEST(Precision, LatentCotWithPruning) {
  LatentCotOptions o;
  o.K = 3, o.tau = 0, o.lambda = 0.4, o.beta = 2;
  using FD = FloatDouble<LatentCotMethod, LatentCotOptions>;
  auto adjust = [](const ParamInfo& p, double v) {
    if (p.name == "latent_cot.router.w2") return v * 4;  // routers that differ between tokens
    if (p.name == "latent_cot.router.b2") return 0.5;
    return v;
  };
  auto setup = [&](FD& c) {
    c.both([](auto& m) { m.set_tau(0); });
    c.forward();
    double gap = 0;
    const double tau = middle_of_widest_gap(c.md->reach_seen(), 0.05, 0.6, &gap);
    if (gap < 2 * kMargin) return false;
    c.both([&](auto& m) { m.set_tau(tau); });
    c.forward();
    return true;
  };
  const long long seed = first_seed(1, 100, [&](uint64_t s) {
    FD c(o, s, adjust, 2, 7);
    return setup(c);
  });
  ASSERT_GE(seed, 0);
  if (std::getenv("ADA_VERBOSE")) std::printf("point: seed %lld\n", seed);
  FD c(o, (uint64_t)seed, adjust, 2, 7);
  ASSERT_TRUE(setup(c));
  int pruned = 0;
  for (int k : c.md->last_step()) pruned += k < o.K;
  EXPECT_GT(pruned, 0);  // cells are pruned
  EXPECT_EQ(c.mf->last_step(), c.md->last_step());
  EXPECT_LT(max_abs_diff(c.mf->reach_seen(), c.md->reach_seen()), 0.1 * kMargin);
  c.expect_match();
}

// TaH2: some tokens continue and some stop (no decider output within kMargin
// of tau_exit), the top-D selections and the depth labels are away from
// their cuts; float computes the same depths, selections and labels.
TEST(Precision, TahWithHalting) {
  TahOptions o;
  o.M = 3, o.alpha = 0.5, o.rho = 0.9;
  using FD = FloatDouble<TahMethod, TahOptions>;
  auto adjust = [](const ParamInfo& p, double v) { return p.name == "tah.decider.score.weight" ? v * 3 : v; };
  const double kTopGap = kMargin;
  auto margins_ok = [&](FD& c) {
    c.forward();
    int cont = 0, stop = 0;
    for (int k : c.md->exit_depth()) (k > 0 ? cont : stop)++;
    double exit_gap = 1e300;
    for (double g : third(c.md->decisions())) exit_gap = std::min(exit_gap, std::abs(g - o.exit));
    const auto& w = c.md->label_weights();
    const auto& cand = c.md->label_candidates();
    int near_cut = 0;  // candidates whose gain is within kMargin of their depth's cut (the cut token is one per depth)
    for (size_t i = 0; i < w.size(); i++) near_cut += cand[i] && w[i] < kMargin;
    return cont > 0 && stop > 0 && exit_gap > kMargin && near_cut <= o.M - 1 &&
           tah_topk_gap(tah_top_logprobs(*c.md, *c.Md), c.Md->cfg.dim) > kTopGap;
  };
  const long long seed = first_seed(1, 100, [&](uint64_t s) {
    FD c(o, s, adjust, 2, 7);
    return margins_ok(c);
  });
  ASSERT_GE(seed, 0);
  if (std::getenv("ADA_VERBOSE")) std::printf("point: seed %lld\n", seed);
  FD c(o, (uint64_t)seed, adjust, 2, 7);
  ASSERT_TRUE(margins_ok(c));
  int stopped = 0;
  for (int k : c.md->exit_depth()) stopped += k < o.M - 1;
  EXPECT_GT(stopped, 0);  // tokens stop before the last depth...
  EXPECT_LT(stopped, (int)c.md->exit_depth().size());  // ...and some continue to it
  EXPECT_EQ(c.mf->exit_depth(), c.md->exit_depth());
  EXPECT_LT(max_abs_diff(third(c.mf->decisions()), third(c.md->decisions())), 0.1 * kMargin);
  EXPECT_EQ(c.mf->topk_columns(*c.Mf), c.md->topk_columns(*c.Md));
  EXPECT_LT(max_abs_diff(tah_top_logprobs(*c.mf, *c.Mf), tah_top_logprobs(*c.md, *c.Md)), 0.1 * kTopGap);
  EXPECT_EQ(c.mf->label_candidates(), c.md->label_candidates());
  EXPECT_EQ(c.mf->label_targets(), c.md->label_targets());
  c.expect_match();
}

// CYB: a strong DK head, so that under greedy decoding some tokens pause
// (abstain at step 1) and some answer before the last step; no step's
// x = o_DK - LSE within kMargin of the greedy cut x = 0.
TEST(Precision, CybWithPauses) {
  CybOptions o;
  o.pauses = 3, o.visibility = "own";
  using FD = FloatDouble<CybMethod, CybOptions>;
  auto adjust = [](const ParamInfo& p, double v) { return p.name == "cyb.dk_head.weight" ? v * 20 : v; };
  auto margins_ok = [&](FD& c) {
    c.forward();
    std::vector<double> x, nll, steps;
    c.md->abstain_logits(*c.Md, x);
    c.md->per_token(*c.Md, nll, steps);
    int paused = 0, early = 0;
    for (double s : steps) paused += s > 1, early += s < o.pauses + 1;
    double gap = 1e300;
    for (double v : x) gap = std::min(gap, std::abs(v));
    return paused > 0 && early > 0 && gap > kMargin;
  };
  const long long seed = first_seed(1, 100, [&](uint64_t s) {
    FD c(o, s, adjust, 2, 7);
    return margins_ok(c);
  });
  ASSERT_GE(seed, 0);
  if (std::getenv("ADA_VERBOSE")) std::printf("point: seed %lld\n", seed);
  FD c(o, (uint64_t)seed, adjust, 2, 7);
  ASSERT_TRUE(margins_ok(c));
  std::vector<double> xd, xf, nd, nf, sd, sf;
  c.md->abstain_logits(*c.Md, xd);
  c.mf->abstain_logits(*c.Mf, xf);
  c.md->per_token(*c.Md, nd, sd);
  c.mf->per_token(*c.Mf, nf, sf);
  int paused = 0;
  for (double s : sd) paused += s > 1;
  EXPECT_GT(paused, 0);  // some tokens pause under greedy decoding
  EXPECT_EQ(sf, sd);     // at the same steps in float
  if (std::getenv("ADA_VERBOSE")) std::printf("abstain logit: float - double up to %.3g\n", max_abs_diff(xf, xd));
  EXPECT_LT(max_abs_diff(xf, xd), 0.1 * kMargin);
  EXPECT_NEAR(c.mf->stats(*c.Mf).ce, c.md->stats(*c.Md).ce, 1e-4 * c.md->stats(*c.Md).ce);  // the greedy answer's loss
  c.expect_match();
}

// Feeding a sequence token by token through the decoder (KV caches) gives the
// same next-token distribution at every position as the full forward pass.
TEST(Decode, CachedDecodingMatchesFullForward) {
  for (const MethodVariant& var : method_variants()) {
    const std::string& name = var.method;
    SCOPED_TRACE(var.label);
    const int T = 11;
    MethodOptions base;
    // ponderlm2 decodes sequentially (exact); its forward is that solution
    // once the Jacobi passes reach (K+1) T (test_ponderlm2.cpp).
    base.plm2.jacobi_eval = (base.plm2.K + 1) * T;
    const MethodOptions mo = var.apply(base);
    CpuBackend<double> be;
    auto method = make_method<CpuBackend<double>>(name, mo);
    ModelConfig cfg = preset_config("test");
    auto m = make_model(be, cfg, *method);
    m->init_params(3);
    // larger weights than init so the distributions are far from uniform
    for (size_t i = 0; i < m->num_params(); i++) m->params.data()[i] *= 8;
    Batch b = random_batch(1, T, cfg.vocab, 4);
    double max_p = 0;
    EXPECT_LT(decode_vs_forward(*method, *m, b, &max_p), 1e-12);
    EXPECT_GT(max_p, 2.0 / cfg.vocab);  // not a uniform distribution
  }
}

// Every method's training readout recomputes its probabilities from the
// normalised state and keeps its argmax: the fused classifier
// (fused_classifier.h: standard, looped, ponder's last pass, pause, ponderlm2)
// and the chunked readout (chunked_readout.h: ponder's pondering passes,
// adaponder, cyb, latent_cot, tah). So after the backward a method gives the
// same probabilities and argmax as before it, and an evaluation forward after
// that the same probabilities as the first one.
TEST(Readout, ProbabilitiesAfterBackwardAreUnchangedForEveryMethod) {
  for (const MethodVariant& var : method_variants()) {
    SCOPED_TRACE(var.label);
    CpuBackend<double> be;
    auto method = make_method<CpuBackend<double>>(var.method, var.apply(MethodOptions{}));
    auto m = make_model(be, preset_config("test"), *method);
    m->init_params(5);
    const Batch b = random_batch(2, 6, m->cfg.vocab, 6);
    std::vector<double> p, p2, pt, pt2;
    std::vector<int> a, a2;
    m->arena.reset();
    method->forward(*m, b, false);
    method->probabilities(*m, p);
    EXPECT_EQ(p.size(), (size_t)b.B * b.T * m->cfg.vocab);
    m->arena.reset();
    method->forward(*m, b, true);
    method->per_token_argmax(*m, a);
    method->probabilities(*m, pt);
    m->zero_grads();
    method->backward(*m, 1.0);
    method->probabilities(*m, pt2);
    method->per_token_argmax(*m, a2);
    EXPECT_EQ(pt2, pt);
    EXPECT_EQ(a2, a);
    EXPECT_FALSE(m->logits_consumed);  // no method's backward wrote dlogits over logits it kept
    m->arena.reset();
    method->forward(*m, b, false);
    EXPECT_FALSE(m->logits_consumed);
    method->probabilities(*m, p2);
    EXPECT_EQ(p2, p);  // the same evaluation forward again: the same probabilities
  }
}

// The unfused readout (Model::readout_forward, what the decoders use) can
// still be differentiated in place, dlogits over the logits, as a method
// that kept its (n, V) logits would: then its probabilities and argmax are
// refused with an error (Model::logits_consumed) instead of reading gradients
// as probabilities, and the next readout forward lifts the refusal.
TEST(Readout, LogitsTurnedIntoDlogitsAreRefusedUntilTheNextForward) {
  CpuBackend<double> be;
  auto method = make_method<CpuBackend<double>>("standard", MethodOptions{});
  auto m = make_model(be, preset_config("test"), *method);
  m->init_params(5);
  const int n = 3, D = m->cfg.dim, V = m->cfg.vocab;
  std::vector<double> x((size_t)n * D), dx((size_t)n * D, 0.0), p, p2;
  std::vector<int> a;
  for (size_t i = 0; i < x.size(); i++) x[i] = std::sin(0.7 * i + 0.1);
  m->arena.reset();
  auto ro = m->readout_forward(x.data(), n);
  probabilities_to_host(*m, ro.logits, n, p);
  EXPECT_EQ(p.size(), (size_t)n * V);
  m->zero_grads();
  m->readout_backward(ro, ro.logits, dx.data());  // the logits are dlogits now
  EXPECT_TRUE(m->logits_consumed);
  EXPECT_THROW(probabilities_to_host(*m, ro.logits, n, p2), Error);
  EXPECT_THROW(argmax_to_host(*m, ro.logits, n, a), Error);
  auto ro2 = m->readout_forward(x.data(), n);
  EXPECT_FALSE(m->logits_consumed);
  probabilities_to_host(*m, ro2.logits, n, p2);
  EXPECT_EQ(p2, p);
}

// Think before you speak with own positions: another computation than the
// shared positions (not the same loss), and a flattened sequence longer than
// the model context is a one-line error in training and in decoding.
TEST(Pause, OwnPositionsDifferAndMustFitTheContext) {
  CpuBackend<double> be;
  ModelConfig cfg = preset_config("test");  // max_seq 64
  MethodOptions shared, own;
  own.pause_positions = "own";
  auto ms = make_method<CpuBackend<double>>("pause", shared);
  auto mo = make_method<CpuBackend<double>>("pause", own);
  auto m = make_model(be, cfg, *ms);
  m->init_params(5);
  for (size_t i = 0; i < m->num_params(); i++) m->params.data()[i] *= 8;
  Batch b = random_batch(1, 16, cfg.vocab, 6);  // 4 x 16 = 64 rows: fits
  m->arena.reset();
  ms->forward(*m, b, false);
  const double ls = ms->stats(*m).loss;
  m->arena.reset();
  mo->forward(*m, b, false);
  const double lo = mo->stats(*m).loss;
  EXPECT_GT(std::abs(ls - lo), 1e-6) << ls << " vs " << lo;
  Batch big = random_batch(1, 17, cfg.vocab, 7);  // 68 rows > 64
  m->arena.reset();
  EXPECT_NO_THROW(ms->forward(*m, big, false));
  m->arena.reset();
  EXPECT_THROW(mo->forward(*m, big, false), Error);
  EXPECT_NO_THROW(ms->decoder(*m, 17));
  EXPECT_THROW(mo->decoder(*m, 17), Error);
  MethodOptions bad;
  bad.pause_positions = "token";
  EXPECT_THROW(make_method<CpuBackend<double>>("pause", bad), Error);
}
