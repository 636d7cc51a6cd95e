// Sum and sum of squares of a float vector, accumulated in double, in an
// order that depends only on n (src/ops/rows.h: sum, sum_squares). Used for
// logging (the loss) and for the global gradient norm of AdamW clipping.
// Two kernels, no atomics:
//   1. G blocks (G fixed by n); block g sums the contiguous chunk
//      [g c, (g+1) c) with c = ceil(n / G): threads stride through it, then a
//      block reduction (butterflies) gives partial[g].
//   2. One block adds partial[0..G) the same way and writes *out.
// The result stays on the device: the AdamW kernel reads the norm from there,
// and the backend copies it to the host only when asked (logging).
#include "compat.h"
#include "launch.h"
#include "device_util.h"
#include "kernels.h"

namespace ada::cuda {
namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 1024;
constexpr size_t kPerBlockMin = 8192;  // elements per block below which fewer blocks are used

size_t reduce_blocks(size_t n) {
  const size_t g = (n + kPerBlockMin - 1) / kPerBlockMin;
  return g < 1 ? 1 : (g > kMaxBlocks ? kMaxBlocks : g);
}

__global__ void __launch_bounds__(kThreads)
    reduce_partial_kernel(double* partial, const float* x, size_t n, size_t chunk, int squares) {
  __shared__ double red[32];
  const size_t i0 = static_cast<size_t>(blockIdx.x) * chunk;
  const size_t i1 = i0 + chunk < n ? i0 + chunk : n;
  double acc = 0.0;
  for (size_t i = i0 + threadIdx.x; i < i1; i += kThreads) {
    const double v = x[i];
    acc += squares ? v * v : v;
  }
  acc = block_sum<kThreads>(acc, red);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void __launch_bounds__(kThreads) reduce_final_kernel(double* out, const double* partial, int g) {
  __shared__ double red[32];
  double acc = 0.0;
  for (int i = static_cast<int>(threadIdx.x); i < g; i += kThreads) acc += partial[i];
  acc = block_sum<kThreads>(acc, red);
  if (threadIdx.x == 0) *out = acc;
}

// Comparison of two outputs (bench_gpu vs cuBLAS): block g finds, over its
// chunk, max |got - want| and max |want| (a NaN in either counts as
// infinity, so it cannot hide: fmaxf would drop it), then one block takes the
// maxima of the partials.
__device__ __forceinline__ float abs_or_inf(float v) { return v != v ? INFINITY : fabsf(v); }

__global__ void __launch_bounds__(kThreads)
    max_abs_diff_partial_kernel(float* partial, const float* got, const float* want, size_t n, size_t chunk) {
  __shared__ float red[32];
  const size_t i0 = static_cast<size_t>(blockIdx.x) * chunk;
  const size_t i1 = i0 + chunk < n ? i0 + chunk : n;
  float diff = 0.0f, mag = 0.0f;
  for (size_t i = i0 + threadIdx.x; i < i1; i += kThreads) {
    diff = fmaxf(diff, abs_or_inf(got[i] - want[i]));
    mag = fmaxf(mag, abs_or_inf(want[i]));
  }
  diff = block_max<kThreads>(diff, red);
  mag = block_max<kThreads>(mag, red);
  if (threadIdx.x == 0) partial[2 * blockIdx.x] = diff, partial[2 * blockIdx.x + 1] = mag;
}

__global__ void __launch_bounds__(kThreads) max_abs_diff_final_kernel(float* out, const float* partial, int g) {
  __shared__ float red[32];
  float diff = 0.0f, mag = 0.0f;
  for (int i = static_cast<int>(threadIdx.x); i < g; i += kThreads)
    diff = fmaxf(diff, partial[2 * i]), mag = fmaxf(mag, partial[2 * i + 1]);
  diff = block_max<kThreads>(diff, red);
  mag = block_max<kThreads>(mag, red);
  if (threadIdx.x == 0) out[0] = diff, out[1] = mag;
}

}  // namespace

size_t max_abs_diff_work_bytes(size_t n) { return reduce_blocks(n) * 2 * sizeof(float); }

void max_abs_diff(cudaStream_t s, float* out, const float* got, const float* want, size_t n, void* work) {
  if (n == 0) {
    memset_async(out, 0, 2 * sizeof(float), s);
    return;
  }
  const size_t g = reduce_blocks(n), chunk = (n + g - 1) / g;
  float* partial = static_cast<float*>(work);
  launch(max_abs_diff_partial_kernel, static_cast<unsigned>(g), kThreads, 0, s, partial, got, want, n, chunk);
  launch(max_abs_diff_final_kernel, 1, kThreads, 0, s, out, partial, static_cast<int>(g));
}

size_t reduce_work_bytes(size_t n) { return reduce_blocks(n) * sizeof(double); }

void reduce_sum(cudaStream_t s, double* out, const float* x, size_t n, bool squares, void* work) {
  if (n == 0) {
    memset_async(out, 0, sizeof(double), s);
    return;
  }
  const size_t g = reduce_blocks(n), chunk = (n + g - 1) / g;
  double* partial = static_cast<double*>(work);
  launch(reduce_partial_kernel, static_cast<unsigned>(g), kThreads, 0, s, partial, x, n, chunk, squares ? 1 : 0);
  launch(reduce_final_kernel, 1, kThreads, 0, s, out, partial, static_cast<int>(g));
}

}  // namespace ada::cuda
