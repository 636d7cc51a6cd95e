// AdamW over the flat parameter buffer, with global-norm clipping whose
// factor is computed on the device (src/ops/adamw.h):
//   norm = sqrt(sum g^2)  (reduce.cu, left in device memory by the caller)
//   gs   = clip / (norm + 1e-6) if clip > 0 and norm > clip, else 1
//   g'   = gs g;   m = b1 m + (1 - b1) g';   v = b2 v + (1 - b2) g'^2
//   p   -= lr (m c1 / (sqrt(v c2) + eps) + wd p)     wd only on [0, n_decay)
// One grid-stride kernel; every thread recomputes gs from the device scalar
// (one cached load and a sqrt), so the step never waits for the host.
#include "compat.h"
#include "launch.h"
#include "device_util.h"
#include "kernels.h"

namespace ada::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    adamw_kernel(float* p, const float* g, float* m, float* v, size_t n, size_t n_decay, AdamWArgs a,
                 const double* grad_sumsq) {
  const double norm = sqrt(*grad_sumsq);
  const float gs = (a.clip > 0 && norm > a.clip) ? static_cast<float>(a.clip / (norm + 1e-6)) : 1.0f;
  for (size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * kThreads) {
    const float dec = i < n_decay ? a.weight_decay : 0.0f;
    const float gi = g[i] * gs;
    const float mi = a.beta1 * m[i] + (1.0f - a.beta1) * gi;
    const float vi = a.beta2 * v[i] + (1.0f - a.beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float mh = mi * a.c1, vh = vi * a.c2;
    p[i] -= a.lr * (mh / (sqrtf(vh) + a.eps) + dec * p[i]);
  }
}

}  // namespace

void adamw(cudaStream_t s, float* p, const float* g, float* m, float* v, size_t n, size_t n_decay,
           const AdamWArgs& a, const double* grad_sumsq) {
  if (n) launch(adamw_kernel, grid_stride_blocks(n, kThreads, 8192), kThreads, 0, s, p, g, m, v, n, n_decay, a,
                grad_sumsq);
}

}  // namespace ada::cuda
