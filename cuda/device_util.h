// Small device-side helpers shared by the kernel files: warp and block
// reductions, launch-size arithmetic. Included after compat.h.
//
// Reductions use the xor butterfly, so every lane (and, for the block
// versions, every thread) ends with the same, bit-identical value: a + b is
// commutative in floating point, so partners compute identical partial sums
// at every stage. The order of the additions depends only on the block shape,
// never on timing: results are reproducible run to run.
#pragma once
#include "compat.h"

// Unrolls the next loop under nvcc (fixed-size register arrays stay in
// registers); nothing under the host compiler, which would warn.
#if defined(__CUDACC__)
#define ADA_UNROLL _Pragma("unroll")
#else
#define ADA_UNROLL
#endif

namespace ada::cuda {

constexpr unsigned kFullMask = 0xffffffffu;

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// Sum over the block (kThreads a multiple of 32, at most 1024); every thread
// gets the result. `red` is a __shared__ array of at least 32 elements owned
// by the caller. Contains two __syncthreads: every thread must call it.
template <int kThreads, class T>
__device__ __forceinline__ T block_sum(T v, T* red) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps only");
  constexpr int kWarps = kThreads / 32;
  const int lane = static_cast<int>(threadIdx.x & 31), warp = static_cast<int>(threadIdx.x >> 5);
  v = warp_sum(v);
  __syncthreads();  // `red` may still be read by an earlier call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  T t = lane < kWarps ? red[lane] : T(0);
  return warp_sum(t);
}

template <int kThreads>
__device__ __forceinline__ float block_max(float v, float* red) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps only");
  constexpr int kWarps = kThreads / 32;
  const int lane = static_cast<int>(threadIdx.x & 31), warp = static_cast<int>(threadIdx.x >> 5);
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  const float t = lane < kWarps ? red[lane] : -INFINITY;
  return warp_max(t);
}

// Blocks needed to cover n items with `per_block` items each.
inline unsigned blocks_for(size_t n, size_t per_block) {
  return static_cast<unsigned>((n + per_block - 1) / per_block);
}

// A grid of at most `cap` blocks for grid-stride loops over n elements.
inline unsigned grid_stride_blocks(size_t n, int threads, unsigned cap = 4096) {
  const unsigned b = blocks_for(n, static_cast<size_t>(threads));
  return b < cap ? (b > 0 ? b : 1u) : cap;
}

}  // namespace ada::cuda
