// Float vs double on the same model and batch (the float path is what
// trains), and KV-cached decoding vs the full training-style forward.
#include <gtest/gtest.h>

#include "train/cpu_instances.h"
#include "gradcheck.h"
#include "method_test_util.h"
#include "method_variants.h"
#include "methods/registry.h"

using namespace ada;
using namespace ada::test;

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
    Md->zero_grads(), Mf->zero_grads();
    md->forward(*Md, b, true);
    mf->forward(*Mf, b, true);
    md->backward(*Md, 1.0);
    mf->backward(*Mf, 1.0);
    const double ld = md->stats(*Md).loss, lf = mf->stats(*Mf).loss;
    EXPECT_LT(std::abs(ld - lf) / std::abs(ld), 1e-4) << "loss " << ld << " vs " << lf;
    for (auto& p : Md->layout.tensors()) {
      std::vector<double> a(Md->grads.data() + p.offset, Md->grads.data() + p.offset + p.numel);
      std::vector<double> f(Mf->grads.data() + p.offset, Mf->grads.data() + p.offset + p.numel);
      EXPECT_LT(grad_error(f, a), 1e-4) << p.name;
    }
  }
}

// Feeding a sequence token by token through the decoder (KV caches) gives the
// same next-token distribution at every position as the full forward pass.
TEST(Decode, CachedDecodingMatchesFullForward) {
  for (const MethodVariant& var : method_variants()) {
    const std::string& name = var.method;
    SCOPED_TRACE(var.label);
    const MethodOptions mo = var.apply(MethodOptions());
    CpuBackend<double> be;
    auto method = make_method<CpuBackend<double>>(name, mo);
    ModelConfig cfg = preset_config("test");
    auto m = make_model(be, cfg, *method);
    m->init_params(3);
    // larger weights than init so the distributions are far from uniform
    for (size_t i = 0; i < m->num_params(); i++) m->params.data()[i] *= 8;
    const int T = 11;
    Batch b = random_batch(1, T, cfg.vocab, 4);
    m->arena.reset();
    method->forward(*m, b, false);
    std::vector<double> full;
    method->probabilities(*m, full);
    auto dec = method->decoder(*m, T);
    double max_diff = 0, max_p = 0;
    for (int t = 0; t < T; t++) {
      const std::vector<double>& p = dec->step(b.inputs[t]);
      ASSERT_EQ((int)p.size(), cfg.vocab);
      for (int v = 0; v < cfg.vocab; v++) {
        max_diff = std::max(max_diff, std::abs(p[v] - full[(size_t)t * cfg.vocab + v]));
        max_p = std::max(max_p, p[v]);
      }
    }
    EXPECT_LT(max_diff, 1e-12);
    EXPECT_GT(max_p, 2.0 / cfg.vocab);  // not a uniform distribution
  }
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
