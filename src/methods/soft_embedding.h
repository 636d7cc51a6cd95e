// The soft ("pondering") embedding map of PonderLM (methods.md 0.1), shared
// by ponder, adaponder and TaH:
//   p = softmax(z)               (N, V)   z = W RMSNorm(h): the pass's logits
//   phi = c * p E                (N, D)   probability-weighted embedding
// backward, given g = dL/dphi (N, D):
//   dE += c * p^T g              (V, D)
//   a   = c * g E^T              (N, V)   = dL/dp
//   dz  = p * (a - <p, a>)       softmax Jacobian
// (dz then goes through the readout backward into W and h.)
// Cost: two V x D products per row, as much as the head itself; counted, and
// beside them the softmax over V (5V + 1 other ops per row, model/flop_count.h).
#pragma once
#include "model/model.h"

namespace ada {

template <class Bk>
struct SoftEmbedding {
  using T = typename Bk::Real;
  int n = 0;
  T c = 1;
  const T* p = nullptr;  // (n, V) probabilities: saved for the backward

  // phi (n, D) from logits z (n, V).
  T* forward(Model<Bk>& m, const T* z, int rows, T scale) {
    const int V = m.cfg.vocab, D = m.cfg.dim;
    n = rows;
    c = scale;
    T* prob = m.alloc((size_t)n * V);
    m.be.softmax_forward(prob, z, n, V);
    p = prob;
    T* phi = m.alloc((size_t)n * D);
    m.be.matmul_nn_forward(phi, p, m.w.embed, n, V, D);
    if (c != T(1)) m.be.scale(phi, c, (size_t)n * D);
    m.flops.fwd += 2.0 * n * V * D;
    m.flops.other += op_cost::softmax(n, V) + (c != T(1) ? op_cost::elementwise((double)n * D) : 0.0);
    return phi;
  }

  // dz (n, V) from dphi (n, D); accumulates dE.
  T* backward(Model<Bk>& m, const T* dphi) {
    const int V = m.cfg.vocab, D = m.cfg.dim;
    T* g = m.alloc((size_t)n * D);  // c * dphi: the scale folds into the product's input
    m.be.copy(g, dphi, (size_t)n * D);
    if (c != T(1)) m.be.scale(g, c, (size_t)n * D);
    T* dp = m.alloc((size_t)n * V);
    m.be.matmul_nn_backward(dp, m.g.embed, g, p, m.w.embed, n, V, D);  // dp = c g E^T, dE += c p^T g
    T* dz = m.alloc((size_t)n * V);
    m.be.softmax_backward(dz, p, dp, n, V);
    return dz;
  }
};

}  // namespace ada
