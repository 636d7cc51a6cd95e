// SwiGLU activation of the MLP (and plain SiLU, at the end of the file): the first linear produces gate|up side by side.
//   gu (N, 2F): a = gu[:, :F] (gate), u = gu[:, F:] (up)
//   forward:  y = silu(a) * u,   silu(a) = a * sigma(a)              y (N, F)
//   backward: du = dy * silu(a)
//             da = dy * u * sigma(a) * (1 + a * (1 - sigma(a)))     (d silu/da)
//   dgu is set (not accumulated).
#pragma once
#include <cmath>

#include "ops/fast_exp.h"
#include "ops/parallel.h"

namespace ada {

template <class T>
void swiglu_forward(T* y, const T* gu, int N, int F) {
  ADA_PARALLEL_FOR((long long)N * F)
  for (int n = 0; n < N; n++) {
    const T* a = gu + (size_t)n * 2 * F;
    const T* u = a + F;
    T* yn = y + (size_t)n * F;
#pragma omp simd
    for (int j = 0; j < F; j++) {
      const T s = T(1) / (T(1) + exp_t(-a[j]));
      yn[j] = a[j] * s * u[j];
    }
  }
}

template <class T>
void swiglu_backward(T* dgu, const T* dy, const T* gu, int N, int F) {
  ADA_PARALLEL_FOR((long long)N * F)
  for (int n = 0; n < N; n++) {
    const T* a = gu + (size_t)n * 2 * F;
    const T* u = a + F;
    const T* g = dy + (size_t)n * F;
    T* da = dgu + (size_t)n * 2 * F;
    T* du = da + F;
#pragma omp simd
    for (int j = 0; j < F; j++) {
      const T s = T(1) / (T(1) + exp_t(-a[j]));
      du[j] = g[j] * a[j] * s;
      da[j] = g[j] * u[j] * s * (T(1) + a[j] * (T(1) - s));
    }
  }
}

// Plain SiLU (the hidden activation of AdaPonderLM's gate MLPs):
//   forward:  y = u * sigma(u)
//   backward: du = dy * sigma(u) * (1 + u * (1 - sigma(u)))      (set)
template <class T>
void silu_forward(T* y, const T* u, size_t n) {
  ADA_PARALLEL_FOR(n)
  for (long long i = 0; i < (long long)n; i++) y[i] = u[i] / (T(1) + exp_t(-u[i]));
}

template <class T>
void silu_backward(T* du, const T* dy, const T* u, size_t n) {
  ADA_PARALLEL_FOR(n)
  for (long long i = 0; i < (long long)n; i++) {
    const T s = T(1) / (T(1) + exp_t(-u[i]));
    du[i] = dy[i] * s * (T(1) + u[i] * (T(1) - s));
  }
}

}  // namespace ada
