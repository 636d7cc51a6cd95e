// The step arena (src/backend/arena.h): allocations never overlap, a request
// that does not fit the newest block uses the room left in earlier ones
// (first fit), reset() merges the blocks into one that holds the whole step,
// after which the same step allocates nothing, and the peaks are tracked;
// scratch scopes release (and poison) what they allocated, so a method's
// backward holds one pass's temporaries at a time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

#include "backend/arena.h"
#include "backend/cpu_backend.h"
#include "method_test_util.h"
#include "methods/registry.h"
#include "train/cpu_instances.h"
#include "train/memory_budget.h"

using namespace ada;

namespace {
using Be = CpuBackend<float>;

// The byte ranges of one step's allocations (sizes in floats), filled with
// their index so that an overlap shows as a wrong value.
std::vector<std::pair<float*, size_t>> one_step(Arena<Be>& a, const std::vector<size_t>& sizes) {
  std::vector<std::pair<float*, size_t>> got;
  for (size_t i = 0; i < sizes.size(); i++) {
    float* p = a.alloc<float>(sizes[i]);
    std::fill(p, p + sizes[i], float(i));
    got.push_back({p, sizes[i]});
  }
  return got;
}

void expect_disjoint(const std::vector<std::pair<float*, size_t>>& got) {
  for (size_t i = 0; i < got.size(); i++) {
    for (size_t k = 0; k < got[i].second; k++) ASSERT_EQ(got[i].first[k], float(i)) << "allocation " << i;
    for (size_t j = i + 1; j < got.size(); j++) {
      const bool apart = got[i].first + got[i].second <= got[j].first || got[j].first + got[j].second <= got[i].first;
      EXPECT_TRUE(apart) << "allocations " << i << " and " << j << " overlap";
    }
  }
}
}  // namespace

TEST(Arena, FirstFitMergeAndPeaks) {
  Be be;
  Arena<Be> a(be, 4096);  // one block of 4 KiB
  // 600 floats (2400 B) fit the first block; 1000 (4000 B) do not fit what is
  // left and open a second block; 300 (1200 B) fit the first block's tail.
  const std::vector<size_t> sizes = {600, 1000, 300, 10, 2000, 5};
  const auto got = one_step(a, sizes);
  expect_disjoint(got);
  const size_t first_block_capacity = 4096;
  auto in_first_block = [&](float* p) {
    return std::any_of(got.begin(), got.begin() + 1, [&](auto& g) {
      return (char*)p >= (char*)g.first && (char*)p < (char*)g.first + first_block_capacity;
    });
  };
  EXPECT_TRUE(in_first_block(got[2].first)) << "the 1200-byte request should use the first block's tail";
  size_t used = 0;
  for (size_t s : sizes) used += (s * sizeof(float) + 255) / 256 * 256;
  EXPECT_EQ(a.peak_used(), used);
  EXPECT_GE(a.peak_capacity(), used);
  EXPECT_EQ(a.peak_capacity(), a.capacity());
  // reset merges into one block with 1/8 headroom; the same step then fits.
  a.reset();
  const size_t merged = a.capacity();
  EXPECT_GE(merged, used + used / 8);
  EXPECT_LT(merged, used + used / 8 + 256);
  expect_disjoint(one_step(a, sizes));
  EXPECT_EQ(a.capacity(), merged);
  a.reset();
  EXPECT_EQ(a.capacity(), merged);
  EXPECT_EQ(a.peak_used(), used);
}

// Scratch scopes: what a scope allocates is released when it ends (last in,
// first out), the next allocation reuses those bytes, the peak counts the
// most in use at once, and reset() sizes the merged block by that peak.
TEST(Arena, ScopesReleaseAndPoison) {
  ASSERT_STREQ(std::getenv("ADA_ARENA_POISON"), "1") << "tests/test_environment.cpp sets it for every test";
  Be be;
  Arena<Be> a(be, 4096);
  a.alloc<float>(64);  // 256 B, kept to the end
  float* tmp = nullptr;
  {
    auto s = a.scope();
    tmp = a.alloc<float>(256);  // 1024 B
    std::fill(tmp, tmp + 256, 1.0f);
    EXPECT_EQ(a.used(), 256u + 1024u);
  }
  EXPECT_EQ(a.used(), 256u);
#ifdef ADA_ARENA_ASAN
  // Under AddressSanitizer the released bytes are off limits: reading them would be reported.
  EXPECT_TRUE(__asan_address_is_poisoned(tmp) && __asan_address_is_poisoned(tmp + 255))
      << "released bytes are ASan-poisoned";
#else
  EXPECT_TRUE(std::isnan(tmp[0]) && std::isnan(tmp[255])) << "released bytes are poisoned";
#endif
  float* again = a.alloc<float>(256);
  EXPECT_EQ(again, tmp) << "the next allocation reuses the released bytes";
  EXPECT_EQ(a.peak_used(), 256u + 1024u);
  // A scope that opens a second block (4096 B do not fit the first) releases it too.
  {
    auto s = a.scope();
    float* big = a.alloc<float>(1024);
    EXPECT_NE(big, nullptr);
    EXPECT_GT(a.capacity(), 4096u);
    EXPECT_EQ(a.used(), 256u + 1024u + 4096u);
  }
  EXPECT_EQ(a.used(), 256u + 1024u);
  // The step's peak (5376 B) sizes the merged block, not what was in use at reset.
  a.reset();
  const size_t peak = 256 + 1024 + 4096;
  EXPECT_GE(a.capacity(), peak + peak / 8);
  EXPECT_LT(a.capacity(), peak + peak / 8 + 256);
}

// What a method's backward adds on top of what its forward saved is one
// pass's temporaries, whatever the number of passes: the scratch scopes
// release each pass's dlogits, recomputed probabilities and layer gradients
// before the next pass's backward, and the classifier's backward reuses the
// logits. Before the scopes, ponder's backward grew by about three (n, V)
// buffers per pass.
namespace {
size_t backward_extra(const std::string& name, int passes) {
  CpuBackend<float> be;
  MethodOptions o;
  o.iters = passes - 1;
  o.ponder_steps = passes - 1;
  auto method = make_method<CpuBackend<float>>(name, o);
  auto m = make_model(be, preset_config("test"), *method);
  const Batch b = ada::test::random_batch(2, 16, m->cfg.vocab, 3);
  m->arena.reset();
  method->forward(*m, b, true);
  const size_t after_forward = m->arena.used();
  method->backward(*m, 1.0);
  return m->arena.step_peak() - after_forward;
}
}  // namespace

TEST(Arena, BackwardHoldsOnePassOfTemporaries) {
  for (const std::string name : {"ponder", "looped"}) {
    const size_t two = backward_extra(name, 2), five = backward_extra(name, 5);
    EXPECT_GT(two, 0u) << name;
    EXPECT_EQ(five, two) << name << ": the backward's peak over the forward grows with the passes";
  }
}

// What one pass of the block stack keeps for its backward: per row and layer
// rstd1, q, att, lse, x_mid, rstd2, gu and x_out, that is 4D + 2F + H + 2
// values, plus the plan's three small index arrays. Of q | k | v only q is
// kept (k and v are in the KV store), and the normalised inputs of the two
// RMSNorms and the SwiGLU output (2D + F more) are recomputed by the
// backward (selective recomputation, Model::LayerActs), so a forward that
// kept any of them would fail here. With bf16_acts, q, att and gu (2D + 2F)
// take 2 bytes a value instead of 4. N is a multiple of 64 rows, so every
// per-layer buffer is a whole number of the arena's 256-byte units.
TEST(Arena, PassSavesOnlyWhatTheBackwardCannotRecompute) {
  CpuBackend<float> be;
  const ModelConfig cfg = preset_config("test");
  ParamLayout lay;
  add_backbone_params(lay, cfg);
  lay.finalize();
  Model<CpuBackend<float>> m(be, cfg, lay);
  m.init_params(1);
  const int B = 4, T = 16, N = B * T, D = cfg.dim, F = cfg.hidden, H = cfg.heads;
  for (bool half : {false, true}) {
    SCOPED_TRACE(half ? "bf16_acts" : "fp32 storage");
    m.bf16_acts = half;
    m.arena.reset();
    KvStore<CpuBackend<float>> kv;
    kv.init(be, m.arena, B, T, cfg.layers, D, kAnyDepth, false);
    float* x = m.zeros((size_t)N * D);
    const size_t before = m.arena.used();
    auto acts = m.forward_pass(PassPlan::dense(B, T, T), kv, x);
    const size_t saved = m.arena.used() - before;
    const size_t index_bytes = 2 * 256 + 256;  // slot, pos (N ints each) and qstart (B + 1), each rounded up
    const size_t per_layer = sizeof(float) * (size_t)N * (2 * D + H + 2) + (half ? 2 : 4) * (size_t)N * (2 * D + 2 * F);
    EXPECT_EQ(saved, index_bytes + cfg.layers * per_layer)
        << "a pass saved " << saved << " bytes; 4D + 2F + H + 2 values per row and layer would be "
        << index_bytes + cfg.layers * per_layer;
    EXPECT_EQ(acts.layers.size(), (size_t)cfg.layers);
  }
}

// The memory check that refuses a run before anything is allocated
// (train/memory_budget.h) must never refuse one that fits: its activation
// estimate is a lower bound of what a training step of every method really
// holds at its peak, at the test model's vocabulary and at one where the
// logits dominate, with the default classifier chunk (all rows here).
TEST(Arena, MemoryEstimateIsALowerBoundOfEveryMethodsPeak) {
  for (const int vocab : {23, 4096}) {
    for (const std::string& name : method_names()) {
      SCOPED_TRACE(name + ", V " + std::to_string(vocab));
      CpuBackend<float> be;
      auto method = make_method<CpuBackend<float>>(name, MethodOptions{});
      ModelConfig cfg = preset_config("test");
      cfg.vocab = vocab;
      auto m = make_model(be, cfg, *method);
      m->init_params(1);
      m->classifier_chunk_rows = 0;  // the default chunk, which the estimate assumes, not the tests' 5 rows
      const int B = 2, T = 16;
      const Batch b = ada::test::random_batch(B, T, vocab, 3);
      m->arena.reset();
      method->forward(*m, b, true);
      method->backward(*m, 1.0);
      const double estimate = activation_bytes(cfg, (double)B * T, method->max_passes(), sizeof(float), true);
      EXPECT_LE(estimate, (double)m->arena.step_peak()) << "the estimate would refuse a step that fits";
    }
  }
}
