// How the blocks' saved activations are stored (src/ops/saved_store.h,
// Model::Saved): the bf16 rounding itself, the strided block moves, and
// whole steps with --bf16-acts against the same steps in fp32 storage.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "method_test_util.h"
#include "methods/registry.h"
#include "ops/saved_store.h"
#include "train/cpu_instances.h"

using namespace ada;
using ada::test::random_batch;
using ada::test::random_params;

namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

TEST(SavedStore, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 (bf16 keeps 7 fraction bits):
  // the tie goes to the even significand (1); 1 + 3 2^-8 lies halfway between
  // 1 + 2^-7 (odd) and 1 + 2^-6 (even)
  EXPECT_EQ(bf16_round(1.0f), 0x3f80);
  EXPECT_EQ(bf16_round(1.0f + 0x1p-8f), 0x3f80);
  EXPECT_EQ(bf16_round(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(bf16_round(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);  // above the tie: up
  EXPECT_EQ(bf16_round(-(1.0f + 0x1p-7f)), 0xbf81);          // exact: kept
  EXPECT_EQ(bf16_round(0.0f), 0x0000);
  EXPECT_EQ(bf16_round(-0.0f), 0x8000);
  EXPECT_EQ(bf16_round(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(bf16_round(std::numeric_limits<float>::max()), 0x7f80);  // beyond bf16's largest + half an ulp
  EXPECT_EQ(bf16_round(from_bits(0x00000001)), 0x0000);               // the smallest subnormal: to zero
  EXPECT_EQ(bf16_round(from_bits(0x00018000)), 0x0002);               // subnormal tie, to even
  const uint16_t nan = bf16_round(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(bf16_widen(nan)));
  EXPECT_TRUE(std::isnan(bf16_widen(bf16_round(from_bits(0x7f800001)))));  // a signalling NaN's payload
                                                                            // is in the low bits: still NaN
  // Against the definition, on random floats of every exponent: the result
  // is one of the two bf16 neighbours, the nearer one, and on a tie the even.
  Rng r(7);
  for (int i = 0; i < 200000; i++) {
    const uint32_t u = (uint32_t)r.next_u64();
    const float f = from_bits(u);
    if (!std::isfinite(f)) continue;
    const uint16_t h = bf16_round(f);
    const double lo = bf16_widen((uint16_t)(u >> 16)), hi = bf16_widen((uint16_t)((u >> 16) + 1));  // toward 0, away
    const double got = bf16_widen(h);
    // past the largest finite bf16 the next value "away" is infinity, which
    // rounding treats as 2^128 (the next power of two) when measuring distance
    const double hi_at = std::isinf(hi) ? std::copysign(0x1p128, (double)f) : hi;
    const double dlo = std::abs((double)f - lo), dhi = std::abs(hi_at - (double)f);
    if (dlo < dhi)
      ASSERT_EQ(got, lo) << std::hexfloat << f;
    else if (dhi < dlo)
      ASSERT_EQ(got, hi) << std::hexfloat << f;
    else
      ASSERT_EQ(h & 1, 0) << std::hexfloat << f << ": a tie goes to the even significand";
  }
  // Every bf16 value widens to itself and rounds back to itself.
  for (uint32_t h = 0; h < 0x10000; h++) {
    const float w = bf16_widen((uint16_t)h);
    if (std::isnan(w)) continue;
    ASSERT_EQ(bits(w), h << 16);
    ASSERT_EQ(bf16_round(w), h);
  }
}

TEST(SavedStore, BlockMovesTouchOnlyTheirColumns) {
  const int n = 5, w = 3, lds = 7, ldd = 4;
  std::vector<float> src(n * lds), dst(n * ldd, -9.0f), back(n * ldd, -9.0f);
  for (size_t i = 0; i < src.size(); i++) src[i] = 0.1f * (float)i - 1.3f;
  copy_block(dst.data(), ldd, src.data() + 2, lds, n, w);  // columns 2..4 of src
  std::vector<uint16_t> h(n * ldd, 0xabcd);
  to_bf16(h.data(), ldd, src.data() + 2, lds, n, w);
  from_bf16(back.data(), ldd, h.data(), ldd, n, w);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < ldd; j++) {
      if (j < w) {
        EXPECT_EQ(dst[i * ldd + j], src[i * lds + 2 + j]);
        EXPECT_EQ(h[i * ldd + j], bf16_round(src[i * lds + 2 + j]));
        EXPECT_EQ(back[i * ldd + j], bf16_widen(bf16_round(src[i * lds + 2 + j])));
        EXPECT_LE(std::abs(back[i * ldd + j] - src[i * lds + 2 + j]), std::abs(src[i * lds + 2 + j]) * 0x1p-8f);
      } else {
        EXPECT_EQ(dst[i * ldd + j], -9.0f);  // the padding columns are left alone
        EXPECT_EQ(h[i * ldd + j], 0xabcd);
        EXPECT_EQ(back[i * ldd + j], -9.0f);
      }
    }
}

namespace {

struct StepOut {
  double loss = 0;
  std::vector<float> grads;
  size_t held_after_forward = 0, peak = 0;
  std::vector<ParamInfo> tensors;
};

StepOut float_step(const std::string& name, const MethodOptions& mo, bool bf16_acts, int B = 2, int T = 16) {
  using Bk = CpuBackend<float>;
  Bk be;
  ModelConfig cfg = preset_config("test");
  const Batch b = random_batch(B, T, cfg.vocab, 9);
  auto meth = make_method<Bk>(name, mo);
  auto m = make_model(be, cfg, *meth);
  random_params(*m, 5);
  m->bf16_acts = bf16_acts;
  meth->set_step(60, 100);
  m->arena.reset();
  m->zero_grads();
  meth->forward(*m, b, true);
  StepOut o;
  o.held_after_forward = m->arena.used();
  meth->backward(*m, 1.0);
  o.loss = meth->stats(*m).loss;
  o.grads.assign(m->grads.data(), m->grads.data() + m->num_params());
  o.peak = m->arena.step_peak();
  o.tensors = m->layout.tensors();
  return o;
}

}  // namespace

// Every method, one training step in float with the saved q, att and gu in
// bf16 against the same step keeping them in float. The forward computes in
// float either way (it rounds only what it saves), so the loss is the same to
// the bit; the backward reads rounded values, so each gradient tensor moves,
// by about bf16's rounding (at most 2^-8 relative per value), far below the differences that a
// wrong read (a stale or misplaced row) would make.
TEST(SavedStore, Bf16ActsKeepTheForwardAndMoveGradientsByRounding) {
  for (const std::string& name : method_names()) {
    SCOPED_TRACE(name);
    MethodOptions mo;
    mo.iters = 2, mo.ponder_steps = 3, mo.pauses = 2;
    if (name == "adaponder") mo.ada.tau = 0.5;  // pruned and compacted later passes
    const StepOut f = float_step(name, mo, false), h = float_step(name, mo, true);
    EXPECT_EQ(f.loss, h.loss) << "the forward must not change";
    ASSERT_EQ(f.grads.size(), h.grads.size());
    double worst = 0;
    size_t differ = 0;
    for (const ParamInfo& p : f.tensors) {
      double d = 0, a = 0;
      for (size_t i = p.offset; i < p.offset + p.numel; i++) {
        d = std::max(d, (double)std::abs(f.grads[i] - h.grads[i]));
        a = std::max(a, (double)std::abs(f.grads[i]));
        differ += f.grads[i] != h.grads[i];
      }
      if (a > 0) worst = std::max(worst, d / a);
      if (a > 0) EXPECT_LT(d / a, 1e-2) << p.name << ": max |diff| " << d << " of max |grad| " << a;
    }
    EXPECT_GT(differ, 0u) << "bf16 storage must change the backward's inputs";
    if (std::getenv("ADA_VERBOSE")) std::printf("  %-12s worst tensor error %.2e\n", name.c_str(), worst);
    EXPECT_LT(h.held_after_forward, f.held_after_forward) << "bf16 storage must hold less after the forward";
    EXPECT_LE(h.peak, f.peak);
  }
}

// What the forward holds for the backward, exactly: per layer and row, q, att
// and gu (2D + 2F values) in 2 bytes instead of 4, each buffer rounded up to
// the arena's 256 bytes. Standard runs one pass of N = B T rows. The backward
// widens one layer's values at a time into one buffer of max(2F, 2D) per
// row (4 max(2F, 2D) bytes against the 2 L (2D + 2F) saved), so the peak
// falls too.
TEST(SavedStore, Bf16ActsHalveTheBlocksLargestSavedTensors) {
  const int B = 4, T = 32;
  const StepOut f = float_step("standard", MethodOptions{}, false, B, T);
  const StepOut h = float_step("standard", MethodOptions{}, true, B, T);
  const ModelConfig cfg = preset_config("test");
  const size_t N = (size_t)B * T, D = cfg.dim, F = cfg.hidden;
  auto r = [](size_t bytes) { return (bytes + 255) & ~size_t(255); };
  const size_t saved_f = 2 * r(N * D * 4) + r(N * 2 * F * 4), saved_h = 2 * r(N * D * 2) + r(N * 2 * F * 2);
  EXPECT_EQ(f.held_after_forward - h.held_after_forward, (size_t)cfg.layers * (saved_f - saved_h));
  EXPECT_LT(h.peak, f.peak);
}
