// Log-softmax read at the target: the cross-entropy building block of every
// method's loss.
//   logits z (N, ld), the softmax runs over the first V columns (CYB puts its
//   extra "don't know" class in column V and treats it separately).
//   forward:  lse_n  = log sum_{v<V} exp(z_nv)
//             logp_n = z_{n,y_n} - lse_n              (0 when y_n < 0: ignored row)
//   backward: given g_logp = dL/dlogp and g_lse = dL/dlse (a loss may depend on
//             lse directly, e.g. CYB's abstain probability sigma(z_DK - lse)):
//             dz_nv = g_logp_n (1[v = y_n] - p_nv) + g_lse_n p_nv,   p = softmax(z)
//   (CE is the case g_logp = -1/N, g_lse = 0.)  dz is set for v < V; columns
//   >= V are left alone.
#pragma once
#include <cmath>

#include "ops/fast_exp.h"
#include "ops/parallel.h"

namespace ada {

template <class T>
void logsoftmax_target_forward(T* lse, T* logp, const T* z, const int* y, int N, int V, int ld) {
  ADA_PARALLEL_FOR((long long)N * V)
  for (int n = 0; n < N; n++) {
    const T* zn = z + (size_t)n * ld;
    T mx = zn[0];
#pragma omp simd reduction(max : mx)
    for (int v = 1; v < V; v++) mx = zn[v] > mx ? zn[v] : mx;
    // sum_v exp(z_v - max) in P partial sums added at the end: the rounding
    // error grows with V / P instead of V (V = 50304: about 1e-5 relative for
    // one float accumulator), whether or not the compiler vectorizes the loop
    // (sanitizer builds do not).
    constexpr int P = 16;
    T part[P] = {};
    const int Vp = V / P * P;
    for (int v = 0; v < Vp; v += P) {
#pragma omp simd
      for (int j = 0; j < P; j++) part[j] += exp_t(zn[v + j] - mx);
    }
    T sum = 0;
    for (int v = Vp; v < V; v++) sum += exp_t(zn[v] - mx);
    for (int j = 0; j < P; j++) sum += part[j];
    const T l = mx + std::log(sum);
    lse[n] = l;
    logp[n] = y[n] >= 0 ? zn[y[n]] - l : T(0);
  }
}

template <class T>
void logsoftmax_target_backward(T* dz, const T* z, const T* lse, const int* y, const T* g_logp, const T* g_lse,
                                int N, int V, int ld) {
  ADA_PARALLEL_FOR((long long)N * V)
  for (int n = 0; n < N; n++) {
    const T* zn = z + (size_t)n * ld;
    T* dn = dz + (size_t)n * ld;
    const T gl = y[n] >= 0 ? g_logp[n] : T(0);
    const T c = (g_lse ? g_lse[n] : T(0)) - gl;  // coefficient of p_v
    const T l = lse[n];
#pragma omp simd
    for (int v = 0; v < V; v++) dn[v] = c * exp_t(zn[v] - l);
    if (y[n] >= 0) dn[y[n]] += gl;
  }
}

}  // namespace ada
