// RMSNorm over the last axis.
//   forward:  r_n = 1 / sqrt(mean_j x_nj^2 + eps);   y_nj = x_nj * r_n * w_j
//             x, y (N, D); w (D); rstd r (N) is saved for the backward.
//   backward: with g = dy,
//             dw_j  += sum_n g_nj x_nj r_n
//             dx_nj += r_n w_j g_nj - (r_n^3 / D) x_nj sum_k g_nk w_k x_nk
//   (d r_n / d x_nj = -r_n^3 x_nj / D.)  Both gradients accumulate (+=).
#pragma once
#include <cmath>

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
  ADA_PARALLEL_FOR((long long)N * D)
  for (int n = 0; n < N; n++) {
    const T* xn = x + (size_t)n * D;
    const T* gn = dy + (size_t)n * D;
    T* dxn = dx + (size_t)n * D;
    const T r = rstd[n];
    T dot = 0;  // sum_k g_k w_k x_k
    for (int j = 0; j < D; j++) dot += gn[j] * w[j] * xn[j];
    const T c = r * r * r * dot / T(D);
    for (int j = 0; j < D; j++) dxn[j] += r * w[j] * gn[j] - c * xn[j];
  }
  // dw: reduce over rows, parallel over columns so no two threads write one element.
  ADA_PARALLEL_FOR((long long)N * D)
  for (int j = 0; j < D; j++) {
    T acc = 0;
    for (int n = 0; n < N; n++) acc += dy[(size_t)n * D + j] * x[(size_t)n * D + j] * rstd[n];
    dw[j] += acc;
  }
}

}  // namespace ada
