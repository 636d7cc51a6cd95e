// Multi-head attention of N query rows against a KV store, with the mask of
// attention_mask.h. This is the CPU reference; cuda/attention.cu computes the
// same thing flash-style.
//
// Shapes: q (N, ldq) and dq (N, dq_ld()) with head h at columns [h*hs, (h+1)*hs); K, V (B*S, D)
// with D = H*hs; out (N, D); lse (N, H). Query rows are grouped by sequence:
// rows qstart[b] .. qstart[b+1]-1 belong to sequence b, with increasing slots.
//
// forward, per sequence b and head h (Q, K, V the head's column blocks):
//   S_ij = scale * q_i . k_j   for visible (i, j), -inf otherwise
//   lse_i = log sum_j exp(S_ij);   P_ij = exp(S_ij - lse_i);   O_i = sum_j P_ij v_j
// backward (FlashAttention algebra; P is recomputed from the saved lse):
//   D_i   = dO_i . O_i
//   dV_j += sum_i P_ij dO_i
//   dP_ij = dO_i . v_j
//   dS_ij = P_ij (dP_ij - D_i)
//   dQ_i  = scale * sum_j dS_ij k_j          (set)
//   dK_j += scale * sum_i dS_ij q_i          (accumulates: keys are shared by passes)
// The (b, h) pairs are independent: OpenMP runs them in parallel and each
// writes only its own rows/columns of dQ, dK, dV. Within a pair, queries go in
// blocks (kQueryBlock) that each stop at the last key the block can see.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/attention_mask.h"
#include "ops/fast_exp.h"
#include "ops/linear.h"
#include "ops/parallel.h"

namespace ada {


namespace detail {
// Number of leading slots of sequence b whose order is <= the largest query
// order of that sequence: every visible key lies in this prefix.
inline int key_prefix(const KeyMeta& km, const int* qslot, int q0, int q1, int b) {  // rows [q0, q1)
  const int last_order = km.order[qslot[q1 - 1]];
  int kend = km.S;
  while (kend > 0 && km.order[b * km.S + kend - 1] > last_order) kend--;
  return kend;
}
}  // namespace detail

// Queries are processed in blocks of kQueryBlock rows: a block only needs the
// keys up to its last query's order, so causal attention computes about half
// the score matrix instead of all of it.
constexpr int kQueryBlock = 64;

template <class T>
void attention_forward(T* out, T* lse, const T* q, const T* K, const T* V, const int* qslot, const int* qstart,
                       const KeyMeta& km, const AttnDims& d) {
  const int D = d.H * d.hs;
  const T scale = T(1) / std::sqrt(T(d.hs));
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const long long work = (long long)d.N * d.S * D;  // upper bound of the multiply-adds
#pragma omp parallel for schedule(dynamic) collapse(2) if (work > 8 * kParallelWork)
  for (int b = 0; b < d.B; b++)
    for (int h = 0; h < d.H; h++) {
      RowMat<T> P;
      for (int r0 = qstart[b]; r0 < qstart[b + 1]; r0 += kQueryBlock) {
        const int r1 = std::min(r0 + kQueryBlock, qstart[b + 1]), nq = r1 - r0;
        const int kend = detail::key_prefix(km, qslot, r0, r1, b);
        auto Q = cmat(q + (size_t)r0 * d.ldq + h * d.hs, nq, d.hs, d.ldq);
        auto Kh = cmat(K + (size_t)b * d.S * D + h * d.hs, kend, d.hs, D);
        auto Vh = cmat(V + (size_t)b * d.S * D + h * d.hs, kend, d.hs, D);
        P.resize(nq, kend);
        P.noalias() = scale * (Q * Kh.transpose());  // scores, then probabilities (nq, kend)
        for (int i = 0; i < nq; i++) {
          const int qs = qslot[r0 + i];
          T mx = neg_inf;
          for (int j = 0; j < kend; j++) {
            if (!km.visible(qs, b * d.S + j)) P(i, j) = neg_inf;
            mx = P(i, j) > mx ? P(i, j) : mx;
          }
          T sum = 0;
          for (int j = 0; j < kend; j++) {
            const T e = P(i, j) == neg_inf ? T(0) : exp_t(P(i, j) - mx);
            P(i, j) = e;
            sum += e;
          }
          const T inv = T(1) / sum;
          for (int j = 0; j < kend; j++) P(i, j) *= inv;
          lse[(size_t)(r0 + i) * d.H + h] = mx + std::log(sum);
        }
        mat(out + (size_t)r0 * D + h * d.hs, nq, d.hs, D).noalias() = P * Vh;
      }
    }
}

template <class T>
void attention_backward(T* dq, T* dK, T* dV, const T* dout, const T* out, const T* lse, const T* q, const T* K,
                        const T* V, const int* qslot, const int* qstart, const KeyMeta& km, const AttnDims& d) {
  const int D = d.H * d.hs;
  const T scale = T(1) / std::sqrt(T(d.hs));
  const long long work = (long long)d.N * d.S * D;
#pragma omp parallel for schedule(dynamic) collapse(2) if (work > 8 * kParallelWork)
  for (int b = 0; b < d.B; b++)
    for (int h = 0; h < d.H; h++) {
      RowMat<T> P, dS;
      for (int r0 = qstart[b]; r0 < qstart[b + 1]; r0 += kQueryBlock) {
        const int r1 = std::min(r0 + kQueryBlock, qstart[b + 1]), nq = r1 - r0;
        const int kend = detail::key_prefix(km, qslot, r0, r1, b);
        const size_t koff = (size_t)b * d.S * D + h * d.hs;
        auto Q = cmat(q + (size_t)r0 * d.ldq + h * d.hs, nq, d.hs, d.ldq);
        auto Kh = cmat(K + koff, kend, d.hs, D);
        auto Vh = cmat(V + koff, kend, d.hs, D);
        auto dO = cmat(dout + (size_t)r0 * D + h * d.hs, nq, d.hs, D);
        auto O = cmat(out + (size_t)r0 * D + h * d.hs, nq, d.hs, D);
        // recompute P from the saved log-sum-exp
        P.resize(nq, kend);
        P.noalias() = scale * (Q * Kh.transpose());
        for (int i = 0; i < nq; i++) {
          const int qs = qslot[r0 + i];
          const T l = lse[(size_t)(r0 + i) * d.H + h];
          for (int j = 0; j < kend; j++) P(i, j) = km.visible(qs, b * d.S + j) ? exp_t(P(i, j) - l) : T(0);
        }
        mat(dV + koff, kend, d.hs, D).noalias() += P.transpose() * dO;
        dS.resize(nq, kend);
        dS.noalias() = dO * Vh.transpose();  // dP (nq, kend)
        for (int i = 0; i < nq; i++) {
          const T Di = dO.row(i).dot(O.row(i));
          for (int j = 0; j < kend; j++) dS(i, j) = P(i, j) * (dS(i, j) - Di);
        }
        mat(dq + (size_t)r0 * d.dq_ld() + h * d.hs, nq, d.hs, d.dq_ld()).noalias() = scale * (dS * Kh);
        mat(dK + koff, kend, d.hs, D).noalias() += scale * (dS.transpose() * Q);
      }
    }
}

}  // namespace ada
