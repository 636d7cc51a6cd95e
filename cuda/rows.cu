// Row movement and elementwise helpers (src/ops/rows.h).
//   gather_rows:      dst[i, :w] = src[idx[i], :w]        row strides ldd, lds
//   scatter_rows:     dst[idx[i], :w] = src[i, :w]
//   scatter_add_rows: dst[idx[i], :w] += src[i, :w]       (idx distinct: no races)
//   scale_rows:       y[i, :] = s[i] x[i, :]              x, y (n, D)
//   row_dot:          out[i] = <a[i, :], b[i, :]>
//   add, axpy, scale, fill: flat vectors of n elements.
// Row ops: one block (kRowThreads threads) per row, consecutive threads on
// consecutive columns. row_dot: one warp per row. Flat ops: grid-stride loops.
#include <string>
#include <unordered_map>
#include <vector>

#include "compat.h"
#include "launch.h"
#include "device_util.h"
#include "kernels.h"

namespace ada::cuda {
namespace {

constexpr int kRowThreads = 128;
constexpr int kThreads = 256;

enum RowMode { kGather = 0, kScatter = 1, kScatterAdd = 2 };

template <int kMode>
__global__ void __launch_bounds__(kRowThreads)
    move_rows_kernel(float* dst, int ldd, const float* src, int lds, const int* idx, int w) {
  const int i = static_cast<int>(blockIdx.x);
  const size_t d = static_cast<size_t>(kMode == kGather ? i : idx[i]) * ldd;
  const size_t s = static_cast<size_t>(kMode == kGather ? idx[i] : i) * lds;
  for (int j = static_cast<int>(threadIdx.x); j < w; j += kRowThreads) {
    if (kMode == kScatterAdd)
      dst[d + j] += src[s + j];
    else
      dst[d + j] = src[s + j];
  }
}

__global__ void __launch_bounds__(kThreads) scale_rows_kernel(float* y, const float* x, const float* sc, int n, int D) {
  const size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < static_cast<size_t>(n) * D) y[i] = sc[i / D] * x[i];
}

__global__ void __launch_bounds__(kThreads) row_dot_kernel(float* out, const float* a, const float* b, int n, int D) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int r = static_cast<int>(blockIdx.x) * (kThreads / 32) + static_cast<int>(threadIdx.x >> 5);
  if (r >= n) return;  // whole warp
  const size_t off = static_cast<size_t>(r) * D;
  float acc = 0.0f;
  for (int j = lane; j < D; j += 32) acc += a[off + j] * b[off + j];
  acc = warp_sum(acc);
  if (lane == 0) out[r] = acc;
}

__global__ void __launch_bounds__(kThreads) add_kernel(float* y, const float* a, const float* b, size_t n) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * kThreads)
    y[i] = a[i] + b[i];
}

__global__ void __launch_bounds__(kThreads) axpy_kernel(float* y, float alpha, const float* x, size_t n) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * kThreads)
    y[i] += alpha * x[i];
}

__global__ void __launch_bounds__(kThreads) scale_kernel(float* y, float alpha, size_t n) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * kThreads)
    y[i] *= alpha;
}

__global__ void __launch_bounds__(kThreads) fill_kernel(float* y, float v, size_t n) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * kThreads)
    y[i] = v;
}

}  // namespace

void gather_rows(cudaStream_t s, float* dst, int ldd, const float* src, int lds, const int* idx, int n, int w) {
  if (n > 0 && w > 0) launch(move_rows_kernel<kGather>, n, kRowThreads, 0, s, dst, ldd, src, lds, idx, w);
}
// Two entries of idx naming one destination row would race on a GPU (two
// blocks writing, or adding to, the same row), and the host runner, which
// runs blocks one after the other, would never show it. So under the runner,
// and in GPU builds with -DADA_CUDA_DEBUG (make NVCC_OPT="-O3 -DADA_CUDA_DEBUG"),
// the indices are checked first; release GPU builds trust their callers.
#if !defined(__CUDACC__) || defined(ADA_CUDA_DEBUG)
namespace {
void distinct_or_fail(const int* h, int n, const char* op) {
  std::unordered_map<int, int> first;  // destination row -> the entry that named it first
  for (int i = 0; i < n; i++) {
    const auto [at, fresh] = first.emplace(h[i], i);
    if (!fresh)
      fail(std::string(op) + ": destination row " + std::to_string(h[i]) + " is named twice (entries " +
           std::to_string(at->second) + " and " + std::to_string(i) + "); the indices must be distinct, or two " +
           "blocks race on that row on a GPU");
  }
}
}  // namespace
#endif

void check_distinct_rows(cudaStream_t s, const int* idx, int n, const char* op) {
#if !defined(__CUDACC__)
  // Recorded for a CUDA graph: checked when the graph reaches the scatter
  // (in the runner device memory is host memory, so a host node may read it).
  if (StreamRecorder* r = recorder_of(s)) return r->host([idx, n, op] { distinct_or_fail(idx, n, op); });
#elif defined(ADA_CUDA_DEBUG)
  if (recorder_of(s))
    fail(std::string(op) + ": ADA_CUDA_DEBUG's check of distinct rows reads device memory, which a CUDA graph's "
         "host node cannot; run the debug build without --cuda-graph");
#endif
#if !defined(__CUDACC__) || defined(ADA_CUDA_DEBUG)
  std::vector<int> h(n);
  CUDA_CHECK(cudaMemcpyAsync(h.data(), idx, n * sizeof(int), cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  distinct_or_fail(h.data(), n, op);
#else
  (void)s, (void)idx, (void)n, (void)op;
#endif
}

void scatter_rows(cudaStream_t s, float* dst, int ldd, const float* src, int lds, const int* idx, int n, int w) {
  if (n <= 0 || w <= 0) return;
  check_distinct_rows(s, idx, n, "scatter_rows");
  launch(move_rows_kernel<kScatter>, n, kRowThreads, 0, s, dst, ldd, src, lds, idx, w);
}
void scatter_add_rows(cudaStream_t s, float* dst, int ldd, const float* src, int lds, const int* idx, int n, int w) {
  if (n <= 0 || w <= 0) return;
  check_distinct_rows(s, idx, n, "scatter_add_rows");
  launch(move_rows_kernel<kScatterAdd>, n, kRowThreads, 0, s, dst, ldd, src, lds, idx, w);
}
void scale_rows(cudaStream_t s, float* y, const float* x, const float* sc, int n, int D) {
  const size_t total = static_cast<size_t>(n) * D;
  if (total) launch(scale_rows_kernel, blocks_for(total, kThreads), kThreads, 0, s, y, x, sc, n, D);
}
void row_dot(cudaStream_t s, float* out, const float* a, const float* b, int n, int D) {
  if (n > 0) launch(row_dot_kernel, blocks_for(n, kThreads / 32), kThreads, 0, s, out, a, b, n, D);
}
void add(cudaStream_t s, float* y, const float* a, const float* b, size_t n) {
  if (n) launch(add_kernel, grid_stride_blocks(n, kThreads), kThreads, 0, s, y, a, b, n);
}
void axpy(cudaStream_t s, float* y, float alpha, const float* x, size_t n) {
  if (n) launch(axpy_kernel, grid_stride_blocks(n, kThreads), kThreads, 0, s, y, alpha, x, n);
}
void scale(cudaStream_t s, float* y, float alpha, size_t n) {
  if (n) launch(scale_kernel, grid_stride_blocks(n, kThreads), kThreads, 0, s, y, alpha, n);
}
void fill(cudaStream_t s, float* y, float v, size_t n) {
  if (n) launch(fill_kernel, grid_stride_blocks(n, kThreads), kThreads, 0, s, y, v, n);
}

}  // namespace ada::cuda
