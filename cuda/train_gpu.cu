// train_gpu: train any method on an NVIDIA GPU (hand-written CUDA kernels,
// fp32 parameters and activations, bf16 tensor-core GEMMs by default).
//   make train_gpu && ./train_gpu --method adaponder
// The same flags, data, metrics and checkpoints as train_cpu (the same
// Trainer, instantiated with CudaBackend); only the default --config differs
// (70m). ADA_GEMM=fp32|bf16|tf32 picks the matrix-product path.
// Without a usable GPU it exits at once with one line:
//   error: no usable CUDA GPU: <reason>
#include <cstdio>
#include <string>

#include "cuda_backend.h"
#include "train/train_main.h"

namespace {

// Picks device 0 and checks that this build can run on it (SASS for sm_90,
// PTX for newer); returns a description, or throws with the reason.
std::string open_gpu() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) ada::fail(std::string("no usable CUDA GPU: ") + cudaGetErrorString(e));
  if (count == 0) ada::fail("no usable CUDA GPU: no CUDA device found");
  e = cudaSetDevice(0);
  if (e != cudaSuccess) ada::fail(std::string("no usable CUDA GPU: ") + cudaGetErrorString(e));
  cudaDeviceProp prop;
  e = cudaGetDeviceProperties(&prop, 0);
  if (e != cudaSuccess) ada::fail(std::string("no usable CUDA GPU: ") + cudaGetErrorString(e));
  if (prop.major < 9)
    ada::fail("no usable CUDA GPU: " + std::string(prop.name) + " has compute capability " +
              std::to_string(prop.major) + "." + std::to_string(prop.minor) +
              "; this build needs 9.0 (Hopper) or newer");
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
         std::to_string(prop.totalGlobalMem >> 30) + " GiB)";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ada;
  return train_main<CudaBackend>(
      argc, argv, "train_gpu", "Train a language model with an adaptive-computation method on a CUDA GPU.", "70m",
      [] { std::printf("gpu     %s\n", open_gpu().c_str()); },
      [](CudaBackend& be) { std::printf("gemm    %s\n", cuda::gemm_precision_name(be.gemm())); });
}
