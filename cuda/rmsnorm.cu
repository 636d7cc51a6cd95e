// RMSNorm over the last axis (src/ops/rmsnorm.h).
//   forward:  r_n = 1 / sqrt(mean_j x_nj^2 + eps);   y_nj = x_nj r_n w_j      x, y (N, D); w (D); r (N)
//   backward: dx_nj += r_n w_j g_nj - (r_n^3 / D) x_nj sum_k g_nk w_k x_nk   (g = dy)
//             dw_j  += sum_n g_nj x_nj r_n
// Row kernels: one warp per row (kRowsPerBlock rows per block); each lane
// strides over the columns (coalesced) and the row sums are warp butterflies.
// dw is a column sum over all N rows, done in two deterministic stages
// without atomics: blocks of 32 columns x 8 row-lanes sum a chunk of
// kChunkRows rows into a partial (chunks, D) array in the workspace, then one
// thread per column adds the partials in chunk order and accumulates into dw.
#include "compat.h"
#include "launch.h"
#include "device_util.h"
#include "kernels.h"

namespace ada::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // warps per block
constexpr int kChunkRows = 256;   // rows per dw partial

__global__ void __launch_bounds__(kRowsPerBlock * 32)
    rmsnorm_forward_kernel(float* y, float* rstd, const float* x, const float* w, int N, int D, float eps) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int n = static_cast<int>(blockIdx.x) * kRowsPerBlock + static_cast<int>(threadIdx.x >> 5);
  if (n >= N) return;  // a whole warp leaves together; no block barrier follows
  const float* xn = x + static_cast<size_t>(n) * D;
  float ss = 0.0f;
  for (int j = lane; j < D; j += 32) ss += xn[j] * xn[j];
  ss = warp_sum(ss);
  const float r = 1.0f / sqrtf(ss / static_cast<float>(D) + eps);
  if (lane == 0) rstd[n] = r;
  float* yn = y + static_cast<size_t>(n) * D;
  for (int j = lane; j < D; j += 32) yn[j] = xn[j] * r * w[j];
}

__global__ void __launch_bounds__(kRowsPerBlock * 32)
    rmsnorm_backward_dx_kernel(float* dx, const float* dy, const float* x, const float* w, const float* rstd, int N,
                               int D) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int n = static_cast<int>(blockIdx.x) * kRowsPerBlock + static_cast<int>(threadIdx.x >> 5);
  if (n >= N) return;
  const size_t off = static_cast<size_t>(n) * D;
  float dot = 0.0f;  // sum_k g_k w_k x_k
  for (int j = lane; j < D; j += 32) dot += dy[off + j] * w[j] * x[off + j];
  dot = warp_sum(dot);
  const float r = rstd[n];
  const float c = r * r * r * dot / static_cast<float>(D);
  for (int j = lane; j < D; j += 32) dx[off + j] += r * w[j] * dy[off + j] - c * x[off + j];
}

// grid (ceil(D / 32), chunks); block (32, 8): threadIdx.x = column, threadIdx.y = row lane.
__global__ void __launch_bounds__(256)
    rmsnorm_dw_partial_kernel(float* partial, const float* dy, const float* x, const float* rstd, int N, int D) {
  __shared__ float red[8][33];
  const int j = static_cast<int>(blockIdx.x * 32 + threadIdx.x);
  const int n0 = static_cast<int>(blockIdx.y) * kChunkRows, n1 = min(N, n0 + kChunkRows);
  float acc = 0.0f;
  if (j < D)
    for (int n = n0 + static_cast<int>(threadIdx.y); n < n1; n += 8) {
      const size_t i = static_cast<size_t>(n) * D + j;
      acc += dy[i] * x[i] * rstd[n];
    }
  red[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && j < D) {
    float t = 0.0f;
    for (int r = 0; r < 8; r++) t += red[r][threadIdx.x];
    partial[static_cast<size_t>(blockIdx.y) * D + j] = t;
  }
}

__global__ void rmsnorm_dw_final_kernel(float* dw, const float* partial, int chunks, int D) {
  const int j = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (j >= D) return;
  float t = 0.0f;
  for (int c = 0; c < chunks; c++) t += partial[static_cast<size_t>(c) * D + j];
  dw[j] += t;
}

}  // namespace

void rmsnorm_forward(cudaStream_t s, float* y, float* rstd, const float* x, const float* w, int N, int D, float eps) {
  if (N <= 0) return;
  launch(rmsnorm_forward_kernel, blocks_for(N, kRowsPerBlock), kRowsPerBlock * 32, 0, s, y, rstd, x, w, N, D, eps);
}

size_t rmsnorm_backward_work_bytes(int N, int D) {
  return blocks_for(N > 0 ? N : 1, kChunkRows) * static_cast<size_t>(D) * sizeof(float);
}

void rmsnorm_backward(cudaStream_t s, float* dx, float* dw, const float* dy, const float* x, const float* w,
                      const float* rstd, int N, int D, void* work) {
  if (N <= 0) return;
  launch(rmsnorm_backward_dx_kernel, blocks_for(N, kRowsPerBlock), kRowsPerBlock * 32, 0, s, dx, dy, x, w, rstd, N,
         D);
  const int chunks = static_cast<int>(blocks_for(N, kChunkRows));
  float* partial = static_cast<float*>(work);
  launch(rmsnorm_dw_partial_kernel, dim3(blocks_for(D, 32), chunks), dim3(32, 8), 0, s, partial, dy, x, rstd, N, D);
  launch(rmsnorm_dw_final_kernel, blocks_for(D, 256), 256, 0, s, dw, partial, chunks, D);
}

}  // namespace ada::cuda
