// The warp-level tensor-core primitives of cuda/warp_mma.h, layout by layout,
// against scalar references. Each kernel indexes fragments with the PTX ISA's
// formulas, written here again in the ISA's own per-element form (a_i, b_i,
// c_i), independently of the runner's emulation (cuda/hostrun/mma.h). In
// `make test` they run under the host runner; `make test_gpu` builds this file
// with nvcc and runs the same kernels on the GPU's real instructions, which is
// what shows that the emulation's layouts are the hardware's.
//
// Test data are small multiples of powers of two, so every product and partial
// sum is exact in fp32: the GPU (fp32 accumulation in any order) and the runner
// (double) must give the same bits, and the checks are exact.
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
#include "launch.h"
#include "warp_mma.h"

namespace {

using ada::cuda::pack_b16x2;
using ada::test::DeviceArray;
using ada::test::from_bf16;


uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// 16-bit encodings of values that are exact in them (checked).
uint16_t to_bf16(float v) {
  const uint32_t u = float_to_bits(v);
  EXPECT_EQ(u & 0xffffu, 0u) << v << " is not a bf16 value";
  return static_cast<uint16_t>(u >> 16);
}

uint16_t to_f16(float v) {  // normal values and zero only
  if (v == 0.0f) return 0;
  const uint32_t u = float_to_bits(v);
  const int e = int((u >> 23) & 0xff) - 127;
  EXPECT_TRUE(e >= -14 && e <= 15 && (u & 0x1fffu) == 0) << v << " is not a normal fp16 value";
  return static_cast<uint16_t>(((u >> 16) & 0x8000u) | uint32_t(e + 15) << 10 | ((u >> 13) & 0x3ffu));
}

// n values k / 8 with k uniform in [-8, 8]: exact in bf16 and fp16; products are
// multiples of 1/64 of magnitude <= 1.
std::vector<float> small_values(size_t n, uint32_t seed, float scale = 0.125f) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-8, 8);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng) * scale;
  return v;
}

std::vector<uint16_t> encode(const std::vector<float>& v, bool bf16) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16 ? to_bf16(v[i]) : to_f16(v[i]);
  return out;
}

// D = A B + C for row-major A (M x K), B (K x N), C (M x N), in double.
std::vector<float> matmul(const std::vector<float>& A, const std::vector<float>& B, const std::vector<float>& C,
                          int M, int N, int K) {
  std::vector<float> D(size_t(M) * N);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double acc = C[size_t(i) * N + j];
      for (int k = 0; k < K; ++k) acc += double(A[size_t(i) * K + k]) * B[size_t(k) * N + j];
      D[size_t(i) * N + j] = static_cast<float>(acc);
    }
  return D;
}

// Runs `body` and checks that it throws ada::Error whose message contains `needle`.
void expect_error(const std::function<void()>& body, const std::string& needle) {
  try {
    body();
    ADD_FAILURE() << "expected ada::Error containing '" << needle << "', nothing was thrown";
  } catch (const ada::Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message was: " << e.what();
  }
}

// ===========================================================================
// mma.sync m16n8k16: fragments loaded straight from global memory by the PTX
// ISA's formulas (g = groupID, t = threadID_in_group):
//   A a_i, i = 0..7:  row g for i in {0,1,4,5}, else g + 8;
//                     col 2t + (i & 1), + 8 for i >= 4;   register i / 2, half i % 2
//   B b_i, i = 0..3:  row 2t + (i & 1), + 8 for i >= 2; col g
//   C c_i, i = 0..3:  row g for i < 2, else g + 8;         col 2t + (i & 1)

__device__ int a_row(int lane, int i) { return (i < 2 || (i >= 4 && i < 6)) ? (lane >> 2) : (lane >> 2) + 8; }
__device__ int a_col(int lane, int i) { return (lane % 4) * 2 + (i & 1) + (i >= 4 ? 8 : 0); }
__device__ int b_row(int lane, int i) { return (lane % 4) * 2 + (i & 1) + (i >= 2 ? 8 : 0); }
__device__ int b_col(int lane, int) { return lane >> 2; }
__device__ int c_row(int lane, int i) { return i < 2 ? (lane >> 2) : (lane >> 2) + 8; }
__device__ int c_col(int lane, int i) { return (lane % 4) * 2 + (i & 1); }

// A 16 x 16, B 16 x 8 (B[k][n]), C and D 16 x 8, all row-major; one warp.
template <bool kBf16>
__global__ void mma_by_layout(const uint16_t* A, const uint16_t* B, const float* C, float* D) {
  const int lane = static_cast<int>(threadIdx.x);
  uint16_t ae[8], be[4];
  for (int i = 0; i < 8; ++i) ae[i] = A[a_row(lane, i) * 16 + a_col(lane, i)];
  for (int i = 0; i < 4; ++i) be[i] = B[b_row(lane, i) * 8 + b_col(lane, i)];
  uint32_t a[4], b[2];
  for (int j = 0; j < 4; ++j) a[j] = pack_b16x2(ae[2 * j], ae[2 * j + 1]);
  for (int j = 0; j < 2; ++j) b[j] = pack_b16x2(be[2 * j], be[2 * j + 1]);
  float c[4], d[4];
  for (int i = 0; i < 4; ++i) c[i] = C[c_row(lane, i) * 8 + c_col(lane, i)];
  if (kBf16) ada::cuda::mma_m16n8k16_bf16(d, a, b, c);
  else ada::cuda::mma_m16n8k16_f16(d, a, b, c);
  for (int i = 0; i < 4; ++i) D[c_row(lane, i) * 8 + c_col(lane, i)] = d[i];
}

void check_mma_by_layout(bool bf16, uint32_t seed) {
  const std::vector<float> A = small_values(16 * 16, seed), B = small_values(16 * 8, seed + 1),
                           C = small_values(16 * 8, seed + 2, 0.5f);
  DeviceArray<uint16_t> dA(encode(A, bf16)), dB(encode(B, bf16));
  DeviceArray<float> dC(C), dD(16 * 8);
  if (bf16) ada::launch(mma_by_layout<true>, 1, 32, 0, nullptr, dA.get(), dB.get(), dC.get(), dD.get());
  else ada::launch(mma_by_layout<false>, 1, 32, 0, nullptr, dA.get(), dB.get(), dC.get(), dD.get());
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> got = dD.download(), want = matmul(A, B, C, 16, 8, 16);
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 8; ++n)
      EXPECT_EQ(got[r * 8 + n], want[r * 8 + n]) << (bf16 ? "bf16" : "f16") << " D[" << r << "][" << n << "]";
}

TEST(MmaSync, Bf16FragmentsByThePtxLayoutGiveTheProduct) {
  for (uint32_t seed : {1u, 2u, 3u}) check_mma_by_layout(true, seed * 10);
}

TEST(MmaSync, F16FragmentsByThePtxLayoutGiveTheProduct) {
  for (uint32_t seed : {4u, 5u}) check_mma_by_layout(false, seed * 10);
}

// General bf16 values (a normal sample rounded to bf16): the runner forms the
// sum in double, the GPU in fp32; both within 1e-6 of sum |a b| + |c|.
TEST(MmaSync, Bf16GeneralValuesWithinFp32Accumulation) {
  std::mt19937 rng(77);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  auto sample = [&](size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = from_bf16(static_cast<uint16_t>(float_to_bits(dist(rng)) >> 16));  // truncated: exact bf16
    return v;
  };
  const std::vector<float> A = sample(16 * 16), B = sample(16 * 8), C = sample(16 * 8);
  DeviceArray<uint16_t> dA(encode(A, true)), dB(encode(B, true));
  DeviceArray<float> dC(C), dD(16 * 8);
  ada::launch(mma_by_layout<true>, 1, 32, 0, nullptr, dA.get(), dB.get(), dC.get(), dD.get());
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> got = dD.download(), want = matmul(A, B, C, 16, 8, 16);
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 8; ++n) {
      double mag = std::fabs(C[r * 8 + n]);
      for (int k = 0; k < 16; ++k) mag += std::fabs(double(A[r * 16 + k]) * B[k * 8 + n]);
      EXPECT_NEAR(got[r * 8 + n], want[r * 8 + n], 1e-6 * mag) << "D[" << r << "][" << n << "]";
    }
}

// ===========================================================================
// ldmatrix m8n8 .b16: four 8 x 8 matrices of distinct values, stored in shared
// memory with padded rows, the matrices in a permuted order and the rows of
// each in a permuted order, so that only the per-lane row addresses say where
// row r of matrix m is. Every lane writes every register it received.

__host__ __device__ uint16_t probe_value(int m, int r, int c) { return static_cast<uint16_t>(0x1000 * (m + 1) + 16 * r + c); }

constexpr int kProbeStride = 24;  // elements per stored row: 48 bytes, 16-byte aligned rows

template <int kCount, bool kTrans>
__global__ void ldmatrix_probe(uint32_t* out) {
  __shared__ __align__(16) uint16_t tile[4 * 8 * kProbeStride];
  const int lane = static_cast<int>(threadIdx.x);
  auto slot = [](int m, int r) { return ((m + 2) % 4) * 8 + (r * 5) % 8; };  // stored row of (matrix, row)
  for (int i = lane; i < 4 * 8 * kProbeStride; i += 32) tile[i] = 0xdead;
  __syncwarp();
  for (int i = lane; i < 4 * 8 * 8; i += 32) {
    const int m = i / 64, r = (i / 8) % 8, c = i % 8;
    tile[slot(m, r) * kProbeStride + c] = probe_value(m, r, c);
  }
  __syncwarp();
  // Lanes 8m..8m+7 point at rows 0..7 of matrix m; lanes past 8 x kCount point
  // at rows too (matrices kCount..3), which the instruction must ignore.
  const void* row = &tile[slot(lane / 8, lane % 8) * kProbeStride];
  uint32_t r[kCount];
  if constexpr (kCount == 1) kTrans ? ada::cuda::ldmatrix_x1_trans(r, row) : ada::cuda::ldmatrix_x1(r, row);
  if constexpr (kCount == 2) kTrans ? ada::cuda::ldmatrix_x2_trans(r, row) : ada::cuda::ldmatrix_x2(r, row);
  if constexpr (kCount == 4) kTrans ? ada::cuda::ldmatrix_x4_trans(r, row) : ada::cuda::ldmatrix_x4(r, row);
  for (int m = 0; m < kCount; ++m) out[lane * kCount + m] = r[m];
}

template <int kCount, bool kTrans>
void check_ldmatrix() {
  DeviceArray<uint32_t> d_out(32 * kCount);
  ada::launch(ldmatrix_probe<kCount, kTrans>, 1, 32, 0, nullptr, d_out.get());
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint32_t> out = d_out.download();
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int m = 0; m < kCount; ++m) {
      // PTX ISA: lane holds row g, columns 2t and 2t + 1 of matrix m (lower
      // column in the low half); .trans delivers the transposed matrix.
      const uint16_t lo = kTrans ? probe_value(m, 2 * t, g) : probe_value(m, g, 2 * t);
      const uint16_t hi = kTrans ? probe_value(m, 2 * t + 1, g) : probe_value(m, g, 2 * t + 1);
      EXPECT_EQ(out[lane * kCount + m], pack_b16x2(lo, hi))
          << "x" << kCount << (kTrans ? ".trans" : "") << " lane " << lane << " register " << m;
    }
  }
}

TEST(MmaLdmatrix, X1) { check_ldmatrix<1, false>(); }
TEST(MmaLdmatrix, X2) { check_ldmatrix<2, false>(); }
TEST(MmaLdmatrix, X4) { check_ldmatrix<4, false>(); }
TEST(MmaLdmatrix, X1Trans) { check_ldmatrix<1, true>(); }
TEST(MmaLdmatrix, X2Trans) { check_ldmatrix<2, true>(); }
TEST(MmaLdmatrix, X4Trans) { check_ldmatrix<4, true>(); }

// ===========================================================================
// Composed: one warp computes a 16 x 8 tile D = A B over K = 64 from shared
// memory: cp.async brings the bf16 tiles in, ldmatrix_x4 gives A's fragments,
// ldmatrix_x2 (B stored n-major, B^T row-major) or ldmatrix_x2_trans (B stored
// k-major) gives B's, and mma accumulates in place (d = c).

constexpr int kTileK = 64;
constexpr int kPad = 8;  // elements of padding per row: rows stay 16-byte aligned

template <bool kBKMajor>
__global__ void tile_16x8(const uint16_t* A, const uint16_t* B, float* D) {
  // A: 16 x K row-major. B: K x 8 row-major (kBKMajor) or 8 x K row-major.
  __shared__ __align__(16) uint16_t As[16][kTileK + kPad];
  constexpr int kBRows = kBKMajor ? kTileK : 8, kBCols = kBKMajor ? 8 : kTileK;
  __shared__ __align__(16) uint16_t Bs[kBRows][kBCols + kPad];
  const int lane = static_cast<int>(threadIdx.x);
  // 16-byte chunks (8 elements): A has 16 x K/8, B has K x 8 / 8.
  for (int c = lane; c < 16 * kTileK / 8; c += 32) {
    const int r = c / (kTileK / 8), k = (c % (kTileK / 8)) * 8;
    ada::cuda::cp_async_16(&As[r][k], A + r * kTileK + k);
  }
  for (int c = lane; c < kBRows * kBCols / 8; c += 32) {
    const int r = c / (kBCols / 8), k = (c % (kBCols / 8)) * 8;
    ada::cuda::cp_async_16(&Bs[r][k], B + r * kBCols + k);
  }
  ada::cuda::cp_async_commit();
  ada::cuda::cp_async_wait<0>();
  __syncwarp();

  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int k0 = 0; k0 < kTileK; k0 += 16) {
    uint32_t a[4], b[2];
    // Matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15),
    // (rows 8-15, k 8-15): registers a0..a3 of the mma A layout.
    ada::cuda::ldmatrix_x4(a, &As[lane % 8 + 8 * ((lane / 8) % 2)][k0 + 8 * (lane / 16)]);
    if constexpr (kBKMajor)  // matrices k0..k0+7 and k0+8..k0+15 (rows k, columns n), transposed
      ada::cuda::ldmatrix_x2_trans(b, &Bs[k0 + lane % 8 + 8 * ((lane / 8) % 2)][0]);
    else  // matrices (n 0-7, k0..k0+7) and (n 0-7, k0+8..k0+15)
      ada::cuda::ldmatrix_x2(b, &Bs[lane % 8][k0 + 8 * ((lane / 8) % 2)]);
    ada::cuda::mma_m16n8k16_bf16(acc, a, b, acc);
  }
  for (int i = 0; i < 4; ++i) D[c_row(lane, i) * 8 + c_col(lane, i)] = acc[i];
}

template <bool kBKMajor>
void check_tile() {
  const std::vector<float> A = small_values(16 * kTileK, 5), B = small_values(kTileK * 8, 6);  // B[k][n]
  std::vector<float> Bstored = B;
  if (!kBKMajor)
    for (int k = 0; k < kTileK; ++k)
      for (int n = 0; n < 8; ++n) Bstored[n * kTileK + k] = B[k * 8 + n];
  DeviceArray<uint16_t> dA(encode(A, true)), dB(encode(Bstored, true));
  DeviceArray<float> dD(16 * 8);
  ada::launch(tile_16x8<kBKMajor>, 1, 32, 0, nullptr, dA.get(), dB.get(), dD.get());
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> got = dD.download(), want = matmul(A, B, std::vector<float>(16 * 8, 0.0f), 16, 8, kTileK);
  for (int i = 0; i < 16 * 8; ++i) EXPECT_EQ(got[i], want[i]) << "D[" << i / 8 << "][" << i % 8 << "]";
}

TEST(MmaComposed, LdmatrixAndMmaTileBStoredNMajor) { check_tile<false>(); }
TEST(MmaComposed, LdmatrixTransAndMmaTileBStoredKMajor) { check_tile<true>(); }

// ===========================================================================
// cp.async: a two-stage pipeline through shared memory. 64 threads copy tiles
// of 256 floats (16 bytes each) into alternating stages; while tile t is
// consumed, tile t + 1 is in flight. Each thread consumes a float another
// thread copied (reversed index), so the barrier after the wait matters too.

enum class Pipeline {
  Correct,       // commit every iteration (an empty group at the end), wait<1>
  NoWait,        // never waits: nothing has landed when the stage is read
  NoEmptyGroup,  // skips the empty commit at the end: wait<1> then leaves the last tile in flight
};

constexpr int kPipeThreads = 64, kTileFloats = kPipeThreads * 4;

__global__ void pipeline_copy(const float* in, float* out, int tiles, Pipeline mode) {
  __shared__ __align__(16) float stage[2][kTileFloats];
  const int t = static_cast<int>(threadIdx.x);
  ada::cuda::cp_async_16(&stage[0][4 * t], in + 4 * t);
  ada::cuda::cp_async_commit();
  for (int tile = 0; tile < tiles; ++tile) {
    if (tile + 1 < tiles) ada::cuda::cp_async_16(&stage[(tile + 1) % 2][4 * t], in + (tile + 1) * kTileFloats + 4 * t);
    if (mode != Pipeline::NoEmptyGroup || tile + 1 < tiles) ada::cuda::cp_async_commit();
    if (mode != Pipeline::NoWait) ada::cuda::cp_async_wait<1>();
    __syncthreads();
    for (int j = 0; j < 4; ++j) {
      const int i = kTileFloats - 1 - (4 * t + j);
      out[tile * kTileFloats + i] = 2.0f * stage[tile % 2][i];
    }
    __syncthreads();  // the stage is refilled in the next iteration
  }
}

// Tiles of `out` whose every value is 2 x the input; -1 if some value is wrong
// but not NaN (a wrong tile from a missing wait must read the poison).
std::vector<int> run_pipeline(Pipeline mode, int tiles) {
  std::vector<float> in(size_t(tiles) * kTileFloats);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i % 1000) - 500.0f;
  DeviceArray<float> d_in(in), d_out(in.size());
  ada::launch(pipeline_copy, 1, kPipeThreads, 0, nullptr, d_in.get(), d_out.get(), tiles, mode);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> out = d_out.download();
  std::vector<int> state(tiles);  // 1 right, 0 NaN somewhere, -1 other wrong value
  for (int tile = 0; tile < tiles; ++tile) {
    int s = 1;
    for (int i = 0; i < kTileFloats; ++i) {
      const size_t at = size_t(tile) * kTileFloats + i;
      if (std::isnan(out[at])) s = std::min(s, 0);
      else if (out[at] != 2.0f * in[at]) s = -1;
    }
    state[tile] = s;
  }
  return state;
}

TEST(MmaCpAsync, TwoStagePipelineCopiesEveryTile) {
  const std::vector<int> state = run_pipeline(Pipeline::Correct, 5);
  EXPECT_EQ(state, std::vector<int>(5, 1));
}

// The zero-fill form: rows past the end of the source read nothing and land as 0.
__global__ void zfill_rows(const float* in, int rows, float* out) {
  __shared__ __align__(16) float tile[8][4];
  const int r = static_cast<int>(threadIdx.x);  // one 16-byte row per thread
  const bool valid = r < rows;
  ada::cuda::cp_async_16_zfill(&tile[r][0], in + 4 * (valid ? r : 0), valid);
  ada::cuda::cp_async_commit();
  ada::cuda::cp_async_wait<0>();
  __syncthreads();
  for (int j = 0; j < 4; ++j) out[(7 - r) * 4 + j] = tile[7 - r][j];
}

TEST(MmaCpAsync, ZeroFillForRowsPastTheEnd) {
  std::vector<float> in(5 * 4);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i + 1);
  DeviceArray<float> d_in(in), d_out(8 * 4);
  ada::launch(zfill_rows, 1, 8, 0, nullptr, d_in.get(), 5, d_out.get());
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> out = d_out.download();
  for (int i = 0; i < 8 * 4; ++i) EXPECT_EQ(out[i], i < 5 * 4 ? in[i] : 0.0f) << i;
}

// ===========================================================================
// gemm_mma_tile (cuda/gemm_mma.cu): C = A B^T over several tiles and a K that
// takes the two-stage pipeline through five slices.

TEST(MmaGemmTile, MatchesTheScalarProduct) {
  constexpr int M = 48, N = 24, K = 80;
  const std::vector<float> A = small_values(size_t(M) * K, 8), W = small_values(size_t(N) * K, 9);  // W (N, K)
  std::vector<float> B(size_t(K) * N);  // B = W^T (K, N) for the reference
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) B[size_t(k) * N + n] = W[size_t(n) * K + k];
  DeviceArray<uint16_t> dA(encode(A, true)), dW(encode(W, true));
  DeviceArray<float> dC(size_t(M) * N);
  ada::cuda::gemm_mma_tile(nullptr, dC.get(), reinterpret_cast<const __nv_bfloat16*>(dA.get()),
                           reinterpret_cast<const __nv_bfloat16*>(dW.get()), M, N, K);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> got = dC.download(), want = matmul(A, B, std::vector<float>(size_t(M) * N, 0.0f), M, N, K);
  for (int i = 0; i < M * N; ++i) EXPECT_EQ(got[i], want[i]) << "C[" << i / N << "][" << i % N << "]";
}

TEST(MmaGemmTile, RefusesShapesOffTheTileGrid) {
  DeviceArray<float> dC(64);
  DeviceArray<uint16_t> d(64);
  const auto* p = reinterpret_cast<const __nv_bfloat16*>(d.get());
  expect_error([&] { ada::cuda::gemm_mma_tile(nullptr, dC.get(), p, p, 16, 8, 8); }, "(got 16 x 8 x 8)");
  expect_error([&] { ada::cuda::gemm_mma_tile(nullptr, dC.get(), p, p, 8, 8, 16); }, "(got 8 x 8 x 16)");
}

#if defined(ADA_HOSTRUN)
// ===========================================================================
// What the runner adds: on a GPU these are races or undefined behaviour that
// may go unnoticed; under the runner they are wrong results or errors.

TEST(MmaCpAsync, RunnerMissingWaitReadsPoison) {
  // Nothing lands: every tile reads the 0xff poison (NaN).
  EXPECT_EQ(run_pipeline(Pipeline::NoWait, 5), std::vector<int>(5, 0));
  // The classic off-by-one: only the last tile, still in flight, is wrong.
  EXPECT_EQ(run_pipeline(Pipeline::NoEmptyGroup, 5), (std::vector<int>{1, 1, 1, 1, 0}));
}

// Each block's groups are its own: copies a block left pending never land in
// the next block's shared memory.
__global__ void leave_pending(const float* in, float* out) {
  __shared__ __align__(16) float s[4];
  if (blockIdx.x == 0) {
    ada::cuda::cp_async_16(s, in);
    ada::cuda::cp_async_commit();  // never waited for
  } else {
    ada::cuda::cp_async_wait<0>();  // must not perform block 0's copy
    out[0] = s[0];
  }
}

TEST(MmaCpAsync, RunnerPendingCopiesEndWithTheirBlock) {
  DeviceArray<float> d_in(std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}), d_out(1);
  ada::launch(leave_pending, 2, 1, 0, nullptr, d_in.get(), d_out.get());
  EXPECT_TRUE(std::isnan(d_out.download()[0]));
}

__global__ void cp_async_misaligned(const float* in) {
  __shared__ __align__(16) float s[8];
  ada::cuda::cp_async_16(s + 1, in);
}
__global__ void cp_async_to_global(const float* in, float* out) { ada::cuda::cp_async_16(out, in); }
__global__ void cp_async_from(const float* in) {
  __shared__ __align__(16) float s[4];
  ada::cuda::cp_async_16(s, in);
}

__global__ void mma_half_warp(float* out) {
  uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  float c[4] = {0, 0, 0, 0}, d[4];
  ada::cuda::mma_m16n8k16_bf16(d, a, b, c);
  out[threadIdx.x] = d[0];
}

__global__ void ldmatrix_from_global(const uint16_t* p, uint32_t* out) {
  uint32_t r[1];
  ada::cuda::ldmatrix_x1(r, p + 8 * (threadIdx.x % 8));
  out[threadIdx.x] = r[0];
}

TEST(MmaRunner, MisuseIsAnError) {
  DeviceArray<float> f(64);
  DeviceArray<uint16_t> h(64);
  DeviceArray<uint32_t> u(32);
  expect_error([&] { ada::launch(cp_async_misaligned, 1, 1, 0, nullptr, f.get()); }, "16-byte aligned");
  expect_error([&] { ada::launch(cp_async_to_global, 1, 1, 0, nullptr, f.get(), f.get() + 32); },
               "destination is global (cudaMalloc) memory");
  expect_error([&] { ada::launch(cp_async_from, 1, 1, 0, nullptr, f.get() + 64); },  // just past the end
               "source is not inside a cudaMalloc allocation");
  expect_error([&] { ada::launch(mma_half_warp, 1, 16, 0, nullptr, f.get()); }, "needs all 32 lanes");
  expect_error([&] { ada::launch(ldmatrix_from_global, 1, 32, 0, nullptr, h.get(), u.get()); },
               "row address is global (cudaMalloc) memory");
}
#endif

}  // namespace
