// Opening the GPU for train_gpu and bench_gpu: device 0, checked against the
// architectures this build holds (gpu_arch.h decides). Compiled by nvcc only;
// the Makefile passes the build's lists as ADA_CUDA_ARCHS (machine code) and
// ADA_CUDA_PTX.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "core/common.h"
#include "driver_check.h"
#include "gpu_arch.h"

#if !defined(ADA_CUDA_ARCHS) || !defined(ADA_CUDA_PTX)
#error "ADA_CUDA_ARCHS and ADA_CUDA_PTX must name the build's architectures (the Makefile passes them)"
#endif

namespace ada::cuda {

inline BuildArchs built_archs() { return {parse_arch_list(ADA_CUDA_ARCHS), parse_arch_list(ADA_CUDA_PTX)}; }

// Selects device `index` (a data-parallel rank's local rank; 0 otherwise) and
// returns its description ("NVIDIA A100-SXM4-80GB (sm_80, 79 GiB)"), or
// throws "no usable CUDA GPU: <reason>".
inline std::string open_gpu(int index = 0, cudaDeviceProp* out = nullptr) {
  auto fail_with = [](const std::string& why) { fail("no usable CUDA GPU: " + why); };
  int count = 0, driver = 0, runtime = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = CUDART_VERSION;
  // One distinct line for no driver, an old driver, no device (driver_check.h).
  const std::string problem_reaching = driver_problem(driver, runtime, e, count, cudaGetErrorString(e));
  if (!problem_reaching.empty()) fail_with(problem_reaching);
  if (index >= count)
    fail_with("this rank is number " + std::to_string(index) + " on its machine but the machine has " +
              std::to_string(count) + " GPU(s): start at most one rank per GPU");
  e = cudaSetDevice(index);
  if (e != cudaSuccess) fail_with(cudaGetErrorString(e));
  cudaDeviceProp prop;
  e = cudaGetDeviceProperties(&prop, index);
  if (e != cudaSuccess) fail_with(cudaGetErrorString(e));
  const std::string problem = gpu_support_problem(prop.major, prop.minor, built_archs());
  if (!problem.empty()) fail_with(std::string(prop.name) + " " + problem);
  if (out) *out = prop;
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
         std::to_string(prop.totalGlobalMem >> 30) + " GiB)";
}

}  // namespace ada::cuda
