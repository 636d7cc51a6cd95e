// The halting chain of methods.md 0.2 with hard truncation, for one token:
// the mixture of its per-step predictions that latent_cot and tah train on,
// the loss -log q[y] and every derivative. An HD function: the CPU runs it in
// an OpenMP loop, the GPU one thread per token (inside each method's functor).
//
// Steps k = 0..K; the token executed steps 0..k* (k* <= K, the last one).
//   a_k = p^k[y]  (given as log a_k),   c_k = continue probability after step k
//   R_0 = 1,  R_{k+1} = R_k c_k                          reach
//   pi_k = R_k (1 - c_k)  for k < k*,   pi_{k*} = R_{k*}  residual mass on the last executed step
//   A = q[y] = sum_k pi_k a_k,   loss = -log A
// Backward, with the value-to-go Q_{k*} = a_{k*},  Q_k = (1 - c_k) a_k + c_k Q_{k+1}  (A = Q_0):
//   dloss/dc_k     = -R_k (Q_{k+1} - a_k) / A     k < k*   (c_{k*} and later do not enter: 0)
//   dloss/dlog a_k = -pi_k a_k / A                k <= k*  (0 beyond)
#pragma once
#include "core/hd_math.h"

namespace ada {

constexpr int kHaltingMaxSteps = 16;  // K + 1 at most

// Arrays are step-major, (K+1) x N: x[k * N + t]. Entries of steps the token
// did not execute are ignored. Writes scale * the derivatives for every
// k = 0..K (zeros where they vanish) and returns -log A.
template <class T>
HD T halting_mixture(int t, int N, int K, int kstar, const T* logp, const T* c, T scale, T* g_logp, T* g_c) {
  T R[kHaltingMaxSteps], a[kHaltingMaxSteps];
  T reach = 1, A = 0;
  for (int k = 0; k <= kstar; k++) {
    R[k] = reach;
    a[k] = hd_exp(logp[(size_t)k * N + t]);
    const T pi = k < kstar ? reach * (T(1) - c[(size_t)k * N + t]) : reach;
    A += pi * a[k];
    if (k < kstar) reach *= c[(size_t)k * N + t];
  }
  T Qnext = a[kstar];  // Q_{k+1}, walked down from Q_{k*} = a_{k*}
  g_logp[(size_t)kstar * N + t] = -R[kstar] * a[kstar] / A * scale;
  for (int k = kstar - 1; k >= 0; k--) {
    const T ck = c[(size_t)k * N + t];
    g_logp[(size_t)k * N + t] = -R[k] * (T(1) - ck) * a[k] / A * scale;
    g_c[(size_t)k * N + t] = -R[k] * (Qnext - a[k]) / A * scale;
    Qnext = (T(1) - ck) * a[k] + ck * Qnext;
  }
  for (int k = kstar; k <= K; k++) g_c[(size_t)k * N + t] = 0;
  for (int k = kstar + 1; k <= K; k++) g_logp[(size_t)k * N + t] = 0;
  return -hd_log(A);
}

}  // namespace ada
