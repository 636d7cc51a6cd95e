// Tensor-core GEMMs written directly on the warp-level primitives of
// warp_mma.h (mma.sync, ldmatrix, cp.async), issue 13. Each pointer is device
// memory; each function enqueues on `s` and returns.
//
//   gemm_mma_tile       the seed: one warp per 16 x 8 tile, two stages, A B^T
//                       only. Small and slow by design; the readable reference.
//   gemm_mma_pipelined  the real one: 128 x 128 block tiles of 8 warps, a
//                       3-stage cp.async pipeline, swizzled shared memory,
//                       every transposition case, split-K, an addend
//                       (accumulate, or the residual stream) in the epilogue.
//   gemm_mma_swiglu     the pipelined kernel with the MLP's SwiGLU in its
//                       epilogue (one pass writes gu and the activation).
#pragma once
#include <cstddef>

#include "compat.h"
#include "kernels.h"

namespace ada::cuda {

// C (M, N) fp32 = A B^T, with A (M, K) and B (N, K) row-major bf16 (y = x W^T
// with W stored as the model stores it). M a multiple of 16, N of 8, K of 16
// (throws ada::Error otherwise). One warp per 16 x 8 output tile.
void gemm_mma_tile(cudaStream_t s, float* C, const __nv_bfloat16* A, const __nv_bfloat16* B, int M, int N, int K);

// C (M, N) = op(A) op(B)  (+ C when accumulate), with the shape conventions of
// gemm() (kernels.h, GemmShape: trans_a / trans_b, leading dimensions), but A
// and B in bf16 and C in fp32 (products exact, sums in fp32). So
//   y  = x W^T    {trans_a = false, trans_b = true}
//   dx = dy W     {false, false}
//   dW = dy^T x   {true, false}       (and {true, true} for completeness).
// What the 16-byte cp.async copies need (ada::Error otherwise): K a positive
// multiple of 8; lda and ldb multiples of 8 and A, B 16-byte aligned; the
// dimension that is contiguous in memory a multiple of 8 (M when trans_a, N
// when not trans_b; K otherwise, already required). M and N are otherwise
// free: rows past the end are zero-filled and their stores skipped. C is read
// only when accumulating.
// splits > 1: split-K, each of `splits` slices of K writes its partial product
// to `work` (gemm_mma_pipelined_work_bytes) and a second kernel adds them in
// slice order (deterministic). splits <= 0 picks gemm_mma_pipelined_auto_splits.
int gemm_mma_pipelined_auto_splits(const GemmShape& g);
size_t gemm_mma_pipelined_work_bytes(const GemmShape& g, int splits);
void gemm_mma_pipelined(cudaStream_t s, const GemmShape& g, const __nv_bfloat16* A, const __nv_bfloat16* B,
                        float* C, bool accumulate, void* work = nullptr, int splits = 1);
// The same with an addend in the epilogue (or in split-K's sum): C = op(A)
// op(B) + R, R (M, N) fp32 with leading dimension ldr (R == C: accumulate;
// null: none; otherwise not overlapping C). The residual add of a block.
void gemm_mma_pipelined_add(cudaStream_t s, const GemmShape& g, const __nv_bfloat16* A, const __nv_bfloat16* B,
                            const float* R, int ldr, float* C, void* work = nullptr, int splits = 1);

// The SwiGLU up-projection with its activation in the epilogue, for
// y = SwiGLU(x W_gu^T) of the model's MLP (ops/swiglu.h): X (M, K) row-major
// bf16 (leading dimension ldx), W (2F, K) bf16 (ldw), the F gate rows then the
// F up rows. Writes gu (M, 2F) fp32 = X W^T exactly as gemm_mma_pipelined
// computes it (the same tiles, slices and sums: bit-identical), and act (M, F)
// = silu(gu[:, :F]) gu[:, F:] as swiglu_forward computes it from that gu. A
// block's 128 output columns are the gate and up halves of 64 hidden units,
// interleaved by 8 (so each thread holds both halves of its units). No
// split-K. K, ldx, ldw multiples of 8, X and W 16-byte aligned (ada::Error
// otherwise); M and F free.
void gemm_mma_swiglu(cudaStream_t s, const __nv_bfloat16* X, int ldx, const __nv_bfloat16* W, int ldw, int M, int K,
                     int F, float* gu, float* act);

// y[i] = x[i] rounded to bf16 (round to nearest even), i < n: operands for
// the above from fp32 tensors.
void convert_f32_to_bf16(cudaStream_t s, __nv_bfloat16* y, const float* x, size_t n);

}  // namespace ada::cuda
