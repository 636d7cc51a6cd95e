// Row softmax, materialised (the soft-embedding map of PonderLM needs every
// probability, not just the target's).
//   forward:  p_nv = exp(z_nv - max) / sum_w exp(z_nw - max)      z, p (N, V)
//   backward: dz_nv = p_nv (dp_nv - sum_w p_nw dp_nw)            (set)
#pragma once
#include <cmath>

#include "ops/fast_exp.h"
#include "ops/parallel.h"

namespace ada {

template <class T>
void softmax_forward(T* p, const T* z, int N, int V) {
  ADA_PARALLEL_FOR((long long)N * V)
  for (int n = 0; n < N; n++) {
    const T* zn = z + (size_t)n * V;
    T* pn = p + (size_t)n * V;
    T mx = zn[0];
#pragma omp simd reduction(max : mx)
    for (int v = 1; v < V; v++) mx = zn[v] > mx ? zn[v] : mx;
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int v = 0; v < V; v++) sum += (pn[v] = exp_t(zn[v] - mx));
    const T inv = T(1) / sum;
#pragma omp simd
    for (int v = 0; v < V; v++) pn[v] *= inv;
  }
}

template <class T>
void softmax_backward(T* dz, const T* p, const T* dp, int N, int V) {
  ADA_PARALLEL_FOR((long long)N * V)
  for (int n = 0; n < N; n++) {
    const T* pn = p + (size_t)n * V;
    const T* gn = dp + (size_t)n * V;
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int v = 0; v < V; v++) dot += pn[v] * gn[v];
    T* dn = dz + (size_t)n * V;
#pragma omp simd
    for (int v = 0; v < V; v++) dn[v] = pn[v] * (gn[v] - dot);
  }
}

}  // namespace ada
