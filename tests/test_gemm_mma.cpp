// gemm_mma_pipelined and convert_f32_to_bf16 (cuda/gemm_mma.cu) against a CPU
// double reference on the same bf16 inputs: every transposition case of
// GemmShape, shapes off the 128 x 128 x 32 tile grid, padded leading
// dimensions, the fused accumulate, split-K, the 70m config's shapes, and the
// shapes it refuses; gemm_mma_swiglu (the SwiGLU epilogue) against
// gemm_mma_pipelined followed by swiglu_forward. Under the host runner (make test) the launches are
// race-checked (docs/hostrun.md): each checked block runs twice in different
// thread orders and must leave the same device memory, and cp.async
// destinations read before their wait are poison (NaN); `make test_gpu` runs
// the same tests on the GPU.
//
// The per-slice __syncthreads of the pipeline: the race check's second run
// lets each warp run ahead to the next block barrier (Config::warp_runahead),
// so without that barrier a warp refills a stage another warp still reads
// and every test here fails with a race report (checked by deleting it; with
// warps interleaved only, as before run-ahead existed, they all passed). A
// missing or off-by-one cp.async wait reads the poison and fails every test
// here too (checked likewise).
//
// Tolerance. The inputs are bf16 values, so every product a b is exact in
// fp32; what differs from the double reference is only the fp32 rounding of
// the sums, in whatever order the tensor cores and the split-K reduction add.
// Any order of K additions is within K u sum_k |a_k b_k| of the exact sum
// (u = 2^-24, the classical bound), so each element is checked against
// 2 K u sum |a b| (plus the rounding of an accumulated C): a wrong fragment,
// a missed slice or a stale stage is off by O(|a b|), far outside it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bf16_bits.h"
#include "compat.h"
#include "cuda_test_array.h"
#include "gemm_mma.h"
#include "kernels.h"
#include "race_checked.h"

#if defined(ADA_HOSTRUN)
#include "hostrun/scheduler.h"
#endif

namespace {

using ada::cuda::GemmShape;
using ada::test::bf16_rne;
using ada::test::DeviceArray;
using ada::test::from_bf16;

const __nv_bfloat16* as_bf16(const DeviceArray<uint16_t>& a) {
  return reinterpret_cast<const __nv_bfloat16*>(a.get());
}

GemmShape shape(bool ta, bool tb, int M, int N, int K, int pad = 0, int cpad = 0) {
  GemmShape g;
  g.trans_a = ta, g.trans_b = tb, g.M = M, g.N = N, g.K = K;
  g.lda = (ta ? M : K) + pad;
  g.ldb = (tb ? K : N) + pad;
  g.ldc = N + cpad;
  return g;
}

std::string describe(const GemmShape& g) {
  return std::string(g.trans_a ? "A^T" : "A") + (g.trans_b ? " B^T " : " B ") + std::to_string(g.M) + "x" +
         std::to_string(g.N) + "x" + std::to_string(g.K) + " ld " + std::to_string(g.lda) + "," +
         std::to_string(g.ldb) + "," + std::to_string(g.ldc);
}

// bf16 values of a normal sample (scale 1), as their encodings.
std::vector<uint16_t> random_bf16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = bf16_rne(dist(rng));
  return v;
}

// Runs gemm_mma_pipelined on random operands and checks every element of C
// (and that the columns of C between N and ldc are left alone).
void check_gemm(const GemmShape& g, bool accumulate, int splits, uint32_t seed) {
  SCOPED_TRACE(describe(g) + (accumulate ? " accumulate" : "") + " splits " + std::to_string(splits));
  const size_t a_rows = g.trans_a ? g.K : g.M, b_rows = g.trans_b ? g.N : g.K;
  const std::vector<uint16_t> A = random_bf16(a_rows * g.lda, seed), B = random_bf16(b_rows * g.ldb, seed + 1);
  std::vector<float> C0(size_t(g.M) * g.ldc);
  {
    std::mt19937 rng(seed + 2);
    std::normal_distribution<float> dist(0.0f, 4.0f);
    for (auto& x : C0) x = dist(rng);
  }
  DeviceArray<uint16_t> dA(A), dB(B);
  DeviceArray<float> dC(C0);
  const int s = splits <= 0 ? ada::cuda::gemm_mma_pipelined_auto_splits(g) : splits;
  DeviceArray<float> work(std::max<size_t>(1, ada::cuda::gemm_mma_pipelined_work_bytes(g, s) / sizeof(float)));
  ada::cuda::gemm_mma_pipelined(nullptr, g, as_bf16(dA), as_bf16(dB), dC.get(), accumulate, work.get(), splits);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> got = dC.download();

  auto a = [&](int m, int k) { return double(from_bf16(g.trans_a ? A[size_t(k) * g.lda + m] : A[size_t(m) * g.lda + k])); };
  auto b = [&](int k, int n) { return double(from_bf16(g.trans_b ? B[size_t(n) * g.ldb + k] : B[size_t(k) * g.ldb + n])); };
  const double u = std::ldexp(1.0, -24);
  int bad = 0;
  for (int m = 0; m < g.M; ++m) {
    for (int n = 0; n < g.N; ++n) {
      double want = 0, mag = 0;
      for (int k = 0; k < g.K; ++k) {
        const double p = a(m, k) * b(k, n);
        want += p, mag += std::fabs(p);
      }
      const double c0 = C0[size_t(m) * g.ldc + n];
      if (accumulate) want += c0;
      const double tol = 2.0 * (g.K + 1) * u * (mag + (accumulate ? std::fabs(c0) : 0.0)) + 1e-30;
      const double v = got[size_t(m) * g.ldc + n];
      if (!(std::fabs(v - want) <= tol) && bad++ < 5)
        ADD_FAILURE() << "C[" << m << "][" << n << "] = " << v << ", want " << want << " (tolerance " << tol << ")";
    }
    for (int n = g.N; n < g.ldc; ++n)
      if (got[size_t(m) * g.ldc + n] != C0[size_t(m) * g.ldc + n] && bad++ < 5)
        ADD_FAILURE() << "C[" << m << "][" << n << "] past N was written";
  }
  EXPECT_EQ(bad, 0) << "elements out of tolerance";
}

void expect_error(const std::function<void()>& body, const std::string& needle) {
  try {
    body();
    ADD_FAILURE() << "expected ada::Error containing '" << needle << "', nothing was thrown";
  } catch (const ada::Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message was: " << e.what();
  }
}

// All four GemmShape cases on shapes off the tile grid: M, N not multiples of
// 128 (two block rows and columns, the second partial), K not a multiple of
// the 32-deep slice (the last slice's upper chunks zero-filled), and tiny ones.
TEST(GemmMmaPipelined, EveryLayoutOffTheTileGrid) {
  RaceChecked rc;
  uint32_t seed = 1;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_gemm(shape(ta, tb, 136, 144, 104), false, 1, seed += 3);
      check_gemm(shape(ta, tb, 8, 8, 8), false, 1, seed += 3);
    }
  // M and N free where they are not the contiguous dimension (y = x W^T).
  check_gemm(shape(false, true, 37, 53, 40), false, 1, seed += 3);
}

// C += op(A) op(B): the backend's gradient accumulation and residual adds.
// Leading dimensions longer than the rows; an odd ldc takes the scalar stores.
TEST(GemmMmaPipelined, AccumulateAndPaddedLeadingDimensions) {
  RaceChecked rc;
  uint32_t seed = 100;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_gemm(shape(ta, tb, 72, 136, 48, 8, 2), true, 1, seed += 3);
      check_gemm(shape(ta, tb, 40, 24, 64, 16, 3), true, 1, seed += 3);
    }
}

// Split-K: slices of K write partial products to the workspace, added in
// order; with and without accumulate, and the automatic choice.
TEST(GemmMmaPipelined, SplitK) {
  RaceChecked rc;
  check_gemm(shape(false, true, 40, 48, 296), false, 3, 200);  // 10 slices -> 3 splits of 4, 4, 2
  check_gemm(shape(true, false, 48, 40, 296), true, 3, 203);
  check_gemm(shape(false, false, 24, 40, 72), true, 8, 206);  // more splits than slices: 3
  const GemmShape deep = shape(true, false, 64, 64, 1024);
  EXPECT_EQ(ada::cuda::gemm_mma_pipelined_auto_splits(deep), 2);
  check_gemm(deep, false, 0, 209);
}

// The 70m config (D = 512, F = 1408) with few rows: the forward of gate_up
// (y = x W^T, N = 2F), the backward dx of down (dx = dy W, K = D, N = F) and
// the weight gradient of wo (dW = dy^T x, K = rows, not a multiple of 32).
TEST(GemmMmaPipelined, SeventyMShapes) {
  RaceChecked rc;
  const int rows = 24, D = 512, F = 1408;
  check_gemm(shape(false, true, rows, 2 * F, D), false, 1, 300);
  check_gemm(shape(false, false, rows, F, D), true, 1, 301);
  check_gemm(shape(true, false, D, D, rows), true, 1, 302);
  // At a full batch (16 x 1024 rows) the weight gradients split K, the rest not.
  EXPECT_EQ(ada::cuda::gemm_mma_pipelined_auto_splits(shape(true, false, D, D, 16384)), 16);
  EXPECT_EQ(ada::cuda::gemm_mma_pipelined_auto_splits(shape(false, true, 16384, 2 * F, D)), 1);
}

TEST(GemmMmaPipelined, RefusesShapesItCannotCopy) {
  DeviceArray<uint16_t> d(4096);
  DeviceArray<float> c(4096);
  const __nv_bfloat16* p = as_bf16(d);
  auto run = [&](const GemmShape& g, const __nv_bfloat16* a = nullptr, int splits = 1, void* work = nullptr) {
    return [&, g, a, splits, work] {
      ada::cuda::gemm_mma_pipelined(nullptr, g, a ? a : p, p, c.get(), false, work, splits);
    };
  };
  expect_error(run(shape(false, true, 16, 16, 12)), "K must be a positive multiple of 8 (got A B^T, 16 x 16 x 12");
  expect_error(run(shape(false, true, 16, 16, 0)), "K must be a positive multiple of 8");
  expect_error(run(shape(false, true, 16, 16, 8, 4)), "lda and ldb must be multiples of 8");
  expect_error(run(shape(false, true, 16, 16, 8), p + 4), "16-byte aligned");
  GemmShape ta = shape(true, true, 20, 16, 8), nb = shape(false, false, 16, 20, 8);
  ta.lda = 24, nb.ldb = 24;  // aligned rows: the contiguous extent itself is refused
  expect_error(run(ta), "with trans_a, M must be a multiple of 8");
  expect_error(run(nb), "without trans_b, N must be a multiple of 8");
  expect_error(run(shape(false, true, 16, 16, 64), nullptr, 2), "split-K needs a workspace");
}

// gemm_mma_swiglu against the two kernels it fuses: gu must be bit-identical
// to gemm_mma_pipelined's x W^T (same tiles, slices and sums; no split) and
// act to swiglu_forward of that gu, on shapes off the tile grid (M not a
// multiple of 128, F not of 64, odd F: scalar stores, K not of 32) and at the
// 70m config's shape. Compared as bits: any fragment or unit mapped to the
// wrong column shows as a different value, not a rounding.
void check_swiglu(int M, int K, int F, uint32_t seed) {
  SCOPED_TRACE("M " + std::to_string(M) + " K " + std::to_string(K) + " F " + std::to_string(F));
  const std::vector<uint16_t> X = random_bf16(size_t(M) * K, seed), W = random_bf16(size_t(2 * F) * K, seed + 1);
  DeviceArray<uint16_t> dX(X), dW(W);
  const std::vector<float> poison(size_t(M) * 2 * F, 12345.0f);
  DeviceArray<float> gu(poison), act(std::vector<float>(size_t(M) * F, 12345.0f)), gu_ref(poison),
      act_ref(size_t(M) * F);
  ada::cuda::gemm_mma_swiglu(nullptr, as_bf16(dX), K, as_bf16(dW), K, M, K, F, gu.get(), act.get());
  ada::cuda::gemm_mma_pipelined(nullptr, shape(false, true, M, 2 * F, K), as_bf16(dX), as_bf16(dW), gu_ref.get(),
                                false, nullptr, 1);
  ada::cuda::swiglu_forward(nullptr, act_ref.get(), gu_ref.get(), M, F);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> g = gu.download(), gr = gu_ref.download(), a = act.download(), ar = act_ref.download();
  int bad = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (std::memcmp(&g[i], &gr[i], sizeof(float)) != 0 && bad++ < 5)
      ADD_FAILURE() << "gu[" << i / (2 * F) << "][" << i % (2 * F) << "] = " << g[i] << ", gemm gives " << gr[i];
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &ar[i], sizeof(float)) != 0 && bad++ < 5)
      ADD_FAILURE() << "act[" << i / F << "][" << i % F << "] = " << a[i] << ", swiglu_forward gives " << ar[i];
  EXPECT_EQ(bad, 0);
  // And the product itself against the exact sum, so the comparison above is
  // not between two equally wrong kernels (element 0 and the last one).
  for (const size_t i : {size_t(0), g.size() - 1}) {
    const int m = int(i / (2 * F)), n = int(i % (2 * F));
    double want = 0, mag = 0;
    for (int k = 0; k < K; ++k) {
      const double p = double(from_bf16(X[size_t(m) * K + k])) * from_bf16(W[size_t(n) * K + k]);
      want += p, mag += std::fabs(p);
    }
    EXPECT_NEAR(g[i], want, 2.0 * K * std::ldexp(1.0, -24) * mag + 1e-30) << "gu[" << m << "][" << n << "]";
  }
}

TEST(GemmMmaSwiglu, BitIdenticalToGemmThenSwiglu) {
  RaceChecked rc;
  check_swiglu(130, 40, 70, 400);  // two block rows and columns, both partial
  check_swiglu(17, 24, 37, 401);   // odd F: no float2 stores, the last unit alone
  check_swiglu(1, 8, 3, 402);      // one row, one chunk of K
  check_swiglu(24, 512, 1408, 403);  // 70m: D 512, F 1408 (22 blocks of 64 units)
}

TEST(GemmMmaSwiglu, RefusesShapesItCannotCopy) {
  DeviceArray<uint16_t> d(4096);
  DeviceArray<float> c(4096), a(4096);
  const __nv_bfloat16* p = as_bf16(d);
  auto run = [&](int ldx, int K, int F, const __nv_bfloat16* x) {
    return [&, ldx, K, F, x] { ada::cuda::gemm_mma_swiglu(nullptr, x, ldx, p, K, 4, K, F, c.get(), a.get()); };
  };
  expect_error(run(12, 12, 8, p), "K must be a positive multiple of 8 (got 4 x 2*8 x 12");
  expect_error(run(12, 8, 8, p), "ldx and ldw must be multiples of 8");
  expect_error(run(8, 8, 8, p + 4), "16-byte aligned");
  expect_error(run(8, 8, 0, p), "F must be positive");
}

TEST(GemmMmaPipelined, ConvertRoundsToNearestEven) {
  std::vector<float> x = {0.0f, -0.0f, 1.0f, -2.5f, 3.14159f, 1e-30f, -1e30f, INFINITY, -INFINITY, 65504.0f};
  // Ties: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 (to even: 1); 1 + 3 2^-8
  // between 1 + 2^-7 and 1 + 2^-6 (to even: 1 + 2^-6).
  x.push_back(1.0f + std::ldexp(1.0f, -8));
  x.push_back(1.0f + 3 * std::ldexp(1.0f, -8));
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 10.0f);
  for (int i = 0; i < 1000; ++i) x.push_back(dist(rng));
  DeviceArray<float> dx(x);
  DeviceArray<uint16_t> dy(x.size());
  ada::cuda::convert_f32_to_bf16(nullptr, reinterpret_cast<__nv_bfloat16*>(dy.get()), dx.get(), x.size());
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint16_t> y = dy.download();
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], bf16_rne(x[i])) << "x = " << x[i];
  EXPECT_EQ(from_bf16(y[10]), 1.0f);
  EXPECT_EQ(from_bf16(y[11]), 1.0f + std::ldexp(1.0f, -6));
}

}  // namespace
