// Softmax cross-entropy read at the target, and the plain row softmax
// (src/ops/cross_entropy.h, src/ops/softmax.h).
//   z (N, ld): the softmax runs over the first V columns (V up to 50304).
//   logsoftmax_target forward:  lse_n = log sum_{v<V} exp(z_nv);   logp_n = z_{n,y_n} - lse_n  (0 if y_n < 0)
//   backward (fused with the softmax, no probability matrix is stored):
//     dz_nv = c_n exp(z_nv - lse_n) + [v = y_n] g_logp_n,   c_n = g_lse_n - g_logp_n     (v < V, set)
//   softmax: p_nv = exp(z_nv - max_n) / sum_w exp(z_nw - max_n);   dz = p (dp - <p, dp>)
// One block of kThreads per row: the threads stride over the columns
// (coalesced), the row max and sums are block reductions (warp butterflies,
// then one value per warp through shared memory), so a row of 50304 logits
// takes ~200 loads per thread.
#include "compat.h"
#include "launch.h"
#include "device_util.h"
#include "kernels.h"

namespace ada::cuda {
namespace {

constexpr int kThreads = 256;

__device__ float row_max(const float* z, int V, float* red) {
  float mx = -INFINITY;
  for (int v = static_cast<int>(threadIdx.x); v < V; v += kThreads) mx = fmaxf(mx, z[v]);
  return block_max<kThreads>(mx, red);
}

__device__ float row_sum_exp(const float* z, int V, float mx, float* red) {
  float sum = 0.0f;
  for (int v = static_cast<int>(threadIdx.x); v < V; v += kThreads) sum += expf(z[v] - mx);
  return block_sum<kThreads>(sum, red);
}

__global__ void __launch_bounds__(kThreads)
    logsoftmax_target_forward_kernel(float* lse, float* logp, const float* z, const int* y, int V, int ld) {
  __shared__ float red[32];
  const int n = static_cast<int>(blockIdx.x);
  const float* zn = z + static_cast<size_t>(n) * ld;
  const float mx = row_max(zn, V, red);
  const float sum = row_sum_exp(zn, V, mx, red);
  if (threadIdx.x == 0) {
    const float l = mx + logf(sum);
    lse[n] = l;
    logp[n] = y[n] >= 0 ? zn[y[n]] - l : 0.0f;
  }
}

__global__ void __launch_bounds__(kThreads)
    logsoftmax_target_backward_kernel(float* dz, const float* z, const float* lse, const int* y, const float* g_logp,
                                      const float* g_lse, int V, int ld) {
  const int n = static_cast<int>(blockIdx.x);
  const int yn = y[n];
  const float gl = yn >= 0 ? g_logp[n] : 0.0f;
  const float c = (g_lse ? g_lse[n] : 0.0f) - gl;  // coefficient of p_v
  const float l = lse[n];
  const float* zn = z + static_cast<size_t>(n) * ld;
  float* dn = dz + static_cast<size_t>(n) * ld;
  for (int v = static_cast<int>(threadIdx.x); v < V; v += kThreads) {
    const float d = c * expf(zn[v] - l);
    dn[v] = v == yn ? d + gl : d;
  }
}

__global__ void __launch_bounds__(kThreads) softmax_forward_kernel(float* p, const float* z, int V) {
  __shared__ float red[32];
  const size_t off = static_cast<size_t>(blockIdx.x) * V;
  const float mx = row_max(z + off, V, red);
  const float sum = row_sum_exp(z + off, V, mx, red);
  const float inv = 1.0f / sum;
  for (int v = static_cast<int>(threadIdx.x); v < V; v += kThreads) p[off + v] = expf(z[off + v] - mx) * inv;
}

__global__ void __launch_bounds__(kThreads) softmax_backward_kernel(float* dz, const float* p, const float* dp, int V) {
  __shared__ float red[32];
  const size_t off = static_cast<size_t>(blockIdx.x) * V;
  float dot = 0.0f;
  for (int v = static_cast<int>(threadIdx.x); v < V; v += kThreads) dot += p[off + v] * dp[off + v];
  dot = block_sum<kThreads>(dot, red);
  for (int v = static_cast<int>(threadIdx.x); v < V; v += kThreads) dz[off + v] = p[off + v] * (dp[off + v] - dot);
}

}  // namespace

void logsoftmax_target_forward(cudaStream_t s, float* lse, float* logp, const float* z, const int* y, int N, int V,
                               int ld) {
  if (N > 0) launch(logsoftmax_target_forward_kernel, N, kThreads, 0, s, lse, logp, z, y, V, ld);
}

void logsoftmax_target_backward(cudaStream_t s, float* dz, const float* z, const float* lse, const int* y,
                                const float* g_logp, const float* g_lse, int N, int V, int ld) {
  if (N > 0) launch(logsoftmax_target_backward_kernel, N, kThreads, 0, s, dz, z, lse, y, g_logp, g_lse, V, ld);
}

void softmax_forward(cudaStream_t s, float* p, const float* z, int N, int V) {
  if (N > 0) launch(softmax_forward_kernel, N, kThreads, 0, s, p, z, V);
}

void softmax_backward(cudaStream_t s, float* dz, const float* p, const float* dp, int N, int V) {
  if (N > 0) launch(softmax_backward_kernel, N, kThreads, 0, s, dz, p, dp, V);
}

}  // namespace ada::cuda
