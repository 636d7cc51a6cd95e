// GEMM for every matrix product of the model (src/ops/linear.h):
//   C (M, Nc) = op(A) (M, K) op(B) (K, Nc)   (+ R, the addend, when given)
// with op(A) = A or A^T and op(B) = B or B^T of row-major fp32 matrices, so
// one kernel family covers
//   y  = x W^T  (forward, trans_b)      dx = dy W  (backward)
//   dW += dy^T x  (weight gradient, trans_a)      y = x W  (soft embedding)
// and ragged sizes (any M, Nc, K: out-of-range loads read 0, out-of-range
// stores are skipped). The addend R is C itself when accumulating, or another
// matrix: the residual stream of a block, x_mid = x + att Wo^T, in one pass
// instead of a copy and an accumulate (gemm_add). C is never read unless it
// is the addend (device memory starts as garbage; 0 * NaN would be NaN).
//
// Two paths, chosen at run time (GemmPrecision):
//
// * SIMT fp32 (the reference-accuracy path). A 128 x 128 output tile per block
//   of 256 threads, each thread an 8 x 8 register micro-tile at rows
//   ty + 16 i and columns tx + 16 j (conflict-free shared reads, coalesced
//   stores). K advances in slices of 8: the slice of A (128 x 8) and of B
//   (8 x 128) is staged k-major in shared memory, and the next slice is
//   prefetched into registers while the current one is multiplied.
//
// * Tensor cores through WMMA (Bf16 or Tf32). A 128 x 128 tile per block of 8
//   warps laid out 2 x 4; each warp owns 64 x 32 = 4 x 2 fragments of 16 x 16
//   fp32 accumulators. K advances in slices of 32: the fp32 slice is loaded
//   from global memory (coalesced along whichever dimension is contiguous),
//   rounded to bf16 (or tf32) and stored to shared memory as A[m][k] and
//   B[n][k] (k contiguous, padded rows: matrix_a row_major and matrix_b
//   col_major fragments), again with a register prefetch of the next slice.
//   The epilogue goes through a per-warp 16 x 16 staging tile in shared
//   memory so that the bounds checks and the accumulate are ordinary code.
//
// Split-K: when the output has too few tiles for the GPU and K is long
// (weight gradients: K = rows of the batch), blockIdx.z takes a slice of K,
// writes its partial product to the workspace, and a second kernel adds the
// slices in order into C. Deterministic (no atomics).
#include <cstdlib>
#include <cstring>
#include <string>

#include "compat.h"
#include "launch.h"
#include "device_util.h"
#include "gemm_mma.h"
#include "kernels.h"

// WMMA with bf16 and tf32 inputs exists from sm_80: a device pass for an
// older architecture (make train_gpu CUDA_ARCHS=75) stops here with this
// message rather than with errors from inside <mma.h>.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "cuda/gemm.cu: the tensor-core GEMMs (WMMA with bf16/tf32 inputs) need sm_80 or newer; build for CUDA_ARCHS of 80 and up"
#endif

namespace ada::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kTileM = 128, kTileN = 128;

// ---- operand access -------------------------------------------------------
// op(A)(m, k): A (M, K) row-major, or stored transposed as (K, M).
template <bool kTransA>
__device__ __forceinline__ float load_a(const float* A, int lda, int M, int K, int m, int k) {
  if (m >= M || k >= K) return 0.0f;
  return kTransA ? A[static_cast<size_t>(k) * lda + m] : A[static_cast<size_t>(m) * lda + k];
}
// op(B)(k, n): B (K, Nc) row-major, or stored transposed as (Nc, K).
template <bool kTransB>
__device__ __forceinline__ float load_b(const float* B, int ldb, int K, int N, int k, int n) {
  if (k >= K || n >= N) return 0.0f;
  return kTransB ? B[static_cast<size_t>(n) * ldb + k] : B[static_cast<size_t>(k) * ldb + n];
}

// Element e (0 .. rows*cols) of a rows x kcols tile, mapped so that
// consecutive threads walk the dimension that is contiguous in memory.
//   k contiguous (A not transposed, B transposed): (r, k) = (e / kcols, e % kcols)
//   r contiguous (A transposed, B not transposed): (r, k) = (e % rows, e / rows)
template <bool kRowContiguous, int kRows, int kCols>
__device__ __forceinline__ void tile_coord(int e, int& r, int& k) {
  if (kRowContiguous) {
    r = e % kRows;
    k = e / kRows;
  } else {
    r = e / kCols;
    k = e % kCols;
  }
}

// Parameters of one launch; C_z = C + blockIdx.z * split_stride.
struct GemmParams {
  const float* A;
  const float* B;
  float* C;
  int M, N, K, lda, ldb, ldc;
  int k_per_split;  // multiple of the K slice
  size_t split_stride;
  // The addend: C = op(A) op(B) + R (R (M, N), leading dimension ldr), or
  // plain C = op(A) op(B) when R is null. R == C (ldr == ldc) accumulates.
  const float* R;
  int ldr;
};

// The value stored at (m, n): the product plus the addend, if any.
__device__ __forceinline__ float with_addend(const GemmParams& g, int m, int n, float v) {
  return g.R ? g.R[static_cast<size_t>(m) * g.ldr + n] + v : v;
}

// ==== SIMT fp32 ==============================================================
constexpr int kSimtK = 8;
constexpr int kSimtLoads = kTileM * kSimtK / kThreads;  // 4 per thread for A and for B

template <bool kTransA, bool kTransB>
__device__ __forceinline__ void simt_fetch(const GemmParams& g, int m0, int n0, int k0, float (&ra)[kSimtLoads],
                                           float (&rb)[kSimtLoads]) {
  const int t = static_cast<int>(threadIdx.x);
  ADA_UNROLL
  for (int i = 0; i < kSimtLoads; i++) {
    int r, k;
    tile_coord<kTransA, kTileM, kSimtK>(t + i * kThreads, r, k);
    ra[i] = load_a<kTransA>(g.A, g.lda, g.M, g.K, m0 + r, k0 + k);
    tile_coord<!kTransB, kTileN, kSimtK>(t + i * kThreads, r, k);
    rb[i] = load_b<kTransB>(g.B, g.ldb, g.K, g.N, k0 + k, n0 + r);
  }
}

template <bool kTransA, bool kTransB>
__device__ __forceinline__ void simt_stage(float (*As)[kTileM + 4], float (*Bs)[kTileN + 4],
                                           const float (&ra)[kSimtLoads], const float (&rb)[kSimtLoads]) {
  const int t = static_cast<int>(threadIdx.x);
  ADA_UNROLL
  for (int i = 0; i < kSimtLoads; i++) {
    int r, k;
    tile_coord<kTransA, kTileM, kSimtK>(t + i * kThreads, r, k);
    As[k][r] = ra[i];
    tile_coord<!kTransB, kTileN, kSimtK>(t + i * kThreads, r, k);
    Bs[k][r] = rb[i];
  }
}

template <bool kTransA, bool kTransB>
__global__ void __launch_bounds__(kThreads) gemm_simt_kernel(GemmParams g) {
  __shared__ float As[kSimtK][kTileM + 4];  // As[k][m]
  __shared__ float Bs[kSimtK][kTileN + 4];  // Bs[k][n]
  const int tx = static_cast<int>(threadIdx.x % 16), ty = static_cast<int>(threadIdx.x / 16);
  const int m0 = static_cast<int>(blockIdx.x) * kTileM, n0 = static_cast<int>(blockIdx.y) * kTileN;
  const int kb = static_cast<int>(blockIdx.z) * g.k_per_split;
  const int ke = min(g.K, kb + g.k_per_split);
  float* C = g.C + blockIdx.z * g.split_stride;

  float acc[8][8];
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;
  float ra[kSimtLoads], rb[kSimtLoads];

  GemmParams gk = g;
  gk.K = ke;  // loads past this split's end read 0
  if (kb < ke) simt_fetch<kTransA, kTransB>(gk, m0, n0, kb, ra, rb);
  for (int k0 = kb; k0 < ke; k0 += kSimtK) {
    simt_stage<kTransA, kTransB>(As, Bs, ra, rb);
    __syncthreads();
    if (k0 + kSimtK < ke) simt_fetch<kTransA, kTransB>(gk, m0, n0, k0 + kSimtK, ra, rb);
    ADA_UNROLL
    for (int kk = 0; kk < kSimtK; kk++) {
      float a[8], b[8];
      for (int i = 0; i < 8; i++) a[i] = As[kk][ty + 16 * i];
      for (int j = 0; j < 8; j++) b[j] = Bs[kk][tx + 16 * j];
      for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
  for (int i = 0; i < 8; i++) {
    const int m = m0 + ty + 16 * i;
    if (m >= g.M) continue;
    for (int j = 0; j < 8; j++) {
      const int n = n0 + tx + 16 * j;
      if (n >= g.N) continue;
      C[static_cast<size_t>(m) * g.ldc + n] = with_addend(g, m, n, acc[i][j]);
    }
  }
}

// ==== tensor cores (WMMA) ====================================================
// The two input precisions differ in the shared-memory element type, the
// fragment type and the K depth of one mma.
struct Bf16Traits {
  using Smem = __nv_bfloat16;  // shared-memory element
  using Frag = __nv_bfloat16;  // fragment element type
  static constexpr int kStep = 16, kPad = 8;
  static __device__ __forceinline__ Smem convert(float x) { return __float2bfloat16(x); }
};
struct Tf32Traits {
  using Smem = float;
  using Frag = nvcuda::wmma::precision::tf32;
  static constexpr int kStep = 8, kPad = 4;
  static __device__ __forceinline__ Smem convert(float x) { return nvcuda::wmma::__float_to_tf32(x); }
};

constexpr int kWmmaK = 32;
constexpr int kWmmaLoads = kTileM * kWmmaK / kThreads;  // 16 per thread for A and for B
constexpr int kWarpM = 64, kWarpN = 32;                 // warp tile; warps 2 (m) x 4 (n)
constexpr int kFragM = kWarpM / 16, kFragN = kWarpN / 16;

template <bool kTransA, bool kTransB>
__device__ __forceinline__ void wmma_fetch(const GemmParams& g, int m0, int n0, int k0, float (&ra)[kWmmaLoads],
                                           float (&rb)[kWmmaLoads]) {
  const int t = static_cast<int>(threadIdx.x);
  ADA_UNROLL
  for (int i = 0; i < kWmmaLoads; i++) {
    int r, k;
    tile_coord<kTransA, kTileM, kWmmaK>(t + i * kThreads, r, k);
    ra[i] = load_a<kTransA>(g.A, g.lda, g.M, g.K, m0 + r, k0 + k);
    tile_coord<!kTransB, kTileN, kWmmaK>(t + i * kThreads, r, k);
    rb[i] = load_b<kTransB>(g.B, g.ldb, g.K, g.N, k0 + k, n0 + r);
  }
}

template <class Tr, bool kTransA, bool kTransB>
__global__ void __launch_bounds__(kThreads) gemm_wmma_kernel(GemmParams g) {
  using namespace nvcuda;
  using Smem = typename Tr::Smem;
  constexpr int kLd = kWmmaK + Tr::kPad;  // row length in shared memory (multiple of 16 bytes)
  __shared__ __align__(32) Smem As[kTileM * kLd];  // As[m][k]
  __shared__ __align__(32) Smem Bs[kTileN * kLd];  // Bs[n][k]
  __shared__ __align__(32) float Cs[kThreads / 32][16 * 16];

  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int wm = warp / 4, wn = warp % 4;
  const int m0 = static_cast<int>(blockIdx.x) * kTileM, n0 = static_cast<int>(blockIdx.y) * kTileN;
  const int kb = static_cast<int>(blockIdx.z) * g.k_per_split;
  const int ke = min(g.K, kb + g.k_per_split);
  float* C = g.C + blockIdx.z * g.split_stride;

  wmma::fragment<wmma::accumulator, 16, 16, Tr::kStep, float> acc[kFragM][kFragN];
  ADA_UNROLL
  for (int i = 0; i < kFragM; i++)
    ADA_UNROLL
    for (int j = 0; j < kFragN; j++) wmma::fill_fragment(acc[i][j], 0.0f);

  float ra[kWmmaLoads], rb[kWmmaLoads];
  GemmParams gk = g;
  gk.K = ke;
  if (kb < ke) wmma_fetch<kTransA, kTransB>(gk, m0, n0, kb, ra, rb);
  for (int k0 = kb; k0 < ke; k0 += kWmmaK) {
    const int t = static_cast<int>(threadIdx.x);
    ADA_UNROLL
    for (int i = 0; i < kWmmaLoads; i++) {
      int r, k;
      tile_coord<kTransA, kTileM, kWmmaK>(t + i * kThreads, r, k);
      As[r * kLd + k] = Tr::convert(ra[i]);
      tile_coord<!kTransB, kTileN, kWmmaK>(t + i * kThreads, r, k);
      Bs[r * kLd + k] = Tr::convert(rb[i]);
    }
    __syncthreads();
    if (k0 + kWmmaK < ke) wmma_fetch<kTransA, kTransB>(gk, m0, n0, k0 + kWmmaK, ra, rb);
    ADA_UNROLL
    for (int kk = 0; kk < kWmmaK; kk += Tr::kStep) {
      wmma::fragment<wmma::matrix_a, 16, 16, Tr::kStep, typename Tr::Frag, wmma::row_major> fa[kFragM];
      wmma::fragment<wmma::matrix_b, 16, 16, Tr::kStep, typename Tr::Frag, wmma::col_major> fb[kFragN];
      ADA_UNROLL
      for (int i = 0; i < kFragM; i++) wmma::load_matrix_sync(fa[i], &As[(wm * kWarpM + i * 16) * kLd + kk], kLd);
      ADA_UNROLL
      for (int j = 0; j < kFragN; j++) wmma::load_matrix_sync(fb[j], &Bs[(wn * kWarpN + j * 16) * kLd + kk], kLd);
      ADA_UNROLL
      for (int i = 0; i < kFragM; i++)
        ADA_UNROLL
        for (int j = 0; j < kFragN; j++) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }
  // Epilogue: each fragment through the warp's staging tile.
  ADA_UNROLL
  for (int i = 0; i < kFragM; i++)
    ADA_UNROLL
    for (int j = 0; j < kFragN; j++) {
      wmma::store_matrix_sync(Cs[warp], acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < 256; e += 32) {
        const int m = m0 + wm * kWarpM + i * 16 + e / 16, n = n0 + wn * kWarpN + j * 16 + e % 16;
        if (m < g.M && n < g.N) C[static_cast<size_t>(m) * g.ldc + n] = with_addend(g, m, n, Cs[warp][e]);
      }
      __syncwarp();
    }
}

// ==== split-K reduction =======================================================
// C (M, N) = sum_z work[z] (M, N contiguous), slices added in order, plus
// the addend R (ldr) when there is one.
__global__ void __launch_bounds__(kThreads) splitk_reduce_kernel(float* C, int ldc, const float* R, int ldr,
                                                                 const float* work, int M, int N, int splits) {
  const size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x;
  const size_t mn = static_cast<size_t>(M) * N;
  if (i >= mn) return;
  float t = 0.0f;
  for (int z = 0; z < splits; z++) t += work[z * mn + i];
  const size_t m = i / N, n = i % N;
  C[m * ldc + n] = R ? R[m * ldr + n] + t : t;
}

// ==== Bf16Mma: bf16 copies, then gemm_mma_pipelined ============================
// dst (rows_pad, ldd) = src (rows, cols; leading dimension lds) rounded to
// bf16, zero past rows and cols: a copy with 16-byte rows that the
// pipelined kernel can read with cp.async, and a K padded to a multiple of 8
// with zeros (which add nothing).
__global__ void __launch_bounds__(kThreads) to_bf16_padded_kernel(__nv_bfloat16* dst, int ldd, int rows_pad,
                                                                  const float* src, int lds, int rows, int cols) {
  const size_t n = static_cast<size_t>(rows_pad) * ldd;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int r = static_cast<int>(i / ldd), c = static_cast<int>(i % ldd);
    dst[i] = __float2bfloat16(r < rows && c < cols ? src[static_cast<size_t>(r) * lds + c] : 0.0f);
  }
}

int round8(int x) { return (x + 7) / 8 * 8; }

// Whether gemm_mma_pipelined takes the shape once A and B are padded copies.
bool mma_eligible(const GemmShape& g) {
  return g.K > 0 && (!g.trans_a || g.M % 8 == 0) && (g.trans_b || g.N % 8 == 0) && blocks_for(g.M, 128) <= 65535;
}

// The shape of the product on the copies: K rounded up to 8, rows of 16 bytes.
GemmShape mma_shape(const GemmShape& g) {
  GemmShape m = g;
  m.K = round8(g.K);
  m.lda = g.trans_a ? round8(g.M) : m.K;
  m.ldb = g.trans_b ? m.K : round8(g.N);
  return m;
}

constexpr size_t kWorkAlign = 256;
size_t align_up(size_t b) { return (b + kWorkAlign - 1) / kWorkAlign * kWorkAlign; }
// Bytes of the two copies (rows of the stored matrix x its leading dimension).
size_t mma_copy_a_bytes(const GemmShape& m) {
  return align_up(static_cast<size_t>(m.trans_a ? m.K : m.M) * m.lda * sizeof(__nv_bfloat16));
}
size_t mma_copy_b_bytes(const GemmShape& m) {
  return align_up(static_cast<size_t>(m.trans_b ? m.N : m.K) * m.ldb * sizeof(__nv_bfloat16));
}

// The bf16 copies of A and B in the workspace (mma_shape's layout), and what
// is left of it after them.
struct Bf16Copies {
  GemmShape m;
  __nv_bfloat16 *a16, *b16;
  void* rest;
};
Bf16Copies bf16_copies(cudaStream_t s, const GemmShape& g, const float* A, const float* B, void* work) {
  check(work != nullptr, "gemm: bf16mma needs a workspace for the bf16 copies (gemm_work_bytes)");
  Bf16Copies c;
  c.m = mma_shape(g);
  const GemmShape& m = c.m;
  c.a16 = static_cast<__nv_bfloat16*>(work);
  c.b16 = reinterpret_cast<__nv_bfloat16*>(static_cast<char*>(work) + mma_copy_a_bytes(m));
  c.rest = static_cast<char*>(work) + mma_copy_a_bytes(m) + mma_copy_b_bytes(m);
  const int a_rows = g.trans_a ? g.K : g.M, a_cols = g.trans_a ? g.M : g.K;
  const int b_rows = g.trans_b ? g.N : g.K, b_cols = g.trans_b ? g.K : g.N;
  const int a_rows_pad = g.trans_a ? m.K : g.M, b_rows_pad = g.trans_b ? g.N : m.K;
  launch(to_bf16_padded_kernel, grid_stride_blocks(static_cast<size_t>(a_rows_pad) * m.lda, kThreads), kThreads, 0, s,
         c.a16, m.lda, a_rows_pad, A, g.lda, a_rows, a_cols);
  launch(to_bf16_padded_kernel, grid_stride_blocks(static_cast<size_t>(b_rows_pad) * m.ldb, kThreads), kThreads, 0, s,
         c.b16, m.ldb, b_rows_pad, B, g.ldb, b_rows, b_cols);
  return c;
}

void gemm_bf16mma(cudaStream_t s, const GemmShape& g, const float* A, const float* B, const float* R, int ldr,
                  float* C, void* work, int splits) {
  const Bf16Copies c = bf16_copies(s, g, A, B, work);
  gemm_mma_pipelined_add(s, c.m, c.a16, c.b16, R, ldr, C, c.rest, splits);
}

// The SwiGLU up-projection's product gu = x W^T as a GemmShape.
GemmShape swiglu_shape(int N, int D, int F) {
  GemmShape g;
  g.trans_a = false, g.trans_b = true, g.M = N, g.N = 2 * F, g.K = D, g.lda = D, g.ldb = D, g.ldc = 2 * F;
  return g;
}

// ==== dispatch ===============================================================
using KernelFn = void (*)(GemmParams);

template <bool kTransA, bool kTransB>
KernelFn select_kernel(GemmPrecision p) {
  switch (p) {
    case GemmPrecision::Bf16: return gemm_wmma_kernel<Bf16Traits, kTransA, kTransB>;
    case GemmPrecision::Tf32: return gemm_wmma_kernel<Tf32Traits, kTransA, kTransB>;
    default: return gemm_simt_kernel<kTransA, kTransB>;
  }
}

KernelFn select_kernel(GemmPrecision p, bool ta, bool tb) {
  if (ta) return tb ? select_kernel<true, true>(p) : select_kernel<true, false>(p);
  return tb ? select_kernel<false, true>(p) : select_kernel<false, false>(p);
}

int k_slice(GemmPrecision p) { return p == GemmPrecision::Fp32 ? kSimtK : kWmmaK; }

}  // namespace

const char* gemm_precision_name(GemmPrecision p) {
  switch (p) {
    case GemmPrecision::Fp32: return "fp32";
    case GemmPrecision::Bf16: return "bf16";
    case GemmPrecision::Tf32: return "tf32";
    case GemmPrecision::Bf16Mma: return "bf16mma";
  }
  return "?";
}

GemmPrecision parse_gemm_precision(const char* name) {
  const std::string n = name ? name : "";
  if (n == "fp32") return GemmPrecision::Fp32;
  if (n == "bf16") return GemmPrecision::Bf16;
  if (n == "tf32") return GemmPrecision::Tf32;
  if (n == "bf16mma") return GemmPrecision::Bf16Mma;
  fail("unknown GEMM precision '" + n + "' (ADA_GEMM must be fp32, bf16, tf32 or bf16mma)");
}

int gemm_auto_splits(GemmPrecision p, const GemmShape& g) {
  if (p == GemmPrecision::Bf16Mma && mma_eligible(g)) return gemm_mma_pipelined_auto_splits(mma_shape(g));
  const long long tiles = (long long)blocks_for(g.M, kTileM) * blocks_for(g.N, kTileN);
  constexpr long long kTargetBlocks = 264;  // two blocks per SM of an H100/H200 (132 SMs)
  constexpr int kMinKPerSplit = 512;
  if (tiles >= kTargetBlocks / 2 || g.K < 2 * kMinKPerSplit) return 1;
  long long s = (kTargetBlocks + tiles - 1) / tiles;
  s = s < g.K / kMinKPerSplit ? s : g.K / kMinKPerSplit;
  s = s < 16 ? s : 16;
  (void)p;
  return s > 1 ? static_cast<int>(s) : 1;
}

size_t gemm_work_bytes(const GemmShape& g, int splits) {
  return splits > 1 ? static_cast<size_t>(splits) * g.M * g.N * sizeof(float) : 0;
}

size_t gemm_work_bytes(GemmPrecision p, const GemmShape& g, int splits) {
  if (p != GemmPrecision::Bf16Mma || !mma_eligible(g) || g.M <= 0 || g.N <= 0) return gemm_work_bytes(g, splits);
  const GemmShape m = mma_shape(g);
  if (splits <= 0) splits = gemm_mma_pipelined_auto_splits(m);
  return mma_copy_a_bytes(m) + mma_copy_b_bytes(m) + gemm_mma_pipelined_work_bytes(m, splits);
}

size_t gemm_swiglu_work_bytes(GemmPrecision p, int N, int D, int F) {
  const GemmShape g = swiglu_shape(N, D, F);
  if (p == GemmPrecision::Bf16Mma && mma_eligible(g) && N > 0) {
    const GemmShape m = mma_shape(g);
    return mma_copy_a_bytes(m) + mma_copy_b_bytes(m);
  }
  return gemm_work_bytes(p, g, gemm_auto_splits(p, g));
}

void gemm_swiglu(cudaStream_t s, GemmPrecision p, float* gu, float* act, const float* x, const float* W, int N, int D,
                 int F, void* work) {
  if (N <= 0) return;
  const GemmShape g = swiglu_shape(N, D, F);
  if (p == GemmPrecision::Bf16Mma && mma_eligible(g)) {
    const Bf16Copies c = bf16_copies(s, g, x, W, work);
    gemm_mma_swiglu(s, c.a16, c.m.lda, c.b16, c.m.ldb, N, c.m.K, F, gu, act);
    return;
  }
  gemm(s, p, g, x, W, gu, false, work, gemm_auto_splits(p, g));
  swiglu_forward(s, act, gu, N, F);
}

void gemm(cudaStream_t s, GemmPrecision p, const GemmShape& g, const float* A, const float* B, float* C,
          bool accumulate, void* work, int splits) {
  gemm_add(s, p, g, A, B, accumulate ? C : nullptr, g.ldc, C, work, splits);
}

void gemm_add(cudaStream_t s, GemmPrecision p, const GemmShape& g, const float* A, const float* B, const float* R,
              int ldr, float* C, void* work, int splits) {
  if (g.M <= 0 || g.N <= 0) return;
  check(!R || R == C || ldr >= g.N, "gemm_add: the addend's leading dimension is shorter than its row");
  if (p == GemmPrecision::Bf16Mma) {
    if (mma_eligible(g)) {
      gemm_bf16mma(s, g, A, B, R, ldr, C, work, splits <= 0 ? gemm_auto_splits(p, g) : splits);
      return;
    }
    p = GemmPrecision::Bf16;  // a shape the pipelined kernel refuses
  }
  if (splits <= 0) splits = gemm_auto_splits(p, g);
  const int slice = k_slice(p);
  const int kslices = static_cast<int>(blocks_for(g.K > 0 ? g.K : 1, slice));
  if (splits > kslices) splits = kslices;
  const int k_per_split = static_cast<int>(blocks_for(kslices, splits)) * slice;
  splits = static_cast<int>(blocks_for(g.K > 0 ? g.K : 1, k_per_split));

  GemmParams prm{A, B, C, g.M, g.N, g.K, g.lda, g.ldb, g.ldc, k_per_split, 0, R, ldr};
  if (splits > 1) {  // the slices' partial products go to the workspace; the reduction adds R
    check(work != nullptr, "gemm: split-K needs a workspace");
    prm.C = static_cast<float*>(work);
    prm.ldc = g.N;
    prm.split_stride = static_cast<size_t>(g.M) * g.N;
    prm.R = nullptr;
  }
  const KernelFn fn = select_kernel(p, g.trans_a, g.trans_b);
  const dim3 grid(blocks_for(g.M, kTileM), blocks_for(g.N, kTileN), static_cast<unsigned>(splits));
  launch(fn, grid, kThreads, 0, s, prm);
  if (splits > 1)
    launch(splitk_reduce_kernel, blocks_for(static_cast<size_t>(g.M) * g.N, kThreads), kThreads, 0, s, C, g.ldc, R,
           ldr, static_cast<const float*>(work), g.M, g.N, splits);
}

}  // namespace ada::cuda
