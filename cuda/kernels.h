// Host entry points of the hand-written CUDA kernels, one group per kernel
// file (cuda/<family>.cu). Each function enqueues its kernel(s) on `s` and
// returns without waiting for them; every pointer is device memory. Shapes,
// strides and "set or accumulate" follow the CPU op of the same name in
// src/ops/<op>.h, which is the reference the tests compare against
// (tests/test_cuda_kernels.cpp). CudaBackend (cuda_backend.h) is the only
// caller in the programs.
//
// Functions that need temporary device memory take `work` and have a
// companion *_work_bytes() that says how much; the backend keeps one
// grow-only workspace for them.
//
// Names in the shape comments: N rows, D width, V vocabulary, F SwiGLU width,
// B sequences, S slots per sequence, H heads, hs head size, M/Nc/K GEMM sizes.
#pragma once
#include <cstddef>
#include <cstdint>

#include "compat.h"
#include "ops/attention_mask.h"

namespace ada::cuda {

// ---- embedding.cu --------------------------------------------------------
// out (N, D) = scale * table[ids] ;   dtable[ids[n]] += scale * dout[n]
void embedding_forward(cudaStream_t s, float* out, const int* ids, const float* table, int N, int D, float scale);
void embedding_backward(cudaStream_t s, float* dtable, const int* ids, const float* dout, int N, int D, float scale);
// The same sum without float atomics, in row order (bit-reproducible): sorts
// the rows by id in `work`.
size_t embedding_backward_deterministic_work_bytes(int N);
void embedding_backward_deterministic(cudaStream_t s, float* dtable, const int* ids, const float* dout, int N, int D,
                                      float scale, void* work);

// ---- rmsnorm.cu ----------------------------------------------------------
// y (N, D), rstd (N) ;  backward accumulates into dx (N, D) and dw (D).
void rmsnorm_forward(cudaStream_t s, float* y, float* rstd, const float* x, const float* w, int N, int D, float eps);
size_t rmsnorm_backward_work_bytes(int N, int D);
void rmsnorm_backward(cudaStream_t s, float* dx, float* dw, const float* dy, const float* x, const float* w,
                      const float* rstd, int N, int D, void* work);

// ---- rope.cu -------------------------------------------------------------
// In place on `nheads` heads of size hs in each of N rows (row stride ld);
// sign +1 forward rotation, -1 the inverse (backward). Tables (max_seq, hs/2).
void rope(cudaStream_t s, float* x, int ld, int nheads, const int* pos, int N, int hs, const float* cos_t,
          const float* sin_t, int sign);

// ---- gemm.cu -------------------------------------------------------------
// C (M, Nc) = op(A) op(B)  (+ C when accumulate), fp32 in memory.
//   op(A) (M, K):  A row-major (M, K), or A^T of a row-major (K, M) when trans_a
//   op(B) (K, Nc): B row-major (K, Nc), or B^T of a row-major (Nc, K) when trans_b
// Precision: Fp32 = SIMT fp32 FMA; Bf16 / Tf32 = tensor cores (WMMA), the
// inputs rounded to bf16 / tf32 as tiles are staged in shared memory, products
// accumulated in fp32. Bf16Mma = A and B rounded to bf16 copies in the
// workspace, then gemm_mma_pipelined (gemm_mma.h: cp.async, ldmatrix,
// mma.sync); the shapes it refuses (with trans_a an M, without trans_b an N,
// that is not a multiple of 8) take the Bf16 path.
enum class GemmPrecision { Fp32, Bf16, Tf32, Bf16Mma };
const char* gemm_precision_name(GemmPrecision p);
// "fp32" | "bf16" | "tf32" | "bf16mma" (throws ada::Error otherwise).
GemmPrecision parse_gemm_precision(const char* name);

struct GemmShape {
  bool trans_a = false, trans_b = false;
  int M = 0, N = 0, K = 0;
  int lda = 0, ldb = 0, ldc = 0;
};
// Split-K factor the dispatcher picks: > 1 only when the output has too few
// tiles to fill the GPU and K is long (weight gradients, dW = dy^T x).
int gemm_auto_splits(GemmPrecision p, const GemmShape& g);
size_t gemm_work_bytes(const GemmShape& g, int splits);
// The workspace gemm() needs at precision p: the above, plus for Bf16Mma the
// bf16 copies of A and B (0 when nothing is needed).
size_t gemm_work_bytes(GemmPrecision p, const GemmShape& g, int splits);
// splits <= 0: gemm_auto_splits. Split-K slices write partial products to
// `work` and a second kernel adds them in slice order (deterministic).
// `work` holds gemm_work_bytes(p, g, splits) bytes.
void gemm(cudaStream_t s, GemmPrecision p, const GemmShape& g, const float* A, const float* B, float* C,
          bool accumulate, void* work, int splits = 0);
// C = op(A) op(B) + R, the addend R (M, Nc) with leading dimension ldr added
// in the epilogue (or in split-K's reduction): the same sum, rounded the same
// way, as copying R into C and accumulating, in one pass over C. R null:
// no addend; R == C (ldr == ldc): accumulate; otherwise R must not overlap C.
void gemm_add(cudaStream_t s, GemmPrecision p, const GemmShape& g, const float* A, const float* B, const float* R,
              int ldr, float* C, void* work, int splits = 0);

// The MLP's up-projection and activation, y = SwiGLU(x W^T): gu (N, 2F) =
// x (N, D) W^T with W (2F, D), and act (N, F) = silu(gu[:, :F]) gu[:, F:]
// (swiglu_forward). Bf16Mma: one kernel, gemm_mma_swiglu (the activation in
// the GEMM's epilogue, gu bit-identical to gemm()'s); other precisions:
// gemm() then swiglu_forward. `work` holds gemm_swiglu_work_bytes.
size_t gemm_swiglu_work_bytes(GemmPrecision p, int N, int D, int F);
void gemm_swiglu(cudaStream_t s, GemmPrecision p, float* gu, float* act, const float* x, const float* W, int N, int D,
                 int F, void* work);

// ---- attention.cu --------------------------------------------------------
// Flash-style attention with the mask of ops/attention_mask.h (shapes in
// src/ops/attention.h). Backward: dq set; dK, dV accumulate.
void attention_forward(cudaStream_t s, float* out, float* lse, const float* q, const float* K, const float* V,
                       const int* qslot, const int* qstart, const KeyMeta& km, const AttnDims& d);
size_t attention_backward_work_bytes(const AttnDims& d);
void attention_backward(cudaStream_t s, float* dq, float* dK, float* dV, const float* dout, const float* out,
                        const float* lse, const float* q, const float* K, const float* V, const int* qslot,
                        const int* qstart, const KeyMeta& km, const AttnDims& d, void* work);

// ---- swiglu.cu -----------------------------------------------------------
void swiglu_forward(cudaStream_t s, float* y, const float* gu, int N, int F);
void swiglu_backward(cudaStream_t s, float* dgu, const float* dy, const float* gu, int N, int F);
void silu_forward(cudaStream_t s, float* y, const float* u, size_t n);
void silu_backward(cudaStream_t s, float* du, const float* dy, const float* u, size_t n);

// ---- cross_entropy.cu ----------------------------------------------------
// Log-softmax read at the target (z (N, ld), softmax over the first V
// columns) and the plain row softmax (N, V).
void logsoftmax_target_forward(cudaStream_t s, float* lse, float* logp, const float* z, const int* y, int N, int V,
                               int ld);
void logsoftmax_target_backward(cudaStream_t s, float* dz, const float* z, const float* lse, const int* y,
                                const float* g_logp, const float* g_lse, int N, int V, int ld);
void softmax_forward(cudaStream_t s, float* p, const float* z, int N, int V);
void softmax_backward(cudaStream_t s, float* dz, const float* p, const float* dp, int N, int V);

// ---- topk.cu -------------------------------------------------------------
// The K largest values of each row of x (N, V), descending, ties by the lower
// column: vals, idx (N, K); backward dx[n, idx] += dvals. K <= kTopKMax.
constexpr int kTopKMax = 1024;
void topk_values_forward(cudaStream_t s, float* vals, int* idx, const float* x, int N, int V, int K);
void topk_values_backward(cudaStream_t s, float* dx, const float* dvals, const int* idx, int N, int V, int K);

// ---- rows.cu -------------------------------------------------------------
void gather_rows(cudaStream_t s, float* dst, int ldd, const float* src, int lds, const int* idx, int n, int w);
void scatter_rows(cudaStream_t s, float* dst, int ldd, const float* src, int lds, const int* idx, int n, int w);
void scatter_add_rows(cudaStream_t s, float* dst, int ldd, const float* src, int lds, const int* idx, int n, int w);
void scale_rows(cudaStream_t s, float* y, const float* x, const float* scale, int n, int D);

// ---- saved_store.cu --------------------------------------------------------
// Row blocks (n, w) with row strides ldd, lds (src/ops/saved_store.h):
// dst = src; dst = bf16(src) (round to nearest even); dst = float(src).
void copy_block(cudaStream_t s, float* dst, int ldd, const float* src, int lds, int n, int w);
void to_bf16(cudaStream_t s, uint16_t* dst, int ldd, const float* src, int lds, int n, int w);
void from_bf16(cudaStream_t s, float* dst, int ldd, const uint16_t* src, int lds, int n, int w);
void row_dot(cudaStream_t s, float* out, const float* a, const float* b, int n, int D);
void add(cudaStream_t s, float* y, const float* a, const float* b, size_t n);
void axpy(cudaStream_t s, float* y, float alpha, const float* x, size_t n);
void scale(cudaStream_t s, float* y, float alpha, size_t n);
void fill(cudaStream_t s, float* y, float v, size_t n);

// ---- reduce.cu -----------------------------------------------------------
// *out = sum_i x_i (or x_i^2), accumulated in double in an order fixed by n
// alone (deterministic). `out` is device memory.
size_t reduce_work_bytes(size_t n);
void reduce_sum(cudaStream_t s, double* out, const float* x, size_t n, bool squares, void* work);
// out[0] = max_i |got_i - want_i|, out[1] = max_i |want_i| (device memory, two
// floats); a NaN in got or want gives infinity (agreement.h turns the pair
// into the relative error). For comparing two device outputs (bench_gpu).
size_t max_abs_diff_work_bytes(size_t n);
void max_abs_diff(cudaStream_t s, float* out, const float* got, const float* want, size_t n, void* work);

// ---- adamw.cu ------------------------------------------------------------
// One AdamW step over the flat buffer (src/ops/adamw.h), weight decay on
// [0, n_decay). The gradient scale comes from the device: with
// norm = sqrt(*grad_sumsq), scale = clip / (norm + 1e-6) if clip > 0 and
// norm > clip, else 1 -- so clipping needs no host round trip.
struct AdamWArgs {
  float lr, beta1, beta2, eps, weight_decay;
  float c1, c2;  // bias corrections 1 / (1 - beta^t)
  double clip;
};
void adamw(cudaStream_t s, float* p, const float* g, float* m, float* v, size_t n, size_t n_decay,
           const AdamWArgs& a, const double* grad_sumsq);

}  // namespace ada::cuda
