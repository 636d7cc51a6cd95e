// The one header every kernel file includes first. It makes the same kernel
// source compile under nvcc (real CUDA) and under the host compiler (the host
// runner in cuda/hostrun/, which executes kernels on the CPU for the tests).
//
// Beyond the CUDA headers it provides the two things that must be spelled
// differently on the two sides:
//   DYNAMIC_SHARED(T, name)  declares `name`, a T* to the block's dynamic
//                            shared memory (the launch's shmem bytes), 16-byte
//                            aligned. Use it instead of `extern __shared__`.
//   CUDA_CHECK(expr)         throws ada::Error("CUDA error: <string> (<expr>)
//                            at file:line") when a runtime call fails.
// Kernels are launched with ada::launch (launch.h), never with <<<...>>>.
#pragma once

#include <string>

#include "core/common.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>
// One byte array for all kernels: declaring it with a different element type in
// each kernel of a file would be a conflicting redeclaration.
#define DYNAMIC_SHARED(T, name)                                        \
  extern __shared__ __align__(16) unsigned char ada_dynamic_shared_[]; \
  T* name = reinterpret_cast<T*>(ada_dynamic_shared_)
#else
#include "hostrun/hostrun.h"
#define DYNAMIC_SHARED(T, name) T* name = static_cast<T*>(::ada::hostrun::dynamic_shared())
#endif

namespace ada {

// True for the errors a kernel leaves behind: they surface at whatever call
// comes next (usually a synchronisation), not at the kernel that caused them.
inline bool is_kernel_fault(cudaError_t e) {
  return e == cudaErrorIllegalAddress || e == cudaErrorLaunchFailure || e == cudaErrorMisalignedAddress ||
         e == cudaErrorIllegalInstruction || e == cudaErrorInvalidPc || e == cudaErrorHardwareStackError ||
         e == cudaErrorAssert || e == cudaErrorLaunchTimeout || e == cudaErrorInvalidAddressSpace;
}

inline void cuda_check(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess)
    fail(std::string("CUDA error: ") + cudaGetErrorString(e) + " (" + what + ") at " + file + ":" +
         std::to_string(line) +
         (is_kernel_fault(e) ? "\nHINT: an earlier kernel failed; run again with ADA_CUDA_SYNC=1 to name it" : ""));
}

}  // namespace ada

#define CUDA_CHECK(expr) ::ada::cuda_check((expr), #expr, __FILE__, __LINE__)
