// The tensor-core GEMMs of gemm_mma.h: first the reference gemm_mma_tile,
// then gemm_mma_pipelined (its own comment, further down).
//
// gemm_mma_tile: one warp computes one 16 x 8 tile of C = A B^T with
// cp.async, ldmatrix and mma.sync, the structure the full tensor-core GEMM
// scales up (more warps and tiles per block, more stages, swizzling).
//
// K advances in slices of 16 through a two-stage pipeline in shared memory:
// while slice s is multiplied, slice s + 1 is in flight. A slice of A is
// 16 x 16 bf16 = 32 chunks of 16 bytes (one per lane), a slice of B 8 x 16 =
// 16 chunks (lanes 0-15). Rows are padded to 24 elements (48 bytes): the 8 row
// addresses of one ldmatrix matrix then fall in 8 disjoint groups of 4 banks
// (48 r mod 128 bytes), so the loads are conflict-free.
#include <algorithm>
#include <cstdint>
#include <string>

#include "compat.h"
#include "device_util.h"
#include "launch.h"
#include "gemm_mma.h"
#include "warp_mma.h"

namespace ada::cuda {
namespace {

constexpr int kRowPad = 24;  // elements per shared row: 16 + 8

__global__ void __launch_bounds__(32) gemm_mma_tile_kernel(float* C, const __nv_bfloat16* A,
                                                           const __nv_bfloat16* B, int N, int K) {
  __shared__ __align__(16) __nv_bfloat16 As[2][16][kRowPad];
  __shared__ __align__(16) __nv_bfloat16 Bs[2][8][kRowPad];
  const int lane = static_cast<int>(threadIdx.x);
  const int m0 = static_cast<int>(blockIdx.y) * 16, n0 = static_cast<int>(blockIdx.x) * 8;
  const int row = lane / 2, half = 8 * (lane % 2);  // this lane's chunk of a slice

  auto load_slice = [&](int slice, int stage) {
    const int k = slice * 16 + half;
    ada::cuda::cp_async_16(&As[stage][row][half], A + size_t(m0 + row) * K + k);
    if (lane < 16) ada::cuda::cp_async_16(&Bs[stage][row][half], B + size_t(n0 + row) * K + k);
  };

  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const int slices = K / 16;
  load_slice(0, 0);
  ada::cuda::cp_async_commit();
  for (int s = 0; s < slices; ++s) {
    if (s + 1 < slices) load_slice(s + 1, (s + 1) % 2);
    ada::cuda::cp_async_commit();  // possibly empty: wait<1> below then always means "slice s"
    ada::cuda::cp_async_wait<1>();
    __syncwarp();  // the other lanes' chunks of slice s have landed
    const int st = s % 2;
    uint32_t a[4], b[2];
    // A quarters (rows 0-7 | 8-15) x (k 0-7 | 8-15) in mma's register order.
    ada::cuda::ldmatrix_x4(a, &As[st][lane % 8 + 8 * ((lane / 8) % 2)][8 * (lane / 16)]);
    // B rows n 0-7, k 0-7 and k 8-15 (lanes 16-31 repeat valid addresses, ignored).
    ada::cuda::ldmatrix_x2(b, &Bs[st][lane % 8][8 * ((lane / 8) % 2)]);
    ada::cuda::mma_m16n8k16_bf16(acc, a, b, acc);
    __syncwarp();  // everyone has read stage st before the next iteration refills it
  }
  // c[i] is C[g + 8 (i >> 1)][2t + (i & 1)].
  const int g = lane / 4, t = lane % 4;
  for (int i = 0; i < 4; ++i) C[size_t(m0 + g + 8 * (i / 2)) * N + n0 + 2 * t + (i % 2)] = acc[i];
}

}  // namespace

void gemm_mma_tile(cudaStream_t s, float* C, const __nv_bfloat16* A, const __nv_bfloat16* B, int M, int N, int K) {
  check(M > 0 && N > 0 && K > 0 && M % 16 == 0 && N % 8 == 0 && K % 16 == 0,
        "gemm_mma_tile: M must be a multiple of 16, N of 8 and K of 16 (got " + std::to_string(M) + " x " +
            std::to_string(N) + " x " + std::to_string(K) + ")");
  ada::launch(gemm_mma_tile_kernel, dim3(N / 8, M / 16), 32, 0, s, C, A, B, N, K);
}

// ============================================================================
// gemm_mma_pipelined: the tensor-core GEMM proper. The same three primitives
// as gemm_mma_tile, scaled up the way fast GEMMs are built:
//
// * Block tile 128 (M) x 128 (N), 8 warps laid out 2 (m) x 4 (n); each warp
//   owns a 64 x 32 warp tile = 4 x 4 mma tiles of 16 x 8, i.e. 64 fp32
//   accumulators per thread. Per 16-deep k step a warp loads 4 A fragments
//   (ldmatrix_x4 each) and 4 B fragments (two ldmatrix_x4) and issues 16 mma:
//   3 KB read from shared memory per 16 x 2048 multiply-adds, each fragment
//   reused 4 times from registers: the ldmatrix traffic stays within what
//   shared memory delivers while the tensor cores are busy.
//
// * K advances in slices of 32 through a 3-stage ring of shared-memory
//   buffers filled by cp.async. At the top of iteration s the thread waits for
//   its copies of slice s (wait_group<1>: only slice s + 1 may still be in
//   flight), one __syncthreads makes every thread's copies visible and
//   guarantees that every warp is done with slice s - 1; then slice s + 2 is
//   issued into the buffer slice s - 1 used, and slice s is multiplied while
//   s + 1 and s + 2 are in flight. One barrier per slice. Every iteration
//   commits a group, empty past the end, so that "wait_group<1>" always means
//   "slice s has landed" (the off-by-one that the runner's poison catches).
//
// * Operands go global -> shared by cp.async (16 bytes = 8 bf16 per copy, no
//   registers, no conversion) in the layout they have in memory: an operand
//   whose K is contiguous (A plain, B transposed) is staged as [128 rows][32 k],
//   one whose rows are contiguous (A transposed, B plain) as [32 k][128 rows].
//   ldmatrix reads the first kind plainly and the second with .trans, which
//   gives the mma fragments of the transposed operand without any data
//   movement: the four GemmShape cases cost the same.
//
// * Shared memory is XOR-swizzled instead of padded (so 3 stages of two 8 KB
//   tiles are exactly 48 KB of static shared memory; two blocks fit per SM).
//   Banks: 32 x 4 bytes = 128 bytes, i.e. 8 "bank groups" of 16 bytes; a
//   16-byte chunk at byte address a lies in group (a / 16) % 8. An ldmatrix
//   8x8 matrix reads 8 chunks (one per row address) and is conflict-free iff
//   they fall in 8 distinct groups; a quarter warp of cp.async stores (8
//   threads x 16 bytes) likewise.
//   - [128][32] tiles: a row is 64 bytes = 4 chunks, so unswizzled rows r and
//     r + 2 share groups (4-way conflicts for ldmatrix). Chunk c of row r is
//     stored at chunk c ^ ((r >> 1) & 3): its group is 4 (r & 1) + (c ^ ((r >> 1)
//     & 3)), and 8 consecutive rows at the same logical c cover all 8 groups
//     (every pair (r & 1, (r >> 1) & 3)). The copies: 8 consecutive threads
//     write rows 2i, 2i + 1, chunks 0-3, again 8 distinct groups.
//   - [32][128] tiles: a row is 256 bytes = 16 chunks, so unswizzled every
//     row's chunk c is in the same group (8-way conflicts for ldmatrix.trans,
//     whose 8 addresses are 8 consecutive k rows). Chunk c of row k is stored
//     at c ^ (k & 7): group (c ^ k) & 7, distinct over 8 consecutive k. The
//     copies: 8 consecutive threads write chunks 8j .. 8j + 7 of one row,
//     permuted within the same 128 bytes.
//
// * Bounds: rows (M or N) and k chunks past the end are zero-filled by the
//   src-size-0 form of cp.async, so the multiply needs no checks, and the
//   epilogue skips out-of-range stores. K must be a multiple of 8 (one chunk
//   is all in range or all out), as must the contiguous dimension of a
//   transposed operand.
//
// * Epilogue straight from the accumulators: c[i] of an mma tile holds
//   C[g + 8 (i >> 1)][2t + (i & 1)], so each thread owns pairs of adjacent
//   columns, stored as one float2 when C's rows are 8-byte aligned (a quad of
//   lanes then writes 32 contiguous bytes: full sectors). Accumulate (C +=)
//   reads C in the same pattern.
//
// * Split-K (blockIdx.z): for outputs with few tiles and a long K (weight
//   gradients, K = rows of the batch) each z takes a slice of K and writes its
//   partial product to a workspace; splitk_sum_kernel adds them in z order.
//
// Registers: at most 128 under __launch_bounds__(256, 2), no spills (the
// ptxas figures are at gemm_mma_pipelined_kernel), so two blocks (16 warps)
// share an SM.
namespace {

constexpr int kPBM = 128, kPBN = 128, kPBK = 32;  // block tile, K slice
constexpr int kPStages = 3;
constexpr int kPWarpsM = 2, kPWarpsN = 4, kPThreads = 32 * kPWarpsM * kPWarpsN;
constexpr int kPWM = kPBM / kPWarpsM, kPWN = kPBN / kPWarpsN;  // warp tile 64 x 32
constexpr int kPFragM = kPWM / 16, kPFragN = kPWN / 8;          // 4 x 4 mma tiles
constexpr int kPTileElems = kPBM * kPBK;                        // one operand, one stage
constexpr int kPChunksPerThread = kPTileElems / 8 / kPThreads;  // 16-byte copies per operand per slice
static_assert(kPBM == kPBN, "one staging geometry serves A and B");
static_assert(kPChunksPerThread * 8 * kPThreads == kPTileElems, "whole copies per thread");
static_assert(kPBK == 32, "the [rows][k] swizzle assumes 4 chunks per row");
static_assert(2 * kPStages * kPTileElems * 2 <= 48 * 1024, "static shared memory limit");

// Element offsets of chunk c (8 bf16) of a staged tile (see the swizzle above).
// [128 rows][32 k]: row r, chunk c in 0..3 (k = 8c .. 8c + 7).
__device__ __forceinline__ int kcontig_offset(int r, int c) { return r * kPBK + 8 * (c ^ ((r >> 1) & 3)); }
// [32 k][128 rows]: k row k, chunk c in 0..15 (rows 8c .. 8c + 7).
__device__ __forceinline__ int rcontig_offset(int k, int c) { return k * kPBM + 8 * (c ^ (k & 7)); }

struct PipelinedParams {
  const __nv_bfloat16* A;
  const __nv_bfloat16* B;
  float* C;
  int M, N, K, lda, ldb, ldc;
  int k_per_split;      // a multiple of kPBK
  size_t split_stride;  // C of split z = C + z * split_stride
  const float* R;       // the addend: C = A B + R (R == C accumulates), or null
  int ldr;
  int vec2;  // C's (and R's) rows and base 8-byte aligned: float2 stores
  // The SwiGLU epilogue only (gemm_mma_swiglu): C = gu (M, 2F), act (M, F).
  float* act = nullptr;
  int F = 0;
};

// The SwiGLU GEMM's B rows (gemm_mma_swiglu): the block's 128 staged rows
// are 8 groups of 16, group q holding the 8 gate rows u0 + 8q .. u0 + 8q + 7
// of W_gu and then the 8 up rows F + u0 + 8q .. of the same hidden units. So
// staged row r is unit u0 + 8 (r >> 4) + (r & 7), its up half when r & 8.
__device__ __forceinline__ int swiglu_unit(int u0, int r) { return u0 + 8 * (r >> 4) + (r & 7); }

// Issues the cp.async copies of one K slice of an operand into a stage.
// kKContig: the operand is stored with K contiguous (X[r * ld + k]), else with
// its rows contiguous (X[k * ld + r]). Rows r0 .. r0 + 127 of `rows`, K from k0
// (exclusive end kend); kSwiRows (K contiguous only): the rows of
// swiglu_unit(r0, r) with rows = F. Out-of-range chunks are zero-filled from
// the (valid, aligned) base address.
template <bool kKContig, bool kSwiRows = false>
__device__ __forceinline__ void load_slice(__nv_bfloat16* stage, const __nv_bfloat16* X, int ld, int rows, int r0,
                                           int k0, int kend) {
  static_assert(!kSwiRows || kKContig, "the SwiGLU row map is for B^T (weights stored (2F, K))");
  const int tid = static_cast<int>(threadIdx.x);
  ADA_UNROLL
  for (int i = 0; i < kPChunksPerThread; ++i) {
    const int e = tid + i * kPThreads;  // chunk index: consecutive threads, consecutive addresses
    int r, k, dst;
    if (kKContig) {
      r = e / 4, k = 8 * (e % 4), dst = kcontig_offset(r, e % 4);
    } else {
      k = e / 16, r = 8 * (e % 16), dst = rcontig_offset(k, e % 16);
    }
    int gr = r0 + r;
    bool row_ok = gr < rows;
    if (kSwiRows) {
      const int u = swiglu_unit(r0, r);
      gr = (r & 8) ? rows + u : u, row_ok = u < rows;
    }
    const int gk = k0 + k;
    const bool valid = row_ok && gk < kend;
    const __nv_bfloat16* src = X;
    if (valid) src += kKContig ? static_cast<size_t>(gr) * ld + gk : static_cast<size_t>(gk) * ld + gr;
    ada::cuda::cp_async_16_zfill(stage + dst, src, valid);
  }
}

// The mma A fragments of the warp's 4 m16 tiles at k step kk (0 or 16) of a
// staged slice. Lane l addresses one row of one of the four 8x8 matrices
// (matrix q = l / 8) in the order of mma's a[0..3]: (m 0-7, k 0-7),
// (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15).
template <bool kKContig>
__device__ __forceinline__ void load_a_frags(uint32_t (&a)[kPFragM][4], const __nv_bfloat16* st, int wm0, int kk,
                                             int lane) {
  ADA_UNROLL
  for (int i = 0; i < kPFragM; ++i) {
    const int m = wm0 + 16 * i;
    if (kKContig) {  // row = m, 16-byte chunk along k: plain ldmatrix
      ada::cuda::ldmatrix_x4(a[i], st + kcontig_offset(m + (lane & 15), kk / 8 + (lane >> 4)));
    } else {  // staged [k][m]: lane l passes k row kk + l % 8 (+ 8 for q >= 2), m half q & 1; .trans
      ada::cuda::ldmatrix_x4_trans(a[i], st + rcontig_offset(kk + (lane & 7) + 8 * (lane >> 4),
                                                             m / 8 + ((lane >> 3) & 1)));
    }
  }
}

// The mma B fragments of the warp's 4 n8 tiles at k step kk: one ldmatrix_x4
// per pair of n8 tiles, matrices (n 0-7, k 0-7), (n 0-7, k 8-15),
// (n 8-15, k 0-7), (n 8-15, k 8-15) = b[2p][0], b[2p][1], b[2p+1][0], b[2p+1][1].
template <bool kKContig>
__device__ __forceinline__ void load_b_frags(uint32_t (&b)[kPFragN][2], const __nv_bfloat16* st, int wn0, int kk,
                                             int lane) {
  ADA_UNROLL
  for (int p = 0; p < kPFragN / 2; ++p) {
    const int n = wn0 + 16 * p;
    uint32_t r[4];
    if (kKContig) {  // staged [n][k] (B^T row-major, y = x W^T): plain
      ada::cuda::ldmatrix_x4(r, st + kcontig_offset(n + (lane & 7) + 8 * (lane >> 4), kk / 8 + ((lane >> 3) & 1)));
    } else {  // staged [k][n] (dx = dy W, dW = dy^T x): .trans
      ada::cuda::ldmatrix_x4_trans(r, st + rcontig_offset(kk + (lane & 7) + 8 * ((lane >> 3) & 1),
                                                          n / 8 + (lane >> 4)));
    }
    b[2 * p][0] = r[0], b[2 * p][1] = r[1], b[2 * p + 1][0] = r[2], b[2 * p + 1][1] = r[3];
  }
}

// C = v0, v1 (+ the addend) at (m, n), (m, n + 1); n is even.
__device__ __forceinline__ void store_pair(const PipelinedParams& p, float* C, int m, int n, float v0, float v1) {
  if (m >= p.M || n >= p.N) return;
  float* c = C + static_cast<size_t>(m) * p.ldc + n;
  const float* r = p.R ? p.R + static_cast<size_t>(m) * p.ldr + n : nullptr;
  if (p.vec2 && n + 1 < p.N) {
    float2 v = make_float2(v0, v1);
    if (r) {
      const float2 old = *reinterpret_cast<const float2*>(r);
      v.x = old.x + v.x, v.y = old.y + v.y;
    }
    *reinterpret_cast<float2*>(c) = v;
  } else {
    c[0] = r ? r[0] + v0 : v0;
    if (n + 1 < p.N) c[1] = r ? r[1] + v1 : v1;
  }
}

// The SwiGLU epilogue: gate a and up u of hidden units j, j + 1 of row m
// (j even) -> gu[m][j], gu[m][F + j] (what the backward keeps) and
// act[m][j] = silu(a) u, the formula and rounding of swiglu_forward_kernel.
__device__ __forceinline__ float swiglu_value(float a, float u) { return a * (1.0f / (1.0f + expf(-a))) * u; }
__device__ __forceinline__ void store_swiglu(const PipelinedParams& p, int m, int j, float a0, float a1, float u0,
                                             float u1) {
  if (m >= p.M || j >= p.F) return;
  float* gu = p.C + static_cast<size_t>(m) * 2 * p.F + j;
  float* act = p.act + static_cast<size_t>(m) * p.F + j;
  if (p.vec2) {  // F even: j + 1 < F, and every pair 8-byte aligned
    *reinterpret_cast<float2*>(gu) = make_float2(a0, a1);
    *reinterpret_cast<float2*>(gu + p.F) = make_float2(u0, u1);
    *reinterpret_cast<float2*>(act) = make_float2(swiglu_value(a0, u0), swiglu_value(a1, u1));
  } else {
    gu[0] = a0, gu[p.F] = u0, act[0] = swiglu_value(a0, u0);
    if (j + 1 < p.F) gu[1] = a1, gu[p.F + 1] = u1, act[1] = swiglu_value(a1, u1);
  }
}

// ptxas -v for sm_90 (CUDA 13.0 nvcc -O3, as the Makefile builds cuda/*.cu): registers
// 128 (A B), 122 (A B^T), 120 (A^T B), 128 (A^T B^T), 126 (A B^T with the
// SwiGLU epilogue); 0 bytes of stack and spills; 49152 bytes of shared memory; 1 barrier. __launch_bounds__(256, 2)
// is what holds them at 128 (64 accumulators + 24 fragment registers +
// addresses): two blocks per SM. Recheck after any change with
// `make ptxas-gemm-mma` (prints these figures, fails on a spill or > 128).
// kSwiGLU: gemm_mma_swiglu (A B^T only): B's rows staged by swiglu_unit, so
// a warp's mma tiles 2q and 2q + 1 hold the gate and the up halves of the
// same 8 hidden units and each thread finishes SwiGLU from its own registers.
template <bool kTransA, bool kTransB, bool kSwiGLU = false>
__global__ void __launch_bounds__(kPThreads, 2) gemm_mma_pipelined_kernel(PipelinedParams p) {
  static_assert(!kSwiGLU || (!kTransA && kTransB), "the SwiGLU epilogue follows y = x W^T");
  // A plain has K contiguous; B has K contiguous when transposed (B^T rows).
  constexpr bool kAK = !kTransA, kBK = kTransB;
  __shared__ __align__(128) __nv_bfloat16 As[kPStages][kPTileElems];
  __shared__ __align__(128) __nv_bfloat16 Bs[kPStages][kPTileElems];

  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int wm0 = (warp / kPWarpsN) * kPWM, wn0 = (warp % kPWarpsN) * kPWN;  // warp tile in the block tile
  const int m0 = static_cast<int>(blockIdx.y) * kPBM, n0 = static_cast<int>(blockIdx.x) * kPBN;
  const int kb = static_cast<int>(blockIdx.z) * p.k_per_split;
  const int ke = min(p.K, kb + p.k_per_split);
  const int slices = (ke - kb + kPBK - 1) / kPBK;
  float* C = p.C + blockIdx.z * p.split_stride;

  auto issue = [&](int s) {  // copies of slice s into stage s % kPStages
    const int k0 = kb + s * kPBK, st = s % kPStages;
    load_slice<kAK>(As[st], p.A, p.lda, p.M, m0, k0, ke);
    if (kSwiGLU)
      load_slice<kBK, kSwiGLU>(Bs[st], p.B, p.ldb, p.F, n0 / 2, k0, ke);  // units n0 / 2 .. n0 / 2 + 63
    else
      load_slice<kBK>(Bs[st], p.B, p.ldb, p.N, n0, k0, ke);
  };

  float acc[kPFragM][kPFragN][4];
  ADA_UNROLL
  for (int i = 0; i < kPFragM; ++i)
    ADA_UNROLL
    for (int j = 0; j < kPFragN; ++j)
      ADA_UNROLL
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

  // Prologue: slices 0 .. kPStages - 2 in flight, one group each.
  ADA_UNROLL
  for (int s = 0; s < kPStages - 1; ++s) {
    if (s < slices) issue(s);
    ada::cuda::cp_async_commit();
  }

  for (int s = 0; s < slices; ++s) {
    ada::cuda::cp_async_wait<kPStages - 2>();  // this thread's copies of slice s have landed
    __syncthreads();  // everyone's have; and everyone is done with slice s - 1's stage
    if (s + kPStages - 1 < slices) issue(s + kPStages - 1);  // into slice s - 1's stage
    ada::cuda::cp_async_commit();                              // possibly empty: keeps the count

    const __nv_bfloat16* as = As[s % kPStages];
    const __nv_bfloat16* bs = Bs[s % kPStages];
    ADA_UNROLL
    for (int kk = 0; kk < kPBK; kk += 16) {
      uint32_t a[kPFragM][4], b[kPFragN][2];
      load_a_frags<kAK>(a, as, wm0, kk, lane);
      load_b_frags<kBK>(b, bs, wn0, kk, lane);
      ADA_UNROLL
      for (int i = 0; i < kPFragM; ++i)
        ADA_UNROLL
        for (int j = 0; j < kPFragN; ++j) ada::cuda::mma_m16n8k16_bf16(acc[i][j], a[i], b[j], acc[i][j]);
    }
  }
  ada::cuda::cp_async_wait<0>();  // only empty groups remain; leave none behind

  // Epilogue: c[r] = C[g + 8 (r >> 1)][2t + (r & 1)] of each mma tile.
  const int g = lane / 4, t = lane % 4;
  if (kSwiGLU) {  // tile 2q: gate, 2q + 1: up, of units n0 / 2 + wn0 / 2 + 8 q + 2t (+ 1)
    ADA_UNROLL
    for (int i = 0; i < kPFragM; ++i)
      ADA_UNROLL
      for (int q = 0; q < kPFragN / 2; ++q) {
        const int m = m0 + wm0 + 16 * i + g, j = (n0 + wn0) / 2 + 8 * q + 2 * t;
        const float* a = acc[i][2 * q];
        const float* u = acc[i][2 * q + 1];
        store_swiglu(p, m, j, a[0], a[1], u[0], u[1]);
        store_swiglu(p, m + 8, j, a[2], a[3], u[2], u[3]);
      }
    return;
  }
  ADA_UNROLL
  for (int i = 0; i < kPFragM; ++i)
    ADA_UNROLL
    for (int j = 0; j < kPFragN; ++j) {
      const int m = m0 + wm0 + 16 * i + g, n = n0 + wn0 + 8 * j + 2 * t;
      store_pair(p, C, m, n, acc[i][j][0], acc[i][j][1]);
      store_pair(p, C, m + 8, n, acc[i][j][2], acc[i][j][3]);
    }
}

// C (M, N) = sum over z of work[z] (M x N contiguous), added in z order,
// plus the addend R (ldr) when there is one.
__global__ void __launch_bounds__(256) splitk_sum_kernel(float* C, int ldc, const float* R, int ldr,
                                                         const float* work, int M, int N, int splits) {
  const size_t mn = static_cast<size_t>(M) * N;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < mn;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float t = 0.0f;
    for (int z = 0; z < splits; ++z) t += work[z * mn + i];
    const size_t m = i / N, n = i % N;
    C[m * ldc + n] = R ? R[m * ldr + n] + t : t;
  }
}

__global__ void __launch_bounds__(256) f32_to_bf16_kernel(__nv_bfloat16* y, const float* x, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    y[i] = __float2bfloat16(x[i]);
}

using PipelinedKernel = void (*)(PipelinedParams);
PipelinedKernel pipelined_kernel(bool ta, bool tb) {
  if (ta) return tb ? gemm_mma_pipelined_kernel<true, true> : gemm_mma_pipelined_kernel<true, false>;
  return tb ? gemm_mma_pipelined_kernel<false, true> : gemm_mma_pipelined_kernel<false, false>;
}

std::string shape_text(const GemmShape& g) {
  return std::string("(got ") + (g.trans_a ? "A^T " : "A ") + (g.trans_b ? "B^T, " : "B, ") + std::to_string(g.M) +
         " x " + std::to_string(g.N) + " x " + std::to_string(g.K) + ", lda " + std::to_string(g.lda) + ", ldb " +
         std::to_string(g.ldb) + ")";
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

int gemm_mma_pipelined_auto_splits(const GemmShape& g) {
  // Split only when the output has under one wave of blocks (132 SMs) and K is
  // long; aim at two blocks per SM, each split at least 512 deep (16 slices:
  // the pipeline runs full most of the time and the partial sums' extra
  // traffic, splits x M x N x 8 bytes, stays small beside the reads of A, B).
  const long long tiles = static_cast<long long>(blocks_for(g.M, kPBM)) * blocks_for(g.N, kPBN);
  constexpr long long kTargetBlocks = 264;
  constexpr int kMinKPerSplit = 512;
  if (tiles >= kTargetBlocks / 2 || g.K < 2 * kMinKPerSplit) return 1;
  long long s = (kTargetBlocks + tiles - 1) / tiles;
  s = std::min<long long>(s, g.K / kMinKPerSplit);
  s = std::min<long long>(s, 16);
  return s > 1 ? static_cast<int>(s) : 1;
}

size_t gemm_mma_pipelined_work_bytes(const GemmShape& g, int splits) {
  return splits > 1 ? static_cast<size_t>(splits) * g.M * g.N * sizeof(float) : 0;
}

void gemm_mma_pipelined(cudaStream_t s, const GemmShape& g, const __nv_bfloat16* A, const __nv_bfloat16* B,
                        float* C, bool accumulate, void* work, int splits) {
  gemm_mma_pipelined_add(s, g, A, B, accumulate ? C : nullptr, g.ldc, C, work, splits);
}

void gemm_mma_pipelined_add(cudaStream_t s, const GemmShape& g, const __nv_bfloat16* A, const __nv_bfloat16* B,
                            const float* R, int ldr, float* C, void* work, int splits) {
  const std::string name = "gemm_mma_pipelined: ";
  check(g.K > 0 && g.K % 8 == 0, name + "K must be a positive multiple of 8 " + shape_text(g));
  check(g.lda % 8 == 0 && g.ldb % 8 == 0 && aligned16(A) && aligned16(B),
        name + "lda and ldb must be multiples of 8 and A, B 16-byte aligned (16-byte cp.async rows) " +
            shape_text(g));
  check(!g.trans_a || g.M % 8 == 0, name + "with trans_a, M must be a multiple of 8 " + shape_text(g));
  check(g.trans_b || g.N % 8 == 0, name + "without trans_b, N must be a multiple of 8 " + shape_text(g));
  if (g.M <= 0 || g.N <= 0) return;
  check(g.ldc >= g.N && g.lda >= (g.trans_a ? g.M : g.K) && g.ldb >= (g.trans_b ? g.K : g.N),
        name + "a leading dimension is shorter than its row " + shape_text(g));
  check(blocks_for(g.M, kPBM) <= 65535,
        name + "M needs more than 65535 block rows (grid.y) " + shape_text(g));
  if (splits <= 0) splits = gemm_mma_pipelined_auto_splits(g);
  const int kslices = static_cast<int>(blocks_for(g.K, kPBK));
  splits = std::min(splits, kslices);
  const int k_per_split = static_cast<int>(blocks_for(kslices, splits)) * kPBK;
  splits = static_cast<int>(blocks_for(g.K, k_per_split));  // no empty split

  check(!R || R == C || ldr >= g.N, name + "the addend's leading dimension is shorter than its row " + shape_text(g));
  PipelinedParams p{A, B, C, g.M, g.N, g.K, g.lda, g.ldb, g.ldc, k_per_split, 0, R, ldr, 0};
  if (splits > 1) {  // the slices' partial products go to the workspace; the sum adds R
    check(work != nullptr, name + "split-K needs a workspace (gemm_mma_pipelined_work_bytes)");
    p.C = static_cast<float*>(work);
    p.ldc = g.N;
    p.split_stride = static_cast<size_t>(g.M) * g.N;
    p.R = nullptr;
  }
  const auto pairs8 = [](const float* q, int ld) { return ld % 2 == 0 && reinterpret_cast<uintptr_t>(q) % 8 == 0; };
  p.vec2 = (pairs8(p.C, p.ldc) && (!p.R || pairs8(p.R, p.ldr))) ? 1 : 0;
  const dim3 grid(blocks_for(g.N, kPBN), blocks_for(g.M, kPBM), static_cast<unsigned>(splits));
  ada::launch(pipelined_kernel(g.trans_a, g.trans_b), grid, kPThreads, 0, s, p);
  if (splits > 1) {
    const size_t mn = static_cast<size_t>(g.M) * g.N;
    ada::launch(splitk_sum_kernel, grid_stride_blocks(mn, 256), 256, 0, s, C, g.ldc, R, ldr,
                static_cast<const float*>(work), g.M, g.N, splits);
  }
}

void gemm_mma_swiglu(cudaStream_t s, const __nv_bfloat16* X, int ldx, const __nv_bfloat16* W, int ldw, int M, int K,
                     int F, float* gu, float* act) {
  const std::string name = "gemm_mma_swiglu: ";
  const std::string got = "(got " + std::to_string(M) + " x 2*" + std::to_string(F) + " x " + std::to_string(K) +
                          ", ldx " + std::to_string(ldx) + ", ldw " + std::to_string(ldw) + ")";
  check(K > 0 && K % 8 == 0, name + "K must be a positive multiple of 8 " + got);
  check(ldx % 8 == 0 && ldw % 8 == 0 && aligned16(X) && aligned16(W) && ldx >= K && ldw >= K,
        name + "ldx and ldw must be multiples of 8, at least K, and X, W 16-byte aligned " + got);
  check(F > 0 && M >= 0, name + "F must be positive and M not negative " + got);
  if (M == 0) return;
  check(blocks_for(M, kPBM) <= 65535, name + "M needs more than 65535 block rows (grid.y) " + got);
  PipelinedParams p{X, W, gu, M, 2 * F, K, ldx, ldw, 2 * F, 0, 0, nullptr, 0, 0};  // no addend
  p.k_per_split = static_cast<int>(blocks_for(K, kPBK)) * kPBK;  // one split: the epilogue is not linear
  p.act = act, p.F = F;
  p.vec2 = (F % 2 == 0 && reinterpret_cast<uintptr_t>(gu) % 8 == 0 && reinterpret_cast<uintptr_t>(act) % 8 == 0);
  const dim3 grid(blocks_for(F, kPBN / 2), blocks_for(M, kPBM), 1);
  ada::launch(gemm_mma_pipelined_kernel<false, true, true>, grid, kPThreads, 0, s, p);
}

void convert_f32_to_bf16(cudaStream_t s, __nv_bfloat16* y, const float* x, size_t n) {
  if (n == 0) return;
  ada::launch(f32_to_bf16_kernel, grid_stride_blocks(n, 256), 256, 0, s, y, x, n);
}

}  // namespace ada::cuda
