// A small kernel file written to the project's conventions, and the build check
// behind `make cuda-check`: nvcc compiles this file for CUDA_ARCHS (proving that
// compat.h and launch.h are valid CUDA), and the tests compile the very same
// file with the host compiler and run self_check() under the host runner.
//
// The conventions it shows:
//   - include "compat.h" (CUDA or the host runner) and "launch.h";
//   - kernels are __global__ functions, templates allowed;
//   - __shared__ arrays are declared inside the kernel, with a compile-time size;
//   - dynamic shared memory comes from DYNAMIC_SHARED(T, name);
//   - warp intrinsics take explicit masks; WMMA through nvcuda::wmma;
//   - kernels are started with ada::launch(kernel, grid, block, shmem, stream,
//     args...), never with <<<...>>>.
#include <cmath>
#include <string>
#include <vector>

#include "compat.h"
#include "launch.h"

namespace ada::smoke {

constexpr unsigned kFullMask = 0xffffffffu;

// y = a * x + y.
__global__ void axpy(float a, const float* x, float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = a * x[i] + y[i];
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(kFullMask, v, offset);
  return v;  // complete in lane 0
}

// *out += sum(x): warp shuffles, then one partial per warp through shared
// memory, then one atomic per block. Every thread reaches the barrier (no early
// return for i >= n).
template <int kThreads>
__global__ void __launch_bounds__(kThreads) sum(const float* x, float* out, int n) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps only");
  __shared__ float partial[kThreads / 32];
  const int i = static_cast<int>(blockIdx.x * kThreads + threadIdx.x);
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  float v = warp_sum(i < n ? x[i] : 0.0f);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = warp_sum(lane < kThreads / 32 ? partial[lane] : 0.0f);
    if (lane == 0) atomicAdd(out, v);
  }
}

// Reverses each block's slice of x into y through dynamic shared memory
// (blockDim.x floats).
__global__ void reverse_blocks(const float* x, float* y) {
  DYNAMIC_SHARED(float, buf);
  const unsigned t = threadIdx.x, base = blockIdx.x * blockDim.x;
  buf[t] = x[base + t];
  __syncthreads();
  y[base + t] = buf[blockDim.x - 1 - t];
}

// c = a * b for one 16x16 tile, bf16 inputs (row-major), fp32 result; one warp.
__global__ void tile_mma(const __nv_bfloat16* a, const __nv_bfloat16* b, float* c) {
  using namespace nvcuda;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(c, acc, 16, wmma::mem_row_major);
}

// A device buffer that frees itself.
template <typename T>
struct Buffer {
  T* p = nullptr;
  explicit Buffer(const std::vector<T>& host) {
    CUDA_CHECK(cudaMalloc(&p, host.size() * sizeof(T)));
    CUDA_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~Buffer() { cudaFree(p); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  std::vector<T> get(size_t n) const {
    std::vector<T> host(n);
    CUDA_CHECK(cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaDeviceSynchronize());
    return host;
  }
};

// Runs each kernel once on small inputs and checks the results on the host.
// Returns "" when everything agrees, otherwise what did not. Works on a GPU and
// under the host runner alike.
inline std::string self_check() {
  const int n = 1000;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 17) - 8.0f;  // small integers: sums are exact
    y[i] = static_cast<float>(i % 5);
  }
  Buffer<float> dx(x), dy(y), dsum(std::vector<float>{0.0f});
  launch(axpy, (n + 127) / 128, 128, 0, nullptr, 2.0f, dx.p, dy.p, n);
  const std::vector<float> y2 = dy.get(n);
  for (int i = 0; i < n; ++i)
    if (y2[i] != 2.0f * x[i] + y[i]) return "axpy: wrong value at " + std::to_string(i);

  launch(sum<256>, (n + 255) / 256, 256, 0, nullptr, dx.p, dsum.p, n);
  double want = 0.0;
  for (float v : x) want += v;
  if (dsum.get(1)[0] != static_cast<float>(want)) return "sum: wrong total";

  const int blocks = 4, threads = 250;  // n = 1000
  launch(reverse_blocks, blocks, threads, threads * sizeof(float), nullptr, dx.p, dy.p);
  const std::vector<float> rev = dy.get(n);
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < threads; ++t)
      if (rev[b * threads + t] != x[b * threads + threads - 1 - t]) return "reverse_blocks: wrong order";

  std::vector<__nv_bfloat16> a(256), b(256);
  for (int i = 0; i < 256; ++i) {
    a[i] = __float2bfloat16(static_cast<float>(i % 7) - 3.0f);  // small integers: exact products
    b[i] = __float2bfloat16(static_cast<float>(i % 5) - 2.0f);
  }
  Buffer<__nv_bfloat16> da(a), db(b);
  Buffer<float> dc(std::vector<float>(256, 0.0f));
  launch(tile_mma, 1, 32, 0, nullptr, da.p, db.p, dc.p);
  const std::vector<float> c = dc.get(256);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float s = 0.0f;
      for (int k = 0; k < 16; ++k)
        s += __bfloat162float(a[i * 16 + k]) * __bfloat162float(b[k * 16 + j]);
      if (c[i * 16 + j] != s) return "tile_mma: wrong value at " + std::to_string(i) + "," + std::to_string(j);
    }
  return "";
}

}  // namespace ada::smoke
