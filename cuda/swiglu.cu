// SwiGLU and SiLU activations (src/ops/swiglu.h), elementwise.
//   gu (N, 2F): gate a = gu[:, :F], up u = gu[:, F:];   y = silu(a) u        y (N, F)
//   backward:   du = dy silu(a);   da = dy u sigma(a) (1 + a (1 - sigma(a)))  (dgu set)
//   silu:       y = u sigma(u);    du = dy sigma(u) (1 + u (1 - sigma(u)))
// One thread per output element. expf (not the fast __expf) keeps the
// results within a few ulp of the CPU reference.
#include "compat.h"
#include "launch.h"
#include "device_util.h"
#include "kernels.h"

namespace ada::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float sigmoid(float a) { return 1.0f / (1.0f + expf(-a)); }

__global__ void __launch_bounds__(kThreads) swiglu_forward_kernel(float* y, const float* gu, int N, int F) {
  const size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= static_cast<size_t>(N) * F) return;
  const size_t n = i / F, j = i % F;
  const float a = gu[n * 2 * F + j], u = gu[n * 2 * F + F + j];
  y[i] = a * sigmoid(a) * u;
}

__global__ void __launch_bounds__(kThreads)
    swiglu_backward_kernel(float* dgu, const float* dy, const float* gu, int N, int F) {
  const size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= static_cast<size_t>(N) * F) return;
  const size_t n = i / F, j = i % F;
  const size_t ia = n * 2 * F + j, iu = ia + F;
  const float a = gu[ia], u = gu[iu], g = dy[i];
  const float s = sigmoid(a);
  dgu[iu] = g * a * s;
  dgu[ia] = g * u * s * (1.0f + a * (1.0f - s));
}

__global__ void __launch_bounds__(kThreads) silu_forward_kernel(float* y, const float* u, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < n) y[i] = u[i] / (1.0f + expf(-u[i]));
}

__global__ void __launch_bounds__(kThreads) silu_backward_kernel(float* du, const float* dy, const float* u, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= n) return;
  const float s = sigmoid(u[i]);
  du[i] = dy[i] * s * (1.0f + u[i] * (1.0f - s));
}

}  // namespace

void swiglu_forward(cudaStream_t s, float* y, const float* gu, int N, int F) {
  const size_t n = static_cast<size_t>(N) * F;
  if (n) launch(swiglu_forward_kernel, blocks_for(n, kThreads), kThreads, 0, s, y, gu, N, F);
}
void swiglu_backward(cudaStream_t s, float* dgu, const float* dy, const float* gu, int N, int F) {
  const size_t n = static_cast<size_t>(N) * F;
  if (n) launch(swiglu_backward_kernel, blocks_for(n, kThreads), kThreads, 0, s, dgu, dy, gu, N, F);
}
void silu_forward(cudaStream_t s, float* y, const float* u, size_t n) {
  if (n) launch(silu_forward_kernel, blocks_for(n, kThreads), kThreads, 0, s, y, u, n);
}
void silu_backward(cudaStream_t s, float* du, const float* dy, const float* u, size_t n) {
  if (n) launch(silu_backward_kernel, blocks_for(n, kThreads), kThreads, 0, s, du, dy, u, n);
}

}  // namespace ada::cuda
