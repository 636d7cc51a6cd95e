// Flash attention on tensor cores (cuda/attention_mma.cu, issue 13): the same
// interface and semantics as attention_forward / attention_backward
// (kernels.h, cuda/attention.cu) -- KeyMeta mask, compacted queries
// (qslot / qstart), lse saved by the forward, dq set, dK and dV accumulated --
// with Q, K, V and dO rounded to bf16 for mma.sync and fp32 softmax
// statistics and accumulators. Opt-in: ADA_ATTN=mma (CudaBackend), the fp32
// kernel stays the default and the --deterministic path (the backward adds
// dq with float atomics, whose order is not fixed).
#pragma once
#include <cstddef>
#include <string>

#include "compat.h"
#include "kernels.h"

namespace ada::cuda {

enum class AttnKernel { Fp32, Mma };
const char* attention_kernel_name(AttnKernel k);
// "fp32" | "mma" (throws ada::Error naming ADA_ATTN otherwise).
AttnKernel parse_attention_kernel(const std::string& name);

// Head sizes the mma kernels take: multiples of 16 in [16, 128]. For others
// they throw ada::Error; CudaBackend then uses the fp32 kernel.
bool attention_mma_supports(int hs);

void attention_mma_forward(cudaStream_t s, float* out, float* lse, const float* q, const float* K, const float* V,
                           const int* qslot, const int* qstart, const KeyMeta& km, const AttnDims& d);
size_t attention_mma_backward_work_bytes(const AttnDims& d);
void attention_mma_backward(cudaStream_t s, float* dq, float* dK, float* dV, const float* dout, const float* out,
                            const float* lse, const float* q, const float* K, const float* V, const int* qslot,
                            const int* qstart, const KeyMeta& km, const AttnDims& d, void* work);

}  // namespace ada::cuda
