// Why the CUDA runtime cannot reach a GPU, as one line. A first run on a new
// machine fails here more often than anywhere else, and CUDA's own strings
// mislead: a machine with no driver at all and one with an old driver both
// say "CUDA driver version is insufficient for CUDA runtime version".
//
// driver_problem() decides from what the runtime reports: the CUDA version
// the driver supports (cudaDriverGetVersion: 0 when no driver can be loaded),
// the runtime's own (cudaRuntimeGetVersion, the toolkit this program was built
// with), and cudaGetDeviceCount's error and count. It is pure, so the tests
// ask it about every case without a GPU; open_gpu() calls it.
#pragma once
#include <string>

#include "compat.h"

namespace ada::cuda {

// 12040 -> "12.4"
inline std::string cuda_version_string(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// The oldest Linux driver branch that runs a toolkit's major version without
// compatibility packages (the CUDA toolkit release notes: 525 for 12.x, 580 for 13.x).
inline int min_driver_branch(int runtime) { return runtime >= 13000 ? 580 : runtime >= 12000 ? 525 : 450; }

// "" when a device is usable, else the reason, e.g. "no NVIDIA driver found
// (...)". error_string: cudaGetErrorString(count_error).
inline std::string driver_problem(int driver, int runtime, cudaError_t count_error, int count,
                                  const std::string& error_string) {
  if (driver == 0)
    return "no NVIDIA driver found (the CUDA driver library could not be loaded): install the NVIDIA driver, or "
           "run on a machine with an NVIDIA GPU";
  // Within one major version a newer runtime runs on an older driver (minor
  // version compatibility); across major versions it does not.
  if (count_error == cudaErrorInsufficientDriver || driver / 1000 < runtime / 1000)
    return "the NVIDIA driver supports CUDA " + cuda_version_string(driver) + ", older than the CUDA " +
           cuda_version_string(runtime) + " this program was built with: update the driver (branch " +
           std::to_string(min_driver_branch(runtime)) + " or newer), or build with the toolkit the driver " +
           "supports (make NVCC=/usr/local/cuda-" + cuda_version_string(driver) + "/bin/nvcc train_gpu)";
  if (count_error == cudaErrorNoDevice || (count_error == cudaSuccess && count == 0))
    return "no CUDA device found: the NVIDIA driver (CUDA " + cuda_version_string(driver) +
           ") is installed but sees no GPU (check nvidia-smi and CUDA_VISIBLE_DEVICES)";
  if (count_error != cudaSuccess) return "cudaGetDeviceCount failed: " + error_string;
  return "";
}

}  // namespace ada::cuda
