// The seed of the tensor-core GEMM of issue 13: a reference kernel on the
// warp-level primitives (warp_mma.h), small and slow by design. Each pointer is
// device memory; the function enqueues on `s` and returns.
#pragma once
#include "compat.h"

namespace ada::cuda {

// C (M, N) fp32 = A B^T, with A (M, K) and B (N, K) row-major bf16 (y = x W^T
// with W stored as the model stores it). M a multiple of 16, N of 8, K of 16
// (throws ada::Error otherwise). One warp per 16 x 8 output tile.
void gemm_mma_tile(cudaStream_t s, float* C, const __nv_bfloat16* A, const __nv_bfloat16* B, int M, int N, int K);

}  // namespace ada::cuda
