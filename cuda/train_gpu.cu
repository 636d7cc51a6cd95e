// train_gpu: train any method on an NVIDIA GPU (hand-written CUDA kernels,
// fp32 parameters and activations, bf16 tensor-core GEMMs by default).
//   make train_gpu && ./train_gpu --method adaponder
// The same flags, data, metrics and checkpoints as train_cpu (the same
// Trainer, instantiated with CudaBackend); only the default --config differs
// (70m). ADA_GEMM=fp32|bf16|tf32 picks the matrix-product path.
// Built for every GPU from compute capability 8.0 (Ampere) on (open_gpu.h,
// gpu_arch.h); without a usable GPU it exits at once with one line:
//   error: no usable CUDA GPU: <reason>
#include <cstdio>
#include <string>

#include "cuda_backend.h"
#include "open_gpu.h"
#include "train/train_main.h"

int main(int argc, char** argv) {
  using namespace ada;
  const std::string summary = "Train a language model with an adaptive-computation method on a CUDA GPU.\nBuilt for " +
                              cuda::describe_archs(cuda::built_archs()) + ".";
  return train_main<CudaBackend>(
      argc, argv, "train_gpu", summary, "70m", [] { std::printf("gpu     %s\n", cuda::open_gpu().c_str()); },
      [](CudaBackend& be) { std::printf("gemm    %s\n", cuda::gemm_precision_name(be.gemm())); });
}
