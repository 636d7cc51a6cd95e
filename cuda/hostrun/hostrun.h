// The host runner: runs CUDA kernels on the CPU, for tests only.
//
// Included (through compat.h) instead of the CUDA headers when a kernel file is
// compiled by the host compiler. It supplies the part of CUDA that the
// project's kernels use; docs/hostrun.md describes what runs how and what is
// not supported. The pieces, each in its own header:
//   vector_types.h  dim3, uint3, float4, ...
//   lowp.h          __nv_bfloat16, __half and their exact conversions
//   runtime.h       cudaMalloc, cudaMemcpy, streams, events, errors, ...
//   scheduler.h     how a launch executes; runner configuration and stats
//   device.h        __global__/__shared__, threadIdx, barriers, warp
//                   intrinsics, atomics, math intrinsics
//   wmma.h          nvcuda::wmma fragments and tile operations
// and, included by cuda/warp_mma.h rather than here (they emulate that
// header's PTX, not a CUDA API):
//   mma.h           mma.sync m16n8k16 and ldmatrix, by the PTX ISA layouts
//   async_copy.h    cp.async groups: copies land when waited for
#pragma once

#if defined(__CUDACC__)
#error "hostrun.h is the CPU stand-in for CUDA; under nvcc include compat.h, which uses the real headers"
#endif

#include "hostrun/vector_types.h"
#include "hostrun/lowp.h"
#include "hostrun/runtime.h"
#include "hostrun/scheduler.h"
#include "hostrun/device.h"
#include "hostrun/wmma.h"
