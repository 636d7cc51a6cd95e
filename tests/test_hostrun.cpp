// Tests of the host runner (cuda/hostrun/): the CPU executor that lets the
// project's CUDA kernels run, and be checked against the CPU reference, on
// machines without a GPU. Each kernel here is ordinary CUDA written to the
// project's conventions (compat.h, ada::launch, DYNAMIC_SHARED).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "compat.h"
#include "cuda_test_array.h"
#include "hostrun/statics.h"
#include "launch.h"
// The file `make cuda-check` compiles with nvcc; here the host compiler builds
// the same source and its self-check runs under the runner.
#include "smoke.cu"

namespace {

using ada::test::DeviceArray;

using ada::hostrun::Config;
using ada::hostrun::Order;
using ada::hostrun::ScopedConfig;
using namespace nvcuda;

constexpr unsigned kFull = 0xffffffffu;

Config with_order(Order order) {
  Config c = ada::hostrun::config();
  c.order = order;
  return c;
}


// Runs `body` and checks that it throws ada::Error whose message contains `needle`.
void expect_error(const std::function<void()>& body, const std::string& needle) {
  try {
    body();
    ADD_FAILURE() << "expected ada::Error containing '" << needle << "', nothing was thrown";
  } catch (const ada::Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message was: " << e.what();
  }
}

// ===========================================================================
// (a) The canary: shared memory read from another thread without a barrier.

template <bool kSync>
__global__ void neighbour_sum(const int* in, int* out) {
  __shared__ int s[256];
  const int t = static_cast<int>(threadIdx.x), n = static_cast<int>(blockDim.x);
  const int base = static_cast<int>(blockIdx.x) * n;
  s[t] = in[base + t];
  if (kSync) __syncthreads();
  // Both neighbours, so that every resume order has an unwritten one to read.
  out[base + t] = s[(t + 1) % n] + s[(t + n - 1) % n];
}

int count_neighbour_errors(bool sync, Order order) {
  ScopedConfig cfg(with_order(order));
  constexpr int kBlocks = 4, kThreads = 256;
  std::vector<int> in(kBlocks * kThreads);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i * 7 + 3);
  DeviceArray<int> d_in(in), d_out(in.size());
  if (sync)
    ada::launch(neighbour_sum<true>, kBlocks, kThreads, 0, nullptr, d_in.get(), d_out.get());
  else
    ada::launch(neighbour_sum<false>, kBlocks, kThreads, 0, nullptr, d_in.get(), d_out.get());
  const std::vector<int> out = d_out.download();
  int errors = 0;
  for (int b = 0; b < kBlocks; ++b)
    for (int t = 0; t < kThreads; ++t) {
      const int want = in[b * kThreads + (t + 1) % kThreads] +
                       in[b * kThreads + (t + kThreads - 1) % kThreads];
      errors += out[b * kThreads + t] != want;
    }
  return errors;
}

TEST(HostRun, MissingBarrierGivesWrongResultInEveryOrder) {
  for (Order order : {Order::Shuffle, Order::Reverse, Order::Forward}) {
    // Twice: the second launch must not be rescued by the first one's leftovers.
    EXPECT_GT(count_neighbour_errors(false, order), 100) << "order " << int(order);
    EXPECT_GT(count_neighbour_errors(false, order), 100) << "order " << int(order);
    EXPECT_EQ(count_neighbour_errors(true, order), 0) << "order " << int(order);
  }
}

// ===========================================================================
// (b) Block-level tree reduction in shared memory.

template <int kThreads, bool kFirstBarrier>
__global__ void block_sum(const float* in, float* out, int n) {
  __shared__ float s[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  const int i = static_cast<int>(blockIdx.x) * kThreads + t;
  s[t] = i < n ? in[i] : 0.0f;
  if (kFirstBarrier) __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

TEST(HostRun, BlockTreeReduction) {
  constexpr int kThreads = 256;
  const int n = 10000, blocks = (n + kThreads - 1) / kThreads;
  std::vector<float> in(n);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : in) v = dist(rng);
  DeviceArray<float> d_in(in), d_out(blocks);
  ada::launch(block_sum<kThreads, true>, blocks, kThreads, 0, nullptr, d_in.get(), d_out.get(), n);
  const std::vector<float> out = d_out.download();
  for (int b = 0; b < blocks; ++b) {
    double want = 0.0, mag = 0.0;
    for (int i = b * kThreads; i < std::min(n, (b + 1) * kThreads); ++i) {
      want += in[i];
      mag += std::fabs(in[i]);
    }
    EXPECT_NEAR(out[b], want, 1e-6 * mag) << "block " << b;
  }

  // The same reduction without the barrier after the stores: reverse order
  // happens to get it right (every reader runs after its writer), the default
  // shuffled order does not.
  ScopedConfig cfg(with_order(Order::Shuffle));
  ada::launch(block_sum<kThreads, false>, blocks, kThreads, 0, nullptr, d_in.get(), d_out.get(), n);
  const std::vector<float> bad = d_out.download();
  int wrong = 0;
  for (int b = 0; b < blocks; ++b) wrong += !(std::fabs(bad[b] - out[b]) <= 1e-4f);
  EXPECT_GT(wrong, blocks / 2);
}

// ===========================================================================
// (c) Warp shuffles and votes.

__global__ void warp_ops(const float* in, float* xor_sum, float* down_sum, float* seg8_sum,
                         float* bcast, float* scan, unsigned* ballot, int* any_all) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = i / 32;
  const float v = in[i];
  float a = v;  // butterfly: every lane ends with the warp sum
  for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(kFull, a, o);
  float b = v;  // tree: lane 0 ends with the warp sum
  for (int o = 16; o > 0; o >>= 1) b += __shfl_down_sync(kFull, b, static_cast<unsigned>(o));
  float c = v;  // butterfly within segments of 8 lanes
  for (int o = 4; o > 0; o >>= 1) c += __shfl_xor_sync(kFull, c, o, 8);
  float s = v;  // inclusive prefix sum
  for (int o = 1; o < 32; o <<= 1) {
    const float up = __shfl_up_sync(kFull, s, static_cast<unsigned>(o));
    if (lane >= o) s += up;
  }
  xor_sum[i] = a;
  if (lane == 0) down_sum[warp] = b;
  seg8_sum[i] = c;
  bcast[i] = __shfl_sync(kFull, v, 7);
  scan[i] = s;
  const unsigned bal = __ballot_sync(kFull, lane % 3 == 0);
  const int any = __any_sync(kFull, v > 40.0f), all = __all_sync(kFull, v >= 0.0f);
  if (lane == 0) {
    ballot[warp] = bal;
    any_all[2 * warp] = any;
    any_all[2 * warp + 1] = all;
  }
}

TEST(HostRun, WarpShufflesAndVotes) {
  constexpr int kBlocks = 3, kThreads = 128, n = kBlocks * kThreads, warps = n / 32;
  std::vector<float> in(n);
  for (int i = 0; i < n; ++i) in[i] = static_cast<float>((i * 37) % 41);  // integers: exact sums
  DeviceArray<float> d_in(in), d_xor(n), d_down(warps), d_seg(n), d_bc(n), d_scan(n);
  DeviceArray<unsigned> d_ballot(warps);
  DeviceArray<int> d_anyall(2 * warps);
  ada::launch(warp_ops, kBlocks, kThreads, 0, nullptr, d_in.get(), d_xor.get(), d_down.get(),
              d_seg.get(), d_bc.get(), d_scan.get(), d_ballot.get(), d_anyall.get());
  const auto xs = d_xor.download(), ds = d_down.download(), seg = d_seg.download(),
             bc = d_bc.download(), scan = d_scan.download();
  const auto bal = d_ballot.download();
  const auto aa = d_anyall.download();
  for (int w = 0; w < warps; ++w) {
    float sum = 0, prefix = 0, mx = 0;
    for (int l = 0; l < 32; ++l) sum += in[w * 32 + l], mx = std::max(mx, in[w * 32 + l]);
    EXPECT_EQ(ds[w], sum);
    EXPECT_EQ(bal[w], 0x49249249u);  // lanes 0, 3, 6, ..., 30
    EXPECT_EQ(aa[2 * w], mx > 40.0f ? 1 : 0);
    EXPECT_EQ(aa[2 * w + 1], 1);
    for (int l = 0; l < 32; ++l) {
      const int i = w * 32 + l;
      prefix += in[i];
      float seg_sum = 0;
      for (int k = 0; k < 8; ++k) seg_sum += in[w * 32 + (l / 8) * 8 + k];
      EXPECT_EQ(xs[i], sum);
      EXPECT_EQ(seg[i], seg_sum);
      EXPECT_EQ(bc[i], in[w * 32 + 7]);
      EXPECT_EQ(scan[i], prefix);
    }
  }
}

// Two halves of a warp in divergent branches, each shuffling among itself.
__global__ void split_warp(int* out) {
  const int lane = static_cast<int>(threadIdx.x);
  int v = lane;
  if (lane < 16) v = __shfl_xor_sync(0x0000ffffu, v, 1);
  else v = __shfl_xor_sync(0xffff0000u, v, 2);
  out[lane] = v;
  out[32 + lane] = static_cast<int>(__ballot_sync(kFull, 1));
}

// A block of 48 threads: its second warp has only 16 lanes, and a full mask
// names only the lanes that exist.
__global__ void partial_warp(unsigned* out) {
  const unsigned b = __ballot_sync(kFull, 1);
  const int sum = __reduce_add_sync(kFull, 1);
  if ((threadIdx.x & 31) == 0) {
    out[2 * (threadIdx.x / 32)] = b;
    out[2 * (threadIdx.x / 32) + 1] = static_cast<unsigned>(sum);
  }
}

TEST(HostRun, WarpMasksAndPartialWarps) {
  DeviceArray<int> d_out(64);
  ada::launch(split_warp, 1, 32, 0, nullptr, d_out.get());
  const auto out = d_out.download();
  for (int lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(out[lane], lane < 16 ? (lane ^ 1) : (lane ^ 2));
    EXPECT_EQ(static_cast<unsigned>(out[32 + lane]), kFull);
  }
  DeviceArray<unsigned> d_p(4);
  ada::launch(partial_warp, 1, 48, 0, nullptr, d_p.get());
  const auto p = d_p.download();
  EXPECT_EQ(p[0], kFull);
  EXPECT_EQ(p[1], 32u);
  EXPECT_EQ(p[2], 0x0000ffffu);
  EXPECT_EQ(p[3], 16u);
}

// Thread coordinates in a 3-D block, and the lane numbering CUDA defines
// (x fastest, then y, then z).
__global__ void coords_kernel(int* out) {
  const int linear = static_cast<int>(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
  const int block = static_cast<int>(blockIdx.x + gridDim.x * blockIdx.y);
  const int nthreads = static_cast<int>(blockDim.x * blockDim.y * blockDim.z);
  const int lane_from_shuffle = __shfl_sync(kFull, linear, 0) + (linear & 31);
  out[block * nthreads + linear] = lane_from_shuffle * 1000 + block;
}

TEST(HostRun, ThreadCoordinatesAndLaneNumbering) {
  const dim3 grid(2, 3), block(8, 4, 2);
  const int nthreads = 64, nblocks = 6;
  DeviceArray<int> d_out(nthreads * nblocks);
  ada::launch(coords_kernel, grid, block, 0, nullptr, d_out.get());
  const auto out = d_out.download();
  for (int b = 0; b < nblocks; ++b)
    for (int t = 0; t < nthreads; ++t) EXPECT_EQ(out[b * nthreads + t], t * 1000 + b);
}

// Every thread gets its own copy of the kernel arguments.
__global__ void param_copy(int n, int* out) {
  out[threadIdx.x] = n;
  n += 1000;
  __syncthreads();
  out[blockDim.x + threadIdx.x] = n;
}

TEST(HostRun, KernelArgumentsAreCopiedPerThread) {
  DeviceArray<int> d_out(128);
  ada::launch(param_copy, 1, 64, 0, nullptr, 7, d_out.get());
  const auto out = d_out.download();
  for (int t = 0; t < 64; ++t) {
    EXPECT_EQ(out[t], 7);
    EXPECT_EQ(out[64 + t], 1007);
  }
}

// ===========================================================================
// (d) Atomics across many blocks.

__global__ void atomics_kernel(int* count, float* fsum, double* dsum, int* imax,
                               unsigned long long* usum, unsigned* cas_count, int* last) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  atomicAdd(count, 1);
  atomicAdd(fsum, 1.0f);
  atomicAdd(dsum, 0.5);
  atomicMax(imax, (i * 7919) % 100003);
  atomicAdd(usum, static_cast<unsigned long long>(i));
  unsigned old = *cas_count, seen;  // increment through a compare-and-swap loop
  do {
    seen = old;
    old = atomicCAS(cas_count, seen, seen + 1);
  } while (old != seen);
  atomicExch(last, i);
}

TEST(HostRun, AtomicsAcrossBlocks) {
  constexpr int kBlocks = 128, kThreads = 256, n = kBlocks * kThreads;
  DeviceArray<int> count(std::vector<int>{0}), imax(std::vector<int>{-1}), last(std::vector<int>{-1});
  DeviceArray<float> fsum(std::vector<float>{0.0f});
  DeviceArray<double> dsum(std::vector<double>{0.0});
  DeviceArray<unsigned long long> usum(std::vector<unsigned long long>{0});
  DeviceArray<unsigned> cas(std::vector<unsigned>{0});
  ada::launch(atomics_kernel, kBlocks, kThreads, 0, nullptr, count.get(), fsum.get(), dsum.get(),
              imax.get(), usum.get(), cas.get(), last.get());
  int want_max = -1;
  for (int i = 0; i < n; ++i) want_max = std::max(want_max, (i * 7919) % 100003);
  EXPECT_EQ(count.download()[0], n);
  EXPECT_EQ(fsum.download()[0], static_cast<float>(n));  // exact below 2^24
  EXPECT_EQ(dsum.download()[0], 0.5 * n);
  EXPECT_EQ(imax.download()[0], want_max);
  EXPECT_EQ(usum.download()[0], static_cast<unsigned long long>(n) * (n - 1) / 2);
  EXPECT_EQ(cas.download()[0], static_cast<unsigned>(n));
  const int l = last.download()[0];
  EXPECT_TRUE(l >= 0 && l < n);
}

// ===========================================================================
// (e) Low-precision conversions and WMMA.

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

TEST(HostRun, Bfloat16RoundsToNearestEvenLikeCuda) {
  struct Case {
    uint32_t in;
    uint16_t out;
  };
  // Expected values worked out by hand from the bit patterns.
  const Case cases[] = {
      {0x3F800000u, 0x3F80u},  // 1.0: exact
      {0x3F808000u, 0x3F80u},  // 1 + 2^-8: halfway, keep the even 0x3F80
      {0x3F818000u, 0x3F82u},  // halfway above the odd 0x3F81: up to even
      {0x3F808001u, 0x3F81u},  // just above halfway: up
      {0x3F807FFFu, 0x3F80u},  // just below halfway: down
      {0xBF818000u, 0xBF82u},  // negative halfway: magnitude to even
      {0x7F7F7FFFu, 0x7F7Fu},  // below halfway near the top: largest finite bf16
      {0x7F7F8000u, 0x7F80u},  // halfway above 0x7F7F (odd): overflows to +inf
      {0x7F7FFFFFu, 0x7F80u},  // FLT_MAX: +inf
      {0x7F800000u, 0x7F80u},  // +inf
      {0xFF800000u, 0xFF80u},  // -inf
      {0x7FC00000u, 0x7FFFu},  // quiet NaN: canonical NaN
      {0xFFC00001u, 0x7FFFu},  // negative NaN: canonical NaN
      {0x7F800001u, 0x7FFFu},  // NaN whose payload is only in the dropped bits: still NaN
      {0x80000000u, 0x8000u},  // -0
      {0x00008000u, 0x0000u},  // subnormal halfway, even below: 0
      {0x00018000u, 0x0002u},  // subnormal halfway, odd below: up
      {0x007FFFFFu, 0x0080u},  // largest subnormal: rounds up to the smallest normal
  };
  for (const Case& c : cases) {
    EXPECT_EQ(__bfloat16_as_ushort(__float2bfloat16(from_bits(c.in))), c.out) << std::hex << c.in;
    EXPECT_EQ(__bfloat16_as_ushort(__float2bfloat16_rn(from_bits(c.in))), c.out) << std::hex << c.in;
  }
  EXPECT_EQ(__bfloat16_as_ushort(__float2bfloat16_rz(from_bits(0x3F81FFFFu))), 0x3F81u);
  EXPECT_EQ(__bfloat162float(__ushort_as_bfloat16(0x3F82u)), from_bits(0x3F820000u));
  EXPECT_TRUE(std::isnan(__bfloat162float(__float2bfloat16(NAN))));
  // From double: one rounding, no double rounding through float.
  // 1 + 2^-8 + 2^-30 is above halfway, although its float rounding (1 + 2^-8) is a tie.
  EXPECT_EQ(__bfloat16_as_ushort(__nv_bfloat16(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30))), 0x3F81u);
}

TEST(HostRun, HalfRoundsToNearestEven) {
  struct Case {
    uint32_t in;
    uint16_t out;
  };
  const Case cases[] = {
      {0x3F800000u, 0x3C00u},  // 1.0
      {0x3F801000u, 0x3C00u},  // 1 + 2^-11: halfway, keep even
      {0x3F803000u, 0x3C02u},  // 1 + 3*2^-11: halfway above odd 0x3C01: up
      {0x477FE000u, 0x7BFFu},  // 65504: largest half
      {0x477FEFFFu, 0x7BFFu},  // just below 65520
      {0x477FF000u, 0x7C00u},  // 65520: halfway to 2^16, odd below: inf
      {0x38800000u, 0x0400u},  // 2^-14: smallest normal
      {0x387FC000u, 0x03FFu},  // largest subnormal
      {0x33800000u, 0x0001u},  // 2^-24: smallest subnormal
      {0x33000000u, 0x0000u},  // 2^-25: halfway to it, even below: 0
      {0x33C00000u, 0x0002u},  // 1.5 * 2^-24: halfway between 1 and 2 units: to even 2
      {0x33400000u, 0x0001u},  // 0.75 * 2^-24: above halfway: 1 unit
      {0xC0000000u, 0xC000u},  // -2
      {0x7FC00000u, 0x7FFFu},  // NaN
  };
  for (const Case& c : cases)
    EXPECT_EQ(__half_as_ushort(__float2half(from_bits(c.in))), c.out) << std::hex << c.in;
  for (uint32_t h = 0; h < 0x7C00u; h += 7)  // every 7th finite half survives a round trip
    EXPECT_EQ(__half_as_ushort(__float2half(__half2float(__ushort_as_half(static_cast<unsigned short>(h))))), h);
}

TEST(HostRun, Tf32RoundsToNearestTiesAway) {
  struct Case {
    uint32_t in, out;
  };
  const Case cases[] = {
      {0x3F801000u, 0x3F802000u},  // halfway, even below: away from zero anyway (not RNE)
      {0xBF801000u, 0xBF802000u},  // negative halfway: away from zero
      {0x3F800FFFu, 0x3F800000u},  // below halfway
      {0x3F802FFFu, 0x3F802000u},
      {0x7F7FF000u, 0x7F800000u},  // halfway at the top: overflows to inf
      {0x7F800000u, 0x7F800000u},  // inf
  };
  for (const Case& c : cases) EXPECT_EQ(bits(wmma::__float_to_tf32(from_bits(c.in))), c.out) << std::hex << c.in;
  EXPECT_TRUE(std::isnan(wmma::__float_to_tf32(from_bits(0x7F800001u))));
}

// D = A * B + C on one 16x16x16 tile: A row-major, B column-major, C loaded
// row-major, D stored column-major (all four layouts exercised). T is
// __nv_bfloat16 or half.
template <typename T>
__global__ void wmma_tile(const T* a, const T* b, const float* c, float* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::load_matrix_sync(acc, c, 16, wmma::mem_row_major);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_col_major);
}

template <typename T>
void check_wmma_tile(unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<T> a(256), b(256);
  std::vector<float> c(256);
  for (auto& v : a) v = T(dist(rng));  // rounded to T (nearest even) on the host
  for (auto& v : b) v = T(dist(rng));
  for (auto& v : c) v = dist(rng);
  DeviceArray<T> da(a), db(b);
  DeviceArray<float> dc(c), dd(256);
  ada::launch(wmma_tile<T>, 1, 32, 0, nullptr, da.get(), db.get(), dc.get(), dd.get());
  const auto d = dd.download();
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      double want = c[i * 16 + j], mag = std::fabs(c[i * 16 + j]);
      for (int k = 0; k < 16; ++k) {
        const double p = double(float(a[i * 16 + k])) * double(float(b[j * 16 + k]));  // B(k, j), col-major
        want += p;
        mag += std::fabs(p);
      }
      // fp32 accumulation of 17 terms on a tensor core: ~1e-6 relative to the
      // magnitude; the runner (double, one rounding) is well inside.
      EXPECT_NEAR(d[j * 16 + i], want, 2e-6 * mag) << i << "," << j;
    }
}

TEST(HostRun, WmmaTileMatchesDoubleReference) {
  check_wmma_tile<__nv_bfloat16>(2);
  check_wmma_tile<half>(5);
}

// D = A * B with TF32 inputs on a 16x16x8 tile, converting the fragments with
// __float_to_tf32 as CUDA requires.
template <bool kConvert>
__global__ void wmma_tf32_tile(const float* a, const float* b, float* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
  wmma::load_matrix_sync(fa, a, 8);
  wmma::load_matrix_sync(fb, b, 16);
  if (kConvert) {
    for (unsigned i = 0; i < fa.num_elements; ++i) fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
    for (unsigned i = 0; i < fb.num_elements; ++i) fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
  }
  wmma::fill_fragment(acc, 0.0f);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
}

// Independent TF32 models for the reference: round to 11 significant bits,
// ties away (std::round), or drop the extra bits (what the hardware does with
// unconverted inputs).
double tf32_round(float x) {
  int e;
  const double m = std::frexp(static_cast<double>(x), &e);  // x = m * 2^e, 0.5 <= |m| < 1
  return std::ldexp(std::round(std::ldexp(m, 11)), e - 11);
}
double tf32_trunc(float x) {
  int e;
  const double m = std::frexp(static_cast<double>(x), &e);
  return std::ldexp(std::trunc(std::ldexp(m, 11)), e - 11);
}

TEST(HostRun, WmmaTf32TileMatchesDoubleReference) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(16 * 8), b(8 * 16);
  for (auto& v : a) v = dist(rng);
  for (auto& v : b) v = dist(rng);
  DeviceArray<float> da(a), db(b), dd(256);
  for (bool convert : {true, false}) {
    if (convert) ada::launch(wmma_tf32_tile<true>, 1, 32, 0, nullptr, da.get(), db.get(), dd.get());
    else ada::launch(wmma_tf32_tile<false>, 1, 32, 0, nullptr, da.get(), db.get(), dd.get());
    const auto d = dd.download();
    double worst_vs_exact = 0;
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 16; ++j) {
        double want = 0, exact = 0, mag = 0;
        for (int k = 0; k < 8; ++k) {
          const double p = convert ? tf32_round(a[i * 8 + k]) * tf32_round(b[k * 16 + j])
                                   : tf32_trunc(a[i * 8 + k]) * tf32_trunc(b[k * 16 + j]);
          want += p;
          exact += double(a[i * 8 + k]) * double(b[k * 16 + j]);
          mag += std::fabs(p);
        }
        EXPECT_NEAR(d[i * 16 + j], want, 1e-6 * mag) << "convert=" << convert << " " << i << "," << j;
        worst_vs_exact = std::max(worst_vs_exact, std::fabs(d[i * 16 + j] - exact) / mag);
      }
    // TF32 keeps 10 significand bits: the result really is that coarse.
    EXPECT_GT(worst_vs_exact, 1e-5);
    EXPECT_LT(worst_vs_exact, 2e-3);
  }
}

// A realistic tiled GEMM: 4 warps per block, tiles staged through shared
// memory with barriers, C = A * B with bf16 inputs (all row-major).
constexpr int kTm = 32, kTn = 32, kTk = 16;

__global__ void __launch_bounds__(128) gemm_bf16_tiled(const __nv_bfloat16* a, const __nv_bfloat16* b,
                                                        float* c, int n, int k) {
  __shared__ __align__(32) __nv_bfloat16 as[kTm * kTk];
  __shared__ __align__(32) __nv_bfloat16 bs[kTk * kTn];
  const int warp = static_cast<int>(threadIdx.x) / 32, wm = warp / 2, wn = warp % 2;
  const int row0 = static_cast<int>(blockIdx.y) * kTm, col0 = static_cast<int>(blockIdx.x) * kTn;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int k0 = 0; k0 < k; k0 += kTk) {
    for (int i = static_cast<int>(threadIdx.x); i < kTm * kTk; i += static_cast<int>(blockDim.x))
      as[i] = a[(row0 + i / kTk) * k + k0 + i % kTk];
    for (int i = static_cast<int>(threadIdx.x); i < kTk * kTn; i += static_cast<int>(blockDim.x))
      bs[i] = b[(k0 + i / kTn) * n + col0 + i % kTn];
    __syncthreads();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
    wmma::load_matrix_sync(fa, as + wm * 16 * kTk, kTk);
    wmma::load_matrix_sync(fb, bs + wn * 16, kTn);
    wmma::mma_sync(acc, fa, fb, acc);
    __syncthreads();
  }
  wmma::store_matrix_sync(c + (row0 + wm * 16) * n + col0 + wn * 16, acc, static_cast<unsigned>(n),
                          wmma::mem_row_major);
}

TEST(HostRun, WmmaTiledGemmWithSharedMemory) {
  const int m = 64, n = 96, k = 48;
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<__nv_bfloat16> a(m * k), b(k * n);
  for (auto& v : a) v = __float2bfloat16(dist(rng));
  for (auto& v : b) v = __float2bfloat16(dist(rng));
  DeviceArray<__nv_bfloat16> da(a), db(b);
  DeviceArray<float> dc(m * n);
  ada::launch(gemm_bf16_tiled, dim3(n / kTn, m / kTm), 128, 0, nullptr, da.get(), db.get(), dc.get(), n, k);
  const auto c = dc.download();
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double want = 0, mag = 0;
      for (int kk = 0; kk < k; ++kk) {
        const double p = double(float(a[i * k + kk])) * double(float(b[kk * n + j]));
        want += p;
        mag += std::fabs(p);
      }
      ASSERT_NEAR(c[i * n + j], want, 2e-6 * mag) << i << "," << j;
    }
}

__global__ void wmma_misaligned(const __nv_bfloat16* a, float* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
  wmma::load_matrix_sync(fa, a + 1, 16);
  d[threadIdx.x] = float(fa.x[0]);
}

__global__ void wmma_lane_dependent(float* d) {
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  acc.x[0] = static_cast<float>(threadIdx.x);  // not portable: which lane holds x[0] is unspecified
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
}

// The block stages a tile in shared memory but forgets the barrier before the
// warps load it.
__global__ void wmma_load_without_barrier(const __nv_bfloat16* a, float* d) {
  __shared__ __align__(32) __nv_bfloat16 tile[256];
  for (int i = static_cast<int>(threadIdx.x); i < 256; i += static_cast<int>(blockDim.x)) tile[i] = a[i];
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
  wmma::load_matrix_sync(fa, tile, 16);
  d[threadIdx.x] = float(fa.x[0]);
}

TEST(HostRun, WmmaMisuseIsReported) {
  DeviceArray<__nv_bfloat16> a(std::vector<__nv_bfloat16>(512, __float2bfloat16(1.0f)));
  DeviceArray<float> d(256);
  expect_error([&] { ada::launch(wmma_misaligned, 1, 32, 0, nullptr, a.get(), d.get()); }, "aligned");
  expect_error([&] { ada::launch(wmma_lane_dependent, 1, 32, 0, nullptr, d.get()); }, "different fragments");
  expect_error([&] { ada::launch(wmma_load_without_barrier, 1, 64, 0, nullptr, a.get(), d.get()); },
               "loaded different tiles");
}

// ===========================================================================
// (f) Dynamic shared memory.

__global__ void reverse_in_block(const float* in, float* out) {
  DYNAMIC_SHARED(float, buf);
  const unsigned t = threadIdx.x, n = blockDim.x, base = blockIdx.x * n;
  buf[t] = in[base + t];
  __syncthreads();
  out[base + t] = buf[n - 1 - t];
}

// Two views of the same dynamic buffer, as kernels carve it up.
__global__ void two_views(int* out) {
  DYNAMIC_SHARED(int, ints);
  DYNAMIC_SHARED(unsigned char, bytes);
  ints[threadIdx.x] = static_cast<int>(threadIdx.x) * 0x01010101;
  __syncthreads();
  out[threadIdx.x] = bytes[4 * threadIdx.x + 2];
}

__global__ void touch_dynamic(float* out, int n) {
  DYNAMIC_SHARED(float, buf);
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) buf[i] = 1.0f;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0;
    for (int i = 0; i < n; ++i) s += buf[i];
    *out = s;
  }
}

TEST(HostRun, DynamicSharedMemory) {
  constexpr int kBlocks = 5, kThreads = 96;
  std::vector<float> in(kBlocks * kThreads);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  DeviceArray<float> d_in(in), d_out(in.size());
  ada::launch(reverse_in_block, kBlocks, kThreads, kThreads * sizeof(float), nullptr, d_in.get(), d_out.get());
  const auto out = d_out.download();
  for (int b = 0; b < kBlocks; ++b)
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(out[b * kThreads + t], in[b * kThreads + kThreads - 1 - t]);

  DeviceArray<int> d_views(64);
  ada::launch(two_views, 1, 64, 64 * sizeof(int), nullptr, d_views.get());
  const auto views = d_views.download();
  for (int t = 0; t < 64; ++t) EXPECT_EQ(views[t], t & 0xff);

  // Above 48 KiB a kernel must opt in first, as on the GPU.
  const int big = 64 * 1024 / sizeof(float);
  DeviceArray<float> d_sum(1);
  expect_error([&] { ada::launch(touch_dynamic, 1, 256, big * sizeof(float), nullptr, d_sum.get(), big); },
               "cudaFuncSetAttribute");
  CUDA_CHECK(cudaFuncSetAttribute(touch_dynamic, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(big * sizeof(float))));
  ada::launch(touch_dynamic, 1, 256, big * sizeof(float), nullptr, d_sum.get(), big);
  EXPECT_EQ(d_sum.download()[0], static_cast<float>(big));
}

// ===========================================================================
// (g) Deadlocks and other misuse are errors, not hangs.

__global__ void half_return_early(float* out) {
  if (threadIdx.x % 2) return;
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}

__global__ void divergent_barriers(float* out) {
  if (threadIdx.x < 32) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1.0f;
}

__global__ void shuffle_with_exited_lane(float* out) {
  if (threadIdx.x == 5) return;
  out[threadIdx.x] = __shfl_xor_sync(kFull, 1.0f, 1);
}

__global__ void warp_waits_for_barrier(float* out) {
  if (threadIdx.x == 0) __syncthreads();
  else __syncwarp();
  out[threadIdx.x] = 1.0f;
}

__global__ void mask_without_caller(float* out) {
  out[threadIdx.x] = __shfl_sync(0x1u, 1.0f, 0);
}

__global__ void throws_in_kernel(float* out) {
  if (threadIdx.x == 17) ada::fail("boom from a kernel");
  out[threadIdx.x] = 1.0f;
}

__global__ void nop(float*) {}

__global__ void nested_launch(float* out) {
  if (threadIdx.x == 0) ada::launch(nop, 1, 1, 0, nullptr, out);
}

__global__ void write_one(float* out) { out[threadIdx.x] = 1.0f; }

TEST(HostRun, MisuseIsReportedAsErrors) {
  DeviceArray<float> out(64);
  auto run = [&](void (*k)(float*)) { return [&out, k] { ada::launch(k, 1, 64, 0, nullptr, out.get()); }; };
  for (Order order : {Order::Shuffle, Order::Reverse, Order::Forward}) {
    ScopedConfig cfg(with_order(order));
    expect_error(run(half_return_early), "__syncthreads");
  }
  expect_error(run(divergent_barriers), "different __syncthreads");
  expect_error(run(shuffle_with_exited_lane), "exited");
  // One warp: lane 0 waits at the barrier, the others wait for lane 0 in
  // __syncwarp. (With a second warp, its threads would exit while lane 0
  // waits, which is reported as such.)
  expect_error([&] { ada::launch(warp_waits_for_barrier, 1, 32, 0, nullptr, out.get()); }, "deadlock");
  expect_error(run(warp_waits_for_barrier), "exited while");
  expect_error(run(mask_without_caller), "does not include the calling lane");
  expect_error(run(throws_in_kernel), "boom from a kernel");
  expect_error(run(nested_launch), "dynamic parallelism");
  expect_error([&] { ada::launch(write_one, 1, 2048, 0, nullptr, out.get()); }, "invalid block shape");
  expect_error([&] { ada::launch(write_one, 0, 32, 0, nullptr, out.get()); }, "invalid grid shape");
  expect_error([] { __syncthreads(); }, "outside a kernel");
  // The runner is usable again after every failure.
  ada::launch(write_one, 1, 64, 0, nullptr, out.get());
  for (float v : out.download()) EXPECT_EQ(v, 1.0f);
}

// Every launch error names where the launch is written: the calling
// function, file and line (LaunchSite in cuda/launch.h, filled in by the
// compiler at the call). On the GPU the same site names the kernel in a
// launch error and, with ADA_CUDA_SYNC=1, in a fault.
const int kBadLaunchLine = __LINE__ + 1;
void launch_divergent_barriers(float* out) { ada::launch(divergent_barriers, 1, 64, 0, nullptr, out); }

TEST(HostRun, ErrorsNameTheLaunchSite) {
  DeviceArray<float> out(64);
  expect_error([&] { launch_divergent_barriers(out.get()); },
               "the kernel launched by launch_divergent_barriers (");
  expect_error([&] { launch_divergent_barriers(out.get()); }, "test_hostrun.cpp:" + std::to_string(kBadLaunchLine) + ")");
  const ada::LaunchSite here(128);
  EXPECT_EQ(here.shmem, 128u);
  EXPECT_STREQ(here.function, "TestBody");
  EXPECT_EQ(here.line, __LINE__ - 3);
}

// A frame too big for the fiber stack lands in the guard area below it and
// stops the process with a hint, instead of corrupting another stack.
__global__ void big_frame(float* out) {
  volatile char big[96 * 1024];
  big[0] = 1;
  out[threadIdx.x] = big[0];
}

TEST(HostRunDeathTest, StackOverflowHitsTheGuard) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Config c = ada::hostrun::config();
        c.stack_bytes = 64 * 1024;
        ScopedConfig scoped(c);
        DeviceArray<float> out(32);
        ada::launch(big_frame, 1, 32, 0, nullptr, out.get());
      },
      "fiber stack overflow");
}

// A kernel that reads one element past its cudaMalloc'd input. Each device
// allocation is its own heap block of exactly the size asked for, so under
// AddressSanitizer (make test-asan) the read lands in the block's redzone and
// stops the process with a report; without ASan the read lands in the block's
// guard and gives NaN (writes there are errors: HostRun.GuardsReport...).
#if defined(__SANITIZE_ADDRESS__)
#define ADA_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ADA_TEST_ASAN 1
#endif
#endif

#ifdef ADA_TEST_ASAN
__global__ void read_past_end(const float* in, float* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i + 1];  // the bug: i + 1 == n for the last thread
}
#endif

TEST(HostRunDeathTest, OutOfBoundsDeviceReadIsCaughtByAsan) {
#ifndef ADA_TEST_ASAN
  GTEST_SKIP() << "needs AddressSanitizer: run make test-asan";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  constexpr int n = 1000;  // 4000 bytes: the redzone starts right after in[n - 1]
  const auto run = [](int count) {
    DeviceArray<float> in(std::vector<float>(n, 1.0f)), out(n);
    ada::launch(read_past_end, (count + 127) / 128, 128, 0, nullptr, in.get(), out.get(), count);
  };
  run(n - 1);  // the same kernel within bounds is clean
  EXPECT_DEATH(run(n), "heap-buffer-overflow");
#endif
}

// Without ASan each device block has 256 guard bytes before and after it
// (runtime.h): a write one element past the end or before the start is an
// error when its launch returns, naming the block and the pointer argument;
// the guard is restored; a read past the end reads NaN.
__global__ void write_at(float* p, int i, float v) {
  if (threadIdx.x == 0) p[i] = v;
}
__global__ void read_at(const float* p, int i, float* out) {
  if (threadIdx.x == 0) *out = p[i];
}

TEST(HostRun, GuardsReportAWriteOutsideTheBlock) {
#ifdef ADA_TEST_ASAN
  GTEST_SKIP() << "under AddressSanitizer the blocks have redzones instead of guards "
                  "(HostRunDeathTest.OutOfBoundsDeviceReadIsCaughtByAsan)";
#else
  DeviceArray<float> buf(std::vector<float>(1000, 1.0f)), other(8), out(1);
  ada::launch(write_at, 1, 32, 0, nullptr, buf.get(), 999, 2.0f);  // the last element: clean
  expect_error([&] { ada::launch(write_at, 1, 32, 0, nullptr, buf.get(), 1000, 5.0f); },
               "hostrun: a kernel wrote outside its device memory: bytes 0 to 3 past the end of a 4000-byte "
               "cudaMalloc block (pointer argument 0 of the launch points into it)");
  expect_error([&] { ada::launch(write_at, 1, 32, 0, nullptr, buf.get(), -1, 5.0f); },
               "bytes 1 to 4 before the start of a 4000-byte cudaMalloc block");
  expect_error([&] { ada::launch(write_at, 1, 32, 0, nullptr, buf.get(), 1000 + 60, 5.0f); },
               "bytes 240 to 243 past the end");
  ada::launch(write_at, 1, 32, 0, nullptr, buf.get(), 0, 3.0f);  // the guards were restored: clean again
  ada::launch(read_at, 1, 32, 0, nullptr, buf.get(), 1000, out.get());
  EXPECT_TRUE(std::isnan(out.download()[0])) << "a read past the end reads the guard";
  const std::vector<float> got = buf.download();
  EXPECT_EQ(got[0], 3.0f);
  EXPECT_EQ(got[999], 2.0f);
  EXPECT_TRUE(std::isnan(other.download()[0])) << "fresh device memory is still poisoned, not zero";
#endif
}

TEST(HostRun, RuntimeApi) {
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  EXPECT_EQ(count, 1);
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  EXPECT_EQ(prop.major, 9);
  EXPECT_EQ(prop.warpSize, 32);

  float* d = nullptr;
  CUDA_CHECK(cudaMalloc(&d, 16 * sizeof(float)));
  std::vector<float> host(32, 0.0f);
  CUDA_CHECK(cudaMemcpy(host.data(), d, 16 * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_TRUE(std::isnan(host[0]));  // fresh device memory is poisoned, not zero
  EXPECT_EQ(cudaMemcpy(d, host.data(), 32 * sizeof(float), cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  // Swapped direction: the "device" side is a host pointer.
  EXPECT_EQ(cudaMemcpy(host.data(), d, 4, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  CUDA_CHECK(cudaMemset(d + 4, 0, 4 * sizeof(float)));
  CUDA_CHECK(cudaFree(d));
  EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidValue);
  (void)cudaGetLastError();
  expect_error([&] { CUDA_CHECK(cudaMemcpy(host.data(), host.data(), 4, cudaMemcpyDeviceToDevice)); },
               "CUDA error: invalid argument");

  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  CUDA_CHECK(cudaStreamDestroy(s));
}

TEST(HostRun, SmokeFileRunsUnderTheRunner) { EXPECT_EQ(ada::smoke::self_check(), ""); }

// ===========================================================================
// (g2) The race check: every block twice, in two resume orders, from the same
// device memory; any difference in device memory is an error.

Config race_checked(Order order) {
  Config c = with_order(order);
  c.race_check = true;
  return c;
}

// Every thread writes the same shared word, then thread 0 reads it: the
// value depends on which thread wrote last (a write-write race).
template <bool kRacy>
__global__ void last_writer(int* out) {
  __shared__ int s;
  if (kRacy || threadIdx.x == 0) s = static_cast<int>(threadIdx.x) + 1;
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}

// block_sum<256, false> written out as a plain function (from before template
// kernels' __shared__ variables were poisoned and restored too: the template
// is tested in TemplateKernelSharedIsPoisonedAndRaceChecked).
__global__ void sum_256_missing_barrier(const float* in, float* out, int n) {
  __shared__ float s[256];
  const int t = static_cast<int>(threadIdx.x);
  const int i = static_cast<int>(blockIdx.x) * 256 + t;
  s[t] = i < n ? in[i] : 0.0f;
  // (the missing __syncthreads)
  for (int stride = 128; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

// Two warps exchange values through shared memory but synchronise only
// within each warp (__syncwarp): a bug on a GPU, where one warp may run
// ahead of the other, and one that a resume order cycling over the whole
// block can hide, because the warps then stay within one warp-level
// operation of each other. With warp run-ahead (Config::warp_runahead) warp
// 0 finishes its loop before warp 1 starts and reads values warp 1 has not
// written; the race check, whose second run toggles run-ahead, reports it.
// The twin with __syncthreads passes both ways.
template <bool kBlockBarrier>
__global__ void warp_exchange(int* out) {
  __shared__ int s[2][32];
  const int t = static_cast<int>(threadIdx.x), w = t / 32, lane = t % 32;
  int acc = 0;
  for (int i = 0; i < 4; ++i) {
    s[w][lane] = 1000 * i + t;
    if (kBlockBarrier) __syncthreads();
    else __syncwarp();
    acc += s[1 - w][lane];
    if (kBlockBarrier) __syncthreads();
    else __syncwarp();
  }
  out[t] = acc;
}

TEST(HostRun, WarpRunaheadExposesAMissingBlockBarrierBetweenWarps) {
  std::vector<int> want(64);
  for (int t = 0; t < 64; ++t) want[t] = 6000 + 4 * ((t + 32) % 64);
  DeviceArray<int> out(64);
  for (Order order : {Order::Shuffle, Order::Reverse, Order::Forward}) {
    for (bool runahead : {false, true}) {
      Config c = with_order(order);
      c.warp_runahead = runahead;
      ScopedConfig cfg(c);
      ada::launch(warp_exchange<true>, 1, 64, 0, nullptr, out.get());
      EXPECT_EQ(out.download(), want) << "order " << int(order) << " runahead " << runahead;
      if (runahead) {  // the buggy kernel reads the other warp's unwritten (poisoned) values
        ada::launch(warp_exchange<false>, 1, 64, 0, nullptr, out.get());
        EXPECT_NE(out.download(), want) << "order " << int(order);
      }
    }
    ScopedConfig cfg(race_checked(order));  // interleaved, then running ahead
    ada::launch(warp_exchange<true>, 1, 64, 0, nullptr, out.get());
    EXPECT_EQ(out.download(), want) << "order " << int(order);
    expect_error([&] { ada::launch(warp_exchange<false>, 1, 64, 0, nullptr, out.get()); },
                 "warps running ahead");
  }
}

TEST(HostRun, RaceCheckReportsSharedMemoryRaces) {
  for (Order order : {Order::Shuffle, Order::Reverse, Order::Forward}) {
    ScopedConfig cfg(race_checked(order));
    DeviceArray<int> out(3);
    // The race-free twin passes, with the right result.
    ada::launch(last_writer<false>, 3, 64, 0, nullptr, out.get());
    EXPECT_EQ(out.download(), std::vector<int>(3, 1)) << "order " << int(order);
    expect_error([&] { ada::launch(last_writer<true>, 3, 64, 0, nullptr, out.get()); },
                 "hostrun: race check: block (0,0,0): the result depends on the order");
    try {
      ada::launch(last_writer<true>, 3, 64, 0, nullptr, out.get());
    } catch (const ada::Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("(12 bytes; kernel argument 1 points into it) first differs at byte offset 0"),
                std::string::npos) << m;
      EXPECT_NE(m.find("[the kernel launched by"), std::string::npos) << m;  // the launch site
    }
  }

  // The tree reduction without its first barrier: reverse order alone gets it
  // right (BlockTreeReduction), and the race check, comparing reverse with
  // forward order, reports it. (Two shuffled orders both read poisoned shared
  // memory and give the same NaN: that is caught by the value, not by the
  // race check.) With the barrier it passes and the sums are right.
  constexpr int kThreads = 256, n = 1000, blocks = (n + kThreads - 1) / kThreads;
  std::vector<float> in(n);
  for (int i = 0; i < n; ++i) in[i] = static_cast<float>(i % 13) - 6.0f;  // integers: exact sums
  DeviceArray<float> d_in(in), d_out(blocks);
  for (Order order : {Order::Reverse, Order::Forward}) {
    ScopedConfig cfg(race_checked(order));
    expect_error([&] { ada::launch(sum_256_missing_barrier, blocks, kThreads, 0, nullptr, d_in.get(), d_out.get(), n); },
                 "race check: block (0,0,0)");
    ada::launch(block_sum<kThreads, true>, blocks, kThreads, 0, nullptr, d_in.get(), d_out.get(), n);
    const std::vector<float> out = d_out.download();
    for (int b = 0; b < blocks; ++b) {
      float want = 0.0f;
      for (int i = b * kThreads; i < std::min(n, (b + 1) * kThreads); ++i) want += in[i];
      EXPECT_EQ(out[b], want) << "block " << b << " order " << int(order);
    }
  }
}

// Config::race_check_blocks: at most L blocks of a launch are checked, at
// linear indices round(i (G - 1) / (L - 1)). A race in one block only:
__global__ void race_in_block(int* out, int racy_block) {
  __shared__ int s;
  if (static_cast<int>(blockIdx.x) == racy_block || threadIdx.x == 0) s = static_cast<int>(threadIdx.x);
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}

TEST(HostRun, RaceCheckSampledBlocks) {
  DeviceArray<int> out(5);
  auto run = [&](unsigned limit, int racy_block) {
    Config c = race_checked(Order::Forward);
    c.race_check_blocks = limit;
    ScopedConfig cfg(c);
    ada::launch(race_in_block, 5, 64, 0, nullptr, out.get(), racy_block);
  };
  expect_error([&] { run(0, 2); }, "race check: block (2,0,0)");  // every block checked
  expect_error([&] { run(2, 4); }, "race check: block (4,0,0)");  // 2 of 5: blocks 0 and 4
  run(2, 2);                                                        // block 2 is not among them
  expect_error([&] { run(3, 2); }, "race check: block (2,0,0)");  // 3 of 5: blocks 0, 2, 4
  run(3, 1);
  expect_error([&] { run(1, 0); }, "race check: block (0,0,0)");  // 1: the first block
}

// ===========================================================================
// (g3) __shared__ variables of template kernels. g++ ignores the section
// attribute (device.h) on static locals of function templates; the runner
// finds those variables through the symbol table (statics.h) and poisons and
// restores them like the others.

// write = 1: every thread writes its word; write = 0: every thread reads its
// word without writing it (uninitialised shared memory).
template <int kN>
__global__ void shared_write_or_read_t(int* out, int write) {
  __shared__ int s[kN];
  if (write) s[threadIdx.x] = 7;
  else out[threadIdx.x] = s[threadIdx.x];
}
__global__ void shared_write_or_read(int* out, int write) {
  __shared__ int s[64];
  if (write) s[threadIdx.x] = 7;
  else out[threadIdx.x] = s[threadIdx.x];
}

// Thread 0 sets a flag that the others read without a barrier: who sees it
// depends on the order. Once an earlier launch has left the flag set, a run
// that does not reset shared memory sees it set in every order (hidden race).
template <int kUnused>
__global__ void flag_without_barrier_t(int* out) {
  __shared__ int flag;
  if (threadIdx.x == 0) flag = 1;
  out[threadIdx.x] = flag;
}

TEST(HostRun, TemplateKernelSharedIsPoisonedAndRaceChecked) {
  // Found by name: the template instance's one array, 64 ints, outside the section.
  const auto& st = ada::hostrun::function_statics(reinterpret_cast<const void*>(shared_write_or_read_t<64>));
  EXPECT_EQ(st.size(), 1u);
  if (!st.empty()) {
    EXPECT_EQ(st[0].second, 64 * sizeof(int));
  }
  // A read of unwritten shared memory sees the poison (-1), not what the
  // previous launch left there: for a template kernel as for a plain one.
  DeviceArray<int> out(64);
  for (int tmpl = 0; tmpl < 2; ++tmpl) {
    auto k = tmpl ? shared_write_or_read_t<64> : shared_write_or_read;
    ada::launch(k, 1, 64, 0, nullptr, out.get(), 1);
    ada::launch(k, 1, 64, 0, nullptr, out.get(), 0);
    EXPECT_EQ(out.download(), std::vector<int>(64, -1)) << (tmpl ? "template kernel" : "plain kernel");
  }
  // The race is reported although the previous launch left the flag set.
  DeviceArray<int> flags(64);
  ada::launch(flag_without_barrier_t<0>, 1, 64, 0, nullptr, flags.get());
  for (Order order : {Order::Forward, Order::Reverse, Order::Shuffle}) {
    ScopedConfig cfg(race_checked(order));
    expect_error([&] { ada::launch(flag_without_barrier_t<0>, 1, 64, 0, nullptr, flags.get()); },
                 "hostrun: race check: block (0,0,0)");
  }
}

// The runner finds a kernel's own __shared__ variables (by section, or by
// symbol for template kernels: statics.h), but not those of a __device__
// function template the kernel calls: g++ puts that template's statics in
// .bss under the callee's name, so they would be neither poisoned nor race
// checked. The project's rule is therefore that shared memory is declared in
// kernels and handed to device functions by pointer (as block_sum's `red`).
// This check enforces it on every CUDA source: for each `__shared__`
// declaration, the nearest function signature above it must be a
// `__global__` one.
std::vector<int> shared_outside_kernels(const std::string& text) {
  std::vector<std::string> lines;
  size_t a = 0;
  while (a <= text.size()) {
    size_t b = text.find('\n', a);
    if (b == std::string::npos) b = text.size();
    std::string l = text.substr(a, b - a);
    const size_t c = l.find("//");
    if (c != std::string::npos) l.resize(c);  // comments may mention __shared__
    lines.push_back(l);
    a = b + 1;
  }
  std::vector<int> bad;
  for (size_t i = 0; i < lines.size(); i++) {
    const std::string& l = lines[i];
    if (l.find("__shared__") == std::string::npos || l.find("extern __shared__") != std::string::npos) continue;
    bool in_kernel = false;
    for (size_t j = i + 1; j-- > 0;) {
      if (lines[j].find("__global__") != std::string::npos) {
        in_kernel = true;
        break;
      }
      if (lines[j].find("__device__") != std::string::npos && lines[j].find('(') != std::string::npos) break;
    }
    if (!in_kernel) bad.push_back(static_cast<int>(i + 1));
  }
  return bad;
}

TEST(HostRun, SharedMemoryIsDeclaredInKernelsOnly) {
  // The check itself: a kernel's array passes, a device function's is caught.
  EXPECT_TRUE(shared_outside_kernels("template <int N>\n__global__ void k(float* x) {\n  __shared__ float s[N];\n"
                                     "  // __shared__ in a comment\n}\n")
                  .empty());
  EXPECT_EQ(shared_outside_kernels("__global__ void k() {}\ntemplate <int N>\n__device__ float f(float v) {\n"
                                   "  __shared__ float s[N];\n  return v;\n}\n"),
            std::vector<int>{4});
  // Every CUDA source of the project (the runner's own headers define the keyword).
  namespace fs = std::filesystem;
  ASSERT_TRUE(fs::is_directory("cuda")) << "run the tests from the repository root";
  int files = 0;
  for (const auto& e : fs::directory_iterator("cuda")) {
    const std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || (ext != ".cu" && ext != ".h")) continue;
    std::FILE* f = std::fopen(e.path().c_str(), "rb");
    ASSERT_NE(f, nullptr) << e.path();
    std::string text;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
    std::fclose(f);
    files++;
    for (int line : shared_outside_kernels(text))
      ADD_FAILURE() << e.path().string() << ":" << line
                    << ": __shared__ outside a __global__ function (declare it in the kernel and pass a pointer)";
  }
  EXPECT_GT(files, 10);
}

// Float atomics from every thread of a block into one word: the sum's last
// bits depend on the order, on a GPU too. That is not a race, and the race
// check leaves atomically updated words out of its comparison.
__global__ void atomic_float_sum(const float* in, float* sum) { atomicAdd(sum, in[threadIdx.x]); }

TEST(HostRun, RaceCheckToleratesAtomicOrder) {
  std::vector<float> in(256);
  for (int i = 0; i < 256; ++i) in[i] = 1.0f / static_cast<float>(i + 1);  // large first, or small first
  DeviceArray<float> d_in(in);
  auto sum_in = [&](const Config& c) {
    ScopedConfig cfg(c);
    DeviceArray<float> sum(std::vector<float>{0.0f});
    ada::launch(atomic_float_sum, 1, 256, 0, nullptr, d_in.get(), sum.get());
    return sum.download()[0];
  };
  // The two orders really give different sums ...
  EXPECT_NE(sum_in(with_order(Order::Forward)), sum_in(with_order(Order::Reverse)));
  // ... and the race check accepts it (and keeps one of them).
  const float got = sum_in(race_checked(Order::Forward));
  Config second = with_order(Order::Reverse);  // the race check's second run: reverse order, warps running ahead
  second.warp_runahead = true;
  EXPECT_EQ(got, sum_in(second));
  // The runner's own tests of atomics and the smoke file pass under it too.
  ScopedConfig cfg(race_checked(Order::Shuffle));
  EXPECT_EQ(ada::smoke::self_check(), "");
}

// The race check on the project's kernels: every kernel test (every kernel
// family, the WMMA GEMMs, top-k and cross-entropy included) run again in a
// child process with ADA_HOSTRUN_RACECHECK=1, about 11 s on 2 busy cores
// (EmbeddingBackwardDeterministic, 2500 blocks, is 7 s of it). SeventyMShapes
// is left out here because it checks itself (a sample of blocks per launch:
// its ~200 MB of device memory would be copied for every block). The CUDA
// kernel tests are linked into the same binary; where they are not (a custom
// build), this is skipped.
TEST(HostRun, RaceCheckPassesTheKernelTests) {
  const char* subset = "CudaKernels.*:Precisions/CudaGemm.*:-CudaKernels.SeventyMShapes";
  // (/proc/self/exe read here: inside popen's shell it would name the shell)
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string list = "'" + self + "' --gtest_list_tests --gtest_filter='" + std::string(subset) + "'";
  FILE* l = popen(list.c_str(), "r");
  ASSERT_NE(l, nullptr);
  std::string listed;
  char buf[256];
  while (std::fgets(buf, sizeof buf, l)) listed += buf;
  pclose(l);
  if (listed.find("Embedding") == std::string::npos) GTEST_SKIP() << "the CUDA kernel tests are not in this binary";
  const std::string cmd = "ADA_HOSTRUN_RACECHECK=1 '" + self + "' --gtest_filter='" + std::string(subset) +
                          "' --gtest_brief=1 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int status = pclose(p);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("[  PASSED  ]"), std::string::npos) << out;
}

// ===========================================================================
// (h) Launch overhead (printed, not asserted).

__global__ void saxpy(float* y, const float* x, float a) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = a * x[i] + y[i];
}

__global__ void four_barriers(float* data) {
  __shared__ float s[256];
  const unsigned t = threadIdx.x, i = blockIdx.x * 256 + t;
  s[t] = data[i];
  for (int r = 0; r < 2; ++r) {
    __syncthreads();
    const float v = s[(t + 1) & 255];
    __syncthreads();
    s[t] = 0.5f * (s[t] + v);
  }
  data[i] = s[t];
}

__global__ void warp_reduce(float* data) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = data[i];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  data[i] = v;
}

// Best and median of a few runs, in ms (the best is the runner's own cost; the
// median shows what a busy machine adds).
template <typename F>
std::pair<double, double> time_ms(F&& f, int reps = 9) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return {t.front(), t[t.size() / 2]};
}

TEST(HostRun, LaunchOverhead) {
  constexpr int kBlocks = 64, kThreads = 256, n = kBlocks * kThreads;
  DeviceArray<float> x(std::vector<float>(n, 1.0f)), y(std::vector<float>(n, 2.0f));
  ada::launch(four_barriers, kBlocks, kThreads, 0, nullptr, y.get());  // warm up: allocate the fibers
  struct Row {
    const char* what;
    std::function<void()> run;
  };
  const Row rows[] = {
      {"no barriers (saxpy)", [&] { ada::launch(saxpy, kBlocks, kThreads, 0, nullptr, y.get(), x.get(), 2.0f); }},
      {"4 __syncthreads per thread", [&] { ada::launch(four_barriers, kBlocks, kThreads, 0, nullptr, y.get()); }},
      {"5 __shfl_xor_sync per thread", [&] { ada::launch(warp_reduce, kBlocks, kThreads, 0, nullptr, y.get()); }},
  };
  for (const Row& row : rows) {
    ada::hostrun::reset_stats();
    const auto [best, median] = time_ms(row.run);
    const auto st = ada::hostrun::stats();
    std::printf("[ hostrun  ] %d x %d threads, %-28s best %6.3f ms, median %6.3f ms per launch "
                "(%.0f ns/thread, %llu switches)\n",
                kBlocks, kThreads, row.what, best, median, best * 1e6 / n,
                static_cast<unsigned long long>(st.switches / st.launches));
  }
}

}  // namespace
