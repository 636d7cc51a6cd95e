// RMSNorm over the last axis.
//   forward:  r_n = 1 / sqrt(mean_j x_nj^2 + eps);   y_nj = x_nj * r_n * w_j
//             x, y (N, D); w (D); rstd r (N) is saved for the backward.
//   backward: with g = dy,
//             dw_j  += sum_n g_nj x_nj r_n
//             dx_nj += r_n w_j g_nj - (r_n^3 / D) x_nj sum_k g_nk w_k x_nk
//   (d r_n / d x_nj = -r_n^3 x_nj / D.)  Both gradients accumulate (+=).
#pragma once
#include <omp.h>

#include <cmath>
#include <vector>

#include "ops/parallel.h"

namespace ada {

template <class T>
void rmsnorm_forward(T* y, T* rstd, const T* x, const T* w, int N, int D, double eps) {
  ADA_PARALLEL_FOR((long long)N * D)
  for (int n = 0; n < N; n++) {
    const T* xn = x + (size_t)n * D;
    T* yn = y + (size_t)n * D;
    T ss = 0;
    for (int j = 0; j < D; j++) ss += xn[j] * xn[j];
    const T r = T(1) / std::sqrt(ss / T(D) + T(eps));
    rstd[n] = r;
    for (int j = 0; j < D; j++) yn[j] = xn[j] * r * w[j];
  }
}

template <class T>
void rmsnorm_backward(T* dx, T* dw, const T* dy, const T* x, const T* w, const T* rstd, int N, int D) {
  // Threads take contiguous row blocks; each keeps its own dw partial sum, and
  // the partials are added in thread order (deterministic for a thread count).
  const int nt = (long long)N * D > kParallelWork ? omp_get_max_threads() : 1;
  std::vector<T> part((size_t)nt * D, T(0));
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    const int r0 = (int)((long long)N * t / n), r1 = (int)((long long)N * (t + 1) / n);
    T* dwp = part.data() + (size_t)t * D;
    for (int r = r0; r < r1; r++) {
      const T* xn = x + (size_t)r * D;
      const T* gn = dy + (size_t)r * D;
      T* dxn = dx + (size_t)r * D;
      const T rr = rstd[r];
      T dot = 0;  // sum_k g_k w_k x_k
#pragma omp simd reduction(+ : dot)
      for (int j = 0; j < D; j++) dot += gn[j] * w[j] * xn[j];
      const T c = rr * rr * rr * dot / T(D);
#pragma omp simd
      for (int j = 0; j < D; j++) {
        dxn[j] += rr * w[j] * gn[j] - c * xn[j];
        dwp[j] += gn[j] * xn[j] * rr;
      }
    }
  }
  for (int t = 0; t < nt; t++)
    for (int j = 0; j < D; j++) dw[j] += part[(size_t)t * D + j];
}

}  // namespace ada
