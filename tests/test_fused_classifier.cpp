// The fused classifier (methods/fused_classifier.h) against the readout it
// replaces: final norm and head over all n rows at once (Model::readout_forward),
// log-softmax of the target, the mean over supervised rows, and the backward
// through readout_backward. Same loss, per-row NLL, argmax, probabilities,
// input gradient and head / final-norm weight gradients, at every chunk size
// (one row, a ragged last chunk, all rows in one), in double; and its
// refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "train/cpu_instances.h"
#include "method_test_util.h"
#include "methods/fused_classifier.h"
#include "methods/next_token_loss.h"
#include "methods/standard.h"

using namespace ada;
using namespace ada::test;

namespace {

using Bd = CpuBackend<double>;

struct Reference {
  double loss = 0;
  std::vector<double> nll, probs, dx, dhead, dnorm;
  std::vector<int> argmax;
};

// The unfused readout: all n x V logits at once.
Reference reference(Model<Bd>& m, const std::vector<double>& x, const std::vector<int>& y, double scale) {
  const int n = (int)y.size(), D = m.cfg.dim, V = m.cfg.vocab;
  Reference r;
  m.arena.reset();
  m.zero_grads();
  auto ro = m.readout_forward(x.data(), n);
  int cnt = 0;
  r.nll.assign(n, NAN);
  std::vector<double> lse(n), logp(n), g(n);
  std::vector<int> ids = y;
  for (int& t : ids) cnt += t >= 0;
  m.be.logsoftmax_target_forward(lse.data(), logp.data(), ro.logits, ids.data(), n, V, V);
  for (int i = 0; i < n; i++)
    if (y[i] >= 0) r.nll[i] = -logp[i], r.loss += -logp[i] / cnt;
  argmax_to_host(m, ro.logits, n, r.argmax);
  probabilities_to_host(m, ro.logits, n, r.probs);
  for (int i = 0; i < n; i++) g[i] = -scale / cnt;
  m.be.logsoftmax_target_backward(ro.logits, ro.logits, lse.data(), ids.data(), g.data(), nullptr, n, V, V);
  r.dx.assign((size_t)n * D, 0.25);  // the backward accumulates into what dx holds
  m.readout_backward(ro, ro.logits, r.dx.data());
  r.dhead.assign(m.g.head, m.g.head + (size_t)V * D);
  r.dnorm.assign(m.g.final_norm, m.g.final_norm + D);
  return r;
}

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double e = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); i++) e = std::max(e, std::fabs(a[i] - b[i]));
  return e;
}

}  // namespace

TEST(FusedClassifier, MatchesTheFullReadoutAtEveryChunkSize) {
  Bd be;
  StandardMethod<Bd> meth;
  ModelConfig cfg = preset_config("test");  // V 23, D 16
  auto m = make_model(be, cfg, meth);
  random_params(*m, 3);
  const int n = 13, D = cfg.dim;
  Rng r(7);
  std::vector<double> x((size_t)n * D);
  for (auto& v : x) v = r.normal();
  std::vector<int> y(n);
  for (int i = 0; i < n; i++) y[i] = i % 4 == 2 ? -1 : (int)r.below(cfg.vocab);  // some rows carry no loss
  const double scale = 0.7;
  const Reference ref = reference(*m, x, y, scale);

  for (int C : {1, 4, 5, 13, 100}) {
    SCOPED_TRACE("chunk rows " + std::to_string(C));
    m->classifier_chunk_rows = C;
    m->arena.reset();
    m->zero_grads();
    FusedClassifier<Bd> fc;
    fc.forward(*m, x.data(), y, true);
    EXPECT_NEAR(fc.mean(*m), ref.loss, 1e-13);
    std::vector<double> nll, probs;
    std::vector<int> am;
    fc.per_token(*m, nll);
    for (int i = 0; i < n; i++) {
      EXPECT_EQ(std::isnan(nll[i]), y[i] < 0);
      if (y[i] >= 0) {
        EXPECT_NEAR(nll[i], ref.nll[i], 1e-13);
      }
    }
    fc.argmax(*m, am);
    EXPECT_EQ(am, ref.argmax);
    std::vector<double> dx((size_t)n * D, 0.25);
    fc.backward(*m, scale, dx.data());
    EXPECT_LT(max_diff(dx, ref.dx), 1e-13);
    EXPECT_LT(max_diff(std::vector<double>(m->g.head, m->g.head + (size_t)cfg.vocab * D), ref.dhead), 1e-13);
    EXPECT_LT(max_diff(std::vector<double>(m->g.final_norm, m->g.final_norm + D), ref.dnorm), 1e-13);
    fc.probabilities(*m, probs);  // after the backward: recomputed from hn
    EXPECT_LT(max_diff(probs, ref.probs), 1e-14);
    EXPECT_THROW(fc.backward(*m, scale, dx.data()), Error);  // the gradient is added once
  }
}

// An evaluation forward computes no gradient, so it has none to give; the
// loss, argmax and probabilities are those of the training forward.
TEST(FusedClassifier, EvaluationForwardHasNoBackwardAndTheSameLoss) {
  Bd be;
  StandardMethod<Bd> meth;
  auto m = make_model(be, preset_config("test"), meth);
  random_params(*m, 4);
  m->classifier_chunk_rows = 3;
  const int n = 8, D = m->cfg.dim;
  Rng r(9);
  std::vector<double> x((size_t)n * D), dx((size_t)n * D, 0);
  for (auto& v : x) v = r.normal();
  std::vector<int> y(n);
  for (auto& t : y) t = (int)r.below(m->cfg.vocab);
  FusedClassifier<Bd> train, eval;
  m->arena.reset();
  train.forward(*m, x.data(), y, true);
  eval.forward(*m, x.data(), y, false);
  EXPECT_EQ(train.mean(*m), eval.mean(*m));
  std::vector<int> a1, a2;
  train.argmax(*m, a1), eval.argmax(*m, a2);
  EXPECT_EQ(a1, a2);
  EXPECT_EQ(eval.dhn, nullptr);
  EXPECT_THROW(eval.backward(*m, 1.0, dx.data()), Error);
  std::vector<int> bad = y;
  bad[2] = m->cfg.vocab;
  EXPECT_THROW(eval.forward(*m, x.data(), bad, false), Error);
}

// The chunk: 2^25 floats of logits by default, the environment's setting
// when given (the tests run at 5 rows), and a bad setting is one clear error.
TEST(FusedClassifier, ChunkRowsFromTheVocabularyOrTheEnvironment) {
  Bd be;
  StandardMethod<Bd> meth;
  ModelConfig cfg = preset_config("test");
  cfg.vocab = 50304;
  auto m = make_model(be, cfg, meth);
  EXPECT_EQ(m->classifier_chunk_rows, 5);  // tests/test_environment.cpp
  m->classifier_chunk_rows = 0;
  EXPECT_EQ(m->classifier_rows(), 667);  // 2^25 / 50304
  const std::string before = std::getenv("ADA_CLASSIFIER_CHUNK_ROWS");
  for (const char* bad : {"0", "-3", "12x", "many"}) {
    setenv("ADA_CLASSIFIER_CHUNK_ROWS", bad, 1);
    EXPECT_THROW(Model<Bd>::chunk_rows_from_env(), Error) << bad;
  }
  setenv("ADA_CLASSIFIER_CHUNK_ROWS", "64", 1);
  EXPECT_EQ(Model<Bd>::chunk_rows_from_env(), 64);
  setenv("ADA_CLASSIFIER_CHUNK_ROWS", before.c_str(), 1);
}
