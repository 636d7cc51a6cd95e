// How close a kernel's output is to a reference, and when that is close
// enough: the measure and the tolerances that the kernel tests
// (tests/test_cuda_kernels.cpp) and bench_gpu's comparison with cuBLAS share.
//
// Measure: max |got - want| / max |want| over the whole output (one number per
// output, insensitive to the scale of the data). A NaN anywhere makes the
// error infinite, so it never passes.
// Tolerances: fp32 kernels 1e-5; tensor-core GEMMs 5e-3 with tf32 inputs and
// 2e-2 with bf16 inputs, both accumulating in fp32 (docs/cuda.md).
#pragma once
#include <cmath>

#include "kernels.h"

namespace ada::cuda {

constexpr double kFp32Tol = 1e-5;

// A GEMM whose operands are bf16 already (gemm_mma_pipelined against cuBLAS
// on the same bf16 inputs): products are exact, only the fp32 summation order
// differs (relative error ~1e-6 at K = 16384), so a wrong fragment or a lost
// slice, errors of order 1, cannot hide under it.
constexpr double kBf16OperandTol = 1e-3;

inline double gemm_tolerance(GemmPrecision p) {
  return p == GemmPrecision::Fp32 ? kFp32Tol : p == GemmPrecision::Tf32 ? 5e-3 : 2e-2;
}

// The tensor-core attention (cuda/attention_mma.cu) against the fp32
// reference: Q, K, V, dO and the probabilities are rounded to bf16, as the
// bf16 GEMM's operands, with fp32 softmax statistics and accumulation.
constexpr double kAttentionMmaTol = 2e-2;

struct Agreement {
  double rel_err;  // max |got - want| / max |want|; infinite when either held a NaN
  bool ok;         // rel_err <= the tolerance
};

// From the two maxima (max_abs_diff may be NaN or infinite: then not ok).
inline Agreement agreement(double max_abs_diff, double max_abs_want, double tol) {
  double rel = max_abs_diff / (max_abs_want > 1e-30 ? max_abs_want : 1e-30);
  if (std::isnan(rel) || std::isnan(max_abs_want)) rel = INFINITY;
  return {rel, rel <= tol};
}

}  // namespace ada::cuda
